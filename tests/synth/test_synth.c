/* test_synth.c - mf_synth(): the small presets load and run in minfer with
 * finite, varied logits in several types; the same seed gives the same bytes
 * whatever the thread count and another seed other weights; every tensor has
 * the type, and the very bytes, that mf_quantize gives the f32 synth for the
 * same target; the big presets have their real models' parameter counts and
 * llama-quantize's fallbacks (planned, not written); the generated vocabulary
 * is valid and round-trips text; a copied one is padded or refused; refusals
 * and cancellation leave no file; extra layers keep the preset's tensors byte
 * for byte and, at scale 0, its greedy output. Nothing here writes more than a
 * few MiB. */
#include "testutil.h"

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "quant/types.h"
#include "synth/synth.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static const char *tmp(const char *name) {
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, 512, "%s/%s", g_dir, name);
    return b;
}

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static mf_status synth(const char *preset, const char *type, uint64_t seed, int threads, const char *vocab,
                       const char *out, mf_synth_result *res) {
    mf_synth_params p = mf_synth_default_params();
    p.preset = preset;
    p.type = type;
    p.seed = seed;
    p.n_threads = threads;
    p.vocab_path = vocab;
    mf_status s = mf_synth(&p, out, res);
    CHECK(s == MF_OK, "synth %s %s seed %" PRIu64 ": %s", preset, type, seed, mf_last_error());
    return s;
}

static bool same_bytes(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    char *x = test_read_file(a, &na), *y = test_read_file(b, &nb);
    bool eq = x && y && na == nb && !memcmp(x, y, na);
    free(x);
    free(y);
    return eq;
}

/* ---- a model loads and its forward gives finite, varied logits ---- */

static void check_runs(const char *path, const char *what) {
    mf_model *m = NULL;
    if (mf_model_load(path, NULL, &m) != MF_OK) {
        CHECK(false, "%s: load: %s", what, mf_last_error());
        return;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    mf_context *c = NULL;
    if (mf_context_new(m, &cp, &c) != MF_OK) {
        CHECK(false, "%s: context: %s", what, mf_last_error());
        mf_model_free(m);
        return;
    }
    const char *text = "Hello world, synth\n";
    mf_token toks[64];
    int32_t n = mf_tokenize(m, text, strlen(text), toks, 64, true, false);
    CHECK(n > 2 && n < 64, "%s: tokenize gave %d", what, (int)n);
    if (n > 2 && n < 64) {
        mf_status s = mf_decode(c, toks, n, true);
        CHECK(s == MF_OK, "%s: decode: %s", what, mf_last_error());
        const int32_t V = mf_model_n_vocab(m);
        for (int32_t i = 0; s == MF_OK && i < n; i++) {
            const float *l = mf_get_logits(c, i);
            CHECK(l != NULL, "%s: no logits at %d", what, (int)i);
            if (!l) break;
            int bad = 0;
            float lo = INFINITY, hi = -INFINITY;
            for (int32_t v = 0; v < V; v++) {
                if (!isfinite(l[v])) bad++;
                if (l[v] < lo) lo = l[v];
                if (l[v] > hi) hi = l[v];
            }
            CHECK(bad == 0, "%s: position %d: %d non-finite logits", what, (int)i, bad);
            /* scaled so that logits spread by a few units, not thousands */
            CHECK(hi > lo && hi - lo < 100.0f, "%s: position %d: logits in [%g, %g]", what, (int)i, lo, hi);
        }
        /* different inputs, different outputs */
        const float *a = mf_get_logits(c, 0), *b = mf_get_logits(c, n - 1);
        CHECK(a && b && memcmp(a, b, (size_t)V * sizeof *a) != 0, "%s: logits of the first and last token are equal",
              what);
    }
    mf_context_free(c);
    mf_model_free(m);
}

static void test_presets_run(void) {
    const char *presets[] = {"tiny", "tiny-qwen2", "tiny-qwen3"};
    const char *types[] = {"F32", "F16", "Q8_0", "Q4_K_M", "Q2_K", "IQ4_XS"};
    for (size_t i = 0; i < 3; i++)
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            char name[64], what[96];
            snprintf(name, sizeof name, "%s-%s.gguf", presets[i], types[k]);
            snprintf(what, sizeof what, "%s %s", presets[i], types[k]);
            if (synth(presets[i], types[k], 1, 0, NULL, tmp(name), NULL) == MF_OK) check_runs(tmp(name), what);
            unlink(tmp(name));
        }
}

/* ---- determinism ---- */

