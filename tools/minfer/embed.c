/* embed.c - `minfer embed`: the embedding of a text (the model's final normed
 * hidden states), pooled over the sequence or one vector per token, and
 * normalized as llama-embedding's --embd-normalize does, so the vectors can
 * be compared with llama.cpp's. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer embed -m MODEL.gguf [-p TEXT] [options]\n"
            "  Prints the embedding of TEXT (read from stdin when -p is absent), tokenized with BOS:\n"
            "  the pooled vector on one line, or with pooling none one line per token.\n"
            "  -m, --model FILE            GGUF model\n"
            "  -p, --prompt TEXT           text to embed\n"
            "  --pooling P                 none, mean, cls or last (default: the model's\n"
            "                              pooling_type; none when the file has none)\n"
            "  --normalize N               -1 none, 0 max-abs scaled to 32760 (int16 range),\n"
            "                              1 taxicab, 2 euclidean (default), N > 2 p-norm\n"
            "                              (also --embd-normalize)\n"
            "  --embd-output-format F      text (default: space-separated floats) or json\n"
            "                              (llama-embedding's layout)\n"
            "  -o, --output FILE           also write the printed vectors as raw little-endian\n"
            "                              float32 [n_vectors][n_embd]\n"
            "  -t, --threads N             worker threads (default: all CPUs)\n"
            "  --cache-type T              KV cache type: f16 (default), f32, q8_0\n"
            "  --no-mmap                   read the model into memory instead of mapping it\n"
            "  --no-repack                 keep the weights in the file's layout\n");
}

static bool parse_pooling(const char *v, mf_pooling *out) {
    static const struct { const char *name; mf_pooling p; } k[] = {
        {"none", MF_POOLING_NONE}, {"mean", MF_POOLING_MEAN}, {"cls", MF_POOLING_CLS}, {"last", MF_POOLING_LAST}};
    if (!v) {
        fprintf(stderr, "minfer embed: option --pooling needs a value\n");
        return false;
    }
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (!strcmp(v, k[i].name)) {
            *out = k[i].p;
            return true;
        }
    fprintf(stderr, "minfer embed: unknown --pooling '%s' (none, mean, cls, last)\n", v);
    return false;
}

static const char *pooling_name(mf_pooling p) {
    switch (p) {
    case MF_POOLING_NONE: return "none";
    case MF_POOLING_MEAN: return "mean";
    case MF_POOLING_CLS: return "cls";
    case MF_POOLING_LAST: return "last";
    default: return "?";
    }
}

/* out = in / norm(in) for the --normalize kinds; a zero vector stays zero. */
static void normalize(const float *in, float *out, int n, long kind) {
    double s = 0.0;
    if (kind < 0) {
        s = 1.0;
    } else if (kind == 0) {
        for (int i = 0; i < n; i++) {
            const double a = fabs((double)in[i]);
            if (a > s) s = a;
        }
        s /= 32760.0; /* the largest element becomes +-32760 */
    } else if (kind == 2) {
        for (int i = 0; i < n; i++) s += (double)in[i] * (double)in[i];
        s = sqrt(s);
    } else {
        const double p = (double)kind;
        for (int i = 0; i < n; i++) s += pow(fabs((double)in[i]), p);
        s = pow(s, 1.0 / p);
    }
    const double inv = s > 0.0 ? 1.0 / s : 0.0;
    for (int i = 0; i < n; i++) out[i] = (float)((double)in[i] * inv);
}

