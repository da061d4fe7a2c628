/* test_grammar_gen.c - constrained sampling end to end on stories260K:
 * 200 generations at temperature 1 under the built-in JSON grammar all end
 * and parse as JSON (Jansson); generations under JSON Schemas validate
 * (validate.c); the CLI's --json / --grammar / --json-schema flags. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "minfer.h"
#include "testutil.h"
#include "validate.h"

#define MODEL "../shared/models/stories260K.gguf"
#define MAX_TOKENS 2040 /* the model's context is 2048 */

static mf_model *g_model;
static mf_context *g_ctx;

/* Samples from BOS until end of generation; false if it did not end. */
static bool generate(mf_grammar_state *gs, uint64_t seed, char *out, size_t cap) {
    mf_sampler_params sp = mf_sampler_default_params();
    sp.temp = 1.0f, sp.top_k = 0, sp.top_p = 1.0f, sp.min_p = 0.0f, sp.seed = seed;
    mf_sampler *smp = NULL;
    size_t n = 0;
    out[0] = 0;
    bool ended = false;
    if (mf_sampler_new(&sp, mf_model_n_vocab(g_model), &smp) || mf_grammar_state_reset(gs) ||
        mf_kv_seq_rm(g_ctx, -1, 0, -1)) {
        CHECK(0, "setup: %s", mf_last_error());
        mf_sampler_free(smp);
        return false;
    }
    mf_token t = mf_token_bos(g_model);
    for (int i = 0; i < MAX_TOKENS; i++) {
        if (mf_decode(g_ctx, &t, 1, false)) { CHECK(0, "decode: %s", mf_last_error()); break; }
        mf_status st = mf_sampler_sample_grammar(smp, mf_get_logits(g_ctx, -1), gs, &t);
        if (st) { CHECK(0, "seed %llu: %s (after \"%s\")", (unsigned long long)seed, mf_last_error(), out); break; }
        if (mf_token_is_eog(g_model, t)) { ended = true; break; }
        char piece[256];
        int32_t len = mf_token_to_piece(g_model, t, piece, sizeof piece, false);
        if (len > 0 && n + (size_t)len < cap) {
            memcpy(out + n, piece, (size_t)len);
            n += (size_t)len;
            out[n] = 0;
        }
    }
    mf_sampler_free(smp);
    return ended;
}

/* The built-in JSON grammar with strings of at most 64 characters: a story
 * model left free inside a string can write to the end of its context (1 of
 * these 200 seeds does with the unbounded built-in), and a cut-off value
 * proves nothing about the grammar. */
static char *bounded_json(void) {
    const char *j = mf_grammar_json(), *at = strstr(j, "char* ");
    CHECK(at != NULL, "the built-in JSON grammar has no `char* `");
    if (!at) return NULL;
    char *t = malloc(strlen(j) + 16);
    sprintf(t, "%.*schar{0,64} %s", (int)(at - j), j, at + 6);
    return t;
}