static void test_seeds(void) {
    mf_synth_result r1, r2;
    synth("tiny", "Q4_K_M", 7, 1, NULL, tmp("s7a.gguf"), &r1);
    synth("tiny", "Q4_K_M", 7, 2, NULL, tmp("s7b.gguf"), &r2);
    CHECK(same_bytes(tmp("s7a.gguf"), tmp("s7b.gguf")), "seed 7 with 1 and 2 threads: files differ");
    CHECK(r1.file_size == r2.file_size && r1.bytes == r2.bytes, "seed 7: results differ");
    synth("tiny", "Q4_K_M", 8, 2, NULL, tmp("s8.gguf"), NULL);
    /* every random tensor changes with the seed, not just the description */
    gguf_file *a = NULL, *b = NULL;
    CHECK(gguf_open(tmp("s7a.gguf"), &a) == MF_OK && gguf_open(tmp("s8.gguf"), &b) == MF_OK, "open: %s",
          mf_last_error());
    if (a && b) {
        CHECK(a->n_tensors == b->n_tensors, "tensor counts differ");
        for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++)
            CHECK(a->tensors[i].nbytes == b->tensors[i].nbytes &&
                      memcmp(a->tensors[i].data, b->tensors[i].data, a->tensors[i].nbytes) != 0,
                  "tensor %s is the same for seeds 7 and 8", a->tensors[i].name);
    }
    gguf_close(a);
    gguf_close(b);
    unlink(tmp("s7a.gguf"));
    unlink(tmp("s7b.gguf"));
    unlink(tmp("s8.gguf"));
}

/* ---- values: never zero, scaled as documented ---- */

static void test_values(void) {
    if (synth("tiny", "F32", 3, 0, NULL, tmp("f32.gguf"), NULL)) return;
    gguf_file *f = NULL;
    CHECK(gguf_open(tmp("f32.gguf"), &f) == MF_OK, "open: %s", mf_last_error());
    for (uint64_t i = 0; f && i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        CHECK(t->type == MF_TYPE_F32, "%s: type %s in an F32 synth", t->name, mf_type_name(t->type));
        const float *x = t->data;
        double sum = 0, sq = 0;
        int64_t zeros = 0;
        for (int64_t k = 0; k < t->n_elements; k++) {
            zeros += x[k] == 0.0f;
            sum += x[k];
            sq += (double)x[k] * x[k];
        }
        const double mean = sum / (double)t->n_elements, sd = sqrt(sq / (double)t->n_elements - mean * mean);
        CHECK(zeros == 0, "%s: %" PRId64 " zeros", t->name, zeros);
        if (strstr(t->name, "norm")) {
            CHECK(fabs(mean - 1.0) < 0.02 && sd > 0.05 && sd < 0.15, "%s: norm weights mean %g sd %g", t->name, mean, sd);
        } else {
            /* matrices: sd 1/sqrt(fan_in), shrunk by sqrt(2 * 4 layers) for the two residual writers */
            double want = 1.0 / sqrt((double)t->ne[0]);
            if (strstr(t->name, "attn_output") || strstr(t->name, "ffn_down")) want /= sqrt(8.0);
            CHECK(fabs(mean) < want * 0.05 && fabs(sd / want - 1.0) < 0.02, "%s: mean %g sd %g, want sd %g", t->name,
                  mean, sd, want);
        }
    }
    gguf_close(f);
}

/* Llama 3's RoPE factors for llama-3.2-1b: 1 for short wavelengths, 32 for
 * long ones, a smooth non-decreasing blend between. */
static void test_rope_factors(void) {
    const synth_preset *p = synth_preset_find("llama-3.2-1b");
    CHECK(p && p->l3_factor == 32.0f, "llama-3.2-1b: no Llama 3 scaling");
    if (!p) return;
    synth_tensor *ts = NULL;
    int64_t n = 0;
    CHECK(synth_tensor_list(p, 0, 1.0f, &ts, &n) == MF_OK && n > 0 && !strcmp(ts[0].name, "rope_freqs.weight") &&
              ts[0].ne[0] == 32,
          "llama-3.2-1b: rope_freqs.weight is not the first tensor or not 32 wide");
    if (!ts) return;
    float f[32];
    synth_fill_row(p, &ts[0], 1, 0, f);
    float g[32];
    synth_fill_row(p, &ts[0], 99, 0, g);
    CHECK(!memcmp(f, g, sizeof f), "RoPE factors depend on the seed");
    CHECK(f[0] == 1.0f && f[31] == 32.0f, "factors %g .. %g, want 1 .. 32", f[0], f[31]);
    int ones = 0, full = 0;
    for (int i = 0; i < 32; i++) {
        ones += f[i] == 1.0f;
        full += f[i] == 32.0f;
        if (i) CHECK(f[i] >= f[i - 1], "factor %d (%g) < factor %d (%g)", i, f[i], i - 1, f[i - 1]);
    }
    /* with base 500000 and 64-wide heads, the wavelength 2 pi 500000^(i/32)
     * passes 8192/4 = 2048 after pair 14 and 8192 before pair 18: 15 pairs
     * keep their frequency, 14 are slowed 32x, 3 are blended (values worked
     * out in double precision from the formula in Meta's reference code) */
    CHECK(ones == 15 && full == 14, "%d factors of 1 and %d of 32, want 15 and 14", ones, full);
    const double blend[3] = {1.6513292457638984, 3.2922621029408843, 9.666728978753293};
    for (int i = 0; i < 3; i++)
        CHECK(fabs(f[15 + i] / blend[i] - 1.0) < 1e-5, "factor %d = %.7g, want %.7g", 15 + i, f[15 + i], blend[i]);
    free(ts);
}

