/* test_vindex_build.c - on stories260K (F32 and Q4_K_M) and every zoo model:
 * a vindex of level inference verifies; its header + weights are the GGUF's
 * bytes, embeddings.bin is token_embd's, gate rows are the gate tensor's
 * bytes when the types agree (llama-q8_0 with q8_0 features too), down rows
 * are the columns of the down projection; the model run from the vindex
 * gives the GGUF's logits bitwise; down_meta is sorted, in range and the
 * head's best tokens for each down vector (against f64, within the head
 * type's rounding); the walk FFN over all features equals the dense FFN
 * within a stated tolerance (another sum order), at 1 and 3 threads bitwise
 * alike. */
#include "testutil.h"
#include "minfer.h"
#include "gguf/gguf.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Walk over all features vs the dense FFN: the sum over features runs in rank
 * order instead of the matmul's, and GELU is computed exactly instead of
 * through llama.cpp's f16 table, so logits differ by rounding only. */
#define WALK_TOL 2e-4
/* Quantized weights: the dense FFN quantizes its activations to the weight's
 * paired type, the walk reads decoded f32 rows against f32 activations (the
 * goldens' tolerance for quantized files) */
#define WALK_TOL_QUANT 0.25
/* GELU families: both sides round the activation's input to f16 (llama.cpp's
 * table), so a score differing in its last bit (another sum order) can land
 * on the neighbouring f16 value: an f16 ulp in one activation */
#define WALK_TOL_GELU 5e-3

static char g_tmp[256];

static void *slurp(const char *dir, const char *name, size_t *n) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return test_read_file(p, n);
}

