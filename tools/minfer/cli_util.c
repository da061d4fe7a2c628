/* cli_util.c - option value parsing shared by the subcommands. */
#include "cli.h"
#include "core/timer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool cli_int(const char *cmd, const char *opt, const char *val, long lo, long hi, long *out) {
    if (!val) {
        fprintf(stderr, "minfer %s: option %s needs a value\n", cmd, opt);
        return false;
    }
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "minfer %s: %s expects an integer in [%ld, %ld], got '%s'\n", cmd, opt, lo, hi, val);
        return false;
    }
    *out = v;
    return true;
}

bool cli_float(const char *cmd, const char *opt, const char *val, double *out) {
    if (!val) {
        fprintf(stderr, "minfer %s: option %s needs a value\n", cmd, opt);
        return false;
    }
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || v != v) {
        fprintf(stderr, "minfer %s: %s expects a number, got '%s'\n", cmd, opt, val);
        return false;
    }
    *out = v;
    return true;
}

char *cli_read_stdin(size_t *len) { return cli_read_stream(stdin, len); }

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = cli_read_stream(f, len);
    fclose(f);
    return buf;
}

char *cli_read_stream(FILE *f, size_t *len) {
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) return NULL;
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (ferror(f)) {
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

bool cli_kv_type(const char *cmd, const char *val, mf_kv_type *out) {
    static const struct { const char *name; mf_kv_type t; } k[] = {{"f32", MF_KV_F32}, {"f16", MF_KV_F16}, {"q8_0", MF_KV_Q8_0}};
    if (!val) {
        fprintf(stderr, "minfer %s: option --cache-type needs a value\n", cmd);
        return false;
    }
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(val, k[i].name)) {
            *out = k[i].t;
            return true;
        }
    fprintf(stderr, "minfer %s: unknown --cache-type '%s' (f32, f16, q8_0)\n", cmd, val);
    return false;
}

const char *cli_kv_name(mf_kv_type t) { return t == MF_KV_F32 ? "f32" : t == MF_KV_Q8_0 ? "q8_0" : "f16"; }

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double cli_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

mf_token cli_rand_token(uint64_t *state, int32_t n_vocab) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (mf_token)(x % (uint64_t)n_vocab);
}

/* ---- --backend / -ngl ---- */

int cli_dev_opt(const char *cmd, const char *a, const char *v, cli_dev *d) {
    if (!strcmp(a, "--backend")) {
        if (!v) {
            fprintf(stderr, "minfer %s: option --backend needs a value (cpu, cpu-ref, cuda)\n", cmd);
            return -1;
        }
        d->backend = v;
        return 1;
    }
    if (strcmp(a, "-ngl") && strcmp(a, "--gpu-layers") && strcmp(a, "--n-gpu-layers")) return 0;
    if (v && !strcmp(v, "all")) {
        d->ngl = CLI_NGL_ALL;
        return 1;
    }
    if (v && !strcmp(v, "auto")) {
        d->ngl = CLI_NGL_AUTO;
        return 1;
    }
    long n;
    if (!cli_int(cmd, a, v, 0, 1 << 20, &n)) return -1;
    d->ngl = n;
    return 1;
}

bool cli_dev_backend(const char *cmd, const cli_dev *d, mf_model_params *mp) {
    mp->backend = d->backend;
    if (d->ngl < 0 && d->ngl != CLI_NGL_AUTO) return true;
    const bool gpu = d->ngl != 0;
    if (d->backend && (gpu ? strcmp(d->backend, "cuda") != 0 : strcmp(d->backend, "cuda") == 0)) {
        if (d->ngl == CLI_NGL_AUTO)
            fprintf(stderr, "minfer %s: -ngl auto contradicts --backend %s\n", cmd, d->backend);
        else
            fprintf(stderr, "minfer %s: -ngl %ld contradicts --backend %s\n", cmd,
                    d->ngl == CLI_NGL_ALL ? 9999 : d->ngl, d->backend);
        return false;
    }
    if (gpu) {
        mp->backend = "cuda";
        /* N below the layer count: the first layers stay on the CPU */
        mp->gpu_layers = d->ngl == CLI_NGL_AUTO ? MF_GPU_LAYERS_AUTO : d->ngl == CLI_NGL_ALL ? 0 : (int32_t)d->ngl;
    }
    return true;
}

int cli_hnsw_opt(const char *cmd, const char *a, const char *v, cli_hnsw *h) {
    if (!strcmp(a, "--hnsw")) {
        h->on = true;
        return 1;
    }
    if (!strcmp(a, "--hnsw-no-cache")) {
        h->no_cache = true;
        return 1;
    }
    long *dst = !strcmp(a, "--hnsw-m") ? &h->m : !strcmp(a, "--hnsw-ef") ? &h->ef : !strcmp(a, "--hnsw-efc") ? &h->efc : NULL;
    if (!dst) return 0;
    const long lo = dst == &h->m ? 2 : 1, hi = dst == &h->m ? 128 : dst == &h->ef ? 1L << 24 : 4096;
    return cli_int(cmd, a, v, lo, hi, dst) ? 2 : -1;
}

bool cli_hnsw_check(const char *cmd, const cli_hnsw *h) {
    if (!h->on && (h->m || h->ef || h->efc || h->no_cache)) {
        fprintf(stderr, "minfer %s: --hnsw-m, --hnsw-ef, --hnsw-efc and --hnsw-no-cache need --hnsw\n", cmd);
        return false;
    }
    return true;
}

bool cli_hnsw_apply(const char *cmd, const cli_hnsw *h, mf_vindex *v) {
    if (!cli_hnsw_check(cmd, h)) return false;
    if (!h->on) return true;
    mf_vindex_hnsw_params p = mf_vindex_default_hnsw_params();
    if (h->m) p.m = (int32_t)h->m;
    if (h->ef) p.ef = (int32_t)h->ef;
    if (h->efc) p.ef_construction = (int32_t)h->efc;
    if (mf_vindex_set_hnsw(v, &p)) {
        fprintf(stderr, "minfer %s: %s\n", cmd, mf_last_error());
        return false;
    }
    if (h->no_cache) return true;
    char *path = mf_vindex_hnsw_cache_path(v, NULL);
    bool loaded = false;
    const double t0 = mf_now();
    /* a cache that is there but refused is an error, not a silent rebuild */
    if (!path || mf_vindex_hnsw_load(v, NULL, &loaded)) {
        fprintf(stderr, "minfer %s: %s\n", cmd, path ? mf_last_error() : "out of memory");
        free(path);
        return false;
    }
    mf_vindex_info vi;
    mf_vindex_get_info(v, &vi);
    if (loaded)
        fprintf(stderr, "minfer %s: HNSW graphs of %d layers mapped from %s (%.1f ms)\n", cmd, vi.n_layer, path,
                (mf_now() - t0) * 1e3);
    else
        fprintf(stderr, "minfer %s: no %s: each layer's HNSW graph is built on its first query "
                        "(`minfer vindex hnsw` saves them)\n", cmd, path);
    free(path);
    return true;
}
