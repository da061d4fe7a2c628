/* dotx16_avx2.c - AVX2 decode kernels for weights in the x16 layout
 * (quant/interleave.h): 16 rows against one activation row. A 64-byte line
 * holds word w of the 16 rows; its low 256 bits are rows 0-7 and its high
 * 256 bits rows 8-15, each row in one 32-bit lane, so every activation
 * broadcast feeds both halves and no row ever needs a horizontal reduction.
 *
 * Without vpdpbusd, a word's 4 levels times 4 activation bytes is vpmaddubsw
 * (two int16 pair sums per lane). Those are added in int16 over as many
 * words as the bounds below allow, then one vpmaddwd with the sub-block
 * scale repeated in both int16 halves of the lane gives scale * sum in
 * int32: a multiply-add per word and one scale step per sub-block and 8 rows,
 * where the one-row kernels pay a scale step per 32 elements and a
 * reduction per block. Bounds, with activations in [-128, 127] (the
 * quantizers write [-127, 127]): a pair sum is at most 2 * L * 128 for
 * levels 0..L, so the int16 sums stay exact over 8 words for Q4_K and Q4_0
 * (8 * 2 * 15 * 128 = 30720), 4 for Q5_K and Q5_0 (4 * 2 * 31 * 128 =
 * 31744) and Q2_K / Q3_K (a 16-element sub-block), 2 for Q6_K (2 * 2 * 63 *
 * 128 = 32256). Q8_0's signed levels use |q| * sign(a, q) per word, exact
 * for activations without -128, as the one-row kernels do; so do the IQ4
 * table values (up to 127 in magnitude, so their pair sums are widened to
 * int32 word by word).
 *
 * Every row's float expression is evaluated per lane in its reference's
 * order (the same steps as dotx16_vnni_avx512.c), so each lane is bitwise
 * the row's vec_dot. The AVX-512 level (without VNNI) runs these kernels;
 * the VNNI level has its own for every type (dotx16_vnni_avx512.c). */
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/interleave.h"
#include "quant/lanes.h"
#include "quant/qsearch.h"

#include <immintrin.h>
#include <string.h>

#define X16_PREFETCH 4608

/* Line i of a group, X16_PREFETCH bytes ahead. One prefetch per line the
 * kernel reads, spread over its loop: a burst of a group's 36-53 lines at
 * its start stalled on the core's miss buffers and streamed 8 GB/s from one
 * core against 10 spread. */
static inline void pf_line(const uint8_t *g, int i) { _mm_prefetch((const char *)g + X16_PREFETCH + 64 * i, _MM_HINT_T0); }

/* half p (rows 8p .. 8p + 7) of line w */
static inline __m256i hl(const uint8_t *g, int w, int p) { return _mm256_loadu_si256((const __m256i *)(g + 64 * w + 32 * p)); }

static inline __m256i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* two int16 values as the pair of every 32-bit lane */
static inline __m256i pair16(int lo, int hi) { return _mm256_set1_epi32((int)((uint32_t)(uint16_t)lo | (uint32_t)(uint16_t)hi << 16)); }

/* byte j of every lane, zero-extended, in both int16 halves of the lane */
static inline __m256i rep_byte(__m256i v, int j) {
    const char a = (char)j, b = (char)(4 + j), c = (char)(8 + j), d = (char)(12 + j), z = (char)0x80;
    return _mm256_shuffle_epi8(v, _mm256_setr_epi8(a, z, a, z, b, z, b, z, c, z, c, z, d, z, d, z,
                                                   a, z, a, z, b, z, b, z, c, z, c, z, d, z, d, z));
}

/* ---------------- Q4_K ----------------
 * line 0 = d | dmin << 16, lines 1-3 = the 12 scale bytes, lines 4 + 8h + c
 * = qs bytes 32h + 4c ..: low nibbles are elements 64h + 4c .. of
 * sub-block 2h, high nibbles those of sub-block 2h + 1. */

/* the f16 pairs of line w (d low, dmin high) of the 8 rows of half p as
 * floats */
static inline void q_dpair(const uint8_t *g, int w, int p, __m256 *d, __m256 *dmin) {
    const __m256i v = hl(g, w, p);
    const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xffff)), hi = _mm256_srli_epi32(v, 16);
    /* per 128-bit lane: d of 4 rows, dmin of the same 4 rows */
    const __m256i pk = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    *d = _mm256_cvtph_ps(_mm256_castsi256_si128(pk));
    *dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(pk, 1));
}
static inline void q4k_d(const uint8_t *g, int p, __m256 *d, __m256 *dmin) { q_dpair(g, 0, p, d, dmin); }

/* sum over the 8 sub-blocks of min_j * (bsum 2j + bsum 2j + 1), per lane */
static inline __m256i q4k_summ(__m256i w1, __m256i w2, const int bs[8]) {
    const __m256i m6 = _mm256_set1_epi8(0x3f), m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30),
                  even = _mm256_set1_epi32(0x00ff00ff);
    /* bytes: mins 0..3 and mins 4..7 of each row */
    const __m256i ml = _mm256_and_si256(w1, m6);
    const __m256i mh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w2, 4), m4),
                                       _mm256_and_si256(_mm256_srli_epi16(w1, 2), m30));
    __m256i s = _mm256_madd_epi16(_mm256_and_si256(ml, even), pair16(bs[0], bs[2]));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_srli_epi16(ml, 8), pair16(bs[1], bs[3])));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_and_si256(mh, even), pair16(bs[4], bs[6])));
    return _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_srli_epi16(mh, 8), pair16(bs[5], bs[7])));
}

/* The end of a Q4_K / Q5_K super-block (same scale and min layout): the mins
 * against the activation's block sums, then d * isum - dmin * summ added to
 * each row's sum, as the reference orders it. */
