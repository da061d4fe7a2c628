/* test_cuda.c - the cuda backend against the CPU backend, the same forward
 * behind the one op interface (ARCHITECTURE.md principle 2).
 *
 * 1. parity: logits of a 100-token prompt (one batch, every row) and of four
 *    decode steps after it, on every model file found, cuda vs cpu.
 *    Tolerance: max |cuda - cpu| <= TOL * max |cpu| over a file's logits
 *    (test_cuda_kernels holds each kernel to its reference tightly; this is
 *    the whole forward).
 *    Not bitwise, because the two compute differently: the CPU's quantized
 *    products run integer dots over activations rounded to 8 bits (q8_0 /
 *    q8_K), the GPU's run f32 FMAs over f32 activations; norms sum in double
 *    on the CPU, in an f32 tree on the GPU; exp/tanh/cos come from different
 *    libraries. TOL = 3% of the logit range covers the activations' 8-bit
 *    rounding carried through the layers (CPU-vs-llama.cpp goldens of
 *    quantized files allow similar margins); a wrong kernel is off by the
 *    whole range. F32 files, where neither side rounds activations, are held
 *    to 1e-3. The files of ../shared/golden/quant (random heavy-tailed
 *    weights, built to stress quantization) to TOL_GQ = 20%: their golden
 *    README measures differences of 1.5 (logits about 10) between runs
 *    whose activations are rounded differently, and here the two sides
 *    round them differently by construction (the CPU to q8_0 / q8_K, the
 *    GPU not at all, or to int8 per 32 in the dp4a kernels).
 * 2. greedy: 24 greedy tokens after a prompt on stories260K (F32) equal.
 * 3. determinism: the cuda run twice, and with decode graphs off
 *    (MINFER_CUDA_GRAPH=0), bitwise equal: the same kernels on the same data.
 *    Embeddings of one-token steps (graph capture and replay) against the CPU.
 *    Fused decode ops against unfused (MINFER_CUDA_FUSE=0) and programmatic
 *    dependent launch against plain launches (MINFER_CUDA_PDL=0), bitwise
 *    equal: each fused kernel computes the bits of the kernels it replaces.
 *    On golden/quant's Q4_K_M file (dp4a shapes: k a multiple of 256) and a
 *    synth tiny-qwen3 Q4_K_M (QK-norm + RoPE fused), written by the CLI.
 * 4. many sequences: four sequences in mixed batches, two sharing a prompt
 *    prefix through mf_kv_seq_cp (copy-on-write pages), each sequence's
 *    logits against the same plan on the CPU, same tolerance; and the
 *    output head of those multi-row steps in vocabulary parts bitwise
 *    against one product (MINFER_CUDA_HEAD_PARTS=1).
 * 5. speculative decoding's step shapes (graphs replayed between wider steps).
 * 6. split models (-ngl N below the layer count: the first layers on the
 *    CPU, the rest on the GPU, the residual stream uploaded once a step):
 *    logits of the first and last split points and the middle against the
 *    CPU, with the parity tolerances (each layer runs one side's kernels,
 *    so the difference is at most the whole-GPU one's); many sequences and
 *    greedy tokens too; -ngl auto under a faked small device
 *    (MINFER_CUDA_MEM_MIB) chooses a split strictly inside the model.
 * 7. KV cache types: q8_0 and f32 caches on the GPU against the same cache
 *    type on the CPU (TOL_Q: both round K/V to 8 bits, so a small difference
 *    upstream can move a value across a rounding step), whole and split;
 *    the prompt's rows and the one-row steps reported apart (they take
 *    different attention kernels).
 *
 * Without a CUDA device (or a build without the backend) it exits 77, which
 * ctest reports as skipped. Models missing from ../shared are skipped with a
 * note, but stories260K must be there. */
#include "testutil.h"
#include "minfer.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* N_PROMPT > 64 rows: the prompt takes the prefill attention (k_fattn.cu
 * where the head dimension allows), over two 64-key tiles and two row blocks */
enum { N_PROMPT = 100, N_GEN = 4, SKIP = 77 };
#define TOL_Q 3e-2
/* The zoo's gemma2 (random weights, scores in the hundreds) with a q8_0
 * cache amplifies any 2^-12 change about 400-fold: on the CPU alone,
 * rounding only its V to f16 moves these logits by 5.2e-2 of their range.
 * The prompt's flash attention rounds P to f16, a change of that size
 * (4.75e-2 to 5.19e-2 on an H100, 2026-12-05; 1.8e-2 with
 * MINFER_CUDA_FA=0). */
