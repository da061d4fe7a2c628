/* test_schema.c - JSON Schema -> GBNF: for each schema, documents the test's
 * own validator (validate.c) calls valid are accepted by the grammar and the
 * invalid ones rejected; unsupported keywords are refused by name. */
#include <stdlib.h>
#include <math.h>
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

/* prefixItems, pattern, integer bounds, allOf */
static void new_keywords(void) {
    schema_case("{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],\"items\":false}",
                (doc_case[]){{"[]", true}, {"[\"a\"]", true}, {"[\"a\", 1]", true}, {"[\"a\",1,2]", false},
                             {"[1]", false}, {"[\"a\",\"b\"]", false}, {NULL, false}});
    schema_case("{\"type\":\"array\",\"prefixItems\":[{\"const\":\"x\"}],\"items\":{\"type\":\"boolean\"},"
                "\"minItems\":2,\"maxItems\":3}",
                (doc_case[]){{"[\"x\",true]", true}, {"[\"x\",true,false]", true}, {"[\"x\"]", false},
                             {"[\"x\",true,false,true]", false}, {"[\"y\",true]", false}, {"[\"x\",1]", false},
                             {NULL, false}});
    schema_case("{\"prefixItems\":[{\"type\":\"null\"}]}",
                (doc_case[]){{"[]", true}, {"[null]", true}, {"[null,1,\"a\"]", true}, {"[1]", false}, {NULL, false}});
    schema_case("{\"type\":\"string\",\"pattern\":\"^[A-Z]{2}-[0-9]{3,4}$\"}",
                (doc_case[]){{"\"AB-123\"", true}, {"\"AB-1234\"", true}, {"\"ab-123\"", false}, {"\"AB-12\"", false},
                             {"\"xAB-123\"", false}, {"\"AB-12345\"", false}, {NULL, false}});
    schema_case("{\"type\":\"string\",\"pattern\":\"ab+c\"}",
                (doc_case[]){{"\"abc\"", true}, {"\"xx abbbc yy\"", true}, {"\"ac\"", false}, {"\"\"", false},
                             {NULL, false}});
    schema_case("{\"type\":\"string\",\"pattern\":\"^(cat|dog)s?$|^\\\\d+$\"}",
                (doc_case[]){{"\"cat\"", true}, {"\"dogs\"", true}, {"\"123\"", true}, {"\"cats1\"", false},
                             {"\"\"", false}, {"\"bird\"", false}, {NULL, false}});
    /* the regex a\.b"c\\.  : a quote and a backslash inside the string */
    schema_case("{\"type\":\"string\",\"pattern\":\"^a\\\\.b\\\"c\\\\\\\\.$\"}",
                (doc_case[]){{"\"a.b\\\"c\\\\x\"", true}, {"\"aXb\\\"c\\\\x\"", false}, {"\"a.b\\\"cx\"", false},
                             {NULL, false}});
    schema_case("{\"type\":\"string\",\"pattern\":\"^[^,]*$\"}",
                (doc_case[]){{"\"a b\"", true}, {"\"\"", true}, {"\"tab\\t \\\"q\\\" \\u0001 \u00e9\"", true},
                             {"\"a,b\"", false}, {NULL, false}});
    schema_case("{\"type\":\"string\",\"pattern\":\"^(?:[a-f0-9]{2}:){2}[a-f0-9]{2}$\"}",
                (doc_case[]){{"\"0a:1b:ff\"", true}, {"\"0a:1b\"", false}, {"\"0A:1b:ff\"", false}, {NULL, false}});
    schema_case("{\"type\":\"integer\",\"minimum\":-15,\"exclusiveMaximum\":120}",
                (doc_case[]){{"-15", true}, {"-9", true}, {"0", true}, {"7", true}, {"119", true}, {"100", true},
                             {"-16", false}, {"120", false}, {"1000", false}, {"-100", false}, {"3.5", false},
                             {NULL, false}});
    schema_case("{\"type\":\"integer\",\"exclusiveMinimum\":99}",
                (doc_case[]){{"100", true}, {"12345", true}, {"99", false}, {"5", false}, {"-1", false}, {"0", false},
                             {NULL, false}});
    schema_case("{\"type\":[\"integer\",\"null\"],\"maximum\":-3}",
                (doc_case[]){{"-3", true}, {"-40", true}, {"-1000", true}, {"null", true}, {"-2", false}, {"0", false},
                             {"5", false}, {NULL, false}});
    schema_case("{\"allOf\":[{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"}},\"required\":[\"id\"]},"
                "{\"properties\":{\"name\":{\"type\":\"string\"}},\"required\":[\"name\"]}]}",
                (doc_case[]){{"{\"id\":1,\"name\":\"a\"}", true}, {"{\"id\":1}", false}, {"{\"name\":\"a\"}", false},
                             {"{\"id\":\"1\",\"name\":\"a\"}", false}, {NULL, false}});
    schema_case("{\"$defs\":{\"base\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
                "\"tag\":{\"enum\":[\"a\",\"b\"]}},\"required\":[\"id\"],\"additionalProperties\":false}},"
                "\"allOf\":[{\"$ref\":\"#/$defs/base\"},{\"properties\":{\"tag\":{\"enum\":[\"a\",\"b\"]},"
                "\"extra\":{\"type\":\"null\"}},\"required\":[\"tag\"]}]}",
                (doc_case[]){{"{\"id\":1,\"tag\":\"a\"}", true}, {"{\"id\":1}", false},
                             {"{\"id\":1,\"tag\":\"a\",\"extra\":null}", false}, {NULL, false}});
}

