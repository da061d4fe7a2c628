/* gemm.c - the GEMM's per-level kind tables and the activation tile builders
 * (plain C: a tile is built once per matmul and read by every weight panel,
 * so its cost is one pass over the activations). */
#include "cpu/kern/gemm/gemm.h"
#include "core/env.h"
#include "cpu/kern/gemm/gemm_layout.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const mf_gemm_kind *g_tab[MF_CPU_LEVELS][MF_TYPE_COUNT];
static const mf_gemm_kind *g_amx[2][MF_TYPE_COUNT];    /* [emulated][type] */
static const mf_gemm_kind *g_amx_mt[2][MF_TYPE_COUNT]; /* the tile-mins variants */
static const mf_gemm_kind *g_amxbf[2][MF_TYPE_COUNT]; /* the bf16 kinds */
static int g_bf16_off;                                 /* MINFER_AMX_BF16 "" or "0" */
static int g_mins_tile;                                /* MINFER_AMX_MINS=tile */
static int g_emulate;                                  /* MINFER_AMX_EMULATE=1 (tests only) */
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
    if (g_supported == MF_CPU_AVX512_VNNI) {
        mf_gemm_reg_amxemu(g_amx[1], g_amx_mt[1]);
        if (mf_amx_init()) mf_gemm_reg_amx(g_amx[0], g_amx_mt[0]);
        mf_gemm_reg_amxemu_bf16(g_amxbf[1]);
        if (mf_amx_bf16_init()) mf_gemm_reg_amx_bf16(g_amxbf[0]);
    }
    g_off = mf_env_on("MINFER_NO_GEMM");
    const char *e = getenv("MINFER_AMX_MINS");
    g_mins_tile = e && !strcmp(e, "tile");
    g_bf16_off = mf_env_off("MINFER_AMX_BF16"); /* amx.c's reading */
    e = getenv("MINFER_AMX_EMULATE");
    g_emulate = e && !strcmp(e, "1") && g_supported == MF_CPU_AVX512_VNNI;
}

const mf_gemm_kind *mf_gemm_get_level(mf_type type, mf_cpu_level level) {
    pthread_once(&g_once, build);
    if ((int)type < 0 || type >= MF_TYPE_COUNT || (int)level < 0 || level > g_supported) return NULL;
    return g_tab[level][type];
}

const mf_gemm_kind *mf_gemm_get_amx(mf_type type, int emulated) {
    pthread_once(&g_once, build);
    if ((int)type < 0 || type >= MF_TYPE_COUNT) return NULL;
    return g_amx[emulated != 0][type];
}

const mf_gemm_kind *mf_gemm_get_amx_mt(mf_type type, int emulated) {
    pthread_once(&g_once, build);
    if ((int)type < 0 || type >= MF_TYPE_COUNT) return NULL;
    return g_amx_mt[emulated != 0][type];
}

const mf_gemm_kind *mf_gemm_get_amx_bf16(mf_type type, int emulated) {
    pthread_once(&g_once, build);
    if ((int)type < 0 || type >= MF_TYPE_COUNT) return NULL;
    return g_amxbf[emulated != 0][type];
}

const mf_gemm_kind *mf_gemm_get(mf_type type) {
    const mf_cpu_level lv = mf_cpu_init();
    pthread_once(&g_once, build);
    if (g_off) return NULL;
    /* at the VNNI level the tile kernels replace the VNNI ones where they
     * exist; MINFER_AMX_EMULATE=1 puts the C model of the tiles there instead,
     * so the tests drive the matmul's AMX path on CPUs without AMX (slow:
     * never for real work) */
    const int em = g_emulate;
    if (lv == MF_CPU_AVX512_VNNI && (int)type >= 0 && type < MF_TYPE_COUNT && g_amx[em][type] &&
        (em || mf_amx_enabled()))
        return g_mins_tile && g_amx_mt[em][type] ? g_amx_mt[em][type] : g_amx[em][type];
    if (lv == MF_CPU_AVX512_VNNI && (int)type >= 0 && type < MF_TYPE_COUNT && g_amxbf[em][type] &&
        (em ? !g_bf16_off : mf_amx_bf16_enabled()))
        return g_amxbf[em][type];
    return mf_gemm_get_level(type, lv);
}

const mf_gemm_kind *mf_gemm_pick(mf_type type, int rows) {
    const mf_gemm_kind *g = mf_gemm_get(type);
    if (g && rows < g->min_rows && g->act >= MF_GEMM_ACT_Q8K_AMX) return mf_gemm_get_level(type, mf_cpu_init());
    return g;
}

