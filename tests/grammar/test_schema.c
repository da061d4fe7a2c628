/* test_schema.c - JSON Schema -> GBNF: for each schema, documents the test's
 * own validator (validate.c) calls valid are accepted by the grammar and the
 * invalid ones rejected; unsupported keywords are refused by name. */
#include <stdlib.h>
#include <string.h>

#include "minfer.h"
#include "testutil.h"
#include "validate.h"

typedef struct doc_case {
    const char *text;
    bool valid;
} doc_case;

/* 1 accepted, 0 rejected, -1 error */
static int grammar_accepts(const char *gbnf, const char *text) {
    mf_grammar *g = NULL;
    mf_grammar_state *s = NULL;
    if (mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) || mf_grammar_state_new(g, NULL, &s)) {
        fprintf(stderr, "  %s\n", mf_last_error());
        mf_grammar_free(g);
        return -1;
    }
    int r = !mf_grammar_accept_text(s, text, strlen(text)) && mf_grammar_done(s);
    mf_grammar_state_free(s);
    mf_grammar_free(g);
    return r;
}

static void schema_case(const char *schema, const doc_case *docs) {
    char *gbnf = NULL;
    mf_status st = mf_json_schema_to_grammar(schema, &gbnf);
    CHECK(!st, "%s: %s", schema, mf_last_error());
    if (st) return;
    json_t *sch = json_loads(schema, JSON_DECODE_ANY, NULL);
    for (const doc_case *d = docs; d->text; d++) {
        json_t *doc = json_loads(d->text, JSON_DECODE_ANY, NULL);
        CHECK(doc || !d->valid, "valid case %s is not JSON", d->text); /* invalid ones may not be JSON at all */
        CHECK(doc ? schema_valid(doc, sch, sch) == d->valid : !d->valid, "validator: %s should be %s under %s", d->text,
              d->valid ? "valid" : "invalid", schema);
        int a = grammar_accepts(gbnf, d->text);
        CHECK(a == d->valid, "grammar %s %s under %s\n%s", a ? "accepts" : "rejects", d->text, schema, gbnf);
        json_decref(doc);
    }
    json_decref(sch);
    free(gbnf);
}

static void refused(const char *schema, const char *want) {
    char *gbnf = NULL;
    mf_status st = mf_json_schema_to_grammar(schema, &gbnf);
    CHECK(st != MF_OK && !gbnf, "%s: should be refused", schema);
    CHECK(strstr(mf_last_error(), want) != NULL, "%s: message \"%s\" lacks \"%s\"", schema, mf_last_error(), want);
    free(gbnf);
}