/* ---- the types (and bytes) are mf_quantize's ---- */

static void compare_with_quantize(const char *preset, const char *type) {
    char f32[64], direct[64], via[64];
    snprintf(f32, sizeof f32, "%s-F32-seed5.gguf", preset);
    snprintf(direct, sizeof direct, "%s-%s.gguf", preset, type);
    snprintf(via, sizeof via, "%s-%s-via-quantize.gguf", preset, type);
    if (!exists(tmp(f32)) && synth(preset, "F32", 5, 0, NULL, tmp(f32), NULL)) return;
    if (synth(preset, type, 5, 0, NULL, tmp(direct), NULL)) return;
    mf_quantize_params qp = mf_quantize_default_params();
    qp.type = type;
    mf_status s = mf_quantize(tmp(f32), tmp(via), &qp, NULL);
    CHECK(s == MF_OK, "quantize %s to %s: %s", preset, type, mf_last_error());
    gguf_file *a = NULL, *b = NULL;
    if (!s && gguf_open(tmp(direct), &a) == MF_OK && gguf_open(tmp(via), &b) == MF_OK) {
        CHECK(a->n_tensors == b->n_tensors, "%s %s: %" PRIu64 " vs %" PRIu64 " tensors", preset, type, a->n_tensors,
              b->n_tensors);
        int differ = 0;
        for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
            const gguf_tensor *x = &a->tensors[i], *y = &b->tensors[i];
            CHECK(!strcmp(x->name, y->name), "%s %s: tensor %" PRIu64 " is %s vs %s", preset, type, i, x->name, y->name);
            CHECK(x->type == y->type, "%s %s: %s is %s, mf_quantize makes it %s", preset, type, x->name,
                  mf_type_name(x->type), mf_type_name(y->type));
            CHECK(x->n_dims == y->n_dims && !memcmp(x->ne, y->ne, sizeof x->ne), "%s %s: %s shapes differ", preset,
                  type, x->name);
            if (x->type == y->type && x->nbytes == y->nbytes) differ += memcmp(x->data, y->data, x->nbytes) != 0;
        }
        CHECK(differ == 0, "%s %s: %d tensors' bytes differ from mf_quantize's", preset, type, differ);
        uint32_t fa = 0, fb = 1;
        gguf_get_u32(a, "general.file_type", true, &fa);
        gguf_get_u32(b, "general.file_type", true, &fb);
        CHECK(fa == fb, "%s %s: general.file_type %u, mf_quantize writes %u", preset, type, fa, fb);
    } else {
        CHECK(false, "%s %s: open: %s", preset, type, mf_last_error());
    }
    gguf_close(a);
    gguf_close(b);
    unlink(tmp(direct));
    unlink(tmp(via));
}

static void test_types(void) {
    const char *types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L",
                           "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "IQ4_NL", "IQ4_XS", "F16", "BF16"};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) compare_with_quantize("tiny", types[k]);
    /* tied embeddings (token_embd takes output.weight's rule) and QKV bias / QK-norm tensors */
    compare_with_quantize("tiny-qwen2", "Q4_K_M");
    compare_with_quantize("tiny-qwen2", "Q2_K");
    compare_with_quantize("tiny-qwen3", "Q4_K_M");
    compare_with_quantize("tiny-qwen3", "Q3_K_M");
}

/* ---- the big presets, planned but not written ---- */

typedef struct plan {
    int n;
    char name[512][SYNTH_NAME_MAX];
    char type[512][8];
} plan;

static bool record(const mf_synth_progress *p, void *ud) {
    plan *pl = ud;
    if (p->event == MF_SYNTH_PLAN && pl->n < 512) {
        snprintf(pl->name[pl->n], SYNTH_NAME_MAX, "%s", p->name);
        snprintf(pl->type[pl->n], 8, "%s", p->type);
        pl->n++;
    }
    return true;
}

static const char *type_of(const plan *pl, const char *name) {
    for (int i = 0; i < pl->n; i++)
        if (!strcmp(pl->name[i], name)) return pl->type[i];
    return "(absent)";
}

