/* audit.c - `minfer vindex audit DIR -f prompts.txt --walk-k K,...`: how far
 * the walk FFN is from the dense one. Per layer, over every position of every
 * prompt, the cosine and relative L2 distance of the walk FFN's output
 * against the all-features FFN on the same input (the dense residual stream
 * keeps running, so layers do not compound); then, running the walk in every
 * layer, top-1 and top-5 agreement of the logits with the dense model's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "minfer.h"

#define MAX_KS 16

typedef struct audit {
    mf_walk *walk, *full;
    int n_layer, n_embd;
    float *a, *b;          /* walk and reference outputs of one call */
    double *cos, *rel;     /* [n_layer] sums */
    long *n;               /* [n_layer] rows */
} audit;

static int audit_ffn(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                     const int32_t *pos, void *ud) {
    audit *au = ud;
    float *a = realloc(au->a, (size_t)n_rows * n_embd * sizeof(float));
    if (a) au->a = a;
    float *b = realloc(au->b, (size_t)n_rows * n_embd * sizeof(float));
    if (b) au->b = b;
    if (!a || !b) return -1;
    if (mf_walk_ffn(layer, xn, a, n_rows, n_embd, seq, pos, au->walk) < 0) return -1;
    if (mf_walk_ffn(layer, xn, b, n_rows, n_embd, seq, pos, au->full) < 0) return -1;
    for (int r = 0; r < n_rows; r++) {
        double ab = 0, aa = 0, bb = 0, dd = 0;
        for (int e = 0; e < n_embd; e++) {
            const double x = a[(size_t)r * n_embd + e], y = b[(size_t)r * n_embd + e];
            ab += x * y, aa += x * x, bb += y * y, dd += (x - y) * (x - y);
        }
        au->cos[layer] += aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
        au->rel[layer] += bb > 0 ? sqrt(dd / bb) : sqrt(dd);
        au->n[layer]++;
    }
    return 0; /* the dense FFN goes on */
}

static void top5(const float *l, int n, int out[5]) {
    for (int i = 0; i < 5; i++) out[i] = -1;
    for (int v = 0; v < n; v++)
        for (int i = 0; i < 5; i++)
            if (out[i] < 0 || l[v] > l[out[i]]) {
                memmove(out + i + 1, out + i, (size_t)(4 - i) * sizeof(int));
                out[i] = v;
                break;
            }
}

static bool decode_all(mf_context *ctx, const mf_token *t, int n) {
    mf_kv_truncate(ctx, 0);
    if (mf_decode(ctx, t, n, true)) {
        fprintf(stderr, "minfer vindex audit: %s\n", mf_last_error());
        return false;
    }
    return true;
}

