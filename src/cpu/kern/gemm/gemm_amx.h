/* gemm_amx.h - the prefill GEMM on AMX int8 tiles, written once and compiled
 * twice: gemm_amx.c with the tile instructions, gemm_amxemu_avx512.c with a
 * C model of them (TL_* below), so the data flow is tested on every AVX-512
 * VNNI CPU and the instructions wherever the CPU has AMX.
 *
 * A tile multiply of A = 16 tokens x K activation bytes (token-major: the
 * AMX part of the tile, gemm_layout.h) with B = K/4 panel records (16 weight
 * rows x 4 bytes per step, the VNNI panel's record format) gives C[token][row]:
 * exact int32 sums, a row of C one vector with the weight rows in its lanes,
 * the layout of the VNNI kernels' accumulators. From there the AVX-512 code
 * takes the VNNI kernels' float steps in the same order, so results are
 * bitwise those of the VNNI GEMM and of vec_dot (integer sums are exact in
 * any order; the float expressions are unchanged).
 *   K-quants: levels pre-multiplied by their unit scale (folded panels,
 *     below), a super-block's 256 columns summed inside the tiles, one store
 *     per super-block and token tile; one call takes up to AMX_TB token
 *     tiles so each B tile is loaded once per super-block from L2 and
 *     reused from L1 (gemm_amx_kq.h); mins and float terms as in
 *     kq_kernel, the mins optionally as a third tile plane.
 *   32-element blocks (Q4_0, Q5_0, Q8_0, IQ4_NL): levels minus their offset
 *     (signed), one multiply per block (its float scale needs the block's
 *     own sum), 16 x 16 x 32 per store.
 * Measured figures and why AMX is off by default: docs/PERFORMANCE.md. */
#ifndef TL_CONFIG
#error "define the TL_* tile operations before including gemm_amx.h"
#endif

/* benchmarks only (bench_amx_vec.c): time the tile half alone */
#ifndef AMX_SKIP_VECTOR
#define AMX_SKIP_VECTOR 0
#endif

#define MF_GEMM_W 512
#define MF_GEMM_VNNI 1
#define MF_GEMM_PACK_ONLY 1
/* the packers of types without a tile kernel stay unused here */
#pragma GCC diagnostic ignored "-Wunused-function"
#include <stdlib.h>
#include "cpu/kern/gemm/gemm_kern.h"

/* ---- tile configurations ---- */

/* The 64-byte operand of ldtilecfg (palette 1). Static tables: the
 * intrinsic's asm names only the first 8 bytes as its input, so a local
 * struct could be stored only partly before it. */
typedef struct amx_cfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_cfg;
_Static_assert(sizeof(amx_cfg) == 64, "ldtilecfg reads 64 bytes");

#define AMX_CFG(KB)                                                                                      \
    {1, 0, {0}, {64, 64, KB, KB, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {16, 16, 16, 16, KB / 4, KB / 4, 0, 0, \
                                                                       0, 0, 0, 0, 0, 0, 0, 0}}
/* folded K-quants: every tile 16 rows x 64 bytes */
static const amx_cfg g_cfg64 __attribute__((aligned(64))) = {
    1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64, 0, 0, 0, 0, 0, 0, 0, 0}, {16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0}};
/* 32-element blocks: C 16 x 64 (tmm0-1), A 16 x 32 (tmm2-3), B 8 x 64 (tmm4-5) */
static const amx_cfg g_cfg32 __attribute__((aligned(64))) = AMX_CFG(32);

/* The configuration is per thread and stays loaded between calls: load it
 * only when a kernel needs the other shape. */
static _Thread_local int tl_kb;
AI void amx_config(const int KB) {
    if (tl_kb == KB) return;
    TL_CONFIG(KB == 64 ? &g_cfg64 : &g_cfg32);
    tl_kb = KB;
}

/* Unit u into C set S (0 or 1): A from a (stride as), B from b (stride 64),
 * C stored to cb. */