static mf_status dry(const char *preset, const char *type, const char *vocab, plan *pl, mf_synth_result *r) {
    mf_synth_params p = mf_synth_default_params();
    p.preset = preset;
    p.type = type;
    p.vocab_path = vocab;
    p.dry_run = true;
    p.progress = record;
    p.progress_ud = pl;
    pl->n = 0;
    return mf_synth(&p, NULL, r);
}

static void test_big_presets(void) {
    static plan pl;
    static const struct {
        const char *preset;
        uint64_t params; /* the published count of the real model */
        int64_t tensors;
    } real[] = {
        {"qwen2.5-0.5b", 494032768ull, 290},
        {"llama-3.2-1b", 1235814400ull + 32, 147}, /* + the RoPE factors, which the checkpoint does not hold */
        {"qwen3-4b", 4022468096ull, 398},
        {"llama-3-8b", 8030261248ull, 291},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        mf_synth_result r;
        mf_status s = dry(real[i].preset, "Q4_K_M", NULL, &pl, &r);
        CHECK(s == MF_OK, "dry run %s: %s", real[i].preset, mf_last_error());
        if (s) continue;
        CHECK(r.n_params == real[i].params, "%s: %" PRIu64 " parameters, the real model has %" PRIu64, real[i].preset,
              r.n_params, real[i].params);
        CHECK(r.n_tensors == real[i].tensors && pl.n == real[i].tensors, "%s: %" PRId64 " tensors (%d planned), want %" PRId64,
              real[i].preset, r.n_tensors, pl.n, real[i].tensors);
        const double bpw = (double)r.bytes * 8.0 / (double)r.n_params;
        CHECK(bpw > 4.8 && bpw < 6.5, "%s Q4_K_M: %.2f bits per weight", real[i].preset, bpw);
        CHECK(r.file_size > r.bytes, "%s: file size %" PRIu64 " <= tensor bytes", real[i].preset, r.file_size);
    }
    /* qwen2.5-0.5b's 896-wide rows hold no whole 256-blocks: llama-quantize
     * falls back q4_K -> q5_0 and q6_K -> q8_0 for them (144 tensors), and
     * the tied embedding (output rule q6_K) goes to q8_0 */
    mf_synth_result r;
    if (dry("qwen2.5-0.5b", "Q4_K_M", NULL, &pl, &r) == MF_OK) {
        CHECK(r.n_fallback == 144, "qwen2.5-0.5b: %" PRId64 " fallbacks, want 144", r.n_fallback);
        CHECK(!strcmp(type_of(&pl, "token_embd.weight"), "q8_0"), "token_embd %s", type_of(&pl, "token_embd.weight"));
        CHECK(!strcmp(type_of(&pl, "blk.0.attn_q.weight"), "q5_0"), "attn_q %s", type_of(&pl, "blk.0.attn_q.weight"));
        CHECK(!strcmp(type_of(&pl, "blk.0.attn_v.weight"), "q8_0"), "attn_v.0 %s", type_of(&pl, "blk.0.attn_v.weight"));
        CHECK(!strcmp(type_of(&pl, "blk.3.attn_v.weight"), "q5_0"), "attn_v.3 %s", type_of(&pl, "blk.3.attn_v.weight"));
        CHECK(!strcmp(type_of(&pl, "blk.5.ffn_down.weight"), "q6_K"), "ffn_down.5 %s", type_of(&pl, "blk.5.ffn_down.weight"));
        CHECK(!strcmp(type_of(&pl, "blk.3.ffn_down.weight"), "q4_K"), "ffn_down.3 %s", type_of(&pl, "blk.3.ffn_down.weight"));
        CHECK(!strcmp(type_of(&pl, "blk.0.attn_q.bias"), "f32"), "attn_q.bias %s", type_of(&pl, "blk.0.attn_q.bias"));
    }
    /* llama-3-8b: a separate output head gets q6_K, the embedding the base type */
    if (dry("llama-3-8b", "Q4_K_M", NULL, &pl, &r) == MF_OK) {
        CHECK(r.n_fallback == 0, "llama-3-8b: %" PRId64 " fallbacks", r.n_fallback);
        CHECK(!strcmp(type_of(&pl, "output.weight"), "q6_K"), "output %s", type_of(&pl, "output.weight"));
        CHECK(!strcmp(type_of(&pl, "token_embd.weight"), "q4_K"), "token_embd %s", type_of(&pl, "token_embd.weight"));
    }
    if (dry("qwen3-4b", "Q8_0", NULL, &pl, &r) == MF_OK) {
        CHECK(!strcmp(type_of(&pl, "blk.7.attn_q_norm.weight"), "f32"), "q_norm %s", type_of(&pl, "blk.7.attn_q_norm.weight"));
        CHECK(r.file_type == 7, "Q8_0 file type %d", (int)r.file_type);
    }
    /* a real vocabulary of exactly the preset's size: copied, not padded */
    if (dry("qwen2.5-0.5b", "Q8_0", "../shared/tokenizer/ggml-vocab-qwen2.gguf", &pl, &r) == MF_OK)
        CHECK(r.n_vocab == 151936 && r.n_vocab_source == 151936, "qwen2 vocab: %d of %d", (int)r.n_vocab_source,
              (int)r.n_vocab);
    else
        CHECK(false, "dry run with the qwen2 vocabulary: %s", mf_last_error());
    if (dry("llama-3.2-1b", "Q8_0", "../shared/tokenizer/ggml-vocab-llama-bpe.gguf", &pl, &r) == MF_OK)
        CHECK(r.n_vocab == 128256 && r.n_vocab_source == 128256, "llama-bpe vocab: %d of %d", (int)r.n_vocab_source,
              (int)r.n_vocab);
    else
        CHECK(false, "dry run with the llama-bpe vocabulary: %s", mf_last_error());
}

