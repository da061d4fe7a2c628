/* bench_decode.c - the decode step's big ops on a real model, one kind at a
 * time: the CPU backend's matrix products of every layer back to back (Q/K/V,
 * attn_output, gate/up, down, as the forward pass calls them for one token),
 * reported as GB/s of weights per kind, and the attention op of every layer
 * at a given depth, in microseconds per layer. Nothing else runs between the
 * calls, so the products show how close the matmul streams get to the
 * machine's read bandwidth, and the attention what the KV cache layout and
 * kernels cost at depth. Built, never run by ctest.
 *
 *   build/tests/bench_decode MODEL.gguf [--threads N] [--reps R] [--depth D]
 * defaults: 2 threads, 20 passes over the layers (the first is not timed),
 * depth 4096 (0: no attention). The weights go through the same load (and
 * x16 repack) as `minfer run`. The KV cache is f16, filled with arbitrary
 * values; the query is arbitrary too: only the time is of interest. */
#include "minfer.h"
#include "cpu/cpu.h"
#include "step_util.h"
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t bytes_of(mf_weight w) { return w ? mf_row_size(w->type, w->ne[0]) * (size_t)w->ne[1] : 0; }

int main(int argc, char **argv) {
    const char *path = NULL;
    int threads = 2, reps = 20, depth = 4096;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--depth") && i + 1 < argc) depth = atoi(argv[++i]);
        else if (argv[i][0] != '-' && !path) path = argv[i];
        else {
            fprintf(stderr, "usage: bench_decode MODEL.gguf [--threads N] [--reps R] [--depth D]\n");
            return 2;
        }
    }
    if (!path || reps < 2 || depth < 0 || threads < 1) {
        fprintf(stderr, "usage: bench_decode MODEL.gguf [--threads N] [--reps R >= 2] [--depth D >= 0]\n");
        return 2;
    }
    mf_model_params mp = mf_model_default_params();
    mf_model *m = NULL;
    if (mf_model_load(path, &mp, &m) != MF_OK) {
        fprintf(stderr, "bench_decode: %s\n", mf_last_error());
        return 1;
    }
    const mf_hparams *hp = &m->hp;
    for (uint32_t l = 0; l < hp->n_layer; l++) {
        const mf_layer *L = &m->layers[l];
        if (!L->wq || !L->wk || !L->wv || !L->wo || !L->ffn_gate || !L->ffn_up || !L->ffn_down) {
            fprintf(stderr, "bench_decode: layer %u is not a dense gated layer with separate Q/K/V\n", l);
            return 1;
        }
    }
    const int width = (int)(hp->n_ff > hp->n_embd ? hp->n_ff : hp->n_embd);
    const int q_width = (int)(hp->n_head * hp->head_dim_v);
    mf_backend *be = mf_cpu_backend_new(threads, 1, width > q_width ? width : q_width, (uint32_t)depth + 1, false);
    mf_kv_desc kd = test_kv_desc(MF_KV_F16, (uint32_t)depth + 1, hp->n_layer, hp->n_head_kv * hp->head_dim_k,
                                 hp->n_head_kv * hp->head_dim_v, hp->head_dim_k, hp->head_dim_v);
    if (!be || be->ops->kv_init(be, &kd) != MF_OK) {
        fprintf(stderr, "bench_decode: backend: %s\n", mf_last_error());
        return 1;
    }
    float *x = malloc(sizeof(float) * (size_t)width), *o[3];
    for (int i = 0; i < 3; i++) o[i] = malloc(sizeof(float) * (size_t)(width > q_width ? width : q_width));
    for (int i = 0; i < width; i++) x[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
    if (depth > 0)
        for (uint32_t l = 0; l < hp->n_layer; l++)
            for (int p = 0; p < depth; p++) kv_store_at(be, (int)l, x + p % 7, x + p % 5, 1, (uint32_t)p);
    const mf_attn_params ap = {(int)hp->n_head, (int)hp->n_head_kv, (int)hp->head_dim_k, (int)hp->head_dim_v, 0.125f, 0, 0};

    const char *names[4] = {"q/k/v", "attn_output", "gate/up", "down"};
    double t[4] = {0}, t_att = 0;
    size_t b[4] = {0};
    for (int r = 0; r < reps; r++)
        for (uint32_t l = 0; l < hp->n_layer; l++) {
            const mf_layer *L = &m->layers[l];
            const mf_weight qkv[3] = {L->wq, L->wk, L->wv}, gu[2] = {L->ffn_gate, L->ffn_up};
            double c[6];
            c[0] = now();
            if (depth > 0) attention_at(be, (int)l, x, 1, (uint32_t)depth - 1, &ap, o[0]);
            c[1] = now();
            be->ops->matmul_n(be, qkv, NULL, 3, x, 1, o, NULL);
            c[2] = now();
            be->ops->matmul(be, L->wo, x, 1, o[0]);
            c[3] = now();
            be->ops->matmul_n(be, gu, NULL, 2, x, 1, o, NULL);
            c[4] = now();
            be->ops->matmul(be, L->ffn_down, x, 1, o[0]);
            c[5] = now();
            if (r == 0) continue;
            t_att += c[1] - c[0];
            for (int k = 0; k < 4; k++) t[k] += c[k + 2] - c[k + 1];
            b[0] += bytes_of(L->wq) + bytes_of(L->wk) + bytes_of(L->wv);
            b[1] += bytes_of(L->wo);
            b[2] += bytes_of(L->ffn_gate) + bytes_of(L->ffn_up);
            b[3] += bytes_of(L->ffn_down);
        }
    const double calls = (double)(reps - 1) * hp->n_layer;
    double tt = 0, bt = 0;
    printf("%s, %d threads, %d timed passes over %u layers\n", path, threads, reps - 1, hp->n_layer);
    for (int k = 0; k < 4; k++) {
        printf("  %-12s %6.1f GB/s  %8.2f us/call\n", names[k], (double)b[k] / t[k] / 1e9, t[k] / calls * 1e6);
        tt += t[k];
        bt += (double)b[k];
    }
    printf("  %-12s %6.1f GB/s\n", "all", bt / tt / 1e9);
    if (depth > 0) printf("  attention at depth %d: %.2f us per layer\n", depth, t_att / calls * 1e6);
    for (int i = 0; i < 3; i++) free(o[i]);
    free(x);
    be->ops->destroy(be);
    mf_model_free(m);
    return 0;
}