static inline void q4k_block_end(const uint8_t *g, const block_q8_K *a, const __m256i isum[2], __m256 sum[2]) {
    int bs[8];
    for (int j = 0; j < 8; j++) bs[j] = a->bsums[2 * j] + a->bsums[2 * j + 1];
    const __m256 yd = _mm256_set1_ps(a->d);
    #pragma GCC unroll 2
    for (int p = 0; p < 2; p++) {
        const __m256i summ = q4k_summ(hl(g, 2, p), hl(g, 3, p), bs);
        __m256 dx, mx;
        q4k_d(g, p, &dx, &mx);
        const __m256 d = _mm256_mul_ps(dx, yd), dmin = _mm256_mul_ps(mx, yd);
        sum[p] = _mm256_add_ps(sum[p], _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[p])),
                                                     _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ))));
    }
}

static void dot_x16_q4_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m6 = _mm256_set1_epi8(0x3f), m30 = _mm256_set1_epi8(0x30);
    __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q4_K)) {
        for (int i = 0; i < 4; i++) pf_line(g, i);
        const block_q8_K *a = &y[b];
        /* the 8 scales of each row as bytes: sl = scales 0..3, sh = 4..7 */
        __m256i sl[2], sh[2], isum[2];
        for (int p = 0; p < 2; p++) {
            const __m256i w0 = hl(g, 1, p), w2 = hl(g, 3, p);
            sl[p] = _mm256_and_si256(w0, m6);
            sh[p] = _mm256_or_si256(_mm256_and_si256(w2, m4), _mm256_and_si256(_mm256_srli_epi16(w0, 2), m30));
            isum[p] = _mm256_setzero_si256();
        }
        #pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, hi[2] = {lo[0], lo[0]};
            #pragma GCC unroll 1
            for (int c = 0; c < 8; c++) {
                pf_line(g, 4 + 8 * h + c);
                const __m256i al = bcast4(a->qs + 64 * h + 4 * c), ah = bcast4(a->qs + 64 * h + 32 + 4 * c);
                #pragma GCC unroll 2
                for (int p = 0; p < 2; p++) {
                    const __m256i v = hl(g, 4 + 8 * h + c, p);
                    lo[p] = _mm256_add_epi16(lo[p], _mm256_maddubs_epi16(_mm256_and_si256(v, m4), al));
                    hi[p] = _mm256_add_epi16(hi[p], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), ah));
                }
            }
            /* sub-blocks 2h and 2h + 1: bytes h % 2 * 2 (+ 1) of sl (h < 2) or sh */
            #pragma GCC unroll 2
            for (int p = 0; p < 2; p++) {
                const __m256i sc = h < 2 ? sl[p] : sh[p];
                isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(lo[p], rep_byte(sc, 2 * (h & 1))));
                isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(hi[p], rep_byte(sc, 2 * (h & 1) + 1)));
            }
        }
        q4k_block_end(g, a, isum, sum);
    }
    _mm256_storeu_ps(s, sum[0]);
    _mm256_storeu_ps(s + 8, sum[1]);
}

/* ---------------- Q2_K / Q3_K ----------------
 * Q2_K: lines 0-3 = scales (low nibble scale, high nibble min), 4-19 = qs,
 * 20 = d | dmin << 16. Q3_K: lines 0-7 = hmask, 8-23 = qs, 24-26 = scales,
 * then d[16]. The 2-bit levels at bits 2k of qs word 8g + c are elements
 * 128g + 32k + 4c .. of sub-block 8g + 2k + c / 4; Q3_K's third bit of the
 * same elements is bit 4g + k of hmask word c. Levels reach 3 (7), so a
 * 16-element sub-block's 4 words are summed in int16 directly. */

/* bit s of every byte moved to bit 2 (s in 0..7) */
static inline __m256i bit_to_2(__m256i v, int s) {
    const __m256i m04 = _mm256_set1_epi8(0x04);
    if (s < 2) return _mm256_and_si256(_mm256_slli_epi16(v, 2 - s), m04);
    if (s > 2) return _mm256_and_si256(_mm256_srli_epi16(v, s - 2), m04);
    return _mm256_and_si256(v, m04);
}

/* bit s of every byte moved to bit 4 (s in 0..7) */
static inline __m256i bit_to_4(__m256i v, int s) {
    const __m256i m10 = _mm256_set1_epi8(0x10);
    if (s < 4) return _mm256_and_si256(_mm256_slli_epi16(v, 4 - s), m10);
    if (s > 4) return _mm256_and_si256(_mm256_srli_epi16(v, s - 4), m10);
    return _mm256_and_si256(v, m10);
}

/* levels * activations of the 4 sub-blocks 8g + 2k + cc (k = 0..3), both
 * halves (acc[k][p]), summed in int16 over their words c = 4cc .. 4cc + 3.
 * Each activation broadcast feeds both halves, in two passes of two fields
 * so the 8 sums stay in the 16 ymm registers (GCC had hoisted the
 * broadcasts out of a per-half loop and spilled them). The odd fields are
 * masked in place (& 0x0c: four times the level; Q3_K's third bit then goes
 * to bit 4) and the upper two share one shift by 4; the odd sums are
 * shifted back exactly at the end (multiples of 4, at most 4 words * 2 *
 * 28 * 128 in magnitude). hm0 < 0: Q2_K, no third bit. */