/* ---- vocabularies ---- */

static int cmp_str(const void *a, const void *b) {
    const gguf_str *x = a, *y = b;
    uint64_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->ptr, y->ptr, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

static void test_generated_vocab(void) {
    if (synth("tiny", "Q8_0", 1, 0, NULL, tmp("v.gguf"), NULL)) return;
    gguf_file *f = NULL;
    CHECK(gguf_open(tmp("v.gguf"), &f) == MF_OK, "open: %s", mf_last_error());
    if (f) {
        const gguf_value *t = gguf_get(f, "tokenizer.ggml.tokens");
        CHECK(t && t->type == GGUF_ARR && t->arr.elem == GGUF_STR && t->arr.n == 1000, "tokens array");
        if (t && t->arr.n == 1000) {
            CHECK(t->arr.strs[0].len == 5 && !memcmp(t->arr.strs[0].ptr, "<unk>", 5), "token 0");
            CHECK(t->arr.strs[3].len == 6 && !memcmp(t->arr.strs[3].ptr, "<0x00>", 6), "token 3");
            CHECK(t->arr.strs[258].len == 6 && !memcmp(t->arr.strs[258].ptr, "<0xFF>", 6), "token 258");
            /* llama.cpp refuses a vocabulary with two tokens of one text */
            gguf_str *s = malloc(1000 * sizeof *s);
            memcpy(s, t->arr.strs, 1000 * sizeof *s);
            qsort(s, 1000, sizeof *s, cmp_str);
            int dup = 0;
            for (int i = 1; i < 1000; i++) dup += !cmp_str(&s[i - 1], &s[i]);
            CHECK(dup == 0, "%d duplicate token texts", dup);
            free(s);
        }
        const gguf_value *ty = gguf_get(f, "tokenizer.ggml.token_type");
        CHECK(ty && ty->arr.n == 1000 && gguf_arr_int(ty, 0) == 2 && gguf_arr_int(ty, 1) == 3 &&
                  gguf_arr_int(ty, 10) == 6 && gguf_arr_int(ty, 500) == 1,
              "token types");
        gguf_close(f);
    }
    /* text (spaces, new lines, non-ASCII through byte fallback) round-trips */
    mf_model *m = NULL;
    CHECK(mf_model_load(tmp("v.gguf"), NULL, &m) == MF_OK, "load: %s", mf_last_error());
    if (m) {
        const char *text = "Hello world\n  tabs\tand ünïcödé €42 {x}";
        mf_token toks[256];
        int32_t n = mf_tokenize(m, text, strlen(text), toks, 256, true, false);
        CHECK(n > 1 && toks[0] == 1, "tokenize: %d, first %d", (int)n, n > 0 ? (int)toks[0] : -1);
        char out[512] = "";
        size_t o = 0;
        int merged = 0;
        for (int32_t i = 1; i < n && o < 400; i++) {
            int32_t k = mf_token_to_piece(m, toks[i], out + o, (int32_t)(sizeof out - o - 1), false);
            if (k > 0) o += (size_t)k;
            merged += toks[i] >= 259;
        }
        out[o] = 0;
        char want[512];
        snprintf(want, sizeof want, " %s", text); /* SentencePiece's space prefix */
        CHECK(!strcmp(out, want), "round trip: '%s', want '%s'", out, want);
        CHECK(merged > 0, "no filler piece was used");
        mf_model_free(m);
    }
    unlink(tmp("v.gguf"));
}

/* A small SentencePiece-style vocabulary GGUF written here (no shared file
 * is smaller than the tiny preset's 1000 tokens). */
static void write_small_vocab(const char *path, int n) {
    gguf_writer *w = NULL;
    CHECK(gguf_writer_new(&w) == MF_OK, "writer");
    if (!w) return;
    char **texts = malloc((size_t)n * sizeof *texts);
    float *scores = malloc((size_t)n * sizeof *scores);
    int32_t *types = malloc((size_t)n * sizeof *types);
    for (int i = 0; i < n; i++) {
        texts[i] = malloc(16);
        if (i == 0) snprintf(texts[i], 16, "<unk>");
        else if (i == 1) snprintf(texts[i], 16, "<s>");
        else if (i == 2) snprintf(texts[i], 16, "</s>");
        else if (i < 259) snprintf(texts[i], 16, "<0x%02X>", i - 3);
        else snprintf(texts[i], 16, "\xe2\x96\x81w%d", i);
        scores[i] = i < 259 ? 0.0f : -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    gguf_writer_set_str(w, "general.architecture", "llama");
    gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)texts, (uint64_t)n);
    gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, (uint64_t)n);
    gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, (uint64_t)n);
    gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    CHECK(gguf_writer_write_file(w, path) == MF_OK, "write %s: %s", path, mf_last_error());
    gguf_writer_free(w);
    for (int i = 0; i < n; i++) free(texts[i]);
    free(texts);
    free(scores);
    free(types);
}