#define AMX_UNIT(S, SIGNED, a, as, b, cb)                                                                 \
    do {                                                                                                 \
        if (S == 0) {                                                                                    \
            TL_LOAD(2, a, as);                                                                  \
            TL_LOAD(4, b, REC);                                                                  \
            TL_ZERO(0);                                           \
            if (SIGNED) TL_DPBSSD(0, 2, 4);                                                              \
            else TL_DPBSUD(0, 2, 4);                                                                     \
            TL_STORE(0, cb, 64);                                                                         \
        } else {                                                                                         \
            TL_LOAD(3, a, as);                                                                  \
            TL_LOAD(5, b, REC);                                                                  \
            TL_ZERO(1);                                           \
            if (SIGNED) TL_DPBSSD(1, 3, 5);                                                              \
            else TL_DPBSUD(1, 3, 5);                                                                     \
            TL_STORE(1, cb, 64);                                                                         \
        }                                                                                                \
    } while (0)

/* ======================= K-quant kernel ======================= */

/* K-quant panels are folded: each level times its unit's scale (minus the
 * type's level offset first) is an int16 w, stored as two planes of 64 step
 * records per super-block, lo = w & 255 (unsigned) and hi = w >> 8 (signed),
 * so sum(w * a) = sum(lo * a) + 256 * sum(hi * a) and a super-block's
 * integer sum accumulates in the tiles over all its 256 columns: four K=64
 * multiplies per plane, no stores between them (a tile store read back by
 * vector loads costs about as much as the multiply it follows: the first
 * design stored every 32-column unit and ran no faster than VNNI).
 * |w| <= 31*63 (Q5_K), 32*128 (Q6_K), 127*32 (IQ4_XS): int16. Q2_K's
 * w <= 3*15 needs only the lo plane. Then per super-block
 * [min records][d record][dmin record], as the VNNI panel has them. */
AI size_t amx_sbf(const int NPL, const int NMIN) { return (size_t)REC * (64 * NPL + NMIN + 1 + (NMIN > 0)); }

/* The VNNI panel (sbv bytes per super-block) rewritten in place as the
 * folded one: packed at the end of the buffer (the larger of the two sizes),
 * each super-block copied out before its folded form overwrites anything. */
AI void amx_fold(uint8_t *panel, int64_t k, const size_t SBV, const int NSC, const int OFF, const int NPL,
                 const int NMIN, const size_t MN_V, const size_t D_V) {
    const int64_t nsb = k / QK_K;
    const size_t SBF = amx_sbf(NPL, NMIN), big = SBF > SBV ? SBF : SBV;
    const size_t src0 = (size_t)nsb * (big - SBV);
    const int per_sc = 64 / NSC; /* steps per scale record */
    __m512i idx[2]; /* int16 lane j of rows 8h..8h+7: the scale word of row 8h + j / 4 */
    for (int h = 0; h < 2; h++) {
        _Alignas(64) int16_t ix[32];
        for (int j = 0; j < 32; j++) ix[j] = (int16_t)(2 * (8 * h + j / 4));
        idx[h] = _mm512_load_si512(ix);
    }
    _Alignas(64) uint8_t v[96 * REC];
    for (int64_t sb = 0; sb < nsb; sb++) {
        memcpy(v, panel + src0 + (size_t)sb * SBV, SBV);
        uint8_t *o = panel + (size_t)sb * SBF;
        for (int s = 0; s < 64; s++) {
            const __m512i sc = _mm512_load_si512(v + (size_t)(64 + s / per_sc) * REC);
            for (int h = 0; h < 2; h++) {
                const __m512i lv = _mm512_sub_epi16(_mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(v + (size_t)s * REC + 32 * h))),
                                                    _mm512_set1_epi16((short)OFF));
                const __m512i w = _mm512_mullo_epi16(lv, _mm512_permutexvar_epi16(idx[h], sc));
                _mm256_storeu_si256((__m256i *)(o + (size_t)s * REC + 32 * h), _mm512_cvtepi16_epi8(w));
                if (NPL == 2)
                    _mm256_storeu_si256((__m256i *)(o + (size_t)(64 + s) * REC + 32 * h), _mm512_cvtepi16_epi8(_mm512_srai_epi16(w, 8)));
            }
        }
        memcpy(o + (size_t)64 * NPL * REC, v + MN_V, (size_t)NMIN * REC);
        memcpy(o + (size_t)(64 * NPL + NMIN) * REC, v + D_V, (size_t)(1 + (NMIN > 0)) * REC);
    }
}

#include "cpu/kern/gemm/gemm_amx_kq.h"

/* Per type: the VNNI packer, then the fold. (VNNI layout: [64 levels][NSC
 * scales][pre][mins][d][dmin]; the pre records are not needed here.) */
