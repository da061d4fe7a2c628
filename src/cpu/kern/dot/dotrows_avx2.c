/* dotrows_avx2.c - multi-row AVX2 dots (vec_dot_rows): Q4_0, Q5_0, Q8_0,
 * IQ4_NL, Q4_K, Q5_K, Q6_K, F32, F16, each s[r] bitwise equal to vec_dot of
 * row r (and so to the reference).
 *
 * A call dots nr weight rows with one activation row, in tiles of a few rows
 * (TILE32, TILEK, TILEF); a last tile of fewer rows runs the same code
 * compiled for its row count. Per step the activation-only work (block sums
 * for level offsets, activation scales, F16 widening) is done once for the
 * tile; per-call setup (partial-group offsets and masks) once per call; the
 * lane folds of a tile's rows run together.
 *
 * 32-element blocks (quant/lanes.h order 1): as dot_legacy_avx2.c, each row
 * has one 8-lane accumulator and adds per group of 8 blocks the vector of
 * their values, formed with the reference's expression ((sumi * dx) * dy for
 * Q4_0, (dx * dy) * sumi otherwise); block b lands in lane b % 8, in block
 * order. The level offsets (8 for Q4_0, 16 for Q5_0) are subtracted as exact
 * int32 offset * (block sum of the activations), computed once per tile
 * instead of once per row. A partial last group (block count not a multiple
 * of 8) reads its missing blocks at the last real block (nothing past the row
 * is read), masks their sums and scales to 0, and so adds +0 to those lanes,
 * which changes nothing (a lane is never -0). fold8x8 folds 8 rows at once
 * with exactly mf_fold8_ps's adds per row.
 *   Integer exactness as dot_legacy_avx2.c: maddubs pair sums of levels
 *   <= 31 stay far from int16 saturation; signed weights (Q8_0, IQ4_NL)
 *   use |w| * sign(a, w), exact since activations never hold -128.
 *
 * Super-blocks (order 2): each row's exact integer sums as dot_kquant_avx2.c
 * computes them; the sums of the tile's rows are reduced together and the
 * reference's expression (d * isum - dmin * summ, d = f16(x.d) * y.d; or
 * d * isum) is evaluated lane-wise, lane r being row r's float chain over the
 * super-blocks in order.
 *
 * F16 (order 3): x_i * y_i is added into lane i % 64 by FMA (the product of
 * two halves is exact, so FMA = the reference's multiply-add); the
 * activations are loaded and widened once per step for the tile's two rows.
 * The 64 lanes go in two passes of 32 (fpass), which keeps the tile's
 * accumulators in registers. A tail shorter than 64 elements is copied into
 * zeroed buffers (once per tile) and run as one more step: zero products add
 * +0. The fold is vec_dot's: +32 (the passes), +16, +8 lanes per row, then
 * fold8x8. F32 rows go through vec_dot (see rows_f32). */
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/lanes.h"
#include "quant/qsearch.h"

#define AI static inline __attribute__((always_inline))

#define TILE32 4 /* rows per tile, 32-element block types */
#define TILEK 4  /* rows per tile, super-block types */
#define KCHUNK 16 /* super-blocks whose values are formed before they are summed */
#define TILEF 2  /* rows per tile, float types */

static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* The fold of quant/lanes.h (mf_fold8_ps) for 8 rows at once: lane r of the
 * result is row r's fold; every add is the one mf_lanes_fold makes, with the
 * same operands in the same order. */