/* Integer bounds against brute force: every n near the bounds (and a few far
 * off) is accepted exactly when it lies within them. */
static void int_ranges(void) {
    static const struct { bool has_lo; long long lo; bool has_hi; long long hi; } R[] = {
        {true, 0, true, 0}, {true, 0, true, 9}, {true, 1, true, 1}, {true, 7, true, 213}, {true, 123, true, 4567},
        {true, -987, true, -45}, {true, -3, true, 1005}, {true, 100, true, 999}, {true, 99, true, 1000},
        {true, 20, false, 0}, {true, -20, false, 0}, {false, 0, true, 77}, {false, 0, true, -77},
        {true, 1000, true, 99999}, {true, 999999999999, true, 1000000000001},
    };
    for (size_t r = 0; r < sizeof R / sizeof *R; r++) {
        char schema[200];
        int k = snprintf(schema, sizeof schema, "{\"type\":\"integer\"");
        if (R[r].has_lo) k += snprintf(schema + k, sizeof schema - (size_t)k, ",\"minimum\":%lld", R[r].lo);
        if (R[r].has_hi) k += snprintf(schema + k, sizeof schema - (size_t)k, ",\"maximum\":%lld", R[r].hi);
        snprintf(schema + k, sizeof schema - (size_t)k, "}");
        char *gbnf = NULL;
        mf_grammar *g = NULL;
        mf_grammar_state *st = NULL;
        if (mf_json_schema_to_grammar(schema, &gbnf) || mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) ||
            mf_grammar_state_new(g, NULL, &st)) {
            CHECK(false, "%s: %s", schema, mf_last_error());
            free(gbnf);
            mf_grammar_free(g);
            continue;
        }
        long long a = R[r].has_lo ? R[r].lo : (R[r].has_hi ? R[r].hi : 0) - 3000;
        long long z = R[r].has_hi ? R[r].hi : a + 3000;
        long long probes[4] = {-1000000000000000LL + 1, 1000000000000000LL - 1, 0, -1};
        int bad = 0;
        for (long long n = a - 1100; n <= z + 1100 + 4 && bad < 5; n++) {
            long long x = n <= z + 1100 ? n : probes[n - z - 1101];
            char t[32];
            snprintf(t, sizeof t, "%lld", x);
            bool want = (!R[r].has_lo || x >= R[r].lo) && (!R[r].has_hi || x <= R[r].hi);
            mf_grammar_state_reset(st);
            bool got = !mf_grammar_accept_text(st, t, strlen(t)) && mf_grammar_done(st);
            if (got != want) bad++;
            CHECK(got == want, "%s: %s %s\n%s", schema, t, got ? "accepted" : "rejected", gbnf);
        }
        mf_grammar_state_free(st);
        mf_grammar_free(g);
        free(gbnf);
    }
}