static inline void k23_sums(const uint8_t *g, const int8_t *qs, int q0, int hm0, int gi, int cc, __m256i acc[4][2]) {
    const __m256i m03 = _mm256_set1_epi8(3), m0c = _mm256_set1_epi8(0x0c);
    for (int k = 0; k < 4; k++) acc[k][0] = acc[k][1] = _mm256_setzero_si256();
    #pragma GCC unroll 2
    for (int kk = 0; kk < 4; kk += 2)
        #pragma GCC unroll 1
        for (int c = 4 * cc; c < 4 * cc + 4; c++) {
            __m256i v0 = hl(g, q0 + 8 * gi + c, 0), v1 = hl(g, q0 + 8 * gi + c, 1);
            if (kk) v0 = _mm256_srli_epi16(v0, 4), v1 = _mm256_srli_epi16(v1, 4);
            #pragma GCC unroll 2
            for (int k = kk; k < kk + 2; k++) {
                const __m256i msk = k & 1 ? m0c : m03, act = bcast4(qs + 128 * gi + 32 * k + 4 * c);
                __m256i w[2];
                #pragma GCC unroll 2
                for (int p = 0; p < 2; p++) {
                    w[p] = _mm256_and_si256(p ? v1 : v0, msk);
                    if (hm0 >= 0) {
                        const __m256i h = hl(g, hm0 + c, p);
                        w[p] = _mm256_or_si256(w[p], k & 1 ? bit_to_4(h, 4 * gi + k) : bit_to_2(h, 4 * gi + k));
                    }
                    acc[k][p] = _mm256_add_epi16(acc[k][p], _mm256_maddubs_epi16(w[p], act));
                }
            }
        }
    for (int k = 1; k < 4; k += 2) acc[k][0] = _mm256_srai_epi16(acc[k][0], 2), acc[k][1] = _mm256_srai_epi16(acc[k][1], 2);
}

/* sum over the 16 sub-blocks of mn_j * bsum_j for 4-bit mins in the high
 * nibbles of lines 0-3 */
static inline __m256i q2k_summ(const uint8_t *g, int p, const int16_t bsums[16]) {
    const __m256i m = _mm256_set1_epi32(0x000f000f);
    __m256i s = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const __m256i w = hl(g, i, p);
        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi16(w, 4), m), pair16(bsums[4 * i], bsums[4 * i + 2])));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_and_si256(_mm256_srli_epi16(w, 12), m), pair16(bsums[4 * i + 1], bsums[4 * i + 3])));
    }
    return s;
}

static void dot_x16_q2_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m256i m0f = _mm256_set1_epi16(0x0f);
    __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q2_K)) {
        const block_q8_K *a = &y[b];
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        #pragma GCC unroll 2
        for (int gi = 0; gi < 2; gi++)
            #pragma GCC unroll 2
            for (int cc = 0; cc < 2; cc++) {
                const int step = 2 * gi + cc; /* 4 steps prefetch the group's 22 lines */
                for (int i = 6 * step; i < 6 * step + 6 && i < 22; i++) pf_line(g, i);
                __m256i acc[4][2];
                k23_sums(g, a->qs, 4, -1, gi, cc, acc);
                #pragma GCC unroll 4
                for (int k = 0; k < 4; k++) {
                    const int j = 8 * gi + 2 * k + cc;
                    #pragma GCC unroll 2
                    for (int p = 0; p < 2; p++) {
                        const __m256i sc = _mm256_and_si256(rep_byte(hl(g, j / 4, p), j % 4), m0f);
                        isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(acc[k][p], sc));
                    }
                }
            }
        const __m256 yd = _mm256_set1_ps(a->d);
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            const __m256i summ = q2k_summ(g, p, a->bsums);
            __m256 dx, mx;
            q_dpair(g, 20, p, &dx, &mx);
            const __m256 dall = _mm256_mul_ps(yd, dx), dmin = _mm256_mul_ps(yd, mx);
            sum[p] = _mm256_add_ps(sum[p], _mm256_sub_ps(_mm256_mul_ps(dall, _mm256_cvtepi32_ps(isum[p])),
                                                         _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(summ))));
        }
    }
    _mm256_storeu_ps(s, sum[0]);
    _mm256_storeu_ps(s + 8, sum[1]);
}

/* Q3_K's 16 six-bit scales of each row as 4 words of bytes (scales 4i .. 4i + 3
 * in word i), unsigned (the stored value, 32 above the scale) */
static inline void q3k_scales(const uint8_t *g, int p, __m256i S[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const __m256i l0 = hl(g, 24, p), l1 = hl(g, 25, p), t = hl(g, 26, p);
    S[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(t, 4), m30));
    S[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(t, 2), m30));
    S[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(t, m30));
    S[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(t, 2), m30));
}

static void dot_x16_q3_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m256i k32 = _mm256_set1_epi16(32), even = _mm256_set1_epi32(0x00ff00ff);
    __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q3_K)) {
        const block_q8_K *a = &y[b];
        __m256i isum[2];
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            /* the level offset: -4 * sum_j (sc_j - 32) * bsum_j */
            __m256i S[4], off = _mm256_setzero_si256();
            q3k_scales(g, p, S);
            #pragma GCC unroll 4
            for (int i = 0; i < 4; i++) {
                const __m256i ev = _mm256_sub_epi16(_mm256_and_si256(S[i], even), k32);
                const __m256i od = _mm256_sub_epi16(_mm256_srli_epi16(S[i], 8), k32);
                off = _mm256_add_epi32(off, _mm256_madd_epi16(ev, pair16(a->bsums[4 * i], a->bsums[4 * i + 2])));
                off = _mm256_add_epi32(off, _mm256_madd_epi16(od, pair16(a->bsums[4 * i + 1], a->bsums[4 * i + 3])));
            }
            isum[p] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 2));
        }
        #pragma GCC unroll 2
        for (int gi = 0; gi < 2; gi++)
            #pragma GCC unroll 2
            for (int cc = 0; cc < 2; cc++) {
                const int step = 2 * gi + cc; /* 4 steps prefetch the group's 28 lines */
                for (int i = 7 * step; i < 7 * step + 7; i++) pf_line(g, i);
                __m256i acc[4][2];
                k23_sums(g, a->qs, 8, 0, gi, cc, acc);
                #pragma GCC unroll 2
                for (int p = 0; p < 2; p++) {
                    __m256i S[4];
                    q3k_scales(g, p, S);
                    #pragma GCC unroll 4
                    for (int k = 0; k < 4; k++) {
                        const int j = 8 * gi + 2 * k + cc;
                        const __m256i sc = _mm256_sub_epi16(rep_byte(S[j / 4], j % 4), k32);
                        isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(acc[k][p], sc));
                    }
                }
            }
        const __m256 yd = _mm256_set1_ps(a->d);
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 64 * 27 + 16 * p))), yd);
            sum[p] = _mm256_add_ps(sum[p], _mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[p])));
        }
    }
    _mm256_storeu_ps(s, sum[0]);
    _mm256_storeu_ps(s + 8, sum[1]);
}