AI __m256 fold8x8(const __m256 a[8]) {
    __m256 t[4];
    #pragma GCC unroll 8
    for (int i = 0; i < 4; i++) /* l[j] + l[j + 4]: [row 2i | row 2i+1] */
        t[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
    /* l[j] + l[j + 2]: [rows 0, 2 | rows 1, 3] and [rows 4, 6 | rows 5, 7], two lanes each */
    const __m256 u0 = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t[0]), _mm256_castps_pd(t[1]))),
                                    _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t[0]), _mm256_castps_pd(t[1]))));
    const __m256 u1 = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t[2]), _mm256_castps_pd(t[3]))),
                                    _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t[2]), _mm256_castps_pd(t[3]))));
    /* l[0] + l[1]: rows 0 2 4 6 | 1 3 5 7 */
    const __m256 v = _mm256_add_ps(_mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* stores lanes 0 .. R-1 of v to s */
AI void store_rows(float *s, __m256 v, int R) {
    if (R == 8) _mm256_storeu_ps(s, v);
    else {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(R), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(s, m, v);
    }
}

/* ---------------- 32-element blocks ---------------- */

enum { B_Q4_0, B_Q5_0, B_Q8_0, B_IQ4_NL };

AI int bbytes(int T) { return T == B_Q5_0 ? 22 : T == B_Q8_0 ? 34 : 18; }
#define YBS 34 /* bytes per block_q8_0 */

/* log2 of the level offset subtracted through activation block sums; -1: none */
AI int boffset_log2(int T) { return T == B_Q4_0 ? 3 : T == B_Q5_0 ? 4 : -1; }

/* 8 int32 partial sums of weight block xb against activation quants a (no level offset) */
AI __m256i blk(int T, const uint8_t *xb, const uint8_t *a) {
    const __m256i ones = _mm256_set1_epi16(1);
    if (T == B_Q4_0) return _mm256_madd_epi16(_mm256_maddubs_epi16(mf_nibbles32(xb + 2), ld256(a)), ones);
    if (T == B_Q5_0) {
        const __m256i q = _mm256_or_si256(mf_nibbles32(xb + 6), mf_bits32_to_0x10(mf_ld32(xb + 2)));
        return _mm256_madd_epi16(_mm256_maddubs_epi16(q, ld256(a)), ones);
    }
    if (T == B_Q8_0) return mf_dot_i8_avx2(ld256(xb + 2), ld256(a));
    const __m128i t = _mm_loadu_si128((const __m128i *)mf_iq4nl_values);
    const __m256i tab = _mm256_inserti128_si256(_mm256_castsi128_si256(t), t, 1);
    return mf_dot_i8_avx2(_mm256_shuffle_epi8(tab, mf_nibbles32(xb + 2)), ld256(a));
}

/* the f16 at p + o[k] for k < 8 as floats */
AI __m256 load8_f16_at(const uint8_t *p, const int o[8]) {
    return _mm256_cvtph_ps(_mm_setr_epi16((short)mf_ld16(p + o[0]), (short)mf_ld16(p + o[1]), (short)mf_ld16(p + o[2]),
                                          (short)mf_ld16(p + o[3]), (short)mf_ld16(p + o[4]), (short)mf_ld16(p + o[5]),
                                          (short)mf_ld16(p + o[6]), (short)mf_ld16(p + o[7])));
}

/* What a partial last group needs, worked out once per call. */
typedef struct part32 {
    int m;            /* blocks in it (0: none) */
    int xo[8], yo[8]; /* byte offsets of its blocks, clamped to the last real one */
    __m256i lanes;    /* all-ones in the lanes of real blocks */
} part32;

static inline void part32_init(part32 *pt, int n, int bs) {
    pt->m = n / 32 % 8;
    #pragma GCC unroll 8
    for (int k = 0; k < 8; k++) {
        const int kk = k < pt->m ? k : pt->m - 1;
        pt->xo[k] = kk * bs;
        pt->yo[k] = kk * YBS;
    }
    pt->lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(pt->m), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* activation side of a group, shared by the tile's rows */
typedef struct ygrp {
    __m256i off; /* offset * block sums */
    __m256 dy;   /* scales (0 in a partial group's missing lanes) */
} ygrp;

AI void y_group(int T, const uint8_t *yg, const part32 *pt, ygrp *Y) {
    if (boffset_log2(T) >= 0) {
        __m256i v[8];
        #pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const int o = pt ? pt->yo[k] : k * YBS;
            v[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), ld256(yg + o + 2)), _mm256_set1_epi16(1));
        }
        Y->off = _mm256_slli_epi32(mf_reduce8_i32(v), boffset_log2(T));
    } else Y->off = _mm256_setzero_si256();
    if (pt) Y->dy = _mm256_and_ps(load8_f16_at(yg, pt->yo), _mm256_castsi256_ps(pt->lanes));
    else Y->dy = mf_load8_f16(yg, YBS);
}