#define TOL_Q_CHAOTIC 8e-2
#define TOL_F32 1e-3
#define TOL_GQ 0.2
/* A random-weight synth qwen3 has near-flat logits, so the q8-rounded activations of the GPU
 * path (identical with fusion off) reach 3.07e-2 of the range on the H200; 5e-2 bounds that. */
#define TOL_SYNTH 5e-2

/* mf_model_params.gpu_layers of the cuda loads (0: all; section 6 splits) */
static int32_t g_gpu_layers;

static float *run_logits(const char *path, const char *backend, mf_kv_type kv, int *n_vocab, bool *skipped) {
    mf_model_params mp = mf_model_default_params();
    mp.backend = backend;
    if (!strcmp(backend, "cuda")) mp.gpu_layers = g_gpu_layers;
    mf_model *m;
    *skipped = false;
    if (mf_model_load(path, &mp, &m)) {
        /* a family the backend refuses at load, with a message; a weight
         * type it refuses is a failure (it takes every type the CPU runs) */
        if (!strcmp(backend, "cuda") && strstr(mf_last_error(), "not supported yet")) {
            fprintf(stderr, "  skip %s: %s\n", path, mf_last_error());
            *skipped = true;
        } else {
            CHECK(0, "%s on %s: %s", path, backend, mf_last_error());
        }
        return NULL;
    }
    const int V = mf_model_n_vocab(m);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 1024; /* decode attention then splits the keys in 4 (flash-decoding) */
    cp.n_threads = 2;
    cp.kv_type = kv;
    mf_context *c;
    if (mf_context_new(m, &cp, &c)) {
        CHECK(0, "%s on %s: context: %s", path, backend, mf_last_error());
        mf_model_free(m);
        return NULL;
    }
    mf_token t[N_PROMPT];
    uint32_t r = 7;
    for (int i = 0; i < N_PROMPT; i++) {
        r = r * 1103515245u + 12345u;
        t[i] = (mf_token)(1 + (r >> 8) % (uint32_t)(V - 1));
    }
    float *out = malloc(sizeof(float) * (size_t)V * (N_PROMPT + N_GEN));
    bool ok = out && mf_decode(c, t, N_PROMPT, true) == MF_OK;
    for (int i = 0; ok && i < N_PROMPT; i++) memcpy(out + (size_t)i * V, mf_get_logits(c, i), sizeof(float) * V);
    for (int g = 0; ok && g < N_GEN; g++) {
        mf_token nt = (mf_token)((g * 7919 + 3) % V);
        ok = mf_decode(c, &nt, 1, false) == MF_OK;
        if (ok) memcpy(out + (size_t)(N_PROMPT + g) * V, mf_get_logits(c, -1), sizeof(float) * V);
    }
    CHECK(ok, "%s on %s: decode: %s", path, backend, mf_last_error());
    if (!ok) free(out), out = NULL;
    *n_vocab = V;
    mf_context_free(c);
    mf_model_free(m);
    return out;
}

/* max |a - b| relative to max |a| */
static double rel_err(const float *a, const float *b, size_t n) {
    double mx = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(a[i]) > mx) mx = fabs(a[i]);
        const double e = fabs((double)a[i] - b[i]);
        if (!(e <= d)) d = e; /* NaN propagates */
    }
    return mx > 0 ? d / mx : d;
}

static int g_files, g_skipped;

static void parity(const char *path, double tol) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "  skip %s: not present\n", path);
        g_skipped++;
        return;
    }
    fclose(f);
    int va = 0, vb = 0;
    bool sa, sb;
    float *b = run_logits(path, "cuda", MF_KV_F16, &vb, &sb);
    float *a = sb ? NULL : run_logits(path, "cpu", MF_KV_F16, &va, &sa);
    if (sb) g_skipped++;
    if (a && b) {
        const double e = rel_err(a, b, (size_t)va * (N_PROMPT + N_GEN));
        fprintf(stderr, "  %-52s max|d|/max|cpu| = %.2e (tolerance %.0e)\n", path, e, tol);
        CHECK(e <= tol, "%s: cuda vs cpu logits differ by %.3e of their range (tolerance %.0e)", path, e, tol);
        g_files++;
    }
    free(a);
    free(b);
}

