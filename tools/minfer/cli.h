/* cli.h - subcommand entry points and shared option helpers of the minfer tool. */
#ifndef MF_CLI_H
#define MF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "minfer.h"

int cmd_run(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_template(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_embed(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_vindex(int argc, char **argv);
int cmd_lql(int argc, char **argv);

/* Option parsing helpers: on a bad value they print "minfer <cmd>: ..." and
 * return false. */
bool cli_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out);
bool cli_float(const char *cmd, const char *opt, const char *val, double *out);
/* --cache-type VALUE: f32, f16 or q8_0; a message naming cmd otherwise */
bool cli_kv_type(const char *cmd, const char *val, mf_kv_type *out);
const char *cli_kv_name(mf_kv_type t);
/* Fixed pseudo-random token ids for benchmarks (xorshift64 on *state). */
mf_token cli_rand_token(uint64_t *state, int32_t n_vocab);
/* The median of v[0..n), n >= 1 (the mean of the middle two for even n);
 * sorts v. */
double cli_median(double *v, int n);

/* Where the model runs: --backend NAME (cpu, cpu-ref, cuda) and
 * -ngl N|all|auto (llama.cpp's --n-gpu-layers): N > 0, all or auto loads the
 * model for the cuda backend, 0 for the CPU. N below the model's layer count
 * runs the last N layers (and the output head) on the GPU and the first ones
 * on the CPU; auto puts as many as fit on the GPU. */
#define CLI_NGL_ALL 0x7fffffffL
#define CLI_NGL_AUTO (-2L)
typedef struct cli_dev {
    const char *backend; /* NULL: not given */
    long ngl;            /* -1: not given */
} cli_dev;
#define CLI_DEV_INIT {NULL, -1}
/* 1: a[/v] was one of these options (the caller skips v), 0: not one, -1: bad value (message printed) */
int cli_dev_opt(const char *cmd, const char *a, const char *v, cli_dev *d);
/* mf_model_params.backend and .gpu_layers; false on a contradiction (message printed) */
bool cli_dev_backend(const char *cmd, const cli_dev *d, mf_model_params *mp);

/* The optional HNSW gate KNN of a vindex: --hnsw, --hnsw-m M, --hnsw-ef EF,
 * --hnsw-efc N, --hnsw-no-cache (the others need --hnsw). */
typedef struct cli_hnsw {
    bool on;
    long m, ef, efc; /* 0: the default */
    bool no_cache;   /* build in memory even when the vindex has a graph cache for these parameters */
} cli_hnsw;
#define CLI_HNSW_INIT {false, 0, 0, 0, false}
#define CLI_HNSW_USAGE "  --hnsw                 gate KNN through a per-layer HNSW graph (approximate) instead of brute force;\n" \
                       "                         the graphs come from DIR/hnsw_m<M>_efc<N>.bin when `minfer vindex hnsw`\n" \
                       "                         saved them, else each is built on its layer's first query\n" \
                       "  --hnsw-m M             its links per node (default 16); --hnsw-ef EF its search beam (default 64,\n" \
                       "                         at least K; EF >= features is exact); --hnsw-efc N its build beam (default 128)\n" \
                       "  --hnsw-no-cache        build the graphs in memory even when the vindex has them saved\n"
/* 1: a was --hnsw or --hnsw-no-cache, 2: a and v were one of the others (the caller skips v),
 * 0: not one, -1: bad value (message printed) */
int cli_hnsw_opt(const char *cmd, const char *a, const char *v, cli_hnsw *h);
/* false (message printed) for tuning flags without --hnsw: check before loading */
bool cli_hnsw_check(const char *cmd, const cli_hnsw *h);
/* Sets the vindex's KNN as asked and maps its graph cache if there is one
 * (a line on stderr says which; without one, a line says how to make it);
 * false (message printed) on a bad combination or a cache refused. */
bool cli_hnsw_apply(const char *cmd, const cli_hnsw *h, mf_vindex *v);

/* Reads all of stdin (for prompts), a file, or an open stream, NUL-terminated;
 * NULL on error (errno tells why). `len` may be NULL. */
char *cli_read_stdin(size_t *len);
char *cli_read_file(const char *path, size_t *len);
char *cli_read_stream(FILE *f, size_t *len);

#endif