/* one row's values of a group: the vector its accumulator adds */
AI __m256 row_group(int T, const uint8_t *xg, const uint8_t *yg, const part32 *pt, const ygrp *Y) {
    const int bs = bbytes(T);
    /* the block sums as mf_reduce8_i32 forms them, each pair reduced as soon
     * as it exists (fewer live registers) */
    __m256i h[4];
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        const int xo0 = pt ? pt->xo[2 * k] : 2 * k * bs, yo0 = pt ? pt->yo[2 * k] : 2 * k * YBS;
        const int xo1 = pt ? pt->xo[2 * k + 1] : (2 * k + 1) * bs, yo1 = pt ? pt->yo[2 * k + 1] : (2 * k + 1) * YBS;
        h[k] = _mm256_hadd_epi32(blk(T, xg + xo0, yg + yo0 + 2), blk(T, xg + xo1, yg + yo1 + 2));
    }
    const __m256i g0 = _mm256_hadd_epi32(h[0], h[1]), g1 = _mm256_hadd_epi32(h[2], h[3]);
    __m256i si = _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
    if (boffset_log2(T) >= 0) si = _mm256_sub_epi32(si, Y->off);
    __m256 dx;
    if (pt) {
        si = _mm256_and_si256(si, pt->lanes);
        dx = _mm256_and_ps(load8_f16_at(xg, pt->xo), _mm256_castsi256_ps(pt->lanes));
    } else dx = mf_load8_f16(xg, (size_t)bs);
    const __m256 sf = _mm256_cvtepi32_ps(si);
    if (T == B_Q4_0) return _mm256_mul_ps(_mm256_mul_ps(sf, dx), Y->dy);
    return _mm256_mul_ps(_mm256_mul_ps(dx, Y->dy), sf);
}

AI void tile32(int T, int R, int n, float *s, const uint8_t *x, size_t xs, const uint8_t *y, const part32 *pt) {
    const int bs = bbytes(T);
    const int ng = n / 32 / 8;
    __m256 acc[8];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
    for (int g = 0; g < ng; g++) {
        const uint8_t *yg = y + (size_t)g * 8 * YBS, *xg = x + (size_t)g * 8 * bs;
        ygrp Y;
        y_group(T, yg, NULL, &Y);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) acc[r] = _mm256_add_ps(acc[r], row_group(T, xg + r * xs, yg, NULL, &Y));
    }
    if (pt->m) {
        const uint8_t *yg = y + (size_t)ng * 8 * YBS, *xg = x + (size_t)ng * 8 * bs;
        ygrp Y;
        y_group(T, yg, pt, &Y);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) acc[r] = _mm256_add_ps(acc[r], row_group(T, xg + r * xs, yg, pt, &Y));
    }
    store_rows(s, fold8x8(acc), R);
}

#define DEFINE_ROWS32(NAME, T)                                                                              \
    static void NAME(int n, float *s, const void *vx, size_t xs, const void *vy, int nr) {                \
        const uint8_t *x = vx, *y = vy;                                                                   \
        part32 pt;                                                                                        \
        part32_init(&pt, n, bbytes(T));                                                                   \
        int r = 0;                                                                                        \
        for (; r + TILE32 <= nr; r += TILE32) tile32(T, TILE32, n, s + r, x + (size_t)r * xs, xs, y, &pt); \
        x += (size_t)r * xs;                                                                              \
        s += r;                                                                                           \
        switch (nr - r) {                                                                                 \
        case 1: tile32(T, 1, n, s, x, xs, y, &pt); break;                                                 \
        case 2: tile32(T, 2, n, s, x, xs, y, &pt); break;                                                 \
        case 3: tile32(T, 3, n, s, x, xs, y, &pt); break;                                                 \
        default: break;                                                                                   \
        }                                                                                                 \
    }