int cmd_vindex_audit(int argc, char **argv) {
    const char *dir = NULL, *file = NULL, *prompt = NULL, *klist = "5%,10%,25%,50%";
    long n_threads = 0;
    cli_hnsw hn = CLI_HNSW_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int h = cli_hnsw_opt("vindex audit", a, v, &hn);
        if (h < 0) return 2;
        if (h) {
            i += h - 1;
            continue;
        }
        if (!strcmp(a, "-f") && v) file = v, i++;
        else if (!strcmp(a, "-p") && v) prompt = v, i++;
        else if (!strcmp(a, "--walk-k") && v) klist = v, i++;
        else if (!strcmp(a, "-t") && v) {
            if (!cli_int("vindex audit", a, v, 0, 512, &n_threads)) return 2;
            i++;
        } else if (a[0] != '-' && !dir) dir = a;
        else {
            fprintf(stderr, "minfer vindex audit: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!dir || (!file && !prompt)) {
        fprintf(stderr, "minfer vindex audit: needs DIR and -f prompts.txt or -p TEXT\n");
        return 2;
    }
    if (!cli_hnsw_check("vindex audit", &hn)) return 2;
    char *text = file ? cli_read_file(file, NULL) : strdup(prompt);
    if (!text) {
        fprintf(stderr, "minfer vindex audit: cannot read %s\n", file ? file : "the prompt");
        return 1;
    }
    int rc = 1;
    mf_model *model = NULL;
    mf_vindex *v = NULL;
    mf_context *dense = NULL, *sparse = NULL, *probe = NULL;
    mf_walk *full = NULL;
    audit au = {0};
    mf_token *tok = NULL;
    float *ref = NULL;
    mf_threadpool *pool = NULL; /* one set of threads for the walks' scans and the three contexts */
    mf_model_params mp = mf_model_default_params();
    if (mf_model_load(dir, &mp, &model) || mf_vindex_open(dir, &v) || mf_threadpool_new((int32_t)n_threads, &pool) ||
        mf_vindex_set_threadpool(v, pool) || mf_walk_new(v, model, 0, &full)) {
        fprintf(stderr, "minfer vindex audit: %s\n", mf_last_error());
        goto done;
    }
    /* the reference walk (K = all) is exact either way: HNSW with ef >= features is exhaustive */
    if (!cli_hnsw_apply("vindex audit", &hn, v)) goto done;
    mf_vindex_info vi;
    mf_vindex_get_info(v, &vi);
    const int V = mf_model_n_vocab(model), L = vi.n_layer;
    long ks[MAX_KS];
    int nk = 0;
    for (const char *p = klist; *p && nk < MAX_KS;) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 0) {
            fprintf(stderr, "minfer vindex audit: bad --walk-k list '%s'\n", klist);
            goto done;
        }
        if (*end == '%') k = (k * vi.n_features + 99) / 100, end++;
        ks[nk++] = k ? (k > vi.n_features ? vi.n_features : k) : vi.n_features;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',' && *end != '%') {
            fprintf(stderr, "minfer vindex audit: bad --walk-k list '%s'\n", klist);
            goto done;
        }
    }
    au.cos = calloc((size_t)L, sizeof(double));
    au.rel = calloc((size_t)L, sizeof(double));
    au.n = calloc((size_t)L, sizeof(long));
    au.full = full;
    tok = malloc(4096 * sizeof *tok);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 512;
    cp.n_threads = (int32_t)n_threads;
    cp.threadpool = pool;
    if (!au.cos || !au.rel || !au.n || !tok || mf_context_new(model, &cp, &dense)) {
        fprintf(stderr, "minfer vindex audit: %s\n", mf_last_error());
        goto done;
    }
    printf("%8s %6s %10s %10s %8s %8s\n", "K", "layer", "cosine", "rel_L2", "top-1", "top-5");
    for (int ik = 0; ik < nk; ik++) {
        memset(au.cos, 0, (size_t)L * sizeof(double));
        memset(au.rel, 0, (size_t)L * sizeof(double));
        memset(au.n, 0, (size_t)L * sizeof(long));
        mf_walk_free(au.walk);
        au.walk = NULL;
        if (mf_walk_new(v, model, (int32_t)ks[ik], &au.walk)) {
            fprintf(stderr, "minfer vindex audit: %s\n", mf_last_error());
            goto done;
        }
        mf_context_free(probe), mf_context_free(sparse);
        probe = sparse = NULL;
        mf_context_params pp = cp, sp = cp;
        pp.ffn_cb = audit_ffn, pp.ffn_ud = &au;
        sp.ffn_cb = mf_walk_ffn, sp.ffn_ud = au.walk;
        if (mf_context_new(model, &pp, &probe) || mf_context_new(model, &sp, &sparse)) {
            fprintf(stderr, "minfer vindex audit: %s\n", mf_last_error());
            goto done;
        }
        long pos = 0, agree1 = 0, agree5 = 0;
        for (char *line = text, *next; line && *line; line = next) {
            next = strchr(line, '\n');
            if (next) *next++ = '\0';
            if (!*line) continue;
            int n = mf_tokenize(model, line, strlen(line), tok, 511, true, false);
            if (n <= 0) continue;
            if (!decode_all(dense, tok, n)) goto done;
            free(ref);
            ref = malloc((size_t)n * V * sizeof(float));
            if (!ref) goto done;
            for (int i = 0; i < n; i++) memcpy(ref + (size_t)i * V, mf_get_logits(dense, i), (size_t)V * sizeof(float));
            if (!decode_all(probe, tok, n) || !decode_all(sparse, tok, n)) goto done;
            for (int i = 0; i < n; i++) {
                int td[5], tw[5];
                top5(ref + (size_t)i * V, V, td);
                top5(mf_get_logits(sparse, i), V, tw);
                agree1 += td[0] == tw[0];
                for (int a = 0; a < 5; a++)
                    for (int b = 0; b < 5; b++) agree5 += td[a] == tw[b];
                pos++;
            }
            if (next) next[-1] = '\n';
        }
        if (!pos) {
            fprintf(stderr, "minfer vindex audit: no prompt tokens\n");
            goto done;
        }
        char kname[32];
        snprintf(kname, sizeof kname, "%ld", ks[ik]);
        for (int l = 0; l < L; l++)
            printf("%8s %6d %10.6f %10.6f\n", kname, l, au.n[l] ? au.cos[l] / au.n[l] : 0, au.n[l] ? au.rel[l] / au.n[l] : 0);
        printf("%8s %6s %10s %10s %7.1f%% %7.1f%%\n", kname, "all", "", "", 100.0 * agree1 / pos, 100.0 * agree5 / (5.0 * pos));
    }
    printf("(K of %d features; %s)\n", vi.n_features, file ? file : "one prompt");
    rc = 0;
done:
    mf_context_free(probe), mf_context_free(sparse), mf_context_free(dense);
    mf_walk_free(au.walk), mf_walk_free(full);
    free(au.a), free(au.b), free(au.cos), free(au.rel), free(au.n);
    free(tok), free(ref), free(text);
    mf_vindex_free(v);
    mf_threadpool_free(pool);
    mf_model_free(model);
    return rc;
}
