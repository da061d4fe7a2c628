/* run_grammar.c - the grammar options of `minfer run`: --grammar,
 * --grammar-file, --json, --json-schema -> one compiled grammar. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "run.h"

int run_grammar_load(const run_opts *o, mf_grammar **out) {
    *out = NULL;
    int given = !!o->grammar + !!o->grammar_file + !!o->json + !!o->json_schema;
    if (!given) return -1;
    if (given > 1) {
        fprintf(stderr, "minfer run: give one of --grammar, --grammar-file, --json, --json-schema\n");
        return 2;
    }
    char *owned = NULL;
    const char *text = o->grammar;
    if (o->json) text = mf_grammar_json();
    if (o->grammar_file) {
        owned = cli_read_file(o->grammar_file, NULL);
        if (!owned) {
            fprintf(stderr, "minfer run: cannot read the grammar file %s\n", o->grammar_file);
            return 2;
        }
        text = owned;
    }
    if (o->json_schema) {
        char *schema = cli_read_file(o->json_schema, NULL);
        if (!schema) {
            fprintf(stderr, "minfer run: cannot read the schema file %s\n", o->json_schema);
            return 2;
        }
        mf_status st = mf_json_schema_to_grammar(schema, &owned);
        free(schema);
        if (st) {
            fprintf(stderr, "minfer run: %s: %s\n", o->json_schema, mf_last_error());
            return 2;
        }
        text = owned;
    }
    mf_status st = mf_grammar_parse(text, strlen(text), NULL, out);
    if (st) {
        if (o->grammar_file) fprintf(stderr, "minfer run: %s: %s\n", o->grammar_file, mf_last_error());
        else fprintf(stderr, "minfer run: %s\n", mf_last_error());
    }
    free(owned);
    return st ? 2 : 0;
}
