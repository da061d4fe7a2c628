/* bench_insert.c - INSERT's wall time (mf_vindex_insert: reference passes
 * and the strength search) on a vindex of level inference, and a
 * fingerprint of what it inserted, so a faster search can be shown to insert
 * the same feature bit for bit. Each repeat inserts, then drops the feature
 * again, so every repeat starts from the same overlay. Built, never run by
 * ctest:
 *   build/tests/bench_insert DIR [-p PROMPT] [-T TARGET] [-l LAYER|-1] [-t THREADS] [-r REPEATS]
 * Prints per repeat the time; then the median, layer, feature, strength,
 * trials and an FNV-1a hash of the feature's gate, up and down floats. */
#include "minfer.h"
#include "vindex/vindex.h"
#include "core/timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

int main(int argc, char **argv) {
    const char *dir = NULL, *prompt = "Tim was a", *target = "happy";
    int layer = -1, nth = 2, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-p") && i + 1 < argc) prompt = argv[++i];
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) target = argv[++i];
        else if (!strcmp(argv[i], "-l") && i + 1 < argc) layer = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) nth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !dir) dir = argv[i];
        else {
            fprintf(stderr, "usage: bench_insert DIR [-p PROMPT] [-T TARGET] [-l LAYER] [-t THREADS] [-r REPEATS]\n");
            return 2;
        }
    }
    if (!dir || reps < 1) {
        fprintf(stderr, "bench_insert: needs a vindex directory of level inference (and -r >= 1)\n");
        return 2;
    }
    mf_vindex *v;
    mf_model *m;
    mf_model_params mp = mf_model_default_params();
    if (mf_vindex_open(dir, &v) || mf_model_load(dir, &mp, &m)) {
        fprintf(stderr, "bench_insert: %s\n", mf_last_error());
        return 1;
    }
    mf_token t[512], tg[8];
    const int32_t n = mf_tokenize(m, prompt, strlen(prompt), t, 512, true, false);
    const int32_t nt = mf_tokenize(m, target, strlen(target), tg, 8, false, false);
    if (n < 1 || nt != 1) {
        fprintf(stderr, "bench_insert: the prompt must tokenize (got %d) and the target be one token (got %d)\n", n, nt);
        return 1;
    }
    mf_vindex_insert_params p = {.prompt = t, .n_prompt = n, .target = tg[0], .layer = layer, .n_threads = nth};
    mf_vindex_insert_result r = {0};
    double *ms = malloc((size_t)reps * sizeof *ms);
    uint64_t h = 0;
    for (int i = 0; i < reps; i++) {
        const double t0 = mf_now();
        if (mf_vindex_insert(v, m, &p, &r)) {
            fprintf(stderr, "bench_insert: %s\n", mf_last_error());
            return 1;
        }
        ms[i] = (mf_now() - t0) * 1e3;
        const vx_feat *f = &v->ov.ins[r.layer][v->ov.n_ins[r.layer] - 1];
        const size_t E = (size_t)v->ix.n_embd * sizeof(float);
        uint64_t hi = fnv(0xcbf29ce484222325ull, f->gate, E);
        if (f->up) hi = fnv(hi, f->up, E);
        hi = fnv(hi, f->down, E);
        if (i && hi != h) {
            fprintf(stderr, "bench_insert: repeat %d inserted another feature (%016llx, first %016llx)\n", i,
                    (unsigned long long)hi, (unsigned long long)h);
            return 1;
        }
        h = hi;
        vx_overlay_pop_insert(v);
        printf("repeat %d: %.2f ms\n", i, ms[i]);
    }
    qsort(ms, (size_t)reps, sizeof *ms, cmp);
    printf("insert: median %.2f ms (min %.2f, max %.2f, %d repeats, %d threads); layer %d, feature %d, strength %.9g, "
           "%d trials, feature hash %016llx\n",
           ms[reps / 2], ms[0], ms[reps - 1], reps, nth, r.layer, r.feature, (double)r.strength, r.trials,
           (unsigned long long)h);
    free(ms);
    mf_model_free(m);
    mf_vindex_free(v);
    return 0;
}