/* ---------------- Q5_K ----------------
 * As Q4_K, with qh in lines 4-11 and qs in lines 12-43: the 5th bit of the
 * element in byte l of qs word 8h + c (low nibble) is bit 2h of qh byte l of
 * qh word c, bit 2h + 1 for the high nibble. Levels reach 31, so a
 * sub-block's 8 words are summed in int16 as two halves of 4. */

static void dot_x16_q5_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m6 = _mm256_set1_epi8(0x3f), m30 = _mm256_set1_epi8(0x30);
    __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q5_K)) {
        for (int i = 0; i < 12; i++) pf_line(g, i);
        const block_q8_K *a = &y[b];
        __m256i sl[2], sh[2], isum[2];
        for (int p = 0; p < 2; p++) {
            const __m256i w0 = hl(g, 1, p), w2 = hl(g, 3, p);
            sl[p] = _mm256_and_si256(w0, m6);
            sh[p] = _mm256_or_si256(_mm256_and_si256(w2, m4), _mm256_and_si256(_mm256_srli_epi16(w0, 2), m30));
            isum[p] = _mm256_setzero_si256();
        }
        #pragma GCC unroll 4
        for (int h = 0; h < 4; h++)
            #pragma GCC unroll 1
            for (int c0 = 0; c0 < 8; c0 += 4) {
                __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, hi[2] = {lo[0], lo[0]};
                #pragma GCC unroll 1
                for (int c = c0; c < c0 + 4; c++) {
                    pf_line(g, 12 + 8 * h + c);
                    const __m256i al = bcast4(a->qs + 64 * h + 4 * c), ah = bcast4(a->qs + 64 * h + 32 + 4 * c);
                    #pragma GCC unroll 2
                    for (int p = 0; p < 2; p++) {
                        const __m256i v = hl(g, 12 + 8 * h + c, p), qh = hl(g, 4 + c, p);
                        const __m256i wl = _mm256_or_si256(_mm256_and_si256(v, m4), bit_to_4(qh, 2 * h));
                        const __m256i wh = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), bit_to_4(qh, 2 * h + 1));
                        lo[p] = _mm256_add_epi16(lo[p], _mm256_maddubs_epi16(wl, al));
                        hi[p] = _mm256_add_epi16(hi[p], _mm256_maddubs_epi16(wh, ah));
                    }
                }
                #pragma GCC unroll 2
                for (int p = 0; p < 2; p++) {
                    const __m256i sc = h < 2 ? sl[p] : sh[p];
                    isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(lo[p], rep_byte(sc, 2 * (h & 1))));
                    isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(hi[p], rep_byte(sc, 2 * (h & 1) + 1)));
                }
            }
        q4k_block_end(g, a, isum, sum);
    }
    _mm256_storeu_ps(s, sum[0]);
    _mm256_storeu_ps(s + 8, sum[1]);
}

/* ---------------- Q6_K ----------------
 * lines 0-31 = ql, 32-47 = qh, 48-51 = the 16 int8 scales, then d[16].
 * For word c of half h, A = ql word 16h + c, B = ql word 16h + 8 + c and
 * C = qh word 8h + c give the 6-bit levels of 4 elements in each of the
 * sub-blocks 8h + 2t + c / 4 (t = 0..3), as in the reference's dequant. */

/* sum over the 16 sub-blocks of scale_j * bsum_j, per lane */
static inline __m256i q6k_off(const uint8_t *g, int p, const int16_t bsums[16]) {
    __m256i s = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        const __m256i w = hl(g, 48 + i, p);
        const __m256i ev = _mm256_srai_epi16(_mm256_slli_epi16(w, 8), 8), od = _mm256_srai_epi16(w, 8);
        s = _mm256_add_epi32(s, _mm256_madd_epi16(ev, pair16(bsums[4 * i], bsums[4 * i + 2])));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(od, pair16(bsums[4 * i + 1], bsums[4 * i + 3])));
    }
    return s;
}

/* in both int16 halves of every lane, sign-extended: scale byte j % 4 of
 * the lane's word (pshufb masks, so loops over j need not be unrolled) */
static const int8_t k_rep_s8[4][32] = {
#define R(j) {-1, j, -1, j, -1, 4 + j, -1, 4 + j, -1, 8 + j, -1, 8 + j, -1, 12 + j, -1, 12 + j, \
               -1, j, -1, j, -1, 4 + j, -1, 4 + j, -1, 8 + j, -1, 8 + j, -1, 12 + j, -1, 12 + j}
    R(0), R(1), R(2), R(3)
#undef R
};

static inline __m256i rep_s8(__m256i w, int j) {
    return _mm256_srai_epi16(_mm256_shuffle_epi8(w, _mm256_loadu_si256((const __m256i *)k_rep_s8[j])), 8);
}