static float *logits_of(const char *path, const mf_token *t, int n, int threads, mf_ffn_fn cb, void *ud, int *nv) {
    mf_model *m;
    mf_model_params mp = mf_model_default_params();
    if (mf_model_load(path, &mp, &m)) {
        CHECK(0, "%s: %s", path, mf_last_error());
        return NULL;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64, cp.n_threads = threads, cp.kv_type = MF_KV_F32, cp.ffn_cb = cb, cp.ffn_ud = ud;
    mf_context *c;
    float *out = NULL;
    if (!mf_context_new(m, &cp, &c)) {
        if (!mf_decode(c, t, n, true)) {
            *nv = mf_model_n_vocab(m);
            out = malloc((size_t)n * *nv * sizeof(float));
            for (int i = 0; i < n; i++) memcpy(out + (size_t)i * *nv, mf_get_logits(c, i), (size_t)*nv * sizeof(float));
        } else CHECK(0, "%s: decode: %s", path, mf_last_error());
        mf_context_free(c);
    } else CHECK(0, "%s: %s", path, mf_last_error());
    mf_model_free(m);
    return out;
}

static const gguf_tensor *tensor(const gguf_file *g, const char *fmt, int l) {
    char name[128];
    snprintf(name, sizeof name, fmt, l);
    return gguf_find_tensor(g, name);
}

static double g_label_err; /* largest label error seen, in units of sum |y h| */

/* A feature's labels against the head in f64: y = the output norm of the
 * down column, score(t) = y . head[t]; tol(t) = head_tol * sum_e |y_e h_te|. */
static void label_check(const char *dir, int l, int f, const float *col, int E, const float *head, double head_tol,
                        int V, const float *nw, const float *nb, bool layer_norm, float eps, const mf_token *tk,
                        const float *sc, int n) {
    double mean = 0, ss = 0;
    if (layer_norm) {
        for (int e = 0; e < E; e++) mean += col[e];
        mean /= E;
    }
    for (int e = 0; e < E; e++) ss += (col[e] - mean) * (col[e] - mean);
    const double inv = 1.0 / sqrt(ss / E + eps);
    double *y = malloc((size_t)E * sizeof(double)), *ref = malloc((size_t)V * sizeof(double)),
           *tol = malloc((size_t)V * sizeof(double));
    for (int e = 0; e < E; e++) y[e] = (col[e] - mean) * inv * (nw ? nw[e] : 1.0) + (nb ? nb[e] : 0.0);
    for (int t = 0; t < V; t++) {
        double d = 0, a = 0;
        for (int e = 0; e < E; e++) d += y[e] * head[(size_t)t * E + e], a += fabs(y[e] * head[(size_t)t * E + e]);
        ref[t] = d, tol[t] = head_tol * a + 1e-30;
    }
    for (int i = 0; i < n; i++) {
        if (tk[i] < 0) continue; /* padding: a vocabulary smaller than k */
        const double err = fabs(sc[i] - ref[tk[i]]);
        if (err / (tol[tk[i]] / head_tol) > g_label_err) g_label_err = err / (tol[tk[i]] / head_tol);
        CHECK(err <= tol[tk[i]], "%s: layer %d feature %d label %d (token %d): %g against %g", dir, l, f, i, tk[i],
              sc[i], ref[tk[i]]);
    }
    int last = tk[n - 1];
    for (int i = n - 1; i > 0 && last < 0; i--) last = tk[i - 1];
    if (last < 0) goto out;
    for (int t = 0; t < V; t++) {
        bool lab = false;
        for (int i = 0; i < n; i++) lab |= tk[i] == t;
        if (!lab && ref[t] - tol[t] > ref[last] + tol[last]) {
            CHECK(0, "%s: layer %d feature %d: token %d (%g) beats the last label %d (%g)", dir, l, f, t, ref[t], last,
                  ref[last]);
            break;
        }
    }
out:
    free(y), free(ref), free(tol);
}

static void check_model(const char *path, const char *ftype) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s-%s", g_tmp, strrchr(path, '/') + 1, ftype);
    mf_vindex_build_params bp = mf_vindex_default_build_params();
    bp.level = MF_VINDEX_INFERENCE, bp.feature_type = ftype, bp.n_threads = 2;
    if (mf_vindex_build(path, dir, &bp)) {
        CHECK(0, "%s: build: %s", path, mf_last_error());
        return;
    }
    CHECK(mf_vindex_verify(dir, NULL, NULL) == MF_OK, "%s: verify: %s", dir, mf_last_error());
    size_t ns, nh, nw, ne;
    uint8_t *src = test_read_file(path, &ns), *hdr = slurp(dir, "header.bin", &nh), *w = slurp(dir, "weights.bin", &nw);
    uint8_t *emb = slurp(dir, "embeddings.bin", &ne);
    gguf_file *g = NULL;
    if (!src || !hdr || !w || !emb || gguf_open(path, &g)) {
        CHECK(0, "%s: cannot read the files back", dir);
        goto out;
    }
    CHECK(nh + nw == ns && !memcmp(src, hdr, nh) && !memcmp(src + nh, w, nw), "%s: header+weights != the GGUF", dir);
    const gguf_tensor *te = gguf_find_tensor(g, "token_embd.weight");
    CHECK(te && ne == te->nbytes && !memcmp(emb, te->data, ne), "%s: embeddings.bin != token_embd", dir);

    mf_vindex *v;
    if (mf_vindex_open(dir, &v)) {
        CHECK(0, "%s: %s", dir, mf_last_error());
        goto out;
    }
    mf_vindex_info vi;
    mf_vindex_get_info(v, &vi);
    const int E = vi.n_embd, F = vi.n_features;
    /* gate rows: byte-equal when the types agree, else the decoded values re-encoded */
    size_t ng;
    uint8_t *gate = slurp(dir, "gate_vectors.bin", &ng);
    float *row = malloc((size_t)E * sizeof(float)), *col = malloc((size_t)E * sizeof(float));
    /* the head and output norm in f32, for the labels' reference */
    const int V = vi.n_vocab;
    const gguf_tensor *ht = gguf_find_tensor(g, "output.weight"), *nwt = gguf_find_tensor(g, "output_norm.weight"),
                      *nbt = gguf_find_tensor(g, "output_norm.bias");
    if (!ht) ht = te; /* tied */
    float *head = malloc((size_t)V * E * sizeof(float)), *onw = nwt ? malloc((size_t)E * sizeof(float)) : NULL,
          *onb = nbt ? malloc((size_t)E * sizeof(float)) : NULL;
    if (head) mf_type_traits_ref(ht->type)->to_float(ht->data, head, (int64_t)V * E);
    if (onw) mf_type_traits_ref(nwt->type)->to_float(nwt->data, onw, E);
    if (onb) mf_type_traits_ref(nbt->type)->to_float(nbt->data, onb, E);
    /* the head product rounds its activations to the head's vec_dot type:
     * f32 stays (sum order only), f16 2^-11 and bf16 2^-8 per element,
     * quantized types to 8 bits per block (q8_0 / q8_K) */
    const double head_tol = ht->type == MF_TYPE_F32 ? 1e-5 : ht->type == MF_TYPE_F16 ? 1e-3
                          : ht->type == MF_TYPE_BF16 ? 8e-3 : 2e-2;
    const bool layer_norm = nbt != NULL || !strcmp(vi.arch, "gpt2") || !strcmp(vi.arch, "starcoder2");
    char key[128];
    float eps = 0;
    snprintf(key, sizeof key, "%s.attention.%s", vi.arch, layer_norm ? "layer_norm_epsilon" : "layer_norm_rms_epsilon");
    CHECK(gguf_get_f32(g, key, true, &eps) == MF_OK, "%s: no %s", path, key);
    for (int l = 0; gate && l < vi.n_layer; l++) {
        const gguf_tensor *gt = tensor(g, vi.n_expert ? "blk.%d.ffn_gate_exps.weight" : vi.gated ? "blk.%d.ffn_gate.weight" : "blk.%d.ffn_up.weight", l);
        if (!gt) gt = tensor(g, "blk.%d.ffn_up.weight", l); /* phi3: fused gate-up, gate first */
        CHECK(gt != NULL, "%s: no gate tensor at layer %d", path, l);
        if (!gt) break;
        if (!strcmp(mf_type_name(gt->type), ftype)) {
            /* the layer's section starts at a 64-multiple: find it through a row read */
            mf_vindex_feature_row(v, 0, l, 0, row);
            const size_t rb = mf_row_size(gt->type, E);
            int same = 1;
            for (uint64_t off = 0; off + (size_t)F * rb <= ng; off += 64)
                if (!memcmp(gate + off, gt->data, (size_t)F * rb)) {
                    same = 2;
                    break;
                }
            CHECK(same == 2, "%s: layer %d gate rows are not the GGUF's bytes", dir, l);
        }
        /* down rows are the down projection's columns (f32 features: exactly) */
        const gguf_tensor *dt = tensor(g, vi.n_expert ? "blk.%d.ffn_down_exps.weight" : "blk.%d.ffn_down.weight", l);
        const int BF = vi.n_expert ? vi.n_ff_expert : F;
        float *dm = malloc((size_t)E * F * sizeof(float));
        if (dt) mf_type_traits_ref(dt->type)->to_float(dt->data, dm, (int64_t)E * F);
        for (int f = 0; dt && f < F; f += 7) {
            const int x = f / BF, ff = f % BF;
            for (int e = 0; e < E; e++) col[e] = dm[(size_t)x * E * BF + (size_t)e * BF + ff];
            mf_vindex_feature_row(v, 2, l, f, row);
            double err = 0, mag = 0;
            for (int e = 0; e < E; e++) err = fmax(err, fabs(row[e] - col[e])), mag = fmax(mag, fabs(col[e]));
            const double tol = !strcmp(ftype, "f32") ? 0 : !strcmp(ftype, "f16") ? 1e-3 * mag : 1e-2 * mag;
            CHECK(err <= tol, "%s: layer %d feature %d down row differs by %g", dir, l, f, err);
        }
        /* labels: best first, tokens in range, and the head's best tokens for
         * the feature's direction (the build runs the model's head product):
         * each label's score within tol of an f64 reference, and no other
         * token above the last label's reference by more than the two tols */
        mf_token tk[16];
        float sc[16];
        for (int f = 0; f < F; f += 13) {
            int n = mf_vindex_feature_tokens(v, l, f, tk, sc, 16);
            CHECK(n == vi.down_top_k, "%s: feature %d has %d labels", dir, f, n);
            for (int i = 1; i < n; i++) CHECK(sc[i - 1] >= sc[i], "%s: labels of feature %d not sorted", dir, f);
            if (!dt || !head || n < 1) continue;
            const int x = f / BF, ff = f % BF;
            for (int e = 0; e < E; e++) col[e] = dm[(size_t)x * E * BF + (size_t)e * BF + ff];
            label_check(dir, l, f, col, E, head, head_tol, V, onw, onb, layer_norm, eps, tk, sc, n);
        }
        free(dm);
    }
    free(gate);

    /* logits: the vindex runs the model on the same bytes */
    const mf_token ids[] = {1, 20, 30, 40, 7, 3};
    int nv = 0, nv2 = 0;
    float *a = logits_of(path, ids, 6, 2, NULL, NULL, &nv), *b = logits_of(dir, ids, 6, 2, NULL, NULL, &nv2);
    CHECK(a && b && nv == nv2 && !memcmp(a, b, (size_t)6 * nv * sizeof(float)), "%s: logits from the vindex differ", dir);

    if (!vi.n_expert && !strcmp(ftype, "f32")) {
        mf_model *m;
        mf_model_params mp = mf_model_default_params();
        mf_walk *wk;
        if (!mf_model_load(dir, &mp, &m) && !mf_walk_new(v, m, 0, &wk)) {
            mf_vindex_set_threads(v, 1);
            float *c1 = logits_of(dir, ids, 6, 1, mf_walk_ffn, wk, &nv);
            mf_vindex_set_threads(v, 3);
            float *c3 = logits_of(dir, ids, 6, 3, mf_walk_ffn, wk, &nv);
            double d = 0;
            for (size_t i = 0; a && c1 && i < (size_t)6 * nv; i++) d = fmax(d, fabs(a[i] - c1[i]));
            const bool quant = strstr(path, "q4_k") || strstr(path, "q8_0");
            const bool gelu = strstr(path, "gemma") || strstr(path, "gpt2") || strstr(path, "starcoder2");
            CHECK(c1 && d <= (quant ? WALK_TOL_QUANT : gelu ? WALK_TOL_GELU : WALK_TOL), "%s: walk over all features differs from dense by %g", dir, d);
            CHECK(c1 && c3 && !memcmp(c1, c3, (size_t)6 * nv * sizeof(float)), "%s: walk depends on the thread count", dir);
            printf("%-28s walk(all) vs dense: max |logit diff| %.3g\n", strrchr(path, '/') + 1, d);
            free(c1), free(c3);
            mf_walk_free(wk);
        } else CHECK(0, "%s: walk: %s", dir, mf_last_error());
        mf_model_free(m);
    }
    free(a), free(b), free(row), free(col), free(head), free(onw), free(onb);
    mf_vindex_free(v);
out:
    gguf_close(g);
    free(src), free(hdr), free(w), free(emb);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/test_vindex_build.%d", (int)getpid());
    char cmd[600];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", g_tmp);
    if (system(cmd) != 0) return 1;
    static const char *models[] = {
        "../shared/models/stories260K.gguf", "../shared/models/stories260K-q4_k_m.gguf",
        "../shared/models/zoo/llama.gguf",   "../shared/models/zoo/llama-q8_0.gguf",
        "../shared/models/zoo/gemma2.gguf",  "../shared/models/zoo/gemma3.gguf",
        "../shared/models/zoo/gpt2.gguf",    "../shared/models/zoo/granite.gguf",
        "../shared/models/zoo/mixtral.gguf", "../shared/models/zoo/phi3.gguf",
        "../shared/models/zoo/qwen2.gguf",   "../shared/models/zoo/qwen3.gguf",
        "../shared/models/zoo/qwen3moe.gguf", "../shared/models/zoo/starcoder2.gguf",
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) check_model(models[i], "f32");
    check_model("../shared/models/zoo/llama-q8_0.gguf", "q8_0");
    check_model("../shared/models/stories260K.gguf", "f16");
    printf("labels: largest score error %.3g of sum |y h| (the head's own rounding)\n", g_label_err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_tmp);
    if (system(cmd) != 0) CHECK(0, "cannot remove %s", g_tmp);
    return test_summary("test_vindex_build");
}
