/* logits.c - `minfer logits`: one batched forward over a prompt, writing the
 * logits at every position as raw little-endian float32 [n_tokens][n_vocab]
 * (the format of the llama.cpp goldens), so engines can be compared. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer logits -m MODEL.gguf (-p TEXT | --ids \"1 2 3\") -o OUT.f32 [options]\n"
            "  Prints the prompt's token ids, then writes [n_tokens][n_vocab] float32 logits to OUT.\n"
            "  --ids LIST        feed these token ids instead of tokenizing a text\n"
            "  --no-bos          do not prepend BOS when tokenizing\n"
            "  -t, --threads N   worker threads\n"
            "  -c, --n-ctx N     context size (default: enough for the prompt)\n"
            "  --cache-type T    KV cache type: f16 (default), f32, q8_0; the goldens use f32\n"
            "  --no-mmap         read the model into memory instead of mapping it\n"
            "  --no-repack       keep the weights in the file's layout (no 16-row interleave)\n"
            "  -ngl N|all|auto   layers on the GPU (CUDA builds; the logits of a GPU run)\n"
            "  --backend NAME    cpu, cpu-ref or cuda\n");
}

static int parse_ids(const char *s, mf_token **out) {
    int n = 0, cap = 16;
    mf_token *v = malloc(sizeof *v * (size_t)cap);
    if (!v) return -1;
    for (;;) {
        while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long x = strtol(s, &end, 10);
        if (end == s || errno || x < 0 || x > 0x7fffffff) { free(v); return -1; }
        if (n == cap) {
            mf_token *nv = realloc(v, sizeof *v * (size_t)(cap *= 2));
            if (!nv) { free(v); return -1; }
            v = nv;
        }
        v[n++] = (mf_token)x;
        s = end;
    }
    *out = v;
    return n;
}

int cmd_logits(int argc, char **argv) {
    mf_model_params mp = mf_model_default_params();
    const char *model_path = NULL, *text = NULL, *ids = NULL, *outp = NULL;
    long n_threads = 0, n_ctx = 0;
    bool no_bos = false;
    mf_kv_type kv = mf_context_default_params().kv_type;
    cli_dev dev = CLI_DEV_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int dv = cli_dev_opt("logits", a, v, &dev);
        if (dv < 0) return 2;
        if (dv) { i++; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) { model_path = v; i++; }
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && v) { text = v; i++; }
        else if (!strcmp(a, "--ids") && v) { ids = v; i++; }
        else if (!strcmp(a, "-o") && v) { outp = v; i++; }
        else if (!strcmp(a, "--no-bos")) no_bos = true;
        else if (!strcmp(a, "--no-mmap")) mp.no_mmap = true;
        else if (!strcmp(a, "--no-repack")) mp.no_repack = true;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!cli_int("logits", a, v, 0, 512, &n_threads)) return 2; i++; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--n-ctx")) { if (!cli_int("logits", a, v, 0, 1L << 24, &n_ctx)) return 2; i++; }
        else if (!strcmp(a, "--cache-type") && v) {
            if (!cli_kv_type("logits", v, &kv)) return 2;
            i++;
        }
        else { fprintf(stderr, "minfer logits: unknown option or missing value '%s' (see --help)\n", a); return 2; }
    }
    if (!model_path || !outp || (!text == !ids)) {
        fprintf(stderr, "minfer logits: need -m MODEL, -o OUT and exactly one of -p TEXT / --ids LIST\n");
        return 2;
    }
    if (!cli_dev_backend("logits", &dev, &mp)) return 2;
    int rc = 1;
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    mf_token *toks = NULL;
    FILE *fo = NULL;
    int32_t n;
    if (mf_model_load(model_path, &mp, &model)) { fprintf(stderr, "minfer logits: %s\n", mf_last_error()); goto done; }
    if (ids) {
        n = parse_ids(ids, &toks);
        if (n <= 0) { fprintf(stderr, "minfer logits: --ids needs a list of non-negative integers\n"); goto done; }
    } else {
        bool add = mf_model_add_bos(model) && !no_bos;
        n = mf_tokenize(model, text, strlen(text), NULL, 0, add, true);
        if (n == INT32_MIN) { fprintf(stderr, "minfer logits: %s\n", mf_last_error()); goto done; }
        int32_t cap = n < 0 ? -n : n;
        toks = malloc(sizeof *toks * (size_t)(cap ? cap : 1));
        if (!toks) goto done;
        n = mf_tokenize(model, text, strlen(text), toks, cap, add, true);
        if (n <= 0) { fprintf(stderr, "minfer logits: the prompt has no tokens\n"); goto done; }
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = n_ctx ? (uint32_t)n_ctx : (uint32_t)n;
    cp.n_batch = (uint32_t)n;
    cp.n_threads = (int32_t)n_threads;
    cp.kv_type = kv;
    if (mf_context_new(model, &cp, &ctx)) { fprintf(stderr, "minfer logits: %s\n", mf_last_error()); goto done; }
    if (mf_decode(ctx, toks, n, true)) { fprintf(stderr, "minfer logits: %s\n", mf_last_error()); goto done; }
    for (int32_t i = 0; i < n; i++) printf(i ? " %d" : "%d", toks[i]);
    printf("\n");
    fo = fopen(outp, "wb");
    if (!fo) { fprintf(stderr, "minfer logits: cannot write %s: %s\n", outp, strerror(errno)); goto done; }
    const size_t V = (size_t)mf_model_n_vocab(model);
    for (int32_t i = 0; i < n; i++)
        if (fwrite(mf_get_logits(ctx, i), sizeof(float), V, fo) != V) {
            fprintf(stderr, "minfer logits: write error on %s\n", outp);
            goto done;
        }
    if (fclose(fo) != 0) { fo = NULL; fprintf(stderr, "minfer logits: write error on %s\n", outp); goto done; }
    fo = NULL;
    rc = 0;
done:
    if (fo) fclose(fo);
    free(toks);
    mf_context_free(ctx);
    mf_model_free(model);
    return rc;
}