#define AMX_KQ(NAME, SBV, NSC, OFF, NPL, NMIN, MN_V, D_V, MIN_T)                                               \
    static size_t amx_panel_bytes_##NAME(int64_t k) {                                                          \
        const size_t f = amx_sbf(NPL, NMIN);                                                                   \
        return (size_t)(k / QK_K) * (f > (SBV) ? f : (SBV));                                                   \
    }                                                                                                          \
    static void amx_pack_##NAME(const uint8_t *w, size_t rb, int nrows, int64_t k, uint8_t *panel) {           \
        const size_t f = amx_sbf(NPL, NMIN), big = f > (SBV) ? f : (SBV);                                      \
        pack_##NAME(w, rb, nrows, k, panel + (size_t)(k / QK_K) * (big - (SBV)));                              \
        amx_fold(panel, k, SBV, NSC, OFF, NPL, NMIN, MN_V, D_V);                                               \
    }                                                                                                          \
    static void amx_kern_##NAME(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out, \
                                size_t ldo, int nrows, int ntok) {                                             \
        amx_kq(panels, pb, tile, 0, 1, k, out, ldo, nrows, ntok, NPL, NMIN, MIN_T, 0);                         \
    }                                                                                                          \
    static void amx_tiles_##NAME(const uint8_t *panels, size_t pb, const uint8_t *tiles, size_t tb, int ntiles, \
                                 int64_t k, float *out, size_t ldo, int nrows, int ntok) {                     \
        amx_kq_all(panels, pb, tiles, tb, ntiles, k, out, ldo, nrows, ntok, NPL, NMIN, MIN_T, 0);              \
    }
/* the tile-mins variant of a type with mins (gemm_amx_kq.h) */
#define AMX_KQ_MT(NAME, NPL, NMIN)                                                                             \
    static void amx_kern_mt_##NAME(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out, \
                                   size_t ldo, int nrows, int ntok) {                                          \
        amx_kq(panels, pb, tile, 0, 1, k, out, ldo, nrows, ntok, NPL, NMIN, 0, 1);                             \
    }                                                                                                          \
    static void amx_tiles_mt_##NAME(const uint8_t *panels, size_t pb, const uint8_t *tiles, size_t tb,         \
                                    int ntiles, int64_t k, float *out, size_t ldo, int nrows, int ntok) {      \
        amx_kq_all(panels, pb, tiles, tb, ntiles, k, out, ldo, nrows, ntok, NPL, NMIN, 0, 1);                  \
    }
AMX_KQ(q4k, Q4K_SB, 8, 0, 2, 4, (size_t)(64 + 8) * REC, (size_t)(64 + 8 + 4) * REC, MF_T8K_BS32P)
AMX_KQ(q5k, Q5K_SB, 8, 0, 2, 4, (size_t)(64 + 8 + Q5K_NPRE) * REC, (size_t)(64 + 8 + Q5K_NPRE + 4) * REC, MF_T8K_BS32P)
AMX_KQ(q6k, Q6K_SB, 16, 32, 2, 0, 0, (size_t)(64 + 16) * REC, 0)
AMX_KQ(q3k, Q3K_SB, 16, 4, 2, 0, 0, (size_t)(64 + 16 + Q3K_NPRE) * REC, 0)
AMX_KQ(q2k, Q2K_SB, 16, 0, 1, 8, (size_t)(64 + 16) * REC, (size_t)(64 + 16 + 8) * REC, MF_T8K_BSP)
AMX_KQ(iq4xs, IQ4XS_SB, 8, 128, 2, 0, 0, (size_t)(64 + 8) * REC, 0)

/* ======================= 32-element block kernel ======================= */

/* Blocks in lane order (gemm.h): lane l's blocks into one float chain per
 * (row, token), then the lanes folded as mf_lanes_fold does. SUMI_FIRST as
 * in b32_kernel. */