/* Words c0 and c0 + 1 of both halves at once, so each activation broadcast
 * serves 16 rows; the levels of ql word A (t = 0, 2) and of B (t = 1, 3)
 * are two passes over the qh word, which keeps the 8 sums and their inputs
 * inside the 16 ymm registers. */
static void dot_x16_q6_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q6_K)) {
        const block_q8_K *a = &y[b];
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        #pragma GCC unroll 1
        for (int h = 0; h < 2; h++)
            #pragma GCC unroll 1
            for (int c0 = 0; c0 < 8; c0 += 2) {
                const int k = 4 * h + c0 / 2; /* 8 steps prefetch the group's 53 lines */
                for (int i = 7 * k; i < 7 * k + 7 && i < 53; i++) pf_line(g, i);
                #pragma GCC unroll 2
                for (int e = 0; e < 2; e++) { /* e = 0: ql word A, t = 0, 2; e = 1: word B, t = 1, 3 */
                    __m256i acc[2][2];
                    #pragma GCC unroll 2
                    for (int c = c0; c < c0 + 2; c++) {
                        const __m256i alo = bcast4(a->qs + 128 * h + 32 * e + 4 * c), ahi = bcast4(a->qs + 128 * h + 32 * (e + 2) + 4 * c);
                        #pragma GCC unroll 2
                        for (int p = 0; p < 2; p++) {
                            const __m256i A = hl(g, 16 * h + 8 * e + c, p), C = hl(g, 32 + 8 * h + c, p);
                            /* qh field t = e joins the low nibble, field t = e + 2 the high one (bits 4-5) */
                            const __m256i lo = _mm256_or_si256(_mm256_and_si256(A, m4), _mm256_and_si256(e ? _mm256_slli_epi16(C, 2) : _mm256_slli_epi16(C, 4), m30));
                            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 4), m4), _mm256_and_si256(e ? _mm256_srli_epi16(C, 2) : C, m30));
                            const __m256i ml = _mm256_maddubs_epi16(lo, alo), mh = _mm256_maddubs_epi16(hi, ahi);
                            acc[0][p] = c == c0 ? ml : _mm256_add_epi16(acc[0][p], ml);
                            acc[1][p] = c == c0 ? mh : _mm256_add_epi16(acc[1][p], mh);
                        }
                    }
                    #pragma GCC unroll 2
                    for (int f = 0; f < 2; f++) {
                        const int j = 8 * h + 2 * (e + 2 * f) + c0 / 4;
                        #pragma GCC unroll 2
                        for (int p = 0; p < 2; p++)
                            isum[p] = _mm256_add_epi32(isum[p], _mm256_madd_epi16(acc[f][p], rep_s8(hl(g, 48 + j / 4, p), j % 4)));
                    }
                }
            }
        const __m256 yd = _mm256_set1_ps(a->d);
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            /* scale * (sum of levels * a - 32 * bsum), exact in int32 */
            const __m256i is = _mm256_sub_epi32(isum[p], _mm256_slli_epi32(q6k_off(g, p, a->bsums), 5));
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(g + 64 * 52 + 16 * p))), yd);
            sum[p] = _mm256_add_ps(sum[p], _mm256_mul_ps(d, _mm256_cvtepi32_ps(is)));
        }
    }
    _mm256_storeu_ps(s, sum[0]);
    _mm256_storeu_ps(s + 8, sum[1]);
}

/* ---------------- IQ4_XS ----------------
 * line 0 = d | scales_h << 16, line 1 = scales_l, lines 2 + 4j + c = qs
 * bytes 16j + 4c .. of sub-block j. */

/* the IQ4 table in both 128-bit lanes, and its magnitudes */
static inline __m256i iq4_table(void) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mf_iq4nl_values));
}

/* table values of the nibbles in nib times the activation bytes act, as
 * int16 pair sums: |act| * sign(v, act), with |act| (aabs) taken once per
 * broadcast for both halves. Exact for every activation byte: the table's
 * values lie in [-127, 113], so sign(v, act) fits a byte and a pair sum is
 * at most 2 * 128 * 127. */
static inline __m256i iq4_mul(__m256i tbl, __m256i nib, __m256i aabs, __m256i act) {
    return _mm256_maddubs_epi16(aabs, _mm256_sign_epi8(_mm256_shuffle_epi8(tbl, nib), act));
}

static void dot_x16_iq4_xs(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f), tbl = iq4_table(), m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3),
                  k32 = _mm256_set1_epi32(32), lo16 = _mm256_set1_epi32(0xffff);
    __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_iq4_xs)) {
        const block_q8_K *a = &y[b];
        __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
        pf_line(g, 0);
        pf_line(g, 1);
        #pragma GCC unroll 1
        for (int j = 0; j < 8; j++) {
            for (int c = 0; c < 4; c++) pf_line(g, 2 + 4 * j + c);
            __m256i sc[2];
            #pragma GCC unroll 2
            for (int p = 0; p < 2; p++) {
                /* ls_j - 32 in both int16 halves of each lane */
                const __m256i ls = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(hl(g, 1, p), 4 * j), m15),
                                                   _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(hl(g, 0, p), 16 + 2 * j), m3), 4));
                const __m256i v = _mm256_sub_epi32(ls, k32);
                sc[p] = _mm256_or_si256(_mm256_and_si256(v, lo16), _mm256_slli_epi32(v, 16));
            }
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m256i al = bcast4(a->qs + 32 * j + 4 * c), ah = bcast4(a->qs + 32 * j + 16 + 4 * c);
                const __m256i aal = _mm256_abs_epi8(al), aah = _mm256_abs_epi8(ah);
                #pragma GCC unroll 2
                for (int p = 0; p < 2; p++) {
                    const __m256i w = hl(g, 2 + 4 * j + c, p);
                    const __m256i ml = iq4_mul(tbl, _mm256_and_si256(w, m4), aal, al);
                    const __m256i mh = iq4_mul(tbl, _mm256_and_si256(_mm256_srli_epi16(w, 4), m4), aah, ah);
                    isum[p] = _mm256_add_epi32(isum[p], _mm256_add_epi32(_mm256_madd_epi16(ml, sc[p]), _mm256_madd_epi16(mh, sc[p])));
                }
            }
        }
        const __m256 yd = _mm256_set1_ps(a->d);
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            __m256 dx, unused;
            q_dpair(g, 0, p, &dx, &unused);
            sum[p] = _mm256_add_ps(sum[p], _mm256_mul_ps(_mm256_mul_ps(dx, yd), _mm256_cvtepi32_ps(isum[p])));
        }
    }
    _mm256_storeu_ps(s, sum[0]);
    _mm256_storeu_ps(s + 8, sum[1]);
}

