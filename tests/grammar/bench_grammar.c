/* bench_grammar.c - the grammar stage's time per token (mask + accept) on a
 * large vocabulary under the built-in JSON grammar and a nested schema.
 *
 *   build/tests/bench_grammar [VOCAB.gguf] [TOKENS] [first]
 *
 * Loads the vocabulary only (vocab_only), builds the trie, then runs TOKENS
 * steps (default 2000) of: random logits -> mf_grammar_apply -> draw the
 * best allowed token -> mf_grammar_accept, restarting the grammar whenever
 * it completes. Reports the median, p90, p99 and mean per token, and how
 * many masks came from the state's cache; then the cost of a first visit
 * (a fresh state, nothing cached: the trie walk) at a few JSON positions,
 * median and best of 3 fresh states; with `first`, only those, of 31. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "minfer.h"
#include "grammar/trie.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)(rng >> 40) / (float)(1 << 24);
}

static int run(const char *name, const char *gbnf, const mf_model *m, const mf_grammar_vocab *v, int steps) {
    mf_grammar *g = NULL;
    mf_grammar_state *s = NULL;
    if (mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) || mf_grammar_state_new(g, v, &s)) {
        fprintf(stderr, "bench_grammar: %s\n", mf_last_error());
        return 1;
    }
    const int32_t n = mf_model_n_vocab(m);
    float *logits = malloc(sizeof *logits * (size_t)n), *base = malloc(sizeof *base * (size_t)n);
    double *t = malloc(sizeof *t * (size_t)steps);
    for (int32_t i = 0; i < n; i++) base[i] = frand() * 10.0f;
    int restarts = 0;
    for (int k = 0; k < steps; k++) {
        memcpy(logits, base, sizeof *logits * (size_t)n);
        for (int j = 0; j < 64; j++) logits[(uint32_t)(frand() * n) % (uint32_t)n] += 20.0f; /* vary the winner */
        double t0 = now_us();
        mf_status st = mf_grammar_apply(s, logits);
        double t1 = now_us();
        if (st) { fprintf(stderr, "bench_grammar: %s\n", mf_last_error()); return 1; }
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++)
            if (logits[i] > logits[best]) best = i;
        double t2 = now_us();
        st = mf_grammar_accept(s, best);
        double t3 = now_us();
        if (st) { fprintf(stderr, "bench_grammar: %s\n", mf_last_error()); return 1; }
        t[k] = (t1 - t0) + (t3 - t2);
        if (mf_token_is_eog(m, best) || mf_grammar_done(s)) {
            if (mf_token_is_eog(m, best)) { mf_grammar_state_reset(s); restarts++; }
        }
    }
    double sum = 0;
    for (int k = 0; k < steps; k++) sum += t[k];
    qsort(t, (size_t)steps, sizeof *t, cmp_d);
    mf_grammar_stats gs = mf_grammar_state_stats(s);
    printf("%-8s %d tokens (%d values): median %.1f us, p90 %.1f us, p99 %.1f us, max %.0f us, mean %.1f us;"
           " masks %llu cached / %llu computed (%.0f trie nodes per computed mask)\n",
           name, steps, restarts, t[steps / 2], t[steps * 9 / 10], t[steps * 99 / 100], t[steps - 1], sum / steps,
           (unsigned long long)gs.cache_hits, (unsigned long long)gs.cache_misses,
           gs.cache_misses ? (double)gs.trie_nodes / (double)gs.cache_misses : 0.0);
    free(logits);
    free(base);
    free(t);
    mf_grammar_state_free(s);
    mf_grammar_free(g);
    return 0;
}

/* The uncached mask at a few positions of a grammar: median and best of
 * `reps` fresh states (the median is the figure on a loaded machine). */