AI void amx_b32(const uint8_t *panel, const uint8_t *tile, int64_t k, float *out, size_t ldo, int nrows, int ntok,
                const int SUMI_FIRST) {
    const int64_t nb = k / 32;
    const size_t tb = (size_t)MF_T80_WORDS * 4 * MF_TAMX_NT;
    const uint8_t *a0 = tile + (size_t)nb * tb;
    _Alignas(64) float lanes[8][MF_TAMX_NT * 16];
    _Alignas(64) int32_t cb[2][16 * 16];
    amx_config(32);
    int64_t p = 0;
    for (int l = 0; l < 8; l++) {
        vf acc[MF_TAMX_NT];
#pragma GCC unroll 16
        for (int t = 0; t < MF_TAMX_NT; t++) acc[t] = VF_ZERO();
        const int64_t n = l < nb ? (nb - l + 7) / 8 : 0;
        if (n) AMX_UNIT(0, 1, a0 + (size_t)p * MF_TAMX_B_BYTES, 32, panel + (size_t)p * B32_BYTES, cb[0]);
        for (int64_t e = 0; e < n; e++, p++) {
            if (e + 1 < n) {
                const uint8_t *an = a0 + (size_t)(p + 1) * MF_TAMX_B_BYTES, *bn = panel + (size_t)(p + 1) * B32_BYTES;
                if (e % 2) AMX_UNIT(0, 1, an, 32, bn, cb[0]);
                else AMX_UNIT(1, 1, an, 32, bn, cb[1]);
            }
            const int32_t *c = cb[e % 2];
            const vf dx = VF_LOAD((const float *)(panel + (size_t)p * B32_BYTES + 8 * REC));
            const uint8_t *ts = tile + (size_t)p * tb;
#pragma GCC unroll 16
            for (int t = 0; t < MF_TAMX_NT; t++) {
                const vf dy = VF_BCAST(ts + ((size_t)MF_T80_D * MF_TAMX_NT + t) * 4);
                const vf sf = VF_CVT(VI_LOAD(c + 16 * t));
                acc[t] = VF_ADD(acc[t], SUMI_FIRST ? VF_MUL(VF_MUL(sf, dx), dy) : VF_MUL(VF_MUL(dx, dy), sf));
            }
        }
#pragma GCC unroll 16
        for (int t = 0; t < MF_TAMX_NT; t++) VF_STORE(&lanes[l][(size_t)t * 16], acc[t]);
    }
    for (int h = 4; h >= 1; h /= 2)
        for (int l = 0; l < h; l++)
            for (int i = 0; i < MF_TAMX_NT; i++)
                VF_STORE(&lanes[l][(size_t)i * 16], VF_ADD(VF_LOAD(&lanes[l][(size_t)i * 16]), VF_LOAD(&lanes[l + h][(size_t)i * 16])));
    store_rows(out, ldo, lanes[0], 1, MF_TAMX_NT, 0, nrows, ntok);
}

/* ======================= panels ======================= */

/* Levels minus `off` in place (mod 256), the steps [0, nsteps) of a record
 * run: the signed levels TDPBSSD reads. */
static void amx_sub_levels(uint8_t *rec, int nsteps, int off) {
    const __m512i o = _mm512_set1_epi8((char)off);
    for (int s = 0; s < nsteps; s++) _mm512_storeu_si512(rec + (size_t)s * REC, _mm512_sub_epi8(_mm512_loadu_si512(rec + (size_t)s * REC), o));
}

/* 32-element blocks: the VNNI panel with levels minus their offset */
#define AMX_B32(NAME, OFF, SUMI_FIRST)                                                                          \
    static void amx_pack_##NAME(const uint8_t *w, size_t rb, int n, int64_t k, uint8_t *p) {                    \
        pack_##NAME(w, rb, n, k, p);                                                                            \
        for (int64_t b = 0; b < k / 32; b++) amx_sub_levels(p + (size_t)b * B32_BYTES, 8, OFF);                 \
    }                                                                                                           \
    static void amx_kern_##NAME(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out,  \
                                size_t ldo, int nrows, int ntok) {                                              \
        amx_b32(panels, tile, k, out, ldo, nrows, ntok, SUMI_FIRST);                                            \
    }
AMX_B32(q4_0, 8, 1)
AMX_B32(q5_0, 16, 0)
AMX_B32(q8_0, 128, 0)
AMX_B32(iq4_nl, 128, 0)

/* ======================= the kinds ======================= */

/* K-quants: two panels x up to AMX_TB token tiles per call (kernel_tiles;
 * kernel is the same code on one tile); 32-element blocks: one panel x one
 * tile. min_rows: below 16 tokens a tile is mostly padding, and the VNNI
 * kernel takes those batches (mf_gemm_pick). */