void mf_gemm_fence(void) { _mm_sfence(); }

mf_type mf_gemm_act_type(mf_gemm_act act) {
    switch (act) {
    case MF_GEMM_ACT_Q8K:
    case MF_GEMM_ACT_Q8K_AMX: return MF_TYPE_Q8_K;
    case MF_GEMM_ACT_Q80:
    case MF_GEMM_ACT_Q80_AMX: return MF_TYPE_Q8_0;
    case MF_GEMM_ACT_BF16:
    case MF_GEMM_ACT_BF16_AMX: return MF_TYPE_BF16;
    default: return MF_TYPE_F16;
    }
}

size_t mf_gemm_tile_bytes(mf_gemm_act act, int nt, int64_t k) {
    switch (act) {
    case MF_GEMM_ACT_Q8K: return (size_t)(k / QK_K) * MF_T8K_WORDS * 4 * (size_t)nt;
    case MF_GEMM_ACT_Q80: return (size_t)(k / QK8_0) * MF_T80_WORDS * 4 * (size_t)nt;
    case MF_GEMM_ACT_Q8K_AMX: return mf_gemm_tile_bytes(MF_GEMM_ACT_Q8K, nt, k) + (size_t)(k / QK_K) * MF_TAMX_SB_BYTES;
    case MF_GEMM_ACT_Q80_AMX: return mf_gemm_tile_bytes(MF_GEMM_ACT_Q80, nt, k) + (size_t)(k / QK8_0) * MF_TAMX_B_BYTES;
    case MF_GEMM_ACT_BF16_AMX: return (size_t)mf_gemm_bf_steps(k) * MF_TBF_BYTES;
    case MF_GEMM_ACT_F16HL_AMX: return (size_t)mf_gemm_bf_steps(k) * MF_TBF_BYTES * 2;
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
        for (int j = 0; j < 8; j++) {
            int s32 = 0;
            for (int i = 0; i < 32; i++) s32 += b->qs[32 * j + i];
            put_word(tile, e0 + MF_T8K_N128 + (size_t)j, nt, t, (uint32_t)(-128 * s32));
        }
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

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* F16 / BF16 tile: nt converted rows (zero past ntok) of 16-bit values into
 * column entries of nt values in the F16 (L = 64) or BF16 (L = 32) column
 * order. 8 tokens x 8 columns at a time through an 8 x 8 transpose of
 * 16-bit values (SSE2, part of every x86-64). */
static void tile_16(const mf_fp16 *y, int nt, int64_t k, uint8_t *tile, const int L) {
    int64_t start[64]; /* first position of lane l */
    mf_gemm_lane_starts(k, L, start);
    int64_t c8 = 0;
#if defined(__SSE2__)
    if (nt % 8 == 0) {
        c8 = k / 8 * 8;
        for (int t0 = 0; t0 < nt; t0 += 8)
            for (int64_t c0 = 0; c0 < c8; c0 += 8) {
                __m128i r[8], a[8], b[8];
                for (int i = 0; i < 8; i++) r[i] = _mm_loadu_si128((const __m128i *)(y + (size_t)(t0 + i) * (size_t)k + c0));
                for (int i = 0; i < 8; i += 2) a[i] = _mm_unpacklo_epi16(r[i], r[i + 1]), a[i + 1] = _mm_unpackhi_epi16(r[i], r[i + 1]);
                for (int i = 0; i < 8; i += 4) {
                    b[i] = _mm_unpacklo_epi32(a[i], a[i + 2]), b[i + 1] = _mm_unpackhi_epi32(a[i], a[i + 2]);
                    b[i + 2] = _mm_unpacklo_epi32(a[i + 1], a[i + 3]), b[i + 3] = _mm_unpackhi_epi32(a[i + 1], a[i + 3]);
                }
                /* b[0..3]: columns (0,1), (2,3), (4,5), (6,7) of tokens 0-3; b[4..7] of tokens 4-7 */
                for (int i = 0; i < 4; i++) {
                    const __m128i lo = _mm_unpacklo_epi64(b[i], b[i + 4]), hi = _mm_unpackhi_epi64(b[i], b[i + 4]);
                    const int64_t ca = c0 + 2 * i, cb = ca + 1;
                    _mm_storeu_si128((__m128i *)(tile + ((size_t)(start[ca % L] + ca / L) * (size_t)nt + (size_t)t0) * 2), lo);
                    _mm_storeu_si128((__m128i *)(tile + ((size_t)(start[cb % L] + cb / L) * (size_t)nt + (size_t)t0) * 2), hi);
                }
            }
    }
#endif
    for (int t = 0; t < nt; t++)
        for (int64_t c = c8; c < k; c++)
            memcpy(tile + ((size_t)(start[c % L] + c / L) * (size_t)nt + (size_t)t) * 2, &y[(size_t)t * (size_t)k + c], 2);
}

/* The bf16 tiles (gemm_layout.h): token t's columns of step s at
 * tile + (s * planes + plane) * 1 KiB + 64 t (the tile was zeroed). */
static void tile_bf(int hl, const float *x, size_t ld, int ntok, int64_t k, mf_from_float_fn from_float, uint8_t *tmp,
                    uint8_t *tile) {
    const int planes = hl ? 2 : 1;
    for (int t = 0; t < ntok; t++) {
        from_float(x + (size_t)t * ld, tmp, k);
        const uint16_t *h = (const uint16_t *)tmp;
        for (int64_t c = 0; c < k; c++) {
            uint8_t *p = tile + (size_t)(c / MF_TBF_COLS * planes) * MF_TBF_BYTES + (size_t)t * 64 + (size_t)(c % MF_TBF_COLS) * 2;
            if (!hl) {
                memcpy(p, &h[c], 2);
                continue;
            }
            uint16_t hi, lo;
            mf_bf16_split(mf_fp16_to_fp32(h[c]), &hi, &lo);
            memcpy(p, &hi, 2);
            memcpy(p + MF_TBF_BYTES, &lo, 2);
        }
    }
}

size_t mf_gemm_tile_tmp_bytes(mf_gemm_act act, int nt, int64_t k) {
    const size_t row = mf_row_size(mf_gemm_act_type(act), k);
    return act == MF_GEMM_ACT_F16 || act == MF_GEMM_ACT_BF16 ? row * (size_t)nt : row;
}

void mf_gemm_tile_build(mf_gemm_act act, int nt, const float *x, size_t ld, int ntok, int64_t k,
                        mf_from_float_fn from_float, uint8_t *tmp, uint8_t *tile) {
    if (act == MF_GEMM_ACT_F16 || act == MF_GEMM_ACT_BF16) { /* both 16-bit: the same transposes */
        const size_t row = (size_t)k * 2;
        for (int t = 0; t < ntok; t++) from_float(x + (size_t)t * ld, tmp + (size_t)t * row, k);
        memset(tmp + (size_t)ntok * row, 0, (size_t)(nt - ntok) * row);
        tile_16((const mf_fp16 *)tmp, nt, k, tile, act == MF_GEMM_ACT_F16 ? 64 : 32);
        return;
    }
    if (ntok < nt || act == MF_GEMM_ACT_BF16_AMX || act == MF_GEMM_ACT_F16HL_AMX)
        memset(tile, 0, mf_gemm_tile_bytes(act, nt, k));
    if (act == MF_GEMM_ACT_BF16_AMX || act == MF_GEMM_ACT_F16HL_AMX) {
        tile_bf(act == MF_GEMM_ACT_F16HL_AMX, x, ld, ntok, k, from_float, tmp, tile);
        return;
    }
    const int k8 = act == MF_GEMM_ACT_Q8K || act == MF_GEMM_ACT_Q8K_AMX;
    /* the token-major quants of the AMX layouts, after the plain tile */
    uint8_t *amx = act == MF_GEMM_ACT_Q8K_AMX ? tile + mf_gemm_tile_bytes(MF_GEMM_ACT_Q8K, nt, k)
                   : act == MF_GEMM_ACT_Q80_AMX ? tile + mf_gemm_tile_bytes(MF_GEMM_ACT_Q80, nt, k)
                                                : NULL;
    for (int t = 0; t < ntok; t++) {
        from_float(x + (size_t)t * ld, tmp, k);
        if (k8) tile_q8k((const block_q8_K *)tmp, t, nt, k, tile);
        else tile_q80((const block_q8_0 *)tmp, t, nt, k, tile);
        if (amx && k8)
            for (int64_t sb = 0; sb < k / QK_K; sb++)
                memcpy(amx + (size_t)sb * MF_TAMX_SB_BYTES + (size_t)t * 256, ((const block_q8_K *)tmp)[sb].qs, 256);
        else if (amx)
            for (int64_t b = 0, nb = k / QK8_0; b < nb; b++)
                memcpy(amx + (size_t)mf_gemm_lane_pos(b, nb) * MF_TAMX_B_BYTES + (size_t)t * 32,
                       ((const block_q8_0 *)tmp)[b].qs, 32);
    }
}