/* ---------------- 32-element block types ----------------
 * Block b's value (its exact int32 sum, then the reference's scale products)
 * goes into accumulator b % 8 of each half; the eight are folded at the end
 * as mf_lanes_fold does (quant/lanes.h), per lane. Each ISUM gives both
 * halves' exact sums of block b: is[p] for rows 8p .. 8p + 7. */

static inline __m256i ones16(void) { return _mm256_set1_epi16(1); }

/* the sum of a Q8_0 activation block's 32 quants, in every lane */
static inline __m256i act_sum(const block_q8_0 *a) {
    const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)a->qs)), ones16());
    return _mm256_set1_epi32(mf_hsum_i32_8(s));
}

/* the stored bytes are q + 128: back to q, then |q| * sign(a, q) */
static inline void q8_0_isum(const uint8_t *g, const block_q8_0 *a, __m256i is[2]) {
    const __m256i m80 = _mm256_set1_epi8((char)0x80);
    is[0] = is[1] = _mm256_setzero_si256();
    #pragma GCC unroll 8
    for (int w = 0; w < 8; w++) {
        const __m256i act = bcast4(a->qs + 4 * w);
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            const __m256i q = _mm256_xor_si256(hl(g, w, p), m80);
            const __m256i m = _mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(act, q));
            is[p] = _mm256_add_epi32(is[p], _mm256_madd_epi16(m, ones16()));
        }
    }
}

/* levels * activation of a block's 4 nibble words at line w0 (qs: the
 * activation's 32 quants), exact int32 per lane */
static inline void nib_sums(const uint8_t *g, int w0, const int8_t *qs, __m256i is[2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i p16[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i al = bcast4(qs + 4 * c), ah = bcast4(qs + 16 + 4 * c);
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            const __m256i v = hl(g, w0 + c, p);
            p16[p] = _mm256_add_epi16(p16[p], _mm256_maddubs_epi16(_mm256_and_si256(v, m4), al));
            p16[p] = _mm256_add_epi16(p16[p], _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), ah));
        }
    }
    for (int p = 0; p < 2; p++) is[p] = _mm256_madd_epi16(p16[p], ones16());
}

static inline void q4_0_isum(const uint8_t *g, const block_q8_0 *a, __m256i is[2]) {
    nib_sums(g, 0, a->qs, is);
    const __m256i off = _mm256_slli_epi32(act_sum(a), 3);
    for (int p = 0; p < 2; p++) is[p] = _mm256_sub_epi32(is[p], off);
}

static inline void q4_1_isum(const uint8_t *g, const block_q8_1 *a, __m256i is[2]) { nib_sums(g, 1, a->qs, is); }

static inline void iq4_nl_isum(const uint8_t *g, const block_q8_0 *a, __m256i is[2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), tbl = iq4_table();
    is[0] = is[1] = _mm256_setzero_si256();
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i al = bcast4(a->qs + 4 * c), ah = bcast4(a->qs + 16 + 4 * c);
        const __m256i aal = _mm256_abs_epi8(al), aah = _mm256_abs_epi8(ah);
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            const __m256i v = hl(g, c, p);
            const __m256i m = _mm256_add_epi32(_mm256_madd_epi16(iq4_mul(tbl, _mm256_and_si256(v, m4), aal, al), ones16()),
                                               _mm256_madd_epi16(iq4_mul(tbl, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4), aah, ah), ones16()));
            is[p] = _mm256_add_epi32(is[p], m);
        }
    }
}

/* 5-bit levels * activation: qh (regrouped: bit t of byte i = 5th bit of
 * element 4t + i) at line wh, the nibbles at lines wq .. wq + 3 */
static inline void q5_sums(const uint8_t *g, int wh, int wq, const int8_t *qs, __m256i is[2]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), m10 = _mm256_set1_epi8(0x10);
    __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, hi[2] = {lo[0], lo[0]};
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m256i al = bcast4(qs + 4 * c), ah = bcast4(qs + 16 + 4 * c);
        #pragma GCC unroll 2
        for (int p = 0; p < 2; p++) {
            /* elements 4c.. take bit c, elements 16 + 4c.. bit 4 + c */
            const __m256i qh = hl(g, wh, p), v = hl(g, wq + c, p);
            const __m256i hlo = _mm256_and_si256(_mm256_slli_epi16(qh, 4 - c), m10);
            const __m256i hhi = _mm256_and_si256(c ? _mm256_srli_epi16(qh, c) : qh, m10);
            lo[p] = _mm256_add_epi16(lo[p], _mm256_maddubs_epi16(_mm256_or_si256(_mm256_and_si256(v, m4), hlo), al));
            hi[p] = _mm256_add_epi16(
                hi[p], _mm256_maddubs_epi16(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), hhi), ah));
        }
    }
    for (int p = 0; p < 2; p++) is[p] = _mm256_add_epi32(_mm256_madd_epi16(lo[p], ones16()), _mm256_madd_epi16(hi[p], ones16()));
}