DEFINE_ROWS32(rows_q4_0, B_Q4_0)
DEFINE_ROWS32(rows_q5_0, B_Q5_0)
DEFINE_ROWS32(rows_q8_0, B_Q8_0)
DEFINE_ROWS32(rows_iq4_nl, B_IQ4_NL)

/* ---------------- super-blocks ---------------- */

enum { K_Q4, K_Q5, K_Q6 };

/* [scale j x 16] from 8 int16 scales repeated in both 128-bit halves */
AI __m256i k_one_scale(__m256i half, int j) {
    return _mm256_shuffle_epi8(half, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}

/* [scale 2k x 8 | scale 2k + 1 x 8] (one scale per 16 elements) */
AI __m256i k_pair_scales(__m256i half, int k) {
    return _mm256_shuffle_epi8(half, _mm256_setr_epi64x(0x0100010001000100ll + 0x0404040404040404ll * k,
                                                        0x0100010001000100ll + 0x0404040404040404ll * k,
                                                        0x0302030203020302ll + 0x0404040404040404ll * k,
                                                        0x0302030203020302ll + 0x0404040404040404ll * k));
}

/* Q4_K / Q5_K 12-byte scale field: the 8 scales as int16 in both halves, the
 * 8 mins as 16 int16 (each twice, one per 16-element bsum) */
AI void k4_unpack(const uint8_t *p, __m256i *sc, __m256i *mn) {
    uint32_t w[3];
    memcpy(w, p, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t sc_lo = w[0] & m6, mn_lo = w[1] & m6;
    const uint32_t sc_hi = (w[2] & m4) | ((w[0] >> 6) & m2) << 4;
    const uint32_t mn_hi = ((w[2] >> 4) & m4) | ((w[1] >> 6) & m2) << 4;
    const __m128i sc16 = _mm_cvtepu8_epi16(_mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0));
    const __m128i mn8 = _mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0);
    *sc = _mm256_inserti128_si256(_mm256_castsi128_si256(sc16), sc16, 1);
    *mn = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
}

/* One row's super-block: *acc = 8 int32 partials of the scaled level sums
 * (Q6_K: minus its level offset), *mn = 8 partials of the min sums (Q4_K,
 * Q5_K). */
AI void k_row(int T, const uint8_t *xb, const block_q8_K *y, __m256i bsums, __m256i *acc_out, __m256i *mn_out) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i acc = _mm256_setzero_si256();
    if (T == K_Q4 || T == K_Q5) {
        const int qs_off = T == K_Q4 ? 16 : 48;
        __m256i sc, mn;
        k4_unpack(xb + 4, &sc, &mn);
        *mn_out = _mm256_madd_epi16(mn, bsums);
        const __m256i qh = T == K_Q5 ? ld256(xb + 16) : _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) {
            /* bytes 32j..32j+31: low nibbles = sub-block 2j, high = 2j + 1 */
            const __m256i q = ld256(xb + qs_off + 32 * j);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (T == K_Q5) { /* 5th bits: bits 2j, 2j + 1 of qh[l], moved to bit 4 */
                __m256i hl = _mm256_and_si256(qh, _mm256_set1_epi8((char)(1 << (2 * j))));
                __m256i hh = _mm256_and_si256(qh, _mm256_set1_epi8((char)(2 << (2 * j))));
                hl = 2 * j <= 4 ? _mm256_slli_epi16(hl, 4 - 2 * j) : _mm256_srli_epi16(hl, 2 * j - 4);
                hh = 2 * j + 1 <= 4 ? _mm256_slli_epi16(hh, 3 - 2 * j) : _mm256_srli_epi16(hh, 2 * j - 3);
                lo = _mm256_or_si256(lo, hl);
                hi = _mm256_or_si256(hi, hh);
            }
            const __m256i pl = _mm256_maddubs_epi16(lo, ld256(y->qs + 64 * j));
            const __m256i ph = _mm256_maddubs_epi16(hi, ld256(y->qs + 64 * j + 32));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pl, k_one_scale(sc, 2 * j)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(ph, k_one_scale(sc, 2 * j + 1)));
        }
        *acc_out = acc;
    } else {
        const block_q6_K *x = (const block_q6_K *)xb;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        /* the level offset: 32 * sum_j sc_j * bsum_j */
        const __m256i voff = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 5);
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = ld256(x->ql + 64 * h), l1 = ld256(x->ql + 64 * h + 32);
            const __m256i qh = ld256(x->qh + 32 * h);
            /* (two literal immediates: an unoptimised build does not fold h) */
            const __m256i half = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                                   : _mm256_permute2x128_si256(sc16, sc16, 0x00);
            /* quarter k = elements 128h + 32k + l; top bits 2k, 2k + 1 of qh[l] moved to bits 4, 5 */
            __m256i w[4];
            /* (16-bit shifts, then the mask: bits crossing into the other byte land outside 0x30) */
            const __m256i m30 = _mm256_set1_epi8(0x30);
            w[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            w[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
            w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
            #pragma GCC unroll 8
            for (int k = 0; k < 4; k++) {
                const __m256i p = _mm256_maddubs_epi16(w[k], ld256(y->qs + 128 * h + 32 * k));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, k_pair_scales(half, k)));
            }
        }
        *acc_out = _mm256_sub_epi32(acc, voff);
        *mn_out = _mm256_setzero_si256();
    }
}