#define AMX_KIND(TNAME, NAME, ACT, KM, RPC, PB, KT, TPC)                                                         \
    static const mf_gemm_kind amx_kind_##NAME = {TNAME " " #RPC "x16 " AMX_LVL_NAME, ACT, MF_TAMX_NT, 16, RPC, KM, \
                                                 16, PB, amx_pack_##NAME, amx_kern_##NAME, NULL, KT, TPC};
#define AMX_KIND_KQ(TNAME, NAME) AMX_KIND(TNAME, NAME, MF_GEMM_ACT_Q8K_AMX, QK_K, 32, amx_panel_bytes_##NAME, amx_tiles_##NAME, AMX_TB)
AMX_KIND_KQ("q4_K", q4k)
AMX_KIND_KQ("q5_K", q5k)
AMX_KIND_KQ("q6_K", q6k)
AMX_KIND_KQ("q3_K", q3k)
AMX_KIND_KQ("q2_K", q2k)
AMX_KIND_KQ("iq4_xs", iq4xs)
AMX_KIND("q4_0", q4_0, MF_GEMM_ACT_Q80_AMX, 32, 16, panel_bytes_b32, NULL, 1)
AMX_KIND("q5_0", q5_0, MF_GEMM_ACT_Q80_AMX, 32, 16, panel_bytes_b32, NULL, 1)
AMX_KIND("q8_0", q8_0, MF_GEMM_ACT_Q80_AMX, 32, 16, panel_bytes_b32, NULL, 1)
AMX_KIND("iq4_nl", iq4_nl, MF_GEMM_ACT_Q80_AMX, 32, 16, panel_bytes_b32, NULL, 1)

/* the tile-mins variants: same panels and pack, mins as a third tile plane */
AMX_KQ_MT(q4k, 2, 4)
AMX_KQ_MT(q5k, 2, 4)
AMX_KQ_MT(q2k, 1, 8)
#define AMX_KIND_MT(TNAME, NAME)                                                                                   \
    static const mf_gemm_kind amx_kind_mt_##NAME = {TNAME " 32x16 " AMX_LVL_NAME " tile mins", MF_GEMM_ACT_Q8K_AMX, \
                                                    MF_TAMX_NT, 16, 32, QK_K, 16, amx_panel_bytes_##NAME,          \
                                                    amx_pack_##NAME, amx_kern_mt_##NAME, NULL, amx_tiles_mt_##NAME,   \
                                                    AMX_TB};
AMX_KIND_MT("q4_K", q4k)
AMX_KIND_MT("q5_K", q5k)
AMX_KIND_MT("q2_K", q2k)

static void register_amx(const mf_gemm_kind **tab, const mf_gemm_kind **tab_mt) {
    const char *pf = getenv("MINFER_AMX_PF");
    if (pf && *pf >= '0' && *pf <= '2') amx_pf = *pf - '0';
    tab[MF_TYPE_Q4_K] = &amx_kind_q4k;
    tab[MF_TYPE_Q5_K] = &amx_kind_q5k;
    tab[MF_TYPE_Q6_K] = &amx_kind_q6k;
    tab[MF_TYPE_Q3_K] = &amx_kind_q3k;
    tab[MF_TYPE_Q2_K] = &amx_kind_q2k;
    tab[MF_TYPE_IQ4_XS] = &amx_kind_iq4xs;
    tab[MF_TYPE_Q4_0] = &amx_kind_q4_0;
    tab[MF_TYPE_Q5_0] = &amx_kind_q5_0;
    tab[MF_TYPE_Q8_0] = &amx_kind_q8_0;
    tab[MF_TYPE_IQ4_NL] = &amx_kind_iq4_nl;
    tab_mt[MF_TYPE_Q4_K] = &amx_kind_mt_q4k;
    tab_mt[MF_TYPE_Q5_K] = &amx_kind_mt_q5k;
    tab_mt[MF_TYPE_Q2_K] = &amx_kind_mt_q2k;
}

/* ======================= bf16 kernel (TDPBF16PS) ======================= */