/* One number text: the grammar accepts it exactly when the validator does. */
static int num_probe(mf_grammar_state *st, json_t *sch, const char *schema, const char *gbnf, const char *t) {
    json_t *doc = json_loads(t, JSON_DECODE_ANY, NULL);
    const bool want = doc && schema_valid(doc, sch, sch);
    json_decref(doc);
    mf_grammar_state_reset(st);
    const bool got = !mf_grammar_accept_text(st, t, strlen(t)) && mf_grammar_done(st);
    CHECK(got == want, "%s: %s %s\n%s", schema, t, got ? "accepted" : "rejected", gbnf);
    return got != want;
}

/* Number bounds against brute force: quarters, tenths and whole numbers from
 * below the lower bound to above the upper one, with and without ".0". */
static void num_ranges(void) {
    static const char *const S[] = {
        "\"minimum\":-2,\"exclusiveMaximum\":3", "\"exclusiveMinimum\":0,\"maximum\":1", "\"minimum\":0",
        "\"exclusiveMinimum\":-5", "\"maximum\":-1", "\"exclusiveMaximum\":0", "\"minimum\":7,\"maximum\":7",
        "\"exclusiveMinimum\":-10,\"exclusiveMaximum\":-8", "\"minimum\":-3,\"maximum\":120,\"exclusiveMaximum\":100",
        "\"exclusiveMinimum\":9,\"maximum\":10",
        /* decimal bounds */
        "\"minimum\":0.5", "\"exclusiveMinimum\":-2.25,\"maximum\":3.1", "\"minimum\":0.1,\"maximum\":0.3",
        "\"exclusiveMinimum\":1.05,\"exclusiveMaximum\":1.75", "\"maximum\":-0.5", "\"exclusiveMaximum\":-10.125",
        "\"minimum\":2.5,\"maximum\":2.5", "\"exclusiveMinimum\":0.999,\"maximum\":1.001", "\"minimum\":-1.5,\"exclusiveMaximum\":0",
        "\"minimum\":99.95,\"exclusiveMaximum\":100.05",
    };
    for (size_t r = 0; r < sizeof S / sizeof *S; r++) {
        char schema[200];
        snprintf(schema, sizeof schema, "{\"type\":\"number\",%s}", S[r]);
        char *gbnf = NULL;
        mf_grammar *g = NULL;
        mf_grammar_state *st = NULL;
        json_t *sch = json_loads(schema, 0, NULL);
        if (mf_json_schema_to_grammar(schema, &gbnf) || mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) ||
            mf_grammar_state_new(g, NULL, &st)) {
            CHECK(false, "%s: %s", schema, mf_last_error());
        } else {
            int bad = 0;
            for (int q = -60 * 20; q <= 130 * 20 && bad < 5; q++) {
                char t[4][32];
                int nt = 0;
                if (q % 20 == 0) { snprintf(t[nt++], 32, "%d", q / 20); snprintf(t[nt++], 32, "%d.0", q / 20); }
                if (q % 5 == 0) snprintf(t[nt++], 32, "%.2f", q / 20.0);
                if (q % 2 == 0) snprintf(t[nt++], 32, "%.1f", q / 20.0);
                for (int i = 0; i < nt; i++) {
                    if (!strcmp(t[i], "-0") || !strncmp(t[i], "-0.0", 4)) continue; /* "-0" is never produced */
                    bad += num_probe(st, sch, schema, gbnf, t[i]);
                }
            }
            /* around each bound: b + j * 10^-d for small j, up to 6 decimals, with a trailing zero too */
            static const char *const keys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
            for (int kk = 0; kk < 4 && bad < 5; kk++) {
                json_t *bv = json_object_get(sch, keys[kk]);
                if (!bv) continue;
                const double bd = json_number_value(bv);
                for (int d = 0; d <= 6; d++)
                    for (int j = -3; j <= 3; j++) {
                        char t[2][48];
                        snprintf(t[0], 48, "%.*f", d, bd + j * pow(10, -d));
                        snprintf(t[1], 48, "%.*f0", d, bd + j * pow(10, -d));
                        for (int i = 0; i < 2; i++) {
                            if (d == 0 && i == 1) continue; /* "30" is another number */
                            if (!strncmp(t[i], "-0", 2) && strspn(t[i] + 1, "0.") == strlen(t[i] + 1)) continue;
                            bad += num_probe(st, sch, schema, gbnf, t[i]);
                        }
                    }
            }
        }
        json_decref(sch);
        mf_grammar_state_free(st);
        mf_grammar_free(g);
        free(gbnf);
    }
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
                             {"{\"d\":\"2000-02-29\",\"t\":\"23:59:59.123456-11:30\",\"dt\":\"1999-12-31T23:59:59Z\","
                              "\"id\":\"00000000-0000-0000-0000-00000000000A\"}", true},
                             {"{\"d\":\"2023-02-29\",\"t\":\"12:30:00Z\",\"dt\":\"2024-01-01T00:00:00Z\","
                              "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}", false},
                             {"{\"d\":\"1900-02-29\",\"t\":\"12:30:00Z\",\"dt\":\"2024-01-01T00:00:00Z\","
                              "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}", false},
                             {"{\"d\":\"2024-04-31\",\"t\":\"12:30:00Z\",\"dt\":\"2024-01-01T00:00:00Z\","
                              "\"id\":\"123e4567-e89b-12d3-a456-426614174000\"}", false},
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

    new_keywords();
    int_ranges();
    num_ranges();
    refused("{\"type\":\"string\",\"pattern\":\"^(?=a)\"}", "pattern: the lookahead (?= is not supported");
    refused("{\"type\":\"string\",\"pattern\":\"(?<!a)b\"}", "the negative lookbehind (?<!");
    refused("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "a backreference");
    refused("{\"type\":\"string\",\"pattern\":\"\\\\bword\"}", "the word boundary \\b");
    refused("{\"type\":\"string\",\"pattern\":\"\\\\p{L}\"}", "the Unicode property escape");
    refused("{\"type\":\"string\",\"pattern\":\"a^b\"}", "the anchor ^ inside the pattern");
    refused("{\"type\":\"string\",\"pattern\":\"(a$)\"}", "the anchor $ inside the pattern");
    refused("{\"type\":\"string\",\"pattern\":\"(?i)a\"}", "the group modifier (?");
    refused("{\"type\":\"string\",\"pattern\":\"a{2,1}\"}", "n below m");
    refused("{\"type\":\"string\",\"pattern\":\"(ab\"}", "an unterminated group");
    refused("{\"type\":\"string\",\"pattern\":\"*a\"}", "nothing to repeat");
    refused("{\"type\":\"string\",\"pattern\":\"^(a|b?)+$\"}", "a repeated group that can match the empty string");
    refused("{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", "pattern with format, minLength or maxLength");
    refused("{\"type\":\"number\",\"minimum\":0.1234567890123456}", "a number bound with more than 15 decimals");
    refused("{\"type\":\"number\",\"minimum\":2,\"exclusiveMaximum\":2}", "no number lies within the bounds");
    refused("{\"minimum\":0}", "minimum/maximum without type integer");
    refused("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "no integer lies within the bounds");
    refused("{\"type\":\"integer\",\"maximum\":1e300}", "maximum beyond +-10^15");
    refused("{\"type\":\"integer\",\"multipleOf\":3}", "keyword 'multipleOf' is not supported");
    refused("{\"allOf\":[{\"type\":\"string\"}]}", "allOf is supported only for object schemas (type object) (at /allOf/0)");
    refused("{\"allOf\":[{\"properties\":{\"a\":{\"type\":\"string\"}}},{\"properties\":{\"a\":{\"type\":\"integer\"}}}]}",
            "property 'a' has different schemas in two entries");
    refused("{\"allOf\":[{\"required\":[\"a\"]},{\"properties\":{\"b\":{}},\"additionalProperties\":false}]}",
            "'a' is required but an entry's additionalProperties false forbids it");
    refused("{\"allOf\":[{\"minProperties\":1}]}", "'minProperties' in an allOf entry is not supported");
    refused("{\"type\":\"array\",\"prefixItems\":[{}],\"items\":false,\"minItems\":2}", "minItems above the prefixItems count");
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