/* [sum of a0, a1, a2, a3 | sum of b0, b1, b2, b3] (exact) */
AI __m256i hsum4x2(const __m256i a[4], const __m256i b[4]) {
    const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(a[0], a[1]), _mm256_unpackhi_epi32(a[0], a[1]));
    const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(a[2], a[3]), _mm256_unpackhi_epi32(a[2], a[3]));
    const __m256i t2 = _mm256_add_epi32(_mm256_unpacklo_epi32(b[0], b[1]), _mm256_unpackhi_epi32(b[0], b[1]));
    const __m256i t3 = _mm256_add_epi32(_mm256_unpacklo_epi32(b[2], b[3]), _mm256_unpackhi_epi32(b[2], b[3]));
    const __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
    const __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi64(t2, t3), _mm256_unpackhi_epi64(t2, t3));
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

AI void tilek(int T, int R, int n, float *s, const uint8_t *x, size_t xs, const block_q8_K *y) {
    const int xbs = T == K_Q4 ? (int)sizeof(block_q4_K) : T == K_Q5 ? (int)sizeof(block_q5_K) : (int)sizeof(block_q6_K);
    const int nb = n / QK_K;
    __m128 sum = _mm_setzero_ps(); /* lane r: row r's float chain */
    /* Super-block values go to vals first and are added into sum in a second
     * loop (same adds, same order): the chain of adds then never waits on a
     * register the decode work pushed out to memory. */
    __m128 vals[KCHUNK];
    for (int b0 = 0; b0 < nb; b0 += KCHUNK) {
    const int b1 = nb - b0 < KCHUNK ? nb : b0 + KCHUNK;
    for (int b = b0; b < b1; b++) {
        const __m256i bsums = ld256(y[b].bsums);
        const uint8_t *xb = x + (size_t)b * xbs;
        __m256i a[4], m[4];
        #pragma GCC unroll 8
        for (int r = 0; r < 4; r++) {
            if (r < R) k_row(T, xb + r * xs, &y[b], bsums, &a[r], &m[r]);
            else a[r] = m[r] = _mm256_setzero_si256();
        }
        const __m256i sums = hsum4x2(a, m); /* [isum of rows 0..3 | summ of rows 0..3] */
        const __m128 isum = _mm_cvtepi32_ps(_mm256_castsi256_si128(sums));
        const __m128 yd = _mm_set1_ps(y[b].d);
#define XR(r) (xb + ((r) < R ? (r) : 0) * xs) /* rows past R read row 0 (lanes never stored) */
        if (T == K_Q6) {
            const size_t o = offsetof(block_q6_K, d);
            const __m128 dx = _mm_cvtph_ps(_mm_setr_epi16((short)mf_ld16(XR(0) + o), (short)mf_ld16(XR(1) + o),
                                                          (short)mf_ld16(XR(2) + o), (short)mf_ld16(XR(3) + o), 0, 0, 0, 0));
            /* d = f16(x.d) * y.d; value d * isum */
            vals[b - b0] = _mm_mul_ps(_mm_mul_ps(dx, yd), isum);
        } else {
            const __m128 summ = _mm_cvtepi32_ps(_mm256_extracti128_si256(sums, 1));
            /* d and dmin are the block's first two f16: [d0 m0 d1 m1 d2 m2 d3 m3] */
            const __m256 dm = _mm256_cvtph_ps(
                _mm_setr_epi32((int)mf_ld32(XR(0)), (int)mf_ld32(XR(1)), (int)mf_ld32(XR(2)), (int)mf_ld32(XR(3))));
            const __m128 lo = _mm256_castps256_ps128(dm), hi = _mm256_extractf128_ps(dm, 1);
            const __m128 d = _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), yd);
            const __m128 dmin = _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), yd);
            /* value d * isum - dmin * summ */
            vals[b - b0] = _mm_sub_ps(_mm_mul_ps(d, isum), _mm_mul_ps(dmin, summ));
        }