static void test_copied_vocab(void) {
    write_small_vocab(tmp("small-vocab.gguf"), 600);
    mf_synth_result r;
    if (synth("tiny", "Q4_K_M", 1, 0, tmp("small-vocab.gguf"), tmp("pv.gguf"), &r) == MF_OK) {
        CHECK(r.n_vocab == 1000 && r.n_vocab_source == 600, "padded vocab: %d of %d", (int)r.n_vocab_source,
              (int)r.n_vocab);
        check_runs(tmp("pv.gguf"), "tiny with a padded vocabulary");
        mf_model *m = NULL, *src = NULL;
        mf_model_params vp = mf_model_default_params();
        vp.vocab_only = true;
        CHECK(mf_model_load(tmp("pv.gguf"), NULL, &m) == MF_OK, "load: %s", mf_last_error());
        CHECK(mf_model_load(tmp("small-vocab.gguf"), &vp, &src) == MF_OK, "load vocab: %s", mf_last_error());
        if (m && src) {
            CHECK(mf_model_n_vocab(m) == 1000, "n_vocab %d", (int)mf_model_n_vocab(m));
            CHECK(!strcmp(mf_token_text(m, 599), "\xe2\x96\x81w599"), "token 599 '%s'", mf_token_text(m, 599));
            CHECK(!strcmp(mf_token_text(m, 600), "[PAD600]") && !strcmp(mf_token_text(m, 999), "[PAD999]"),
                  "padding tokens '%s' '%s'", mf_token_text(m, 600), mf_token_text(m, 999));
            /* tokenizes as the source vocabulary does */
            const char *text = "w300 w301 hello";
            mf_token a[64], b[64];
            int32_t na = mf_tokenize(m, text, strlen(text), a, 64, true, false);
            int32_t nb = mf_tokenize(src, text, strlen(text), b, 64, true, false);
            CHECK(na == nb && na > 0 && !memcmp(a, b, (size_t)na * sizeof *a), "tokenization differs from the source's");
        }
        mf_model_free(m);
        mf_model_free(src);
    }
    unlink(tmp("pv.gguf"));

    /* larger than the preset: refused with the sizes named, no file */
    mf_synth_params p = mf_synth_default_params();
    p.preset = "tiny";
    p.vocab_path = "../shared/tokenizer/ggml-vocab-qwen2.gguf";
    mf_status s = mf_synth(&p, tmp("big-vocab.gguf"), NULL);
    CHECK(s == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "151936 tokens") && strstr(mf_last_error(), "1000"),
          "vocabulary larger than the preset: %d %s", (int)s, mf_last_error());
    CHECK(!exists(tmp("big-vocab.gguf")), "refused, yet the file exists");
    p.vocab_path = tmp("no-such-vocab.gguf");
    s = mf_synth(&p, tmp("big-vocab.gguf"), NULL);
    CHECK(s == MF_ERR_IO && strstr(mf_last_error(), "no-such-vocab.gguf"), "missing vocabulary: %d %s", (int)s,
          mf_last_error());
    CHECK(!exists(tmp("big-vocab.gguf")), "refused, yet the file exists");
    unlink(tmp("small-vocab.gguf"));
}

/* ---- refusals and cancellation ---- */

static int g_chunks;
static bool cancel_later(const mf_synth_progress *p, void *ud) {
    (void)ud;
    return p->event != MF_SYNTH_CHUNK || ++g_chunks < 5;
}