/* F16 and BF16 weights on the bf16 tiles: C[token][row] += A[token][2 cols]
 * . B[2 cols][row] per dword pair, 16 x 16 x 32 per multiply.
 *   BF16: the weights are bf16 already and the activations are the bf16
 *     conversion vec_dot reads, so the inputs are exactly vec_dot's and only
 *     the accumulation differs (f32 in the tiles, vec_dot's in double).
 *   F16: f16 -> bf16 alone would drop 3 of the 11 significand bits of the
 *     weights and of the f16 activations (2^-9 relative each); instead both
 *     are split into exact bf16 hi + lo planes (mf_bf16_split) and each step
 *     takes hi.hi + hi.lo + lo.hi, 3 multiplies: the dropped lo.lo is at
 *     most 2^-16 of |a b| per term. AMX bf16 does 16x the f32 FMA rate of
 *     AVX-512 per core, so 3x the tile work still leaves ~5x.
 * Bound against vec_dot (tests/cpu/test_gemm_amx_bf16.c checks it, on the
 * model and on real tiles alike). With S = sum |w_i x_i| over the row,
 * P = multiplies per step (1 or 3) and n = 17 + P ceil(k / 32) (a term
 * passes at most 16 FMAs of its partial sum, the pair add, then one add
 * into C per later multiply, each rounding by at most 2^-24 relative):
 *   |got - vec_dot| <= [F16: 2^-16 S] + (n + ceil(k / 64) + 8) 2^-24 S
 *                      + k 2^-125
 * where ceil(k / 64) + 8 covers vec_dot's own rounding (f32 lanes for F16,
 * double for BF16) and the last term the flushed subnormals. In practice
 * the error is far below the bound (the test prints the largest seen).
 * Each output element's operations (steps in order, products in order)
 * do not depend on the token tiles, panels or blocks of the call, so
 * results are the same at any thread count and batch split.
 * Blocking: two panels (32 rows) x two token tiles in tmm0-3 (C), A in
 * tmm4-5, B in tmm6-7; the columns in blocks of BF_KB steps across all the
 * call's token tiles, C stored and reloaded between blocks (a plain copy,
 * bitwise neutral), so a block's B tiles of both panels (16 KiB) are read
 * from L1 by every token tile of the call (the int8 kernel's lesson,
 * docs/PERFORMANCE.md). Not yet timed on AMX hardware. */
#define BF_KB(NPB) (NPB == 1 ? 8 : 4)

AI void amx_bf(const uint8_t *panels, size_t pb, const uint8_t *tiles, size_t tb, int ntiles, int64_t k, float *out,
               size_t ldo, int nrows, int ntok, const int NPA, const int NPB) {
    const int64_t ns = mf_gemm_bf_steps(k);
    const int np = nrows > 16 ? 2 : 1;
    /* products per step as (A plane, B plane) */
    static const int pa_of[3] = {0, 0, 1}, pb_of[3] = {0, 1, 0};
    const int nprod = NPA == 2 && NPB == 2 ? 3 : 1;
    _Alignas(64) float cb[AMX_TB][2][256];
    amx_config(64);
    for (int i0 = 0; i0 < ntiles; i0 += AMX_TB) {
        const int nti = ntiles - i0 < AMX_TB ? ntiles - i0 : AMX_TB;
        const uint8_t *tl = tiles + (size_t)i0 * tb;
        for (int64_t s0 = 0; s0 < ns; s0 += BF_KB(NPB)) {
            const int64_t s1 = s0 + BF_KB(NPB) < ns ? s0 + BF_KB(NPB) : ns;
            for (int j = 0; j < nti; j += 2) {
                const int nj = nti - j >= 2 ? 2 : 1;
                if (s0 == 0) {
                    TL_ZERO(0);
                    TL_ZERO(1);
                    TL_ZERO(2);
                    TL_ZERO(3);
                } else {
                    TL_LOAD(0, cb[j][0], 64);
                    if (np == 2) TL_LOAD(1, cb[j][1], 64);
                    if (nj == 2) {
                        TL_LOAD(2, cb[j + 1][0], 64);
                        if (np == 2) TL_LOAD(3, cb[j + 1][1], 64);
                    }
                }
                const uint8_t *a0 = tl + (size_t)j * tb, *a1 = a0 + tb;
                for (int64_t s = s0; s < s1; s++)
                    for (int q = 0; q < nprod; q++) {
                        const int pa = pa_of[q], pbq = pb_of[q];
                        if (q == 0 || pa != pa_of[q - 1]) {
                            TL_LOAD(4, a0 + (size_t)(s * NPA + pa) * MF_TBF_BYTES, 64);
                            if (nj == 2) TL_LOAD(5, a1 + (size_t)(s * NPA + pa) * MF_TBF_BYTES, 64);
                        }
                        if (q == 0 || pbq != pb_of[q - 1]) {
                            TL_LOAD(6, panels + (size_t)(s * NPB + pbq) * MF_TBF_BYTES, 64);
                            if (np == 2) TL_LOAD(7, panels + pb + (size_t)(s * NPB + pbq) * MF_TBF_BYTES, 64);
                        }
                        TL_DPBF16PS(0, 4, 6);
                        if (np == 2) TL_DPBF16PS(1, 4, 7);
                        if (nj == 2) {
                            TL_DPBF16PS(2, 5, 6);
                            if (np == 2) TL_DPBF16PS(3, 5, 7);
                        }
                    }
                TL_STORE(0, cb[j][0], 64);
                if (np == 2) TL_STORE(1, cb[j][1], 64);
                if (nj == 2) {
                    TL_STORE(2, cb[j + 1][0], 64);
                    if (np == 2) TL_STORE(3, cb[j + 1][1], 64);
                }
            }
        }
        /* C row t = token, column = weight row */
        for (int j = 0; j < nti; j++) {
            const int t0 = 16 * (i0 + j), nt = ntok - t0 < 16 ? ntok - t0 : 16;
            for (int t = 0; t < nt; t++)
                for (int p = 0; p < np; p++) {
                    const int nr = nrows - 16 * p < 16 ? nrows - 16 * p : 16;
                    memcpy(out + (size_t)(t0 + t) * ldo + 16 * p, &cb[j][p][16 * t], sizeof(float) * (size_t)nr);
                }
        }
    }
}

