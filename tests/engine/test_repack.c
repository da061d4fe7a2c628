/* test_repack.c - the load-time x16 repack (model/repack.c) on real files:
 *   - every repacked matrix unpacks, row by row, to the bytes the file holds
 *     (read through a second, independent open of the file);
 *   - the original pages were released but stay reserved: still mapped
 *     (msync succeeds), so no later mapping can land inside the model's
 *     range and be unmapped when the model closes;
 *   - no_repack (and MINFER_NO_REPACK=1) leave every matrix as it is;
 *   - logits with and without the repack are bitwise equal (a prefill batch
 *     large enough for the GEMM, and one-token decode).
 * The files: real ones, and "tiny" synth models written here for the types
 * no shared file has (IQ4_XS, IQ4_NL, Q4_1, Q5_1).
 * On a CPU without AVX2 (no x16 kernels) nothing is repacked and only that is
 * checked. */
#include "testutil.h"

#include "cpu/kern/features.h"
#include "gguf/gguf.h"
#include "model/model.h"
#include "quant/interleave.h"
#include "synth/synth.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int count_x16(const mf_model *m) {
    int n = 0;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) n += m->tensors[i].handle != NULL;
    return n;
}

static void check_bytes(const char *path, const mf_model *m) {
    gguf_file *ref = NULL;
    CHECK(gguf_open(path, &ref) == MF_OK, "%s: second open", path);
    if (!ref) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const mf_tensor *t = &m->tensors[i];
        if (!t->handle) continue;
        const gguf_tensor *r = gguf_find_tensor(ref, t->name);
        CHECK(r && r->nbytes == t->nbytes, "%s: tensor %s missing from the second open", path, t->name);
        if (!r) continue;
        const size_t row = mf_row_size(t->type, t->ne[0]);
        uint8_t *buf = malloc(row);
        int bad = 0;
        for (int64_t k = 0; k < t->ne[1]; k++) {
            mf_x16_unpack_row(t->type, (const uint8_t *)t->handle + (size_t)(k / MF_X16) * row * MF_X16, (int)(k % MF_X16),
                              t->ne[0], buf);
            bad += memcmp(buf, (const uint8_t *)r->data + (size_t)k * row, row) != 0;
        }
        CHECK(!bad, "%s: %s: %d rows of the interleaved copy differ from the file", path, t->name, bad);
        free(buf);
        const uintptr_t a = ((uintptr_t)t->data + page - 1) & ~(page - 1), b = ((uintptr_t)t->data + t->nbytes) & ~(page - 1);
        if (b > a) CHECK(msync((void *)a, b - a, MS_ASYNC) == 0, "%s: %s: the released range is no longer reserved", path, t->name);
    }
    gguf_close(ref);
}

static float *logits_of(const char *path, bool no_repack, const mf_token *ids, int n, int *n_vocab) {
    mf_model_params mp = mf_model_default_params();
    mp.no_repack = no_repack;
    mf_model *m = NULL;
    if (mf_model_load(path, &mp, &m)) return NULL;
    mf_context_params cp = mf_context_default_params();
    cp.n_threads = 2;
    mf_context *ctx = NULL;
    float *out = NULL;
    if (!mf_context_new(m, &cp, &ctx)) {
        *n_vocab = mf_model_n_vocab(m);
        out = malloc(sizeof(float) * (size_t)*n_vocab * 2);
        /* a prefill batch, then one decoded token */
        if (mf_decode(ctx, ids, n - 1, false) == MF_OK)
            memcpy(out, mf_get_logits(ctx, -1), sizeof(float) * (size_t)*n_vocab);
        if (mf_decode(ctx, ids + n - 1, 1, false) == MF_OK)
            memcpy(out + *n_vocab, mf_get_logits(ctx, -1), sizeof(float) * (size_t)*n_vocab);
        mf_context_free(ctx);
    }
    mf_model_free(m);
    return out;
}

int main(void) {
    static const char *synth_types[] = {"IQ4_XS", "IQ4_NL", "Q4_1", "Q5_1"};
    enum { NSYNTH = sizeof synth_types / sizeof synth_types[0] };
    char dir[] = "/tmp/test_repack_XXXXXX", synth_path[NSYNTH][64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    for (int i = 0; i < NSYNTH; i++) {
        snprintf(synth_path[i], sizeof synth_path[i], "%s/tiny-%s.gguf", dir, synth_types[i]);
        mf_synth_params p = mf_synth_default_params();
        p.preset = "tiny";
        p.type = synth_types[i];
        p.n_threads = 2;
        CHECK(mf_synth(&p, synth_path[i], NULL) == MF_OK, "synth tiny %s: %s", synth_types[i], mf_last_error());
    }
    const char *files[] = {"../shared/models/stories260K-f16.gguf", "../shared/models/stories260K-bf16.gguf",
                           "../shared/models/stories260K-q4_k_m.gguf",
                           "../shared/models/zoo/llama-q8_0.gguf", "../shared/models/zoo/qwen2.gguf",
                           "../shared/models/zoo/mixtral.gguf", "../shared/models/zoo/gemma2.gguf", "../shared/models/llama-2-tiny-random.gguf",
                           synth_path[0], synth_path[1], synth_path[2], synth_path[3]};
    const int x16 = mf_cpu_init() >= MF_CPU_AVX2;
    int repacked = 0;
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        mf_model_params mp = mf_model_default_params();
        mf_model *m = NULL;
        CHECK(mf_model_load(files[f], &mp, &m) == MF_OK, "load %s: %s", files[f], mf_last_error());
        if (!m) continue;
        const int nx = count_x16(m);
        repacked += nx;
        if (!x16) CHECK(nx == 0, "%s: repacked without the x16 kernels", files[f]);
        check_bytes(files[f], m);
        mf_model_free(m);
        mp.no_repack = true;
        CHECK(mf_model_load(files[f], &mp, &m) == MF_OK, "load %s", files[f]);
        if (m) CHECK(count_x16(m) == 0, "%s: no_repack still repacked", files[f]);
        mf_model_free(m);
        /* 80 tokens: the prefill batch (79) is past the line below which x16
         * weights skip the GEMM, so the GEMM's panels from x16 are checked too */
        mf_token ids[80];
        const int n = sizeof ids / sizeof ids[0];
        for (int i = 0; i < n; i++) ids[i] = (mf_token)(1 + (i * 37) % 250);
        int nv = 0, nv2 = 0;
        float *a = logits_of(files[f], false, ids, n, &nv), *b = logits_of(files[f], true, ids, n, &nv2);
        CHECK(a && b && nv == nv2, "%s: logits", files[f]);
        if (a && b && nv == nv2)
            CHECK(!memcmp(a, b, sizeof(float) * (size_t)nv * 2), "%s: logits differ with and without the repack", files[f]);
        free(a);
        free(b);
        printf("%s: %d matrices interleaved; bytes and logits equal the file's layout\n", files[f], nx);
    }
    if (x16) CHECK(repacked > 0, "no matrix of these files was interleaved");
    for (int i = 0; i < NSYNTH; i++) unlink(synth_path[i]);
    rmdir(dir);
    return test_summary("test_repack");
}