#undef XR
    }
    for (int b = b0; b < b1; b++) sum = _mm_add_ps(sum, vals[b - b0]);
    }
    _mm_maskstore_ps(s, _mm_cmpgt_epi32(_mm_set1_epi32(R), _mm_setr_epi32(0, 1, 2, 3)), sum);
}

#define DEFINE_ROWSK(NAME, T)                                                                         \
    static void NAME(int n, float *s, const void *vx, size_t xs, const void *vy, int nr) {          \
        const uint8_t *x = vx;                                                                      \
        const block_q8_K *y = vy;                                                                   \
        int r = 0;                                                                                  \
        for (; r + TILEK <= nr; r += TILEK) tilek(T, TILEK, n, s + r, x + (size_t)r * xs, xs, y);    \
        x += (size_t)r * xs;                                                                        \
        s += r;                                                                                     \
        switch (nr - r) {                                                                           \
        case 1: tilek(T, 1, n, s, x, xs, y); break;                                                 \
        case 2: tilek(T, 2, n, s, x, xs, y); break;                                                 \
        case 3: tilek(T, 3, n, s, x, xs, y); break;                                                 \
        default: break;                                                                             \
        }                                                                                           \
    }

DEFINE_ROWSK(rows_q4_k, K_Q4)
DEFINE_ROWSK(rows_q5_k, K_Q5)
DEFINE_ROWSK(rows_q6_k, K_Q6)

/* ---------------- F32 / F16 ---------------- */

/* 8 elements of an F32 or F16 row at p as floats */
AI __m256 fld8(int f16, const uint8_t *p) {
    return f16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)) : _mm256_loadu_ps((const float *)p);
}

/* Half the lanes of R rows: lanes 32p .. 32p + 31 (four 8-float registers
 * per row) over the whole row, the tail from the zero-padded copies ty, tx.
 * Two passes instead of all 64 lanes at once keep a tile's accumulators in
 * the 16 registers; each pass reads every other half of each 64-element step. */
AI void fpass(int f16, int R, int p, int n, const uint8_t *x, size_t xs, const uint8_t *y, const uint8_t *ty,
              const uint8_t *const tx[TILEF], __m256 acc[TILEF][4]) {
    const int es = f16 ? 2 : 4;
    #pragma GCC unroll 8
    for (int r = 0; r < TILEF; r++)
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) acc[r][j] = _mm256_setzero_ps();
    int i = 0;
    for (; i + MF_FDOT_LANES <= n; i += MF_FDOT_LANES) {
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) {
            const size_t o = (size_t)(i + 32 * p + 8 * j) * es;
            const __m256 yv = fld8(f16, y + o);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][j] = _mm256_fmadd_ps(fld8(f16, x + r * xs + o), yv, acc[r][j]);
        }
    }
    if (i < n) {
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) {
            const size_t o = (size_t)(32 * p + 8 * j) * es;
            const __m256 yv = fld8(f16, ty + o);
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r][j] = _mm256_fmadd_ps(fld8(f16, tx[r] + o), yv, acc[r][j]);
        }
    }
}