static inline void q5_0_isum(const uint8_t *g, const block_q8_0 *a, __m256i is[2]) {
    q5_sums(g, 0, 1, a->qs, is);
    const __m256i off = _mm256_slli_epi32(act_sum(a), 4);
    for (int p = 0; p < 2; p++) is[p] = _mm256_sub_epi32(is[p], off);
}

static inline void q5_1_isum(const uint8_t *g, const block_q8_1 *a, __m256i is[2]) { q5_sums(g, 1, 2, a->qs, is); }

/* One kernel body per type: ISUM gives block b's exact sums, VALUE its float
 * value exactly as the type's reference writes it (dx: 8 rows' scales, dy:
 * the activation block's, fi: the sums as floats). */
#define X16_LEGACY(name, block_t, WORDS, ISUM, VALUE)                                                            \
    static void name(int n, float *s, const void *vg, const void *vy) {                                         \
        const uint8_t *g = vg;                                                                                   \
        const block_q8_0 *y = vy;                                                                                \
        const size_t gs = 16 * sizeof(block_t);                                                                  \
        const int nb = n / 32;                                                                                   \
        __m256 acc[8][2];                                                                                        \
        for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();                                \
        for (int b0 = 0; b0 < nb; b0 += 8) {                                                                     \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) {                                                \
                const int b = b0 + l;                                                                            \
                if (b >= nb) break;                                                                              \
                const uint8_t *gb = g + (size_t)b * gs;                                                          \
                for (size_t i = 0; i < gs; i += 64) pf_line(gb, (int)(i / 64));                                \
                __m256i is[2];                                                                                   \
                ISUM(gb, &y[b], is);                                                                             \
                const __m256 dy = _mm256_set1_ps(_cvtsh_ss(y[b].d));                                             \
                _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) {                                            \
                    const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(gb + 64 * (WORDS) + 16 * p))); \
                    const __m256 fi = _mm256_cvtepi32_ps(is[p]);                                                 \
                    acc[l][p] = _mm256_add_ps(acc[l][p], VALUE);                                                 \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        for (int p = 0; p < 2; p++) {                                                                            \
            for (int i = 0; i < 4; i++) acc[i][p] = _mm256_add_ps(acc[i][p], acc[i + 4][p]);                     \
            for (int i = 0; i < 2; i++) acc[i][p] = _mm256_add_ps(acc[i][p], acc[i + 2][p]);                     \
            _mm256_storeu_ps(s + 8 * p, _mm256_add_ps(acc[0][p], acc[1][p]));                                    \
        }                                                                                                        \
    }

/* references: Q8_0 (float)sumi * (dx * dy); Q4_0 (float)sumi * dx * dy; Q5_0 (dx * dy) * (float)sumi */
X16_LEGACY(dot_x16_q8_0, block_q8_0, 8, q8_0_isum, _mm256_mul_ps(fi, _mm256_mul_ps(dx, dy)))
X16_LEGACY(dot_x16_q4_0, block_q4_0, 4, q4_0_isum, _mm256_mul_ps(_mm256_mul_ps(fi, dx), dy))
X16_LEGACY(dot_x16_q5_0, block_q5_0, 5, q5_0_isum, _mm256_mul_ps(_mm256_mul_ps(dx, dy), fi))
X16_LEGACY(dot_x16_iq4_nl, block_iq4_nl, 4, iq4_nl_isum, _mm256_mul_ps(_mm256_mul_ps(dx, dy), fi))

/* Q4_1 / Q5_1: line 0 = d | m << 16; per block (dx * dy) * sumi + mx * sy,
 * as the reference */