static void test_refusals(void) {
    mf_synth_params p = mf_synth_default_params();
    p.preset = "nope";
    mf_status s = mf_synth(&p, tmp("x.gguf"), NULL);
    CHECK(s == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "unknown preset 'nope'") &&
              strstr(mf_last_error(), "qwen2.5-0.5b"),
          "unknown preset: %d %s", (int)s, mf_last_error());
    p.preset = "tiny";
    p.type = "Q7_K";
    s = mf_synth(&p, tmp("x.gguf"), NULL);
    CHECK(s == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "unknown type 'Q7_K'") && strstr(mf_last_error(), "Q4_K_M"),
          "unknown type: %d %s", (int)s, mf_last_error());
    p.type = "q4_k_m"; /* case-insensitive, as mf_quantize */
    s = mf_synth(&p, NULL, NULL);
    CHECK(s == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "output"), "no output path: %d %s", (int)s,
          mf_last_error());
    CHECK(!exists(tmp("x.gguf")), "a refused synth left a file");

    p.progress = cancel_later;
    g_chunks = 0;
    s = mf_synth(&p, tmp("x.gguf"), NULL);
    CHECK(s == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "cancelled"), "cancel: %d %s", (int)s, mf_last_error());
    CHECK(g_chunks == 5, "%d chunks reported before the cancel", g_chunks);
    CHECK(!exists(tmp("x.gguf")), "a cancelled synth left a file");
    /* nor any temporary file beside it */
    char cmd[600], out[256];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp", g_dir);
    test_run(cmd, out, sizeof out);
    CHECK(atoi(out) == 0, "temporary files left: %s", out);
}

/* ---- extra layers: a constructed draft/target pair ---- */

static mf_status synth_extra(const char *type, int32_t extra, float scale, const char *out) {
    mf_synth_params p = mf_synth_default_params();
    p.preset = "tiny";
    p.type = type;
    p.extra_layers = extra;
    p.extra_scale = scale;
    mf_status s = mf_synth(&p, out, NULL);
    CHECK(s == MF_OK, "synth tiny %s + %d layers x %g: %s", type, (int)extra, (double)scale, mf_last_error());
    return s;
}

/* Greedy tokens after a prompt (n of them into out) and the first step's
 * logits (V floats into first, malloc'd). */