int main(void) {
    schema_case("{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":10},"
                "\"age\":{\"type\":\"integer\"},\"email\":{\"type\":\"string\"}},\"required\":[\"name\",\"age\"],"
                "\"additionalProperties\":false}",
                (doc_case[]){{"{\"name\":\"Al\",\"age\":3}", true},
                             {"{ \"name\": \"\\u00e9\\n\", \"age\": -40, \"email\": \"a@b\" }", true},
                             {"{\"name\":\"\",\"age\":3}", false},
                             {"{\"age\":3}", false},
                             {"{\"name\":\"Al\",\"age\":3.5}", false},
                             {"{\"name\":\"Al\",\"age\":3,\"x\":1}", false},
                             {"{\"name\":\"abcdefghijk\",\"age\":1}", false},
                             {NULL, false}});
    schema_case("{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},"
                "\"color\":{\"enum\":[\"red\",\"green\",3,null]}},\"required\":[\"kind\",\"color\"]}",
                (doc_case[]){{"{\"kind\":\"circle\",\"color\":\"red\"}", true},
                             {"{\"kind\":\"circle\",\"color\":3}", true},
                             {"{\"kind\":\"circle\",\"color\":null}", true},
                             {"{\"kind\":\"square\",\"color\":\"red\"}", false},
                             {"{\"kind\":\"circle\",\"color\":\"blue\"}", false},
                             {NULL, false}});
    schema_case("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,\"maxItems\":3}",
                (doc_case[]){{"[1]", true}, {"[1, 2.5, -3e2]", true}, {"[]", false}, {"[1,2,3,4]", false},
                             {"[\"a\"]", false}, {NULL, false}});
    schema_case("{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"},"
                "\"t\":{\"type\":\"string\",\"format\":\"time\"},\"dt\":{\"type\":\"string\",\"format\":\"date-time\"},"
                "\"id\":{\"type\":\"string\",\"format\":\"uuid\"}},\"required\":[\"d\",\"t\",\"dt\",\"id\"]}",
                (doc_case[]){{"{\"d\":\"2024-02-29\",\"t\":\"12:30:00Z\",\"dt\":\"2024-01-01T00:00:00.5+02:00\","
                              "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}", true},
                             {"{\"d\":\"2024-13-01\",\"t\":\"12:30:00Z\",\"dt\":\"2024-01-01T00:00:00Z\","
                              "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}", false},
                             {"{\"d\":\"2024-12-01\",\"t\":\"24:00:00Z\",\"dt\":\"2024-01-01T00:00:00Z\","
                              "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}", false},
                             {"{\"d\":\"2024-12-01\",\"t\":\"12:30:00Z\",\"dt\":\"2024-01-01T00:00:00Z\","
                              "\"id\":\"123e4567-e89b-12d3-a456-42661417400\"}", false},
                             {NULL, false}});
    schema_case("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},"
                "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"]}},"
                "\"$ref\":\"#/$defs/node\"}",
                (doc_case[]){{"{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}", true},
                             {"{\"v\":1,\"kids\":[{\"kids\":[]}]}", false},
                             {"{\"v\":\"1\"}", false},
                             {NULL, false}});
    schema_case("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"t\":{\"const\":\"a\"},\"x\":{\"type\":\"integer\"}},"
                "\"required\":[\"t\",\"x\"],\"additionalProperties\":false},{\"type\":\"object\",\"properties\":"
                "{\"t\":{\"const\":\"b\"},\"y\":{\"type\":\"boolean\"}},\"required\":[\"t\",\"y\"],"
                "\"additionalProperties\":false}]}",
                (doc_case[]){{"{\"t\":\"a\",\"x\":1}", true}, {"{\"t\":\"b\",\"y\":true}", true},
                             {"{\"t\":\"a\",\"y\":true}", false}, {NULL, false}});
    schema_case("{\"anyOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"null\"}]}",
                (doc_case[]){{"\"ab\"", true}, {"null", true}, {"\"abc\"", false}, {"1", false}, {NULL, false}});
    schema_case("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"},"
                "\"c\":{\"type\":\"integer\"}}}",
                (doc_case[]){{"{}", true}, {"{\"b\":null}", true}, {"{\"a\":true,\"c\":1}", true},
                             {"{\"a\":false,\"b\":null,\"c\":2}", true}, {"{\"a\":1}", false}, {NULL, false}});
    schema_case("{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
                (doc_case[]){{"{\"x\":1,\"y\":2}", true}, {"{}", true}, {"{\"x\":\"a\"}", false}, {NULL, false}});
    schema_case("{\"type\":[\"string\",\"null\"],\"title\":\"t\",\"description\":\"d\"}",
                (doc_case[]){{"\"x\"", true}, {"null", true}, {"1", false}, {NULL, false}});
    schema_case("{\"type\":\"integer\",\"enum\":[1,\"a\",2]}",
                (doc_case[]){{"1", true}, {"2", true}, {"\"a\"", false}, {NULL, false}});
    schema_case("{}", (doc_case[]){{"[1,{\"a\":null}]", true}, {"[1,]", false}, {NULL, false}});

    refused("{\"type\":\"string\",\"pattern\":\"^a\"}", "keyword 'pattern' is not supported");
    refused("{\"type\":\"number\",\"minimum\":0}", "keyword 'minimum' is not supported");
    refused("{\"allOf\":[{\"type\":\"string\"}]}", "keyword 'allOf' is not supported");
    refused("{\"type\":\"object\",\"properties\":{\"a\":{\"not\":{}}}}", "keyword 'not' is not supported (at /properties/a)");
    refused("{\"type\":\"string\",\"format\":\"email\"}", "format 'email' is not supported");
    refused("{\"type\":\"array\",\"items\":[{}]}", "items as a list");
    refused("{\"$ref\":\"http://x/y.json\"}", "only references inside the schema");
    refused("{\"$ref\":\"#/$defs/missing\"}", "points at nothing");
    refused("{\"type\":\"strin\"}", "unknown type 'strin'");
    refused("{\"type\":\"object\",", "json schema: line 1");
    refused("false", "matches nothing");
    return test_summary("test_schema");
}