AI size_t amx_bf_panel_bytes(int64_t k, const int NPB) { return (size_t)mf_gemm_bf_steps(k) * MF_TBF_BYTES * (size_t)NPB; }
/* byte offset of column c, row r, plane p in a panel */
AI size_t amx_bf_off(int64_t c, int r, int p, const int NPB) {
    return (size_t)(c / MF_TBF_COLS * NPB + p) * MF_TBF_BYTES + (size_t)(c % MF_TBF_COLS / 2) * 64 + (size_t)r * 4 +
           (size_t)(c % 2) * 2;
}

/* BF16 rows in the file's layout: each value to its place (the x16 path
 * below is the usual one) */
static void amx_pack_bf16(const uint8_t *w, size_t rb, int nrows, int64_t k, uint8_t *panel) {
    memset(panel, 0, amx_bf_panel_bytes(k, 1));
    for (int r = 0; r < nrows; r++)
        for (int64_t c = 0; c < k; c++) memcpy(panel + amx_bf_off(c, r, 0, 1), w + (size_t)r * rb + 2 * (size_t)c, 2);
}
/* The BF16 x16 layout is the panel's: line w of a group is columns 2w,
 * 2w + 1 of its 16 rows, i.e. line w % 16 of step w / 16. */
static void amx_pack_x16_bf16(const uint8_t *x16, int64_t row0, int nrows, int64_t k, uint8_t *panel) {
    const size_t len = nrows ? (size_t)k / 2 * 64 : 0;
    if (len) memcpy(panel, x16 + (size_t)(row0 / 16) * 32 * (size_t)k, len);
    memset(panel + len, 0, amx_bf_panel_bytes(k, 1) - len);
}
/* F16 rows in the file's layout: hi and lo planes */
static void amx_pack_f16hl(const uint8_t *w, size_t rb, int nrows, int64_t k, uint8_t *panel) {
    memset(panel, 0, amx_bf_panel_bytes(k, 2));
    for (int r = 0; r < nrows; r++)
        for (int64_t c = 0; c < k; c++) {
            uint16_t h, hi, lo;
            memcpy(&h, w + (size_t)r * rb + 2 * (size_t)c, 2);
            mf_bf16_split(mf_fp16_to_fp32(h), &hi, &lo);
            memcpy(panel + amx_bf_off(c, r, 0, 2), &hi, 2);
            memcpy(panel + amx_bf_off(c, r, 1, 2), &lo, 2);
        }
}
/* 16 floats -> mf_bf16_split's hi and lo bits in the low halves of dwords */
AI void amx_split16(__m512 v, __m512i *hi, __m512i *lo) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i rne = _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                                             _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))));
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    *hi = _mm512_mask_or_epi32(_mm512_srli_epi32(rne, 16), nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
    const __m512 r = _mm512_sub_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(*hi, 16)));
    const __mmask16 fin = _mm512_cmp_ps_mask(_mm512_sub_ps(r, r), _mm512_setzero_ps(), _CMP_EQ_OQ);
    *lo = _mm512_maskz_srli_epi32(fin, _mm512_castps_si512(r), 16);
}
/* The F16 x16 layout: column c of the group's 16 rows is 16 halves at
 * byte 32 c, one vcvtph2ps; two columns make a line of each plane. */