AI void tilef(int f16, int R, int n, float *s, const uint8_t *x, size_t xs, const uint8_t *y) {
    const int es = f16 ? 2 : 4;
    const int i = n / MF_FDOT_LANES * MF_FDOT_LANES;
    /* the tail, zero-padded to a whole step */
    float ty[MF_FDOT_LANES], tx[TILEF][MF_FDOT_LANES];
    const uint8_t *txp[TILEF];
    if (i < n) {
        const size_t len = (size_t)(n - i) * es;
        memset(ty, 0, sizeof ty);
        memcpy(ty, y + (size_t)i * es, len);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            memset(tx[r], 0, sizeof tx[r]);
            memcpy(tx[r], x + r * xs + (size_t)i * es, len);
        }
    }
    #pragma GCC unroll 8
    for (int r = 0; r < TILEF; r++) txp[r] = (const uint8_t *)tx[r < R ? r : 0];
    __m256 lo[TILEF][4], hi[TILEF][4];
    fpass(f16, R, 0, n, x, xs, y, (const uint8_t *)ty, txp, lo);
    fpass(f16, R, 1, n, x, xs, y, (const uint8_t *)ty, txp, hi);
    __m256 v[8];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) {
        if (r < R) { /* 64 -> 8 lanes: +32 (the two passes), +16, +8 */
            __m256 a0 = _mm256_add_ps(lo[r][0], hi[r][0]), a1 = _mm256_add_ps(lo[r][1], hi[r][1]);
            __m256 a2 = _mm256_add_ps(lo[r][2], hi[r][2]), a3 = _mm256_add_ps(lo[r][3], hi[r][3]);
            a0 = _mm256_add_ps(a0, a2);
            a1 = _mm256_add_ps(a1, a3);
            v[r] = _mm256_add_ps(a0, a1);
        } else v[r] = _mm256_setzero_ps();
    }
    store_rows(s, fold8x8(v), R);
}

#define DEFINE_ROWSF(NAME, F16)                                                                       \
    static void NAME(int n, float *s, const void *vx, size_t xs, const void *vy, int nr) {          \
        const uint8_t *x = vx, *y = vy;                                                             \
        int r = 0;                                                                                  \
        for (; r + TILEF <= nr; r += TILEF) tilef(F16, TILEF, n, s + r, x + (size_t)r * xs, xs, y); \
        if (r < nr) tilef(F16, 1, n, s + r, x + (size_t)r * xs, xs, y);                             \
    }

DEFINE_ROWSF(rows_f16, 1)

/* F32 at this level is bound by FMA throughput (two 8-wide FMAs a cycle take
 * both rows' loads in stride), so sharing the activation loads gains
 * nothing: tiles measured 0.93-1.0x of vec_dot. Rows go through vec_dot. */
static mf_vec_dot_fn g_vdot_f32;

static void rows_f32(int n, float *s, const void *vx, size_t xs, const void *vy, int nr) {
    for (int r = 0; r < nr; r++) g_vdot_f32(n, &s[r], (const uint8_t *)vx + (size_t)r * xs, vy);
}

/* tab must already hold this level's vec_dot (dispatch registers the dots first) */
void mf_cpu_reg_dotrows_avx2(mf_type_traits *tab) {
    g_vdot_f32 = tab[MF_TYPE_F32].vec_dot;
    tab[MF_TYPE_Q4_0].vec_dot_rows = rows_q4_0;
    tab[MF_TYPE_Q5_0].vec_dot_rows = rows_q5_0;
    tab[MF_TYPE_Q8_0].vec_dot_rows = rows_q8_0;
    tab[MF_TYPE_IQ4_NL].vec_dot_rows = rows_iq4_nl;
    tab[MF_TYPE_Q4_K].vec_dot_rows = rows_q4_k;
    tab[MF_TYPE_Q5_K].vec_dot_rows = rows_q5_k;
    tab[MF_TYPE_Q6_K].vec_dot_rows = rows_q6_k;
    tab[MF_TYPE_F32].vec_dot_rows = rows_f32;
    tab[MF_TYPE_F16].vec_dot_rows = rows_f16;
}