static mf_context *open_ctx(const char *path, const char *backend, int n_seq, mf_model **m) {
    mf_model_params mp = mf_model_default_params();
    mp.backend = backend;
    if (!strcmp(backend, "cuda")) mp.gpu_layers = g_gpu_layers;
    if (mf_model_load(path, &mp, m)) {
        CHECK(0, "%s on %s: %s", path, backend, mf_last_error());
        return NULL;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 512;
    cp.n_seq_max = (uint32_t)n_seq;
    cp.n_threads = 2;
    mf_context *c = NULL;
    if (mf_context_new(*m, &cp, &c)) {
        CHECK(0, "%s on %s: context: %s", path, backend, mf_last_error());
        mf_model_free(*m);
        *m = NULL;
    }
    return c;
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* greedy ids after the prompt, and (when out) the logits of every step */
static bool greedy(const char *path, const char *backend, int n, mf_token *ids) {
    mf_model *m = NULL;
    mf_context *c = open_ctx(path, backend, 1, &m);
    if (!c) return false;
    mf_token p[64];
    const int np = mf_tokenize(m, "Once upon a time, there was a little", 36, p, 64, true, false);
    bool ok = np > 0 && mf_decode(c, p, np, false) == MF_OK;
    const int V = mf_model_n_vocab(m);
    for (int i = 0; ok && i < n; i++) {
        ids[i] = argmax(mf_get_logits(c, -1), V);
        ok = mf_decode(c, &ids[i], 1, false) == MF_OK;
    }
    CHECK(ok, "greedy on %s: %s", backend, mf_last_error());
    mf_context_free(c);
    mf_model_free(m);
    return ok;
}

/* Embeddings of one-token steps (the decode graph's path; the forward reads
 * the downloaded rows at once): three steps, every row's state. */
static float *embed_steps(const char *path, const char *backend, int *n_embd) {
    mf_model_params mp = mf_model_default_params();
    mp.backend = backend;
    if (!strcmp(backend, "cuda")) mp.gpu_layers = g_gpu_layers;
    mf_model *m;
    if (mf_model_load(path, &mp, &m)) {
        CHECK(0, "%s on %s: %s", path, backend, mf_last_error());
        return NULL;
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 256;
    cp.embeddings = true;
    cp.pooling = MF_POOLING_NONE;
    mf_context *c;
    if (mf_context_new(m, &cp, &c)) {
        CHECK(0, "%s on %s: embeddings context: %s", path, backend, mf_last_error());
        mf_model_free(m);
        return NULL;
    }
    const int E = mf_model_n_embd(m);
    *n_embd = E;
    float *out = malloc(sizeof(float) * 4 * (size_t)E);
    bool ok = out != NULL;
    for (int i = 0; ok && i < 4; i++) {
        const mf_token t = (mf_token)(3 + 17 * i);
        ok = mf_decode(c, &t, 1, false) == MF_OK && mf_get_embeddings_ith(c, 0);
        if (ok) memcpy(out + (size_t)i * E, mf_get_embeddings_ith(c, 0), sizeof(float) * E);
    }
    CHECK(ok, "embeddings on %s: %s", backend, mf_last_error());
    mf_context_free(c);
    mf_model_free(m);
    if (!ok) free(out), out = NULL;
    return out;
}

/* Four sequences: 0 and 1 share a 20-token prefix (1 copies it from 0),
 * 2 and 3 have their own prompts; prompts go in chunks while others decode;
 * every output row is kept per (sequence, position). */
enum { B_SEQ = 4, B_POS = 48 };
static float *batch_plan(const char *path, const char *backend, int *n_vocab) {
    mf_model *m = NULL;
    mf_context *c = open_ctx(path, backend, B_SEQ, &m);
    if (!c) return NULL;
    const int V = mf_model_n_vocab(m);
    *n_vocab = V;
    float *out = calloc((size_t)B_SEQ * B_POS * V, sizeof(float));
    mf_batch b;
    mf_batch_init(&b, 64);
    int pos[B_SEQ] = {0};
    const int prompt[B_SEQ] = {20, 26, 13, 7};
    uint32_t r = 99;
    bool ok = out != NULL;
    /* sequence 0's prefix first, then 1 shares it */
    mf_batch_clear(&b);
    for (int i = 0; i < 20; i++) {
        r = r * 1103515245u + 12345u;
        mf_batch_add(&b, (mf_token)(1 + (r >> 8) % (uint32_t)(V - 1)), pos[0]++, 0, true);
    }
    ok = ok && mf_decode_batch(c, &b) == MF_OK;
    for (int i = 0; ok && i < 20; i++) memcpy(out + ((size_t)0 * B_POS + i) * V, mf_get_logits_ith(c, i), sizeof(float) * V);
    ok = ok && mf_kv_seq_cp(c, 0, 1, -1) == MF_OK;
    pos[1] = 20;
    for (int tick = 0; ok && tick < 24; tick++) {
        mf_batch_clear(&b);
        int who[64], at[64];
        for (int s = 0; s < B_SEQ; s++) {
            /* prompt rows in chunks of 1 + s, then one token per tick */
            const int take = pos[s] < prompt[s] ? (prompt[s] - pos[s] < 1 + s ? prompt[s] - pos[s] : 1 + s) : 1;
            for (int k = 0; k < take && pos[s] < B_POS; k++) {
                r = r * 1103515245u + 12345u;
                who[b.n_tokens] = s;
                at[b.n_tokens] = pos[s];
                mf_batch_add(&b, (mf_token)(1 + (r >> 8) % (uint32_t)(V - 1)), pos[s]++, s, true);
            }
        }
        ok = mf_decode_batch(c, &b) == MF_OK;
        for (int i = 0; ok && i < b.n_tokens; i++)
            memcpy(out + ((size_t)who[i] * B_POS + at[i]) * V, mf_get_logits_ith(c, i), sizeof(float) * V);
    }
    CHECK(ok, "batch plan on %s: %s", backend, mf_last_error());
    mf_batch_free(&b);
    mf_context_free(c);
    mf_model_free(m);
    if (!ok) free(out), out = NULL;
    return out;
}

/* Speculative decoding's step shapes on one sequence: one-row steps (the
 * decode graph) between verification steps of 2..9 rows that all want
 * logits (they grow the engine's output buffer, which moves it) and the
 * rollback of their rejected tails. The last row of every step is kept. */
enum { S_STEPS = 16 };
static float *spec_steps(const char *path, const char *backend, int *n_vocab) {
    mf_model *m = NULL;
    mf_context *c = open_ctx(path, backend, 1, &m);
    if (!c) return NULL;
    const int V = mf_model_n_vocab(m);
    *n_vocab = V;
    float *out = calloc((size_t)S_STEPS * V, sizeof(float));
    mf_batch b;
    mf_batch_init(&b, 16);
    int pos = 0;
    bool ok = out != NULL;
    for (int st = 0; ok && st < S_STEPS; st++) {
        const int rows = st % 3 == 2 ? 2 + st / 2 : 1, keep = rows > 1 ? rows / 2 : 1;
        mf_batch_clear(&b);
        for (int i = 0; i < rows; i++) mf_batch_add(&b, (mf_token)(1 + (st * 31 + i * 7) % (V - 1)), pos + i, 0, rows > 1 || i == rows - 1);
        ok = mf_decode_batch(c, &b) == MF_OK && mf_get_logits_ith(c, rows - 1);
        if (ok) memcpy(out + (size_t)st * V, mf_get_logits_ith(c, rows - 1), sizeof(float) * V);
        /* keep a prefix of the rows, as a verification does */
        ok = ok && mf_kv_seq_rm(c, 0, pos + keep, -1) == MF_OK;
        pos += keep;
    }
    CHECK(ok, "speculative step shapes on %s: %s", backend, mf_last_error());
    mf_batch_free(&b);
    mf_context_free(c);
    mf_model_free(m);
    if (!ok) free(out), out = NULL;
    return out;
}

int main(void) {
    const char *stories = "../shared/models/stories260K.gguf";
    {
        mf_model_params mp = mf_model_default_params();
        mp.backend = "cuda";
        mf_model *m;
        if (mf_model_load(stories, &mp, &m)) {
            const char *e = mf_last_error();
            if (strstr(e, "no CUDA device") || strstr(e, "no CUDA backend")) {
                fprintf(stderr, "test_cuda: skipped: %s\n", e);
                return SKIP;
            }
            CHECK(0, "%s on cuda: %s", stories, e);
            return test_summary("test_cuda");
        }
        mf_model_free(m);
    }

    /* 1. parity */
    /* f32: held to TOL_F32; q8: llama-q8_0, the one zoo file whose every
     * product runs on 8-bit activations on the CPU: 15.6% of the range on
     * the H200 whichever GPU kernels run (graphs, dp4a and tensor cores on
     * or off), the activation-rounding difference the golden README
     * describes, so it gets TOL_GQ like the golden/quant files */
    static const struct { const char *path; int f32; int q8; } files[] = {
        {"../shared/models/stories260K.gguf", true, false},
        {"../shared/models/stories260K-f16.gguf", false, false},
        {"../shared/models/stories260K-bf16.gguf", false, false},
        {"../shared/models/stories260K-q4_k_m.gguf", false, false},
        {"../shared/models/zoo/llama.gguf", false, false},
        {"../shared/models/zoo/llama-q8_0.gguf", false, true},
        {"../shared/models/zoo/qwen2.gguf", false, false},
        {"../shared/models/zoo/qwen3.gguf", false, false},
        {"../shared/models/zoo/gemma2.gguf", false, false},
        {"../shared/models/zoo/gemma3.gguf", false, false},
        {"../shared/models/zoo/phi3.gguf", false, false},
        {"../shared/models/zoo/granite.gguf", false, false},
        {"../shared/models/zoo/gpt2.gguf", false, false},
        {"../shared/models/zoo/starcoder2.gguf", false, false},
        {"../shared/models/zoo/qwen3moe.gguf", false, false},
        {"../shared/models/zoo/mixtral.gguf", false, false},
    };
    fprintf(stderr, "test_cuda: parity with the cpu backend\n");
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) parity(files[i].path, files[i].f32 ? TOL_F32 : files[i].q8 ? TOL_GQ : TOL_Q);
    DIR *d = opendir("../shared/golden/quant");
    char path[512];
    for (struct dirent *e; d && (e = readdir(d));) {
        const size_t L = strlen(e->d_name);
        if (L < 5 || strcmp(e->d_name + L - 5, ".gguf")) continue;
        snprintf(path, sizeof path, "../shared/golden/quant/%s", e->d_name);
        parity(path, TOL_GQ);
    }
    if (d) closedir(d);
    CHECK(g_files >= 1, "no model compared");

    /* 2. greedy tokens */
    enum { NG = 24 };
    mf_token ga[NG], gb[NG];
    if (greedy(stories, "cpu", NG, ga) && greedy(stories, "cuda", NG, gb)) {
        int same = 0;
        while (same < NG && ga[same] == gb[same]) same++;
        CHECK(same == NG, "greedy tokens on stories260K: cuda leaves the cpu's at token %d", same);
        fprintf(stderr, "test_cuda: greedy: %d of %d tokens equal\n", same, NG);
    }

    /* 3. determinism: twice, and without graphs */
    int v1 = 0, v2 = 0, v3 = 0;
    bool s1, s2, s3;
    const char *det = "../shared/models/stories260K-q4_k_m.gguf";
    float *r1 = run_logits(det, "cuda", MF_KV_F16, &v1, &s1);
    float *r2 = run_logits(det, "cuda", MF_KV_F16, &v2, &s2);
    setenv("MINFER_CUDA_GRAPH", "0", 1);
    float *r3 = run_logits(det, "cuda", MF_KV_F16, &v3, &s3);
    unsetenv("MINFER_CUDA_GRAPH");
    if (r1 && r2 && r3) {
        const size_t n = (size_t)v1 * (N_PROMPT + N_GEN) * sizeof(float);
        CHECK(!memcmp(r1, r2, n), "two cuda runs differ");
        CHECK(!memcmp(r1, r3, n), "cuda with and without decode graphs differ");
        fprintf(stderr, "test_cuda: run to run and graph vs eager: bitwise %s\n",
                !memcmp(r1, r2, n) && !memcmp(r1, r3, n) ? "equal" : "DIFFERENT");
    }
    free(r1), free(r2), free(r3);

    /* 3a. fused vs unfused, PDL vs plain launches */
    {
        char cmd[512], fq3[] = "/tmp/minfer-test-cuda-XXXXXX";
        const int fd = mkstemp(fq3);
        if (fd >= 0) close(fd);
        snprintf(cmd, sizeof cmd, "%s synth --preset tiny-qwen3 --type Q4_K_M -o %s -t 2 >/dev/null 2>&1",
                 test_minfer_bin(), fq3);
        const bool have_q3 = fd >= 0 && test_run(cmd, NULL, 0) == 0;
        CHECK(have_q3, "minfer synth tiny-qwen3 failed: %s", cmd);
        const char *ff[] = {"../shared/golden/quant/quant-q4_k_m.gguf", have_q3 ? fq3 : NULL};
        for (int i = 0; i < 2; i++) {
            if (!ff[i]) continue;
            FILE *f = fopen(ff[i], "rb");
            if (!f) {
                fprintf(stderr, "  skip %s: not present\n", ff[i]);
                continue;
            }
            fclose(f);
            int va = 0, vb = 0, vc = 0;
            bool sa, sb, sc;
            float *a = run_logits(ff[i], "cuda", MF_KV_F16, &va, &sa);
            setenv("MINFER_CUDA_FUSE", "0", 1);
            float *b = run_logits(ff[i], "cuda", MF_KV_F16, &vb, &sb);
            unsetenv("MINFER_CUDA_FUSE");
            setenv("MINFER_CUDA_PDL", "0", 1);
            float *cc = run_logits(ff[i], "cuda", MF_KV_F16, &vc, &sc);
            unsetenv("MINFER_CUDA_PDL");
            if (a && b && cc) {
                const size_t n = (size_t)va * (N_PROMPT + N_GEN) * sizeof(float);
                const bool fe = !memcmp(a, b, n), pe = !memcmp(a, cc, n);
                CHECK(fe, "%s: fused and unfused decode ops differ (max %.3e of the range)", ff[i],
                      rel_err(b, a, n / sizeof(float)));
                CHECK(pe, "%s: with and without programmatic dependent launch differ", ff[i]);
                fprintf(stderr, "test_cuda: %s: fused vs unfused %s, PDL vs plain %s\n", ff[i],
                        fe ? "bitwise equal" : "DIFFERENT", pe ? "bitwise equal" : "DIFFERENT");
            }
            if (i == 1) { /* the synth file against the CPU too */
                int vd = 0;
                bool sd;
                float *d = run_logits(ff[i], "cpu", MF_KV_F16, &vd, &sd);
                if (a && d) {
                    const double e = rel_err(d, a, (size_t)vd * (N_PROMPT + N_GEN));
                    fprintf(stderr, "  %-52s max|d|/max|cpu| = %.2e (tolerance %.0e)\n", "synth tiny-qwen3 Q4_K_M", e,
                            TOL_SYNTH);
                    CHECK(e <= TOL_SYNTH, "synth tiny-qwen3 Q4_K_M: cuda vs cpu logits differ by %.3e", e);
                }
                free(d);
            }
            free(a), free(b), free(cc);
        }
        if (fd >= 0) unlink(fq3);
    }

    /* 3b. embeddings of one-token steps */
    {
        int ea = 0, eb = 0;
        float *a = embed_steps(stories, "cpu", &ea), *b = embed_steps(stories, "cuda", &eb);
        if (a && b) {
            const double e = rel_err(a, b, (size_t)4 * ea);
            fprintf(stderr, "test_cuda: embeddings of 4 one-token steps max|d|/max|cpu| = %.2e (tolerance %.0e)\n", e,
                    TOL_F32);
            CHECK(e <= TOL_F32, "embeddings of one-token steps differ by %.3e (tolerance %.0e)", e, TOL_F32);
        }
        free(a);
        free(b);
    }

    /* 4. many sequences, shared prefix */
    static const char *bfiles[] = {"../shared/models/stories260K.gguf", "../shared/models/zoo/gemma2.gguf",
                                   "../shared/models/zoo/qwen2.gguf"};
    for (size_t i = 0; i < sizeof bfiles / sizeof bfiles[0]; i++) {
        FILE *f = fopen(bfiles[i], "rb");
        if (!f) continue;
        fclose(f);
        int va = 0, vb = 0;
        float *a = batch_plan(bfiles[i], "cpu", &va), *b = batch_plan(bfiles[i], "cuda", &vb);
        if (a && b) {
            const double e = rel_err(a, b, (size_t)B_SEQ * B_POS * va);
            const double tol = i == 0 ? TOL_F32 : TOL_Q;
            fprintf(stderr, "test_cuda: batch %-40s max|d|/max|cpu| = %.2e (tolerance %.0e)\n", bfiles[i], e, tol);
            CHECK(e <= tol, "%s: many-sequence logits differ by %.3e (tolerance %.0e)", bfiles[i], e, tol);
        }
        /* steps of 4 output rows take the head in vocabulary parts (2 of
         * stories260K's 512 columns, 4 ragged ones of qwen2's 50257; gemma2's
         * soft cap keeps one product): bitwise one product and one copy */
        int vh = 0;
        setenv("MINFER_CUDA_HEAD_PARTS", "1", 1);
        float *h = batch_plan(bfiles[i], "cuda", &vh);
        unsetenv("MINFER_CUDA_HEAD_PARTS");
        if (b && h) {
            const bool he = vh == vb && !memcmp(b, h, (size_t)B_SEQ * B_POS * vb * sizeof(float));
            CHECK(he, "%s: the head in parts and in one product differ", bfiles[i]);
            fprintf(stderr, "test_cuda: batch %-40s head in parts vs whole: %s\n", bfiles[i],
                    he ? "bitwise equal" : "DIFFERENT");
        }
        free(h);
        free(a);
        free(b);
    }
    /* 5. speculative decoding's steps: graphs replayed between wider steps */
    {
        int va = 0, vb = 0;
        const char *f = "../shared/models/stories260K.gguf";
        float *a = spec_steps(f, "cpu", &va), *b = spec_steps(f, "cuda", &vb);
        if (a && b) {
            const double e = rel_err(a, b, (size_t)S_STEPS * va);
            fprintf(stderr, "test_cuda: speculative step shapes max|d|/max|cpu| = %.2e (tolerance %.0e)\n", e, TOL_F32);
            CHECK(e <= TOL_F32, "speculative step shapes: logits differ by %.3e (tolerance %.0e)", e, TOL_F32);
        }
        free(a);
        free(b);
    }
    /* 6. split models */
    {
        static const struct { const char *path; double tol; } sf[] = {
            {"../shared/models/stories260K.gguf", TOL_F32},
            {"../shared/models/stories260K-q4_k_m.gguf", TOL_Q},
            {"../shared/models/zoo/qwen2.gguf", TOL_Q},
            {"../shared/models/zoo/gemma2.gguf", TOL_Q},
        };
        for (size_t i = 0; i < sizeof sf / sizeof sf[0]; i++) {
            FILE *f = fopen(sf[i].path, "rb");
            if (!f) {
                fprintf(stderr, "  skip %s: not present\n", sf[i].path);
                continue;
            }
            fclose(f);
            mf_model_params mp = mf_model_default_params();
            mf_model *m;
            if (mf_model_load(sf[i].path, &mp, &m)) continue;
            const int L = mf_model_n_layer(m);
            mf_model_free(m);
            int vc = 0;
            bool sk;
            float *cpu = run_logits(sf[i].path, "cpu", MF_KV_F16, &vc, &sk);
            const int splits[3] = {1, L / 2, L - 1};
            for (int k = 0; k < 3 && cpu; k++) {
                if (splits[k] < 1 || (k && splits[k] == splits[k - 1])) continue;
                g_gpu_layers = splits[k];
                int vg = 0;
                float *g = run_logits(sf[i].path, "cuda", MF_KV_F16, &vg, &sk);
                if (g) {
                    const double e = rel_err(cpu, g, (size_t)vc * (N_PROMPT + N_GEN));
                    fprintf(stderr, "test_cuda: split %d of %d layers on the GPU %-40s max|d|/max|cpu| = %.2e (tolerance "
                            "%.0e)\n", splits[k], L, sf[i].path, e, sf[i].tol);
                    CHECK(e <= sf[i].tol, "%s with %d of %d layers on the GPU: logits differ by %.3e", sf[i].path,
                          splits[k], L, e);
                }
                free(g);
                if (k == 1) { /* many sequences on the middle split */
                    int va = 0, vb = 0;
                    float *a = batch_plan(sf[i].path, "cpu", &va);
                    float *b = batch_plan(sf[i].path, "cuda", &vb);
                    if (a && b) {
                        const double e = rel_err(a, b, (size_t)B_SEQ * B_POS * va);
                        fprintf(stderr, "test_cuda: split batch %-40s max|d|/max|cpu| = %.2e\n", sf[i].path, e);
                        CHECK(e <= sf[i].tol, "%s split: many-sequence logits differ by %.3e", sf[i].path, e);
                    }
                    free(a);
                    free(b);
                }
                g_gpu_layers = 0;
            }
            free(cpu);
        }
        /* a session saved from a split context restores both sides' caches:
         * the next decode gives the same bits as the context that saved it */
        {
            g_gpu_layers = 2;
            mf_model *m = NULL;
            mf_context *a = open_ctx("../shared/models/stories260K-q4_k_m.gguf", "cuda", 1, &m);
            mf_context *b = NULL;
            mf_context_params cp = mf_context_default_params();
            cp.n_ctx = 512; /* as open_ctx */
            cp.n_threads = 2;
            if (a && mf_context_new(m, &cp, &b)) b = NULL;
            mf_token pr[20];
            for (int i = 0; i < 20; i++) pr[i] = (mf_token)(10 + 7 * i);
            void *img = NULL;
            size_t len = 0;
            mf_token nx = 42;
            bool ok = a && b && mf_decode(a, pr, 20, false) == MF_OK &&
                      mf_state_save_buffer(a, pr, 20, NULL, 0, &img, &len) == MF_OK &&
                      mf_state_load_buffer(b, img, len, NULL, NULL, NULL, NULL) == MF_OK &&
                      mf_decode(a, &nx, 1, false) == MF_OK && mf_decode(b, &nx, 1, false) == MF_OK;
            CHECK(ok, "split session round trip: %s", mf_last_error());
            if (ok) {
                const int V = mf_model_n_vocab(m);
                const bool same = !memcmp(mf_get_logits(a, -1), mf_get_logits(b, -1), sizeof(float) * (size_t)V);
                CHECK(same, "split session round trip: the restored context's next logits differ");
                fprintf(stderr, "test_cuda: split session round trip: next logits %s\n", same ? "bitwise equal" : "DIFFERENT");
            }
            free(img);
            if (b) mf_context_free(b);
            if (a) mf_context_free(a);
            if (m) mf_model_free(m);
            g_gpu_layers = 0;
        }
        /* greedy on a split stories260K */
        g_gpu_layers = 2;
        mf_token ga[NG], gb[NG];
        if (greedy(stories, "cpu", NG, ga) && greedy(stories, "cuda", NG, gb)) {
            int same = 0;
            while (same < NG && ga[same] == gb[same]) same++;
            CHECK(same == NG, "greedy tokens on a split stories260K: the cpu's left at token %d", same);
        }
        g_gpu_layers = 0;
        /* -ngl auto on a "device" of 770 MiB: 768 are reserved for buffers,
         * the rest holds some of stories260K's layers with their 4096-cell
         * caches, not all */
        setenv("MINFER_CUDA_MEM_MIB", "770", 1);
        mf_model_params mp = mf_model_default_params();
        mp.backend = "cuda";
        mp.gpu_layers = MF_GPU_LAYERS_AUTO;
        mf_model *m;
        if (!mf_model_load(stories, &mp, &m)) {
            const int on = mf_model_gpu_layers(m), L = mf_model_n_layer(m);
            fprintf(stderr, "test_cuda: -ngl auto under MINFER_CUDA_MEM_MIB=770: %d of %d layers on the GPU\n", on, L);
            CHECK(on >= 1 && on < L, "-ngl auto put %d of %d layers on the GPU", on, L);
            mf_model_free(m);
        } else {
            CHECK(0, "-ngl auto: %s", mf_last_error());
        }
        setenv("MINFER_CUDA_MEM_MIB", "100", 1);
        CHECK(mf_model_load(stories, &mp, &m) != MF_OK && strstr(mf_last_error(), "not one layer fits"),
              "-ngl auto on a 100 MiB device: %s", mf_last_error());
        unsetenv("MINFER_CUDA_MEM_MIB");
    }
    /* 7. KV cache types */
    {
        static const struct { const char *path; mf_kv_type kv; int split; double tol; } kf[] = {
            {"../shared/models/stories260K.gguf", MF_KV_Q8_0, 0, TOL_Q},
            {"../shared/models/stories260K-q4_k_m.gguf", MF_KV_Q8_0, 2, TOL_Q},
            {"../shared/models/zoo/qwen2.gguf", MF_KV_Q8_0, 0, TOL_Q},
            /* head 32: the fused RoPE + q8_0 store */
            {"../shared/models/zoo/gemma2.gguf", MF_KV_Q8_0, 0, TOL_Q_CHAOTIC},
            {"../shared/models/zoo/qwen3.gguf", MF_KV_Q8_0, 0, TOL_Q}, /* ... after QK-norm */
            {"../shared/models/stories260K.gguf", MF_KV_F32, 0, TOL_F32},
        };
        for (size_t i = 0; i < sizeof kf / sizeof kf[0]; i++) {
            FILE *f = fopen(kf[i].path, "rb");
            if (!f) {
                fprintf(stderr, "  skip %s: not present\n", kf[i].path);
                continue;
            }
            fclose(f);
            int va = 0, vb = 0;
            bool sa, sb;
            float *a = run_logits(kf[i].path, "cpu", kf[i].kv, &va, &sa);
            g_gpu_layers = kf[i].split;
            float *b = run_logits(kf[i].path, "cuda", kf[i].kv, &vb, &sb);
            g_gpu_layers = 0;
            if (a && b) {
                const double e = rel_err(a, b, (size_t)va * (N_PROMPT + N_GEN));
                const double tol = kf[i].tol;
                /* the prompt's rows and the one-row steps take different attention kernels */
                const double ep = rel_err(a, b, (size_t)va * N_PROMPT);
                const double eg = rel_err(a + (size_t)va * N_PROMPT, b + (size_t)va * N_PROMPT, (size_t)va * N_GEN);
                fprintf(stderr,
                        "test_cuda: %s KV cache%s %-40s max|d|/max|cpu| = %.2e (tolerance %.0e; prompt %.2e, steps %.2e)\n",
                        kf[i].kv == MF_KV_F32 ? "f32" : "q8_0", kf[i].split ? " (split)" : "", kf[i].path, e, tol, ep, eg);
                CHECK(e <= tol, "%s with a %s KV cache: logits differ by %.3e", kf[i].path,
                      kf[i].kv == MF_KV_F32 ? "f32" : "q8_0", e);
            }
            free(a);
            free(b);
        }
    }
    fprintf(stderr, "test_cuda: %d files compared, %d skipped\n", g_files, g_skipped);
    return test_summary("test_cuda");
}
