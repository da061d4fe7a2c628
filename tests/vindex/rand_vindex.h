/* rand_vindex.h - writes a browse-level vindex of random gate rows for the
 * KNN benchmarks and tests (no model behind it: down rows and embeddings are
 * zero-filled sparse files whose hashes are zeros, so verify refuses it and
 * open accepts it; gate_vectors.bin's sha256 is the real one, because the
 * HNSW graph cache is tied to it and the tests need two random vindexes to
 * differ there). Rows are uniform in [-0.5, 0.5) times a per-row scale drawn
 * from [1 - spread, 1 + spread], so norms differ as real gate rows' do. */
#ifndef MF_TEST_RAND_VINDEX_H
#define MF_TEST_RAND_VINDEX_H

#include "minfer.h"
#include "vindex/vindex.h"
#include "vindex/sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline int rv_write_file(const char *dir, const char *name, const void *data, size_t n, size_t sparse) {
    char *p = vx_path(dir, name);
    FILE *f = p ? fopen(p, "wb") : NULL;
    int ok = f != NULL;
    if (f && n) ok = fwrite(data, 1, n, f) == n;
    if (f) ok &= fclose(f) == 0;
    if (ok && sparse) ok = truncate(p, (off_t)sparse) == 0;
    free(p);
    return ok;
}

static inline double rv_uniform(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* 0 on success; type "f32", "f16" or "q8_0" */
static inline int rand_vindex_write(const char *dir, int n_layer, int F, int E, const char *type, uint64_t seed,
                                    double spread) {
    if (mkdir(dir, 0777) != 0) return -1;
    vx_index ix = {0};
    ix.level = MF_VINDEX_BROWSE;
    snprintf(ix.source_file, sizeof ix.source_file, "random");
    memset(ix.source_sha256, '0', 64);
    snprintf(ix.arch, sizeof ix.arch, "gemma3");
    snprintf(ix.ffn, sizeof ix.ffn, "geglu");
    ix.gated = true;
    ix.n_layer = n_layer, ix.n_embd = E, ix.n_vocab = 1, ix.n_ff = F, ix.n_features = F;
    ix.ftype = !strcmp(type, "f32") ? MF_TYPE_F32 : !strcmp(type, "f16") ? MF_TYPE_F16 : MF_TYPE_Q8_0;
    ix.embd_type = MF_TYPE_F32;
    const size_t rb = mf_row_size(ix.ftype, E), layer = (rb * (size_t)F + VX_ALIGN - 1) / VX_ALIGN * VX_ALIGN;
    const size_t bytes = layer * (size_t)n_layer;
    uint8_t *g = calloc(1, bytes);
    float *w = malloc((size_t)E * sizeof *w);
    ix.sect = calloc((size_t)n_layer * VX_NSECT, sizeof *ix.sect);
    if (!g || !w || !ix.sect) return -1;
    uint64_t s = seed;
    for (int l = 0; l < n_layer; l++) {
        for (int f = 0; f < F; f++) {
            const double scale = 1.0 + spread * (2 * rv_uniform(&s) - 1);
            for (int e = 0; e < E; e++) w[e] = (float)((rv_uniform(&s) - 0.5) * scale);
            mf_type_traits_ref(ix.ftype)->from_float_ref(w, g + layer * l + (size_t)f * rb, E);
        }
        ix.sect[(size_t)l * VX_NSECT + VX_GATE] = ix.sect[(size_t)l * VX_NSECT + VX_DOWN] =
            (vx_section){layer * l, rb * (size_t)F};
    }
    static const vx_file listed[] = {VX_GATE, VX_DOWN, VX_EMBD, VX_TOKENIZER};
    const size_t sizes[] = {bytes, bytes, (size_t)E * 4, 0};
    for (int i = 0; i < 4; i++) {
        ix.files[listed[i]].present = true;
        ix.files[listed[i]].size = sizes[i];
        memset(ix.files[listed[i]].sha256, '0', 64);
    }
    mf_sha256 h;
    mf_sha256_init(&h);
    mf_sha256_update(&h, g, bytes);
    mf_sha256_final_hex(&h, ix.files[VX_GATE].sha256);
    int ok = rv_write_file(dir, "gate_vectors.bin", g, bytes, 0) && rv_write_file(dir, "down_features.bin", NULL, 0, bytes) &&
             rv_write_file(dir, "embeddings.bin", NULL, 0, (size_t)E * 4) && rv_write_file(dir, "tokenizer.gguf", NULL, 0, 0);
    char *js = vx_index_dump(&ix);
    ok = ok && js && rv_write_file(dir, "index.json", js, strlen(js), 0);
    free(js), free(g), free(w);
    vx_index_free(&ix);
    return ok ? 0 : -1;
}

#endif
