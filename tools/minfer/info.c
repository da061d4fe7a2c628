/* info.c - `minfer info model.gguf`: GGUF version, metadata, tensor table,
 * parameter count and file size, through the public GGUF inspection API. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "minfer.h"

#define ARRAY_ITEMS 3  /* array elements shown per metadata value */
#define STRING_BYTES 120 /* string bytes shown (chat templates run to kilobytes) */

static void usage(FILE *f) {
    fprintf(f, "usage: minfer info [--all] model.gguf\n"
               "  prints the GGUF version, metadata (one key per line with its type),\n"
               "  tensor table (name, type, shape, bytes), parameter count and file size.\n"
               "  --all   print metadata values in full (no array or string abbreviation)\n");
}

/* 292800 -> "0.29M", 1240000000 -> "1.24B" */
static void human_count(uint64_t n, char *buf, size_t cap) {
    if (n >= 1000000000ull) snprintf(buf, cap, "%.2fB", (double)n / 1e9);
    else if (n >= 100000ull) snprintf(buf, cap, "%.2fM", (double)n / 1e6);
    else if (n >= 1000ull) snprintf(buf, cap, "%.2fK", (double)n / 1e3);
    else snprintf(buf, cap, "%" PRIu64, n);
}

static void human_bytes(uint64_t n, char *buf, size_t cap) {
    if (n >= (1ull << 30)) snprintf(buf, cap, "%.2f GiB", (double)n / (double)(1ull << 30));
    else if (n >= (1ull << 20)) snprintf(buf, cap, "%.2f MiB", (double)n / (double)(1ull << 20));
    else if (n >= (1ull << 10)) snprintf(buf, cap, "%.2f KiB", (double)n / (double)(1ull << 10));
    else snprintf(buf, cap, "%" PRIu64 " B", n);
}

static int print_metadata(const mf_gguf *g, bool all) {
    int64_t n = mf_gguf_n_kv(g);
    int kw = 0;
    for (int64_t i = 0; i < n; i++) {
        int l = (int)strlen(mf_gguf_key(g, i));
        if (l > kw) kw = l;
    }
    if (kw > 56) kw = 56;
    printf("metadata: %" PRId64 " keys\n", n);
    size_t cap = 4096;
    char *buf = malloc(cap);
    if (!buf) return -1;
    for (int64_t i = 0; i < n; i++) {
        int32_t items = all ? -1 : ARRAY_ITEMS, bytes = all ? -1 : STRING_BYTES;
        int64_t len = mf_gguf_value_text(g, i, items, bytes, buf, cap);
        if (len >= 0 && (uint64_t)len >= cap) { /* only with --all: grow to fit */
            char *nb = realloc(buf, (size_t)len + 1);
            if (!nb) {
                free(buf);
                return -1;
            }
            buf = nb;
            cap = (size_t)len + 1;
            mf_gguf_value_text(g, i, items, bytes, buf, cap);
        }
        printf("  %-*s  %-13s  %s\n", kw, mf_gguf_key(g, i), mf_gguf_value_type(g, i), buf);
    }
    free(buf);
    return 0;
}

static uint64_t print_tensors(const mf_gguf *g) {
    int64_t n = mf_gguf_n_tensors(g);
    int nw = 4;
    for (int64_t i = 0; i < n; i++) {
        mf_gguf_tensor_info t;
        if (mf_gguf_tensor(g, i, &t) == MF_OK && (int)strlen(t.name) > nw) nw = (int)strlen(t.name);
    }
    printf("tensors: %" PRId64 "\n", n);
    printf("  %-*s  %-7s  %-24s  %12s  %s\n", nw, "name", "type", "shape", "bytes", "offset");
    uint64_t params = 0;
    for (int64_t i = 0; i < n; i++) {
        mf_gguf_tensor_info t;
        if (mf_gguf_tensor(g, i, &t) != MF_OK) continue;
        char shape[128];
        int k = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t.n_dims && k > 0 && (size_t)k < sizeof shape; d++)
            k += snprintf(shape + k, sizeof shape - (size_t)k, "%s%" PRId64, d ? ", " : "", t.ne[d]);
        if (k > 0 && (size_t)k < sizeof shape) snprintf(shape + k, sizeof shape - (size_t)k, "]");
        printf("  %-*s  %-7s  %-24s  %12" PRIu64 "  0x%" PRIx64 "\n", nw, t.name, t.type, shape, t.nbytes, t.offset);
        params += (uint64_t)t.n_elements;
    }
    return params;
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    bool all = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--all")) {
            all = true;
        } else if (!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "minfer info: option %s needs a value\n", argv[i]);
                return 1;
            }
            path = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "minfer info: unknown option '%s'\n", argv[i]);
            return 1;
        } else if (path) {
            fprintf(stderr, "minfer info: more than one file given ('%s' and '%s')\n", path, argv[i]);
            return 1;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 1;
    }
    mf_gguf *g;
    if (mf_gguf_open(path, &g) != MF_OK) {
        fprintf(stderr, "minfer info: %s\n", mf_last_error());
        return 1;
    }
    uint64_t size = mf_gguf_file_size(g);
    char hb[32], hp[32];
    human_bytes(size, hb, sizeof hb);
    printf("file: %s\n", path);
    printf("GGUF version: %" PRIu32 "\n", mf_gguf_version(g));
    printf("alignment: %" PRIu64 ", tensor data at 0x%" PRIx64 "\n", mf_gguf_alignment(g), mf_gguf_data_offset(g));
    if (print_metadata(g, all) != 0) {
        fprintf(stderr, "minfer info: out of memory\n");
        mf_gguf_close(g);
        return 1;
    }
    uint64_t params = print_tensors(g);
    human_count(params, hp, sizeof hp);

    /* architecture traits: what the forward pass will do with this file. A file
     * the model loader refuses (vocabulary only, unknown architecture) still
     * gets its container printed above; the reason is shown instead. */
    if (mf_gguf_find_key(g, "general.architecture") >= 0) {
        mf_model *model;
        mf_model_params mp = mf_model_default_params();
        mp.no_repack = true; /* nothing is computed: do not rearrange the weights */
        if (mf_model_load(path, &mp, &model) == MF_OK) {
            printf("traits: %s\n", mf_model_traits(model));
            mf_model_free(model);
        } else {
            printf("traits: not runnable by minfer: %s\n", mf_last_error());
        }
    }

    printf("parameters: %" PRIu64 " (%s)\n", params, hp);
    printf("file size: %" PRIu64 " bytes (%s)\n", size, hb);
    mf_gguf_close(g);
    return 0;
}