static bool greedy(const char *path, int n, mf_token *out, float **first) {
    *first = NULL;
    mf_model *m = NULL;
    if (mf_model_load(path, NULL, &m) != MF_OK) {
        CHECK(false, "%s: load: %s", path, mf_last_error());
        return false;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 128;
    cp.n_threads = 2;
    mf_context *c = NULL;
    bool ok = mf_context_new(m, &cp, &c) == MF_OK;
    CHECK(ok, "%s: context: %s", path, mf_last_error());
    const int32_t V = mf_model_n_vocab(m);
    mf_token toks[64];
    const char *text = "The river market at dawn";
    int32_t np = ok ? mf_tokenize(m, text, strlen(text), toks, 64, true, false) : 0;
    ok = ok && np > 2 && mf_decode(c, toks, np, false) == MF_OK;
    for (int i = 0; ok && i < n; i++) {
        const float *l = mf_get_logits(c, -1);
        ok = l != NULL;
        if (!ok) break;
        if (i == 0 && (*first = malloc((size_t)V * sizeof **first))) memcpy(*first, l, (size_t)V * sizeof **first);
        int best = 0;
        for (int v = 1; v < V; v++)
            if (l[v] > l[best]) best = v;
        out[i] = best;
        ok = mf_decode(c, &out[i], 1, false) == MF_OK;
    }
    CHECK(ok, "%s: greedy decode: %s", path, mf_last_error());
    mf_context_free(c);
    mf_model_free(m);
    return ok && *first;
}

static bool all_zero(const gguf_tensor *t) {
    const uint8_t *b = t->data;
    for (size_t k = 0; k < t->nbytes; k++)
        if (b[k]) return false;
    return true;
}

/* The target of `--extra-layers` holds the preset's file tensor for tensor,
 * byte for byte and type for type (Q4_K_M: the layer-position rules are the
 * preset's), plus the extra layers; scale 0 makes their residual writers
 * zeros, so greedy output and logits are the preset's exactly; a non-zero
 * scale changes the logits. */
static void test_extra_layers(void) {
    const char *types[] = {"Q4_K_M", "Q8_0"};
    for (size_t k = 0; k < 2; k++) {
        if (synth("tiny", types[k], 1, 0, NULL, tmp("draft.gguf"), NULL) ||
            synth_extra(types[k], 5, 0.25f, tmp("target.gguf")))
            continue;
        gguf_file *d = NULL, *t = NULL;
        CHECK(gguf_open(tmp("draft.gguf"), &d) == MF_OK && gguf_open(tmp("target.gguf"), &t) == MF_OK, "open: %s",
              mf_last_error());
        if (d && t) {
            uint32_t nl = 0;
            CHECK(gguf_get_u32(t, "llama.block_count", true, &nl) == MF_OK && nl == 9, "%s: block_count %u, want 9",
                  types[k], nl);
            CHECK(t->n_tensors == d->n_tensors + 5 * 9, "%s: %" PRIu64 " tensors, want %" PRIu64, types[k],
                  t->n_tensors, d->n_tensors + 45);
            for (uint64_t i = 0; i < d->n_tensors; i++) {
                const gguf_tensor *a = &d->tensors[i], *b = gguf_find_tensor(t, a->name);
                CHECK(b && b->type == a->type && b->ne[0] == a->ne[0] && b->ne[1] == a->ne[1] &&
                          b->nbytes == a->nbytes && !memcmp(a->data, b->data, a->nbytes),
                      "%s: %s differs between draft and target", types[k], a->name);
            }
            const gguf_tensor *x = gguf_find_tensor(t, "blk.6.ffn_down.weight");
            CHECK(x && !all_zero(x), "%s: extra layer 6's ffn_down missing or zero", types[k]);
        }
        gguf_close(d);
        gguf_close(t);
    }

    /* scale 0: the same greedy tokens and the same logits, bit for bit */
    if (synth("tiny", "Q8_0", 1, 0, NULL, tmp("draft.gguf"), NULL) || synth_extra("Q8_0", 5, 0.0f, tmp("t0.gguf")) ||
        synth_extra("Q8_0", 5, 1.0f, tmp("t1.gguf")))
        return;
    gguf_file *z = NULL;
    CHECK(gguf_open(tmp("t0.gguf"), &z) == MF_OK, "open: %s", mf_last_error());
    for (int l = 4; z && l < 9; l++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_output.weight", l);
        const gguf_tensor *a = gguf_find_tensor(z, name);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", l);
        const gguf_tensor *b = gguf_find_tensor(z, name);
        CHECK(a && b && all_zero(a) && all_zero(b), "scale 0: layer %d's residual writers are not zeros", l);
        snprintf(name, sizeof name, "blk.%d.ffn_up.weight", l);
        const gguf_tensor *c = gguf_find_tensor(z, name);
        CHECK(c && !all_zero(c), "scale 0: layer %d's ffn_up is zeros", l);
    }
    gguf_close(z);
    enum { N = 32 };
    mf_token gd[N], g0[N], g1[N];
    float *ld = NULL, *l0 = NULL, *l1 = NULL;
    if (greedy(tmp("draft.gguf"), N, gd, &ld) && greedy(tmp("t0.gguf"), N, g0, &l0) &&
        greedy(tmp("t1.gguf"), N, g1, &l1)) {
        CHECK(!memcmp(gd, g0, sizeof gd), "scale 0: greedy tokens differ from the draft's");
        CHECK(!memcmp(ld, l0, 1000 * sizeof *ld), "scale 0: logits differ from the draft's");
        CHECK(memcmp(ld, l1, 1000 * sizeof *ld) != 0, "scale 1: logits equal the draft's");
    }
    free(ld);
    free(l0);
    free(l1);
    unlink(tmp("draft.gguf"));
    unlink(tmp("target.gguf"));
    unlink(tmp("t0.gguf"));
    unlink(tmp("t1.gguf"));

    /* refusals */
    mf_synth_params p = mf_synth_default_params();
    p.preset = "tiny";
    p.extra_layers = 1025;
    mf_status s = mf_synth(&p, tmp("x.gguf"), NULL);
    CHECK(s == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "extra layers must be 0..1024"), "1025 layers: %d %s",
          (int)s, mf_last_error());
    p.extra_layers = 2;
    p.extra_scale = -0.5f;
    s = mf_synth(&p, tmp("x.gguf"), NULL);
    CHECK(s == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "scale must be finite and >= 0"), "scale -0.5: %d %s",
          (int)s, mf_last_error());
    p.extra_scale = INFINITY;
    s = mf_synth(&p, tmp("x.gguf"), NULL);
    CHECK(s == MF_ERR_INVALID_ARG, "scale inf accepted");
    CHECK(!exists(tmp("x.gguf")), "a refused synth left a file");
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/minfer-synth-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    test_refusals();
    test_rope_factors();
    test_values();
    test_seeds();
    test_generated_vocab();
    test_copied_vocab();
    test_presets_run();
    test_types();
    test_big_presets();
    test_extra_layers();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    test_run(cmd, NULL, 0);
    return test_summary("synth_models");
}
