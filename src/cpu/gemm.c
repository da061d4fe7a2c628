/* gemm.c - the GEMM's per-level kind tables and the activation tile builders
 * (plain C: a tile is built once per matmul and read by every weight panel,
 * so its cost is one pass over the activations). */
#include "cpu/gemm.h"
#include "cpu/gemm_layout.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const mf_gemm_kind *g_tab[MF_CPU_LEVELS][MF_TYPE_COUNT];
static mf_cpu_level g_supported;
static int g_off; /* MINFER_NO_GEMM */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

/* Each level starts from the one below and overrides what it implements; a
 * level's hooks run only when the CPU has it (they are compiled for it). */
static void build(void) {
    g_supported = mf_cpu_level_supported();
    for (int lv = MF_CPU_AVX2; lv <= (int)g_supported; lv++) {
        memcpy(g_tab[lv], g_tab[lv - 1], sizeof g_tab[lv]);
        if (lv == MF_CPU_AVX2) mf_gemm_reg_avx2(g_tab[lv]);
        else if (lv == MF_CPU_AVX512) mf_gemm_reg_avx512(g_tab[lv]);
        else if (lv == MF_CPU_AVX512_VNNI) mf_gemm_reg_vnni_avx512(g_tab[lv]);
    }
    const char *e = getenv("MINFER_NO_GEMM");
    g_off = e && *e && strcmp(e, "0") != 0;
}

const mf_gemm_kind *mf_gemm_get_level(mf_type type, mf_cpu_level level) {
    pthread_once(&g_once, build);
    if ((int)type < 0 || type >= MF_TYPE_COUNT || (int)level < 0 || level > g_supported) return NULL;
    return g_tab[level][type];
}

const mf_gemm_kind *mf_gemm_get(mf_type type) {
    const mf_cpu_level lv = mf_cpu_init();
    pthread_once(&g_once, build);
    return g_off ? NULL : mf_gemm_get_level(type, lv);
}

mf_type mf_gemm_act_type(mf_gemm_act act) {
    switch (act) {
    case MF_GEMM_ACT_Q8K: return MF_TYPE_Q8_K;
    case MF_GEMM_ACT_Q80: return MF_TYPE_Q8_0;
    default: return MF_TYPE_F16;
    }
}

size_t mf_gemm_tile_bytes(mf_gemm_act act, int nt, int64_t k) {
    switch (act) {
    case MF_GEMM_ACT_Q8K: return (size_t)(k / QK_K) * MF_T8K_WORDS * 4 * (size_t)nt;
    case MF_GEMM_ACT_Q80: return (size_t)(k / QK8_0) * MF_T80_WORDS * 4 * (size_t)nt;
    default: return (size_t)k * 2 * (size_t)nt;
    }
}

static inline void put_word(uint8_t *tile, size_t entry, int nt, int t, uint32_t v) {
    memcpy(tile + (entry * (size_t)nt + (size_t)t) * 4, &v, 4);
}

static inline uint32_t pair16(int a, int b) { return (uint32_t)(uint16_t)(int16_t)a | (uint32_t)(uint16_t)(int16_t)b << 16; }

static void tile_q8k(const block_q8_K *y, int t, int nt, int64_t k, uint8_t *tile) {
    const size_t per_sb = MF_T8K_WORDS;
    for (int64_t sb = 0; sb < k / QK_K; sb++) {
        const block_q8_K *b = &y[sb];
        const size_t e0 = (size_t)sb * per_sb;
        for (int s = 0; s < 64; s++) {
            uint32_t w;
            memcpy(&w, b->qs + 4 * s, 4);
            put_word(tile, e0 + MF_T8K_QS + (size_t)s, nt, t, w);
        }
        uint32_t dbits;
        memcpy(&dbits, &b->d, 4);
        put_word(tile, e0 + MF_T8K_D, nt, t, dbits);
        for (int m = 0; m < 4; m++)
            put_word(tile, e0 + MF_T8K_BS32P + (size_t)m, nt, t,
                     pair16(b->bsums[4 * m] + b->bsums[4 * m + 1], b->bsums[4 * m + 2] + b->bsums[4 * m + 3]));
        for (int g = 0; g < 16; g++) put_word(tile, e0 + MF_T8K_N16 + (size_t)g, nt, t, (uint32_t)(-16 * b->bsums[g]));
        for (int u = 0; u < 32; u++) {
            int s8 = 0;
            for (int i = 0; i < 8; i++) s8 += b->qs[8 * u + i];
            put_word(tile, e0 + MF_T8K_N32 + (size_t)u, nt, t, (uint32_t)(-32 * s8));
        }
        for (int m = 0; m < 8; m++) put_word(tile, e0 + MF_T8K_BSP + (size_t)m, nt, t, pair16(b->bsums[2 * m], b->bsums[2 * m + 1]));
    }
}

static void tile_q80(const block_q8_0 *y, int t, int nt, int64_t k, uint8_t *tile) {
    const int64_t nb = k / QK8_0;
    for (int64_t b = 0; b < nb; b++) {
        const size_t e0 = (size_t)mf_gemm_lane_pos(b, nb) * MF_T80_WORDS;
        int sum = 0;
        for (int s = 0; s < 8; s++) {
            uint32_t w;
            memcpy(&w, y[b].qs + 4 * s, 4);
            put_word(tile, e0 + MF_T80_QS + (size_t)s, nt, t, w);
        }
        for (int i = 0; i < QK8_0; i++) sum += y[b].qs[i];
        const float d = mf_fp16_to_fp32(y[b].d);
        uint32_t dbits;
        memcpy(&dbits, &d, 4);
        put_word(tile, e0 + MF_T80_D, nt, t, dbits);
        put_word(tile, e0 + MF_T80_NEG, nt, t, (uint32_t)-sum);
    }
}

static void tile_f16(const mf_fp16 *y, int t, int nt, int64_t k, uint8_t *tile) {
    int64_t start[64]; /* first position of lane l */
    int64_t pos = 0;
    for (int kk = 0; kk < 64; kk++) {
        const int l = mf_gemm_rev6(kk);
        start[l] = pos;
        pos += mf_gemm_lane_count(l, k);
    }
    for (int64_t c = 0; c < k; c++) memcpy(tile + ((size_t)(start[c % 64] + c / 64) * (size_t)nt + (size_t)t) * 2, &y[c], 2);
}

void mf_gemm_tile_build(mf_gemm_act act, int nt, const float *x, size_t ld, int ntok, int64_t k,
                        mf_from_float_fn from_float, uint8_t *tmp, uint8_t *tile) {
    if (ntok < nt) memset(tile, 0, mf_gemm_tile_bytes(act, nt, k));
    for (int t = 0; t < ntok; t++) {
        from_float(x + (size_t)t * ld, tmp, k);
        switch (act) {
        case MF_GEMM_ACT_Q8K: tile_q8k((const block_q8_K *)tmp, t, nt, k, tile); break;
        case MF_GEMM_ACT_Q80: tile_q80((const block_q8_0 *)tmp, t, nt, k, tile); break;
        default: tile_f16((const mf_fp16 *)tmp, t, nt, k, tile); break;
        }
    }
}