#define X16_DM(name, block_t, ISUM)                                                                              \
    static void name(int n, float *s, const void *vg, const void *vy) {                                         \
        const uint8_t *g = vg;                                                                                   \
        const block_q8_1 *y = vy;                                                                                \
        const size_t gs = 16 * sizeof(block_t);                                                                  \
        const int nb = n / 32;                                                                                   \
        __m256 acc[8][2];                                                                                        \
        for (int i = 0; i < 8; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();                                \
        for (int b0 = 0; b0 < nb; b0 += 8) {                                                                     \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) {                                                \
                const int b = b0 + l;                                                                            \
                if (b >= nb) break;                                                                              \
                const uint8_t *gb = g + (size_t)b * gs;                                                          \
                for (size_t i = 0; i < gs; i += 64) pf_line(gb, (int)(i / 64));                                \
                __m256i is[2];                                                                                   \
                ISUM(gb, &y[b], is);                                                                             \
                const __m256 dy = _mm256_set1_ps(_cvtsh_ss(y[b].d)), sy = _mm256_set1_ps(_cvtsh_ss(y[b].s));     \
                _Pragma("GCC unroll 2") for (int p = 0; p < 2; p++) {                                            \
                    __m256 dx, mx;                                                                               \
                    q_dpair(gb, 0, p, &dx, &mx);                                                                 \
                    const __m256 v = _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(dx, dy), _mm256_cvtepi32_ps(is[p])), \
                                                   _mm256_mul_ps(mx, sy));                                       \
                    acc[l][p] = _mm256_add_ps(acc[l][p], v);                                                     \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
        for (int p = 0; p < 2; p++) {                                                                            \
            for (int i = 0; i < 4; i++) acc[i][p] = _mm256_add_ps(acc[i][p], acc[i + 4][p]);                     \
            for (int i = 0; i < 2; i++) acc[i][p] = _mm256_add_ps(acc[i][p], acc[i + 2][p]);                     \
            _mm256_storeu_ps(s + 8 * p, _mm256_add_ps(acc[0][p], acc[1][p]));                                    \
        }                                                                                                        \
    }

X16_DM(dot_x16_q4_1, block_q4_1, q4_1_isum)
X16_DM(dot_x16_q5_1, block_q5_1, q5_1_isum)

/* ---------------- BF16 ----------------
 * As dotx16_vnni_avx512.c's: line w (columns 2w and 2w + 1) feeds lanes
 * 2w % 32 and (2w + 1) % 32; a shift or a mask of each 8-row half gives a
 * column's floats, and one f32 fma adds them to the lane's run (two 8-float
 * registers per lane). Every 256 columns the runs are widened and added to
 * the double lanes (four 4-double vectors each, rows 4q .. 4q + 3). */
static void dot_x16_bf16(int n, float *s, const void *vg, const void *vy) {
    enum { BLK = MF_DDOT_LANES * MF_BF16_RUN };
    const uint8_t *g = vg;
    const uint16_t *y = vy;
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256d acc[32][4];
    float yf[BLK];
    for (int l = 0; l < 32; l++)
        for (int q = 0; q < 4; q++) acc[l][q] = _mm256_setzero_pd();
    for (int c0 = 0; c0 < n; c0 += BLK) {
        const int len = n - c0 < BLK ? n - c0 : BLK; /* even (the layout's rule) */
        int c = 0;
        for (; c + 8 <= len; c += 8) /* the block's activations as floats, once for all 16 rows */
            _mm256_storeu_ps(yf + c, _mm256_castsi256_ps(_mm256_slli_epi32(
                                         _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(y + c0 + c))), 16)));
        for (; c < len; c++) yf[c] = _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128((int)((uint32_t)y[c0 + c] << 16))));
        /* lanes 2j .. 2j + 3 (lines j + 16t and j + 1 + 16t) at a time, so
         * their runs stay in registers (the line-order walk kept all 64 of
         * them in memory: a load and a store per fma); each lane still adds
         * its columns in order. The next block is prefetched line by line in
         * memory order, one line per line used: prefetching the lines in the
         * walk's strided order streamed a fifth slower from memory. The
         * walk along t (lines j + 16t) is unrolled whole, 8 steps in a full
         * block: with its 16 lines' loads in one straight run the core
         * keeps more of them in flight (one thread from memory 12.6-13.1 ->
         * 17.4-19.4 GB/s on a Zen 3, two-thread BF16 decode 1.15x; from L2
         * 30.5 -> 25, but decode streams its weights from memory). */
        const uint8_t *gc = g + 32 * (size_t)c0;
        const int nw = len / 2;
        int pk = 0;
        for (int j = 0; j < 16; j += 2) {
            __m256 r[4][2];
            for (int l = 0; l < 4; l++) r[l][0] = r[l][1] = _mm256_setzero_ps();
            #pragma GCC unroll 8
            for (int w = j; w < nw; w += 16) {
                #pragma GCC unroll 2
                for (int e = 0; e < 2; e++) {
                    if (w + e >= nw) break;
                    _mm_prefetch((const char *)gc + 64 * (pk++ + BLK / 2), _MM_HINT_T0);
                    const __m256 ye = _mm256_set1_ps(yf[2 * (w + e)]), yo = _mm256_set1_ps(yf[2 * (w + e) + 1]);
                    #pragma GCC unroll 2
                    for (int p = 0; p < 2; p++) {
                        const __m256i v = hl(gc, w + e, p);
                        r[2 * e][p] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), ye, r[2 * e][p]);
                        r[2 * e + 1][p] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(v, hi)), yo, r[2 * e + 1][p]);
                    }
                }
            }
            for (int l = 0; l < 4; l++)
                for (int p = 0; p < 2; p++) {
                    acc[2 * j + l][2 * p] = _mm256_add_pd(acc[2 * j + l][2 * p], _mm256_cvtps_pd(_mm256_castps256_ps128(r[l][p])));
                    acc[2 * j + l][2 * p + 1] = _mm256_add_pd(acc[2 * j + l][2 * p + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(r[l][p], 1)));
                }
        }
    }
    for (int h = 16; h >= 1; h /= 2)
        for (int l = 0; l < h; l++)
            for (int q = 0; q < 4; q++) acc[l][q] = _mm256_add_pd(acc[l][q], acc[l + h][q]);
    for (int q = 0; q < 4; q++) _mm_storeu_ps(s + 4 * q, _mm256_cvtpd_ps(acc[0][q]));
}

void mf_cpu_reg_dotx16_avx2(mf_type_traits *tab) {
    tab[MF_TYPE_Q2_K].vec_dot_x16 = dot_x16_q2_k;
    tab[MF_TYPE_Q3_K].vec_dot_x16 = dot_x16_q3_k;
    tab[MF_TYPE_Q4_K].vec_dot_x16 = dot_x16_q4_k;
    tab[MF_TYPE_Q5_K].vec_dot_x16 = dot_x16_q5_k;
    tab[MF_TYPE_Q6_K].vec_dot_x16 = dot_x16_q6_k;
    tab[MF_TYPE_Q4_0].vec_dot_x16 = dot_x16_q4_0;
    tab[MF_TYPE_Q5_0].vec_dot_x16 = dot_x16_q5_0;
    tab[MF_TYPE_Q8_0].vec_dot_x16 = dot_x16_q8_0;
    tab[MF_TYPE_IQ4_XS].vec_dot_x16 = dot_x16_iq4_xs;
    tab[MF_TYPE_IQ4_NL].vec_dot_x16 = dot_x16_iq4_nl;
    tab[MF_TYPE_Q4_1].vec_dot_x16 = dot_x16_q4_1;
    tab[MF_TYPE_Q5_1].vec_dot_x16 = dot_x16_q5_1;
    tab[MF_TYPE_BF16].vec_dot_x16 = dot_x16_bf16;
}