int cmd_embed(int argc, char **argv) {
    mf_model_params mp = mf_model_default_params();
    const char *model_path = NULL, *prompt = NULL, *outp = NULL;
    long n_threads = 0, norm = 2;
    bool json = false;
    mf_pooling pooling = MF_POOLING_UNSPECIFIED;
    mf_kv_type kv = MF_KV_F16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v) { model_path = v; i++; }
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && v) { prompt = v; i++; }
        else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) { outp = v; i++; }
        else if (!strcmp(a, "--pooling")) { if (!parse_pooling(v, &pooling)) return 2; i++; }
        else if (!strcmp(a, "--normalize") || !strcmp(a, "--embd-normalize")) {
            if (!cli_int("embed", a, v, -1, 1000, &norm)) return 2;
            i++;
        } else if (!strcmp(a, "--embd-output-format")) {
            if (!v || (strcmp(v, "text") && strcmp(v, "json"))) {
                fprintf(stderr, "minfer embed: --embd-output-format expects text or json, got '%s'\n", v ? v : "");
                return 2;
            }
            json = !strcmp(v, "json");
            i++;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!cli_int("embed", a, v, 0, 512, &n_threads)) return 2;
            i++;
        } else if (!strcmp(a, "--cache-type")) {
            if (!cli_kv_type("embed", v, &kv)) return 2;
            i++;
        } else if (!strcmp(a, "--no-mmap")) mp.no_mmap = true;
        else if (!strcmp(a, "--no-repack")) mp.no_repack = true;
        else { fprintf(stderr, "minfer embed: unknown option or missing value '%s' (see --help)\n", a); return 2; }
    }
    if (!model_path) { fprintf(stderr, "minfer embed: no model given (-m FILE)\n"); return 2; }

    int rc = 1;
    char *stdin_text = NULL;
    mf_model *model = NULL;
    mf_context *ctx = NULL;
    mf_token *toks = NULL;
    float *vecs = NULL;
    mf_batch batch = {0};
    FILE *fo = NULL;
    size_t plen;
    if (prompt) {
        plen = strlen(prompt);
    } else {
        stdin_text = cli_read_stdin(&plen);
        if (!stdin_text) { fprintf(stderr, "minfer embed: cannot read stdin: %s\n", strerror(errno)); goto done; }
        prompt = stdin_text;
    }
    if (mf_model_load(model_path, &mp, &model)) { fprintf(stderr, "minfer embed: %s\n", mf_last_error()); goto done; }

    int32_t n = mf_tokenize(model, prompt, plen, NULL, 0, true, true);
    if (n == INT32_MIN) { fprintf(stderr, "minfer embed: %s\n", mf_last_error()); goto done; }
    const int32_t cap = n < 0 ? -n : n;
    toks = malloc(sizeof *toks * (size_t)(cap ? cap : 1));
    if (!toks) { fprintf(stderr, "minfer embed: out of memory\n"); goto done; }
    n = mf_tokenize(model, prompt, plen, toks, cap, true, true);
    if (n < 0) { fprintf(stderr, "minfer embed: %s\n", mf_last_error()); goto done; }
    if (n == 0) { fprintf(stderr, "minfer embed: the text has no tokens\n"); goto done; }
    if (n > mf_model_n_ctx_train(model)) {
        fprintf(stderr, "minfer embed: the text has %d tokens, more than the model's context (%d)\n", n,
                mf_model_n_ctx_train(model));
        goto done;
    }

    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = (uint32_t)n;
    cp.n_batch = (uint32_t)n;
    cp.n_seq_max = 1;
    cp.n_threads = (int32_t)n_threads;
    cp.kv_type = kv;
    cp.embeddings = true;
    cp.pooling = pooling;
    if (mf_context_new(model, &cp, &ctx)) { fprintf(stderr, "minfer embed: %s\n", mf_last_error()); goto done; }
    const mf_pooling pool = mf_context_pooling(ctx);
    if (mf_batch_init(&batch, n)) { fprintf(stderr, "minfer embed: %s\n", mf_last_error()); goto done; }
    for (int32_t i = 0; i < n; i++) mf_batch_add(&batch, toks[i], i, 0, true);
    if (mf_decode_batch(ctx, &batch)) { fprintf(stderr, "minfer embed: %s\n", mf_last_error()); goto done; }

    const int E = mf_model_n_embd(model);
    const int n_vec = pool == MF_POOLING_NONE ? n : 1;
    vecs = malloc(sizeof *vecs * (size_t)n_vec * (size_t)E);
    if (!vecs) { fprintf(stderr, "minfer embed: out of memory\n"); goto done; }
    for (int v = 0; v < n_vec; v++) {
        const float *e = pool == MF_POOLING_NONE ? mf_get_embeddings_ith(ctx, v) : mf_get_embeddings_seq(ctx, 0);
        if (!e) { fprintf(stderr, "minfer embed: the engine returned no embedding (%s pooling)\n", pooling_name(pool)); goto done; }
        normalize(e, vecs + (size_t)v * E, E, norm);
    }

    /* max-abs scaling gives integers' range: llama-embedding prints them
     * without decimals in JSON */
    const char *jfmt = norm == 0 ? "%.0f" : "%.7f";
    if (json) printf("{\n  \"object\": \"list\",\n  \"data\": [\n");
    for (int v = 0; v < n_vec; v++) {
        const float *x = vecs + (size_t)v * E;
        if (json) printf("    {\n      \"object\": \"embedding\",\n      \"index\": %d,\n      \"embedding\": [", v);
        for (int i = 0; i < E; i++) {
            if (json) {
                if (i) putchar(',');
                printf(jfmt, (double)x[i]);
            } else {
                printf(i ? " %.7g" : "%.7g", (double)x[i]);
            }
        }
        if (json) printf("]\n    }%s\n", v + 1 < n_vec ? "," : "");
        else putchar('\n');
    }
    if (json) printf("  ]\n}\n");
    if (fflush(stdout) != 0) { fprintf(stderr, "minfer embed: write error on stdout\n"); goto done; }
    fprintf(stderr, "minfer embed: %d token%s, pooling %s, %d vector%s of %d\n", n, n == 1 ? "" : "s",
            pooling_name(pool), n_vec, n_vec == 1 ? "" : "s", E);

    if (outp) {
        fo = fopen(outp, "wb");
        if (!fo) { fprintf(stderr, "minfer embed: cannot write %s: %s\n", outp, strerror(errno)); goto done; }
        const size_t cnt = (size_t)n_vec * (size_t)E;
        if (fwrite(vecs, sizeof(float), cnt, fo) != cnt) { fprintf(stderr, "minfer embed: write error on %s\n", outp); goto done; }
        const int cr = fclose(fo);
        fo = NULL;
        if (cr != 0) { fprintf(stderr, "minfer embed: write error on %s\n", outp); goto done; }
    }
    rc = 0;
done:
    if (fo) fclose(fo);
    free(vecs);
    mf_batch_free(&batch);
    free(toks);
    free(stdin_text);
    mf_context_free(ctx);
    mf_model_free(model);
    return rc;
}
