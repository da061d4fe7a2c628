/* bench_batch.h - `minfer bench --batch B,...`: aggregate throughput with B
 * sequences at once, in llama-batched-bench's shape. */
#ifndef MF_BENCH_BATCH_H
#define MF_BENCH_BATCH_H

#include "minfer.h"

typedef struct bench_batch_opts {
    const int *levels; /* sequence counts */
    int n_levels;
    int n_prompt, n_gen, reps, n_threads, n_batch;
    mf_kv_type kv;
    const char *fmt;   /* md, csv, json */
} bench_batch_opts;

int bench_batch(mf_model *model, const char *model_path, const bench_batch_opts *o);

#endif