static void amx_pack_x16_f16hl(const uint8_t *x16, int64_t row0, int nrows, int64_t k, uint8_t *panel) {
    memset(panel, 0, amx_bf_panel_bytes(k, 2));
    if (!nrows) return;
    const uint8_t *g = x16 + (size_t)(row0 / 16) * 32 * (size_t)k;
    for (int64_t c = 0; c < k; c += 2) {
        __m512i h0, l0, h1 = _mm512_setzero_si512(), l1 = _mm512_setzero_si512();
        amx_split16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + 32 * (size_t)c))), &h0, &l0);
        if (c + 1 < k) amx_split16(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + 32 * (size_t)(c + 1)))), &h1, &l1);
        _mm512_storeu_si512(panel + amx_bf_off(c, 0, 0, 2), _mm512_or_si512(h0, _mm512_slli_epi32(h1, 16)));
        _mm512_storeu_si512(panel + amx_bf_off(c, 0, 1, 2), _mm512_or_si512(l0, _mm512_slli_epi32(l1, 16)));
    }
}
static size_t amx_panel_bytes_bf16(int64_t k) { return amx_bf_panel_bytes(k, 1); }
static size_t amx_panel_bytes_f16hl(int64_t k) { return amx_bf_panel_bytes(k, 2); }
static void amx_kern_bf16(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out, size_t ldo,
                          int nrows, int ntok) {
    amx_bf(panels, pb, tile, 0, 1, k, out, ldo, nrows, ntok, 1, 1);
}
static void amx_tiles_bf16(const uint8_t *panels, size_t pb, const uint8_t *tiles, size_t tb, int ntiles, int64_t k,
                           float *out, size_t ldo, int nrows, int ntok) {
    amx_bf(panels, pb, tiles, tb, ntiles, k, out, ldo, nrows, ntok, 1, 1);
}
static void amx_kern_f16hl(const uint8_t *panels, size_t pb, const uint8_t *tile, int64_t k, float *out, size_t ldo,
                           int nrows, int ntok) {
    amx_bf(panels, pb, tile, 0, 1, k, out, ldo, nrows, ntok, 2, 2);
}
static void amx_tiles_f16hl(const uint8_t *panels, size_t pb, const uint8_t *tiles, size_t tb, int ntiles, int64_t k,
                            float *out, size_t ldo, int nrows, int ntok) {
    amx_bf(panels, pb, tiles, tb, ntiles, k, out, ldo, nrows, ntok, 2, 2);
}
static const mf_gemm_kind amx_kind_bf16 = {"bf16 32x16 " AMX_LVL_NAME " bf16", MF_GEMM_ACT_BF16_AMX, MF_TAMX_NT, 16, 32, 1,
                                           16, amx_panel_bytes_bf16, amx_pack_bf16, amx_kern_bf16, amx_pack_x16_bf16,
                                           amx_tiles_bf16, AMX_TB};
static const mf_gemm_kind amx_kind_f16hl = {"f16 32x16 " AMX_LVL_NAME " bf16 hi+lo", MF_GEMM_ACT_F16HL_AMX, MF_TAMX_NT, 16,
                                            32, 1, 16, amx_panel_bytes_f16hl, amx_pack_f16hl, amx_kern_f16hl,
                                            amx_pack_x16_f16hl, amx_tiles_f16hl, AMX_TB};

static void register_amx_bf16(const mf_gemm_kind **tab) {
    tab[MF_TYPE_BF16] = &amx_kind_bf16;
    tab[MF_TYPE_F16] = &amx_kind_f16hl;
}