static void test_json_generations(const mf_grammar_vocab *v) {
    char *text = bounded_json();
    if (!text) return;
    mf_grammar *g = NULL;
    mf_grammar_state *gs = NULL;
    CHECK(!mf_grammar_parse(text, strlen(text), NULL, &g) && !mf_grammar_state_new(g, v, &gs), "%s", mf_last_error());
    if (!gs) { free(text); return; }
    int parsed = 0, ended = 0, kinds[8] = {0};
    static char out[1 << 16];
    for (int i = 0; i < 200; i++) {
        bool e = generate(gs, 1000 + (uint64_t)i, out, sizeof out);
        ended += e;
        json_error_t je;
        json_t *j = json_loads(out, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
        CHECK(e && j, "generation %d %s: \"%s\" (%s)", i, e ? "ended" : "did not end", out, j ? "" : je.text);
        if (j) { parsed++; kinds[json_typeof(j) & 7]++; }
        json_decref(j);
    }
    printf("json: %d of 200 ended, %d parsed (objects %d, arrays %d, strings %d, numbers %d, literals %d)\n", ended,
           parsed, kinds[JSON_OBJECT], kinds[JSON_ARRAY], kinds[JSON_STRING], kinds[JSON_INTEGER] + kinds[JSON_REAL],
           kinds[JSON_TRUE] + kinds[JSON_FALSE] + kinds[JSON_NULL]);
    mf_grammar_stats s = mf_grammar_state_stats(gs);
    printf("json: masks %llu cached / %llu computed\n", (unsigned long long)s.cache_hits,
           (unsigned long long)s.cache_misses);
    mf_grammar_state_free(gs);
    mf_grammar_free(g);
    free(text);
}

static void test_schema_generations(const mf_grammar_vocab *v, const char *schema, int n) {
    char *gbnf = NULL;
    mf_grammar *g = NULL;
    mf_grammar_state *gs = NULL;
    CHECK(!mf_json_schema_to_grammar(schema, &gbnf) && !mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) &&
              !mf_grammar_state_new(g, v, &gs),
          "%s: %s", schema, mf_last_error());
    json_t *sch = json_loads(schema, 0, NULL);
    static char out[1 << 16];
    int ok = 0;
    for (int i = 0; gs && i < n; i++) {
        bool e = generate(gs, 7 + (uint64_t)i, out, sizeof out);
        json_t *j = json_loads(out, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
        bool valid = e && j && schema_valid(j, sch, sch);
        CHECK(valid, "schema generation %d: \"%s\" does not validate", i, out);
        ok += valid;
        json_decref(j);
    }
    printf("schema: %d of %d valid, e.g. %s\n", ok, n, out);
    json_decref(sch);
    mf_grammar_state_free(gs);
    mf_grammar_free(g);
    free(gbnf);
}

/* `minfer run ARGS`: exit status, and stdout (ARGS ending in "2>/dev/null")
 * or stdout+stderr into out. */
static int cli(const char *args, char *out, size_t cap) {
    char cmd[2048];
    size_t n = strlen(args);
    bool quiet = n >= 11 && !strcmp(args + n - 11, "2>/dev/null");
    snprintf(cmd, sizeof cmd, "%s run -m " MODEL " %s%s", test_minfer_bin(), args, quiet ? "" : " 2>&1");
    return test_run(cmd, out, cap);
}

static void test_cli(void) {
    char out[8192];
    int rc = cli("--json --temp 1 -s 3 -n 300 -p x 2>/dev/null", out, sizeof out);
    json_t *j = json_loads(out, JSON_DECODE_ANY, NULL);
    CHECK(rc == 0 && j, "--json: rc %d, output \"%s\" is not JSON", rc, out);
    json_decref(j);
    rc = cli("--grammar 'root ::= \"yes\" | \"no\"' -n 20 -p x 2>/dev/null", out, sizeof out);
    CHECK(rc == 0 && (!strcmp(out, "yes\n") || !strcmp(out, "no\n")), "--grammar: rc %d, \"%s\"", rc, out);
    rc = cli("--grammar 'root ::= \"a\"\nx ::= [b' -p x", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "grammar: line 2, column 7: character class not closed"), "bad grammar: rc %d, %s", rc, out);
    rc = cli("--grammar-file /nonexistent.gbnf -p x", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "cannot read the grammar file"), "missing grammar file: rc %d, %s", rc, out);
    rc = cli("--grammar-file tests/grammar/data/chess.gbnf --temp 1 -n 60 -p x 2>/dev/null", out, sizeof out);
    CHECK(rc == 0 && !strncmp(out, "1. ", 3), "--grammar-file chess: rc %d, \"%s\"", rc, out);
    rc = cli("--json --grammar 'root ::= \"a\"' -p x", out, sizeof out);
    CHECK(rc == 2 && strstr(out, "give one of"), "two grammars: rc %d, %s", rc, out);

    char path[] = "/tmp/mf-schema-XXXXXX";
    int fd = mkstemp(path);
    const char *schema = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\"},\"s\":{\"enum\":[\"a\",\"b\"]}},"
                         "\"required\":[\"n\",\"s\"],\"additionalProperties\":false}";
    CHECK(fd >= 0 && write(fd, schema, strlen(schema)) == (ssize_t)strlen(schema), "temp schema file");
    if (fd >= 0) close(fd);
    char args[512];
    snprintf(args, sizeof args, "--json-schema %s --temp 1 -n 300 -p x 2>/dev/null", path);
    rc = cli(args, out, sizeof out);
    json_t *sch = json_loads(schema, 0, NULL);
    j = json_loads(out, 0, NULL);
    CHECK(rc == 0 && j && schema_valid(j, sch, sch), "--json-schema: rc %d, \"%s\"", rc, out);
    json_decref(j);
    json_decref(sch);
    fd = open(path, O_WRONLY | O_TRUNC);
    const char *bad = "{\"type\":\"string\",\"pattern\":\"(?=a)\"}";
    CHECK(fd >= 0 && write(fd, bad, strlen(bad)) == (ssize_t)strlen(bad), "temp schema file");
    if (fd >= 0) close(fd);
    snprintf(args, sizeof args, "--json-schema %s -p x", path);
    rc = cli(args, out, sizeof out);
    CHECK(rc == 2 && strstr(out, "pattern: the lookahead (?= is not supported"), "unsupported schema: rc %d, %s", rc, out);
    unlink(path);
}

int main(void) {
    mf_model_params mp = mf_model_default_params();
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 2048;
    cp.n_threads = 1;
    if (mf_model_load(MODEL, &mp, &g_model) || mf_context_new(g_model, &cp, &g_ctx)) {
        CHECK(0, "load %s: %s", MODEL, mf_last_error());
        return test_summary("test_grammar_gen");
    }
    mf_grammar_vocab *v = NULL;
    CHECK(!mf_grammar_vocab_new(g_model, &v), "vocab: %s", mf_last_error());
    if (v) {
        test_json_generations(v);
        test_schema_generations(v, "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},"
                                   "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},"
                                   "\"maxItems\":3},\"when\":{\"type\":\"string\",\"format\":\"date\"}},"
                                   "\"required\":[\"name\",\"age\",\"when\"],\"additionalProperties\":false}", 20);
        test_schema_generations(v, "{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"boolean\"},"
                                   "\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/n\"},\"maxItems\":2}},"
                                   "\"required\":[\"v\"]}},\"anyOf\":[{\"$ref\":\"#/$defs/n\"},{\"type\":\"null\"}]}", 20);
        /* pattern, integer bounds, prefixItems, allOf */
        test_schema_generations(v, "{\"allOf\":[{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\","
                                   "\"pattern\":\"^[A-Z]{2}-\\\\d{3}$\"}},\"required\":[\"code\"]},{\"properties\":{\"pt\":"
                                   "{\"type\":\"array\",\"prefixItems\":[{\"type\":\"integer\",\"minimum\":-50,\"maximum\":50},"
                                   "{\"type\":\"integer\",\"exclusiveMinimum\":1000}],\"items\":false,\"minItems\":2}},"
                                   "\"required\":[\"pt\"]}]}", 20);
    }
    test_cli();
    mf_grammar_vocab_free(v);
    mf_context_free(g_ctx);
    mf_model_free(g_model);
    return test_summary("test_grammar_gen");
}