static void first_visits(const mf_model *m, const mf_grammar_vocab *v, int reps, const char *name, const char *j,
                         const char *const *pre) {
    mf_grammar *g = NULL;
    if (mf_grammar_parse(j, strlen(j), NULL, &g)) return;
    float *l = malloc(sizeof *l * (size_t)mf_model_n_vocab(m));
    printf("first visit, %s (trie walk, nothing cached):", name);
    for (size_t k = 0; pre[k]; k++) {
        double best = 1e30, dts[64];
        int got = 0;
        unsigned long long nodes = 0;
        for (int r = 0; r < reps && r < 64; r++) {
            mf_grammar_state *s = NULL;
            if (mf_grammar_state_new(g, v, &s) || mf_grammar_accept_text(s, pre[k], strlen(pre[k]))) break;
            double t0 = now_us();
            mf_grammar_apply(s, l);
            double dt = now_us() - t0;
            if (dt < best) best = dt;
            dts[got++] = dt;
            nodes = (unsigned long long)mf_grammar_state_stats(s).trie_nodes;
            mf_grammar_state_free(s);
        }
        qsort(dts, (size_t)got, sizeof *dts, cmp_d);
        printf("%s '%s' median %.0f / best %.0f us (%llu nodes)", k ? "," : "", pre[k], got ? dts[got / 2] : 0.0, best, nodes);
    }
    printf("\n");
    free(l);
    mf_grammar_free(g);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "../shared/tokenizer/ggml-vocab-qwen2.gguf";
    int steps = argc > 2 ? atoi(argv[2]) : 2000;
    if (steps < 10) steps = 10;
    mf_model_params mp = mf_model_default_params();
    mp.vocab_only = true;
    mf_model *m = NULL;
    mf_grammar_vocab *v = NULL;
    if (mf_model_load(path, &mp, &m)) { fprintf(stderr, "bench_grammar: %s\n", mf_last_error()); return 1; }
    double t0 = now_us();
    if (mf_grammar_vocab_new(m, &v)) { fprintf(stderr, "bench_grammar: %s\n", mf_last_error()); return 1; }
    printf("vocabulary %s: %d tokens, trie built in %.1f ms: %u nodes, %u subtrees for the shortcut (trie and tables %.1f MiB)\n", path,
           mf_model_n_vocab(m), (now_us() - t0) / 1e3, v->n_nodes, v->n_sub,
           ((double)v->n_nodes * (sizeof *v->node + sizeof *v->big) + (double)v->n_sub * sizeof *v->sub +
            (double)v->n_vocab * (sizeof *v->dfs_tok + 4 * 3)) / (1024.0 * 1024.0));
    static const char *const json_pre[] = {"", "{", "{\"key\": ", "{\"key\": \"some text", "[1, 2", "[tr", NULL};
    /* in the schema: a bounded string (maxLength 40) at its start, midway and
     * 5 characters from its end, an unbounded one */
    static const char *const schema_pre[] = {
        "{\"id\": \"123e4567-e89b-12d3-a456-426614174000\", \"user\": {\"name\": \"",
        "{\"id\": \"123e4567-e89b-12d3-a456-426614174000\", \"user\": {\"name\": \"twenty characters in",
        "{\"id\": \"123e4567-e89b-12d3-a456-426614174000\", \"user\": {\"name\": \"thirty-five characters long, nearly",
        "{\"id\": \"123e4567-e89b-12d3-a456-426614174000\", \"user\": {\"name\": \"a\", \"age\": 3}, \"items\": [{\"sku\": \"x",
        NULL};
    char *gbnf = NULL;
    const char *schema =
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\",\"format\":\"uuid\"},"
        "\"user\":{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":40},"
        "\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":5}},"
        "\"required\":[\"name\",\"age\"]},\"items\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":"
        "{\"sku\":{\"type\":\"string\"},\"qty\":{\"type\":\"integer\"},\"price\":{\"type\":\"number\"}},"
        "\"required\":[\"sku\",\"qty\",\"price\"]},\"maxItems\":8},\"when\":{\"type\":\"string\",\"format\":\"date-time\"}},"
        "\"required\":[\"id\",\"user\",\"items\",\"when\"]}";
    int rc = 0;
    if (mf_json_schema_to_grammar(schema, &gbnf)) { fprintf(stderr, "bench_grammar: %s\n", mf_last_error()); rc = 1; }
    if (!rc && argc > 3 && !strcmp(argv[3], "first")) { /* only the first visits, 31 times each (for profiling) */
        first_visits(m, v, 31, "json", mf_grammar_json(), json_pre);
        first_visits(m, v, 31, "schema", gbnf, schema_pre);
    } else if (!rc) {
        rc = run("json", mf_grammar_json(), m, v, steps);
        first_visits(m, v, 3, "json", mf_grammar_json(), json_pre);
        if (!rc) rc = run("schema", gbnf, m, v, steps);
        first_visits(m, v, 3, "schema", gbnf, schema_pre);
    }
    free(gbnf);
    mf_grammar_vocab_free(v);
    mf_model_free(m);
    return rc;
}
