/* schema_accepts.c - the grammar side of the ajv test (tests/server/js/
 * schema.test.mjs): reads [{"schema": S, "docs": [TEXT, ...]}, ...] on
 * stdin and prints, per case, {"accepts": [bool, ...]} (does the grammar
 * compiled from S accept each TEXT whole) or {"error": MESSAGE} when the
 * converter refuses S. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "minfer.h"

static json_t *run_case(json_t *c) {
    char *schema = json_dumps(json_object_get(c, "schema"), JSON_ENCODE_ANY | JSON_COMPACT), *gbnf = NULL;
    mf_grammar *g = NULL;
    mf_grammar_state *st = NULL;
    json_t *res;
    if (!schema || mf_json_schema_to_grammar(schema, &gbnf) || mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) ||
        mf_grammar_state_new(g, NULL, &st)) {
        res = json_pack("{s:s}", "error", mf_last_error());
    } else {
        json_t *acc = json_array(), *d;
        size_t i;
        json_array_foreach(json_object_get(c, "docs"), i, d) {
            const char *t = json_string_value(d);
            mf_grammar_state_reset(st);
            bool ok = t && !mf_grammar_accept_text(st, t, strlen(t)) && mf_grammar_done(st);
            json_array_append_new(acc, json_boolean(ok));
        }
        res = json_pack("{s:o}", "accepts", acc);
    }
    mf_grammar_state_free(st);
    mf_grammar_free(g);
    free(gbnf);
    free(schema);
    return res;
}

int main(void) {
    json_error_t je;
    json_t *cases = json_loadf(stdin, 0, &je);
    if (!json_is_array(cases)) {
        fprintf(stderr, "schema_accepts: stdin is not a JSON list: %s\n", je.text);
        return 2;
    }
    json_t *out = json_array(), *c;
    size_t i;
    json_array_foreach(cases, i, c) json_array_append_new(out, run_case(c));
    json_dumpf(out, stdout, JSON_COMPACT);
    putchar('\n');
    json_decref(out);
    json_decref(cases);
    return 0;
}
