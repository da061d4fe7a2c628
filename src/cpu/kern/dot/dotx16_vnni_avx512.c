/* dotx16_vnni_avx512.c - decode kernels for weights in the x16 layout
 * (quant/interleave.h): 16 rows against one activation row, row r in 32-bit
 * lane r. Per 4 elements, one vpdpbusd of the 16 rows' levels against the
 * broadcast activation bytes; sub-block sums are scaled with vpmulld and each
 * row's float expression is evaluated per lane exactly as the reference
 * writes it (mul, mul, sub, then add to the running sum), so every lane is
 * bitwise the row's vec_dot.
 *
 * Each block group is prefetched X16_PREFETCH bytes ahead: without it one
 * core streamed these kernels at the same ~18 GB/s as the one-row dots even
 * though they compute 3-4x faster from cache; with it, close to the
 * machine's read bandwidth (docs/PERFORMANCE.md). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("no-avx512bf16")
#endif
#include "cpu/kern/features.h"
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/interleave.h"
#include "quant/lanes.h"
#include "quant/qsearch.h"

#include <immintrin.h>
#include <string.h>

#define X16_PREFETCH 4608

static inline void prefetch_group(const uint8_t *g, size_t bytes) {
    for (size_t c = 0; c < bytes; c += 64) _mm_prefetch((const char *)g + X16_PREFETCH + c, _MM_HINT_T0);
}

static inline __m512i bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* lane-wise d * isum - dmin * summ added to sum, as the reference orders it */
static inline __m512 k_tail(__m512 sum, __m512 d, __m512i isum, __m512 dmin, __m512i summ) {
    return _mm512_add_ps(sum, _mm512_sub_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)),
                                            _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(summ))));
}

static inline __m512 f16x16(const uint8_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* line w of a block group: word w of the 16 rows. The empty asm keeps it
 * in a register: without it GCC folds the load into each instruction that
 * reads the line (a nibble kernel's mask and its shift), two 64-byte loads
 * a line where one does. On a Zen 5 (bench_dot, one thread, 2026-12-06)
 * that took the x16 kernels from L2 1.05-1.59x faster (BF16 46 -> 58-63
 * GB/s, Q5_1 54 -> 86, Q5_K and IQ4_XS 1.3-1.5x); from memory within the
 * VM's noise. Q4_0 first kept line_f (one thread from memory 0.90-0.96x);
 * two-thread decode measured later took line: 1.08x, L2 59 -> 68 GB/s
 * (2026-12-07). Q2_K's and Q3_K's scale lines (their level lines take
 * line) and Q8_0, whose lines are read once anyway, keep line_f. */
static inline __m512i line(const uint8_t *g, int w) {
    __m512i v = _mm512_loadu_si512(g + 64 * w);
    __asm__("" : "+v"(v));
    return v;
}
static inline __m512i line_f(const uint8_t *g, int w) { return _mm512_loadu_si512(g + 64 * w); }

/* One Q4_K / Q5_K super-block group (the same scale and min layout): line 0
 * = d | dmin << 16, lines 1-3 = the 12 scale bytes, lines q0 + 8h + c = qs
 * bytes 32h + 4c ..: low nibbles are elements 64h + 4c .. of sub-block 2h,
 * high nibbles those of sub-block 2h + 1. Q5_K (qh0 >= 0): the fifth bit of
 * the low nibble's element is bit 2h of the same byte of qh line qh0 + c,
 * bit 2h + 1 for the high nibble's. Constant q0 / qh0 make two kernels. */
static inline __m512 q45k_group(const uint8_t *g, const block_q8_K *a, int q0, int qh0, __m512 sum) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10), m6 = _mm512_set1_epi32(63),
                  m2 = _mm512_set1_epi32(3), m4w = _mm512_set1_epi32(15);
    const __m512i w0 = line(g, 1), w1 = line(g, 2), w2 = line(g, 3);
    __m512i isum = _mm512_setzero_si512(), summ = _mm512_setzero_si512();
    #pragma GCC unroll 4
    for (int h = 0; h < 4; h++) {
        /* two accumulators each to halve the dependency chains */
        __m512i lo[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, hi[2] = {lo[0], lo[0]};
        #pragma GCC unroll 8
        for (int c = 0; c < 8; c++) {
            const __m512i v = line(g, q0 + 8 * h + c);
            __m512i wl = _mm512_and_si512(v, m4), wh = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
            if (qh0 >= 0) {
                /* bits 2h and 2h + 1 of each qh byte to bit 4 */
                const __m512i qh = line(g, qh0 + c);
                const __m512i bl = 2 * h < 4 ? _mm512_slli_epi16(qh, 4 - 2 * h) : 2 * h > 4 ? _mm512_srli_epi16(qh, 2 * h - 4) : qh;
                const __m512i bh = 2 * h + 1 < 4 ? _mm512_slli_epi16(qh, 3 - 2 * h) : _mm512_srli_epi16(qh, 2 * h - 3);
                wl = _mm512_or_si512(wl, _mm512_and_si512(bl, m10));
                wh = _mm512_or_si512(wh, _mm512_and_si512(bh, m10));
            }
            lo[c & 1] = _mm512_dpbusd_epi32(lo[c & 1], wl, bcast4(a->qs + 64 * h + 4 * c));
            hi[c & 1] = _mm512_dpbusd_epi32(hi[c & 1], wh, bcast4(a->qs + 64 * h + 32 + 4 * c));
        }
        #pragma GCC unroll 2
        for (int t = 0; t < 2; t++) {
            /* the 6-bit scale and min of sub-block j (the reference's get_scale_min) */
            const int j = 2 * h + t;
            __m512i sc, mn;
            if (j < 4) {
                sc = _mm512_and_si512(_mm512_srli_epi32(w0, 8 * j), m6);
                mn = _mm512_and_si512(_mm512_srli_epi32(w1, 8 * j), m6);
            } else {
                const int k = j - 4;
                sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 8 * k), m4w),
                                     _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 8 * k + 6), m2), 4));
                mn = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w2, 8 * k + 4), m4w),
                                     _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w1, 8 * k + 6), m2), 4));
            }
            const __m512i dot = t ? _mm512_add_epi32(hi[0], hi[1]) : _mm512_add_epi32(lo[0], lo[1]);
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot, sc));
            summ = _mm512_add_epi32(summ, _mm512_mullo_epi32(mn, _mm512_set1_epi32(a->bsums[2 * j] + a->bsums[2 * j + 1])));
        }
    }
    /* line 0: d in the low halves, dmin in the high halves */
    const __m512i dd = line(g, 0);
    const __m512 yd = _mm512_set1_ps(a->d);
    const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd)), yd);
    const __m512 dmin = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16))), yd);
    return k_tail(sum, d, isum, dmin, summ);
}

static void dot_x16_q4_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    __m512 sum = _mm512_setzero_ps();
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q4_K)) {
        prefetch_group(g, 16 * sizeof(block_q4_K));
        sum = q45k_group(g, &y[b], 4, -1, sum);
    }
    _mm512_storeu_ps(s, sum);
}

/* Q5_K: qh in lines 4-11, qs in lines 12-43 */
static void dot_x16_q5_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    __m512 sum = _mm512_setzero_ps();
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q5_K)) {
        prefetch_group(g, 16 * sizeof(block_q5_K));
        sum = q45k_group(g, &y[b], 12, 4, sum);
    }
    _mm512_storeu_ps(s, sum);
}

static void dot_x16_q6_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30);
    __m512 sum = _mm512_setzero_ps();
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q6_K)) {
        prefetch_group(g, 16 * sizeof(block_q6_K));
        const block_q8_K *a = &y[b];
        __m512i isum = _mm512_setzero_si512();
        #pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            #pragma GCC unroll 2
            for (int half = 0; half < 2; half++) {
                /* words c = 4 half .. 4 half + 3 of this 128-element half:
                 * quarter q of each is 4 elements of sub-block 8h + 2q + half */
                __m512i acc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(),
                                  _mm512_setzero_si512()};
                #pragma GCC unroll 4
                for (int c = 4 * half; c < 4 * half + 4; c++) {
                    const __m512i A = line(g, 16 * h + c), B = line(g, 16 * h + 8 + c), C = line(g, 32 + 8 * h + c);
                    const __m512i q[4] = {
                        _mm512_or_si512(_mm512_and_si512(A, m4), _mm512_and_si512(_mm512_slli_epi16(C, 4), m30)),
                        _mm512_or_si512(_mm512_and_si512(B, m4), _mm512_and_si512(_mm512_slli_epi16(C, 2), m30)),
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(A, 4), m4), _mm512_and_si512(C, m30)),
                        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(B, 4), m4),
                                        _mm512_and_si512(_mm512_srli_epi16(C, 2), m30))};
                    #pragma GCC unroll 4
                    for (int t = 0; t < 4; t++)
                        acc[t] = _mm512_dpbusd_epi32(acc[t], q[t], bcast4(a->qs + 128 * h + 32 * t + 4 * c));
                }
                #pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    /* scale * (sum of levels * a - 32 * bsum), exact in int32 */
                    const int j = 8 * h + 2 * t + half;
                    const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(line(g, 48 + j / 4), 24 - 8 * (j % 4)), 24);
                    const __m512i sub = _mm512_sub_epi32(acc[t], _mm512_set1_epi32(32 * a->bsums[j]));
                    isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(sub, sc));
                }
            }
        }
        const __m512 d = _mm512_mul_ps(f16x16(g + 64 * 52), _mm512_set1_ps(a->d));
        sum = _mm512_add_ps(sum, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)));
    }
    _mm512_storeu_ps(s, sum);
}

/* ---------------- Q2_K / Q3_K ----------------
 * Layouts as dotx16_avx2.c's: Q2_K lines 0-3 = scales (low nibble scale, high
 * nibble min; sub-block j in byte j % 4 of line j / 4), 4-19 = qs, 20 = d |
 * dmin << 16; Q3_K lines 0-7 = hmask, 8-23 = qs, 24-26 = scales, then d[16].
 * The 2-bit levels at bits 2k of qs word 8g + c are elements 128g + 32k + 4c
 * .. of sub-block 8g + 2k + c / 4; Q3_K's third bit of those elements is bit
 * 4g + k of hmask word c. A sub-block's 4 words go into one vpdpbusd
 * accumulator (levels 0..3 or 0..7 unsigned against the signed activations);
 * two sub-blocks' sums, exact in int16, then share one vpdpwssd against
 * their scales (byte_pair) where a vpmulld and an add each took: exact
 * int32 throughout. (The AVX2
 * kernels these replace on this level add vpmaddubsw pairs in int16 and
 * were compute-bound at about 55-60% of the read bandwidth.) */

/* the dpbusd sums of the 8 sub-blocks 8g + 2k + t (k = 0..3, t = 0..1) of
 * one 128-element half: acc[k][t]. hm0 < 0: no third bit (Q2_K). */
static inline void k23_acc(const uint8_t *g, const int8_t *qs, int q0, int hm0, int gi, __m512i acc[4][2]) {
    const __m512i m3 = _mm512_set1_epi8(3), m4 = _mm512_set1_epi8(4);
    for (int k = 0; k < 4; k++) acc[k][0] = acc[k][1] = _mm512_setzero_si512();
    #pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        const __m512i v = line(g, q0 + 8 * gi + c);
        const __m512i h = hm0 >= 0 ? line(g, hm0 + c) : v;
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i w = _mm512_and_si512(k ? _mm512_srli_epi16(v, 2 * k) : v, m3);
            if (hm0 >= 0) {
                /* bit 4g + k of each byte to bit 2 */
                const int sb = 4 * gi + k;
                const __m512i hb = sb < 2 ? _mm512_slli_epi16(h, 2 - sb) : sb > 2 ? _mm512_srli_epi16(h, sb - 2) : h;
                w = _mm512_or_si512(w, _mm512_and_si512(hb, m4));
            }
            acc[k][c >> 2] = _mm512_dpbusd_epi32(acc[k][c >> 2], w, bcast4(qs + 128 * gi + 32 * k + 4 * c));
        }
    }
}

/* The same with GFNI: vgf2p8affineqb multiplies each byte by an 8x8 bit
 * matrix (output bit i is the parity of the byte AND byte 7 - i of the
 * matrix qword), so one instruction moves the 2-bit level at bits 2k..2k+1
 * to bits 0-1 with the rest cleared, and one moves Q3_K's third bit sb to
 * bit 2: 2 or 3 instructions per 64 levels instead of 2 or 5, which took
 * both kernels from about 31-34 to 47-50 GB/s from L2 on a Zen 5. */
static inline __m512i bit_to(int from, int to) {
    return _mm512_set1_epi64((long long)((uint64_t)(1u << from) << (8 * (7 - to))));
}

__attribute__((target("gfni"))) static inline void k23_acc_gfni(const uint8_t *g, const int8_t *qs, int q0, int hm0,
                                                                 int gi, __m512i acc[4][2]) {
    __m512i mk[4], mh[4];
    for (int k = 0; k < 4; k++) {
        mk[k] = _mm512_or_si512(bit_to(2 * k, 0), bit_to(2 * k + 1, 1));
        mh[k] = bit_to(4 * gi + k, 2);
        acc[k][0] = acc[k][1] = _mm512_setzero_si512();
    }
    #pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        const __m512i v = line(g, q0 + 8 * gi + c);
        const __m512i h = hm0 >= 0 ? line(g, hm0 + c) : v;
        #pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            __m512i w = _mm512_gf2p8affine_epi64_epi8(v, mk[k], 0);
            if (hm0 >= 0) w = _mm512_or_si512(w, _mm512_gf2p8affine_epi64_epi8(h, mh[k], 0));
            acc[k][c >> 2] = _mm512_dpbusd_epi32(acc[k][c >> 2], w, bcast4(qs + 128 * gi + 32 * k + 4 * c));
        }
    }
}

/* bytes b and b + 1 of each 32-bit lane to the low bytes of its two 16-bit
 * halves, the rest zero (b = 0 or 2): a pair of sub-block scales placed for
 * one vpdpwssd against two sub-blocks' sums */
static inline __m512i byte_pair(__m512i w, int b) {
    const __m128i lo = _mm_setr_epi8(0, -128, 1, -128, 4, -128, 5, -128, 8, -128, 9, -128, 12, -128, 13, -128);
    return _mm512_shuffle_epi8(w, _mm512_broadcast_i32x4(b ? _mm_add_epi8(lo, _mm_setr_epi8(2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0)) : lo));
}

#define K23_ATTR
#define K23_NAME(f) f
#define K23_ACC k23_acc
#include "cpu/kern/dot/dotx16_k23_avx512.inc"
#undef K23_ATTR
#undef K23_NAME
#undef K23_ACC
#define K23_ATTR __attribute__((target("gfni")))
#define K23_NAME(f) f##_gfni
#define K23_ACC k23_acc_gfni
#include "cpu/kern/dot/dotx16_k23_avx512.inc"
#undef K23_ATTR
#undef K23_NAME
#undef K23_ACC

/* The IQ4 table + 128 (v ^ 0x80), in every 128-bit lane: vpdpbusd takes
 * the levels unsigned, and the 128 * sum(activation) this adds is taken off
 * again through the activation's block sums. */
static inline __m512i iq4_table_u(void) {
    return _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *)mf_iq4nl_values), _mm_set1_epi8((char)0x80)));
}

/* IQ4_XS: line 0 = d | scales_h << 16, line 1 = scales_l, lines 2 + 4j + c
 * = qs bytes 16j + 4c .. of sub-block j (low nibbles: elements 4c.., high:
 * 16 + 4c..). Per super-block isum = sum_j (ls_j - 32) * sumi_j in int32,
 * then sum += (dx * dy) * isum, as the reference. */
static void dot_x16_iq4_xs(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0f), tbl = iq4_table_u(), m15 = _mm512_set1_epi32(15), m3 = _mm512_set1_epi32(3),
                  k32 = _mm512_set1_epi32(32);
    __m512 sum = _mm512_setzero_ps();
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_iq4_xs)) {
        prefetch_group(g, 16 * sizeof(block_iq4_xs));
        const block_q8_K *a = &y[b];
        const __m512i w0 = line(g, 0), w1 = line(g, 1);
        __m512i isum = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            __m512i lo = _mm512_setzero_si512(), hi = lo;
            #pragma GCC unroll 4
            for (int c = 0; c < 4; c++) {
                const __m512i v = line(g, 2 + 4 * j + c);
                lo = _mm512_dpbusd_epi32(lo, _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4)), bcast4(a->qs + 32 * j + 4 * c));
                hi = _mm512_dpbusd_epi32(hi, _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)),
                                         bcast4(a->qs + 32 * j + 16 + 4 * c));
            }
            const __m512i dot = _mm512_sub_epi32(_mm512_add_epi32(lo, hi),
                                                 _mm512_set1_epi32(128 * (a->bsums[2 * j] + a->bsums[2 * j + 1])));
            const __m512i ls = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(w1, 4 * j), m15),
                                               _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(w0, 16 + 2 * j), m3), 4));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(dot, _mm512_sub_epi32(ls, k32)));
        }
        const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(w0)), _mm512_set1_ps(a->d));
        sum = _mm512_add_ps(sum, _mm512_mul_ps(d, _mm512_cvtepi32_ps(isum)));
    }
    _mm512_storeu_ps(s, sum);
}

/* ---------------- 32-element block types ----------------
 * Block b's value (its exact int32 sum, then the reference's scale products)
 * goes into accumulator b % 8; the eight are folded at the end as
 * mf_lanes_fold does (quant/lanes.h), per lane. */

/* 16 rows' f16 scales after the `words` lines of a block group */
static inline __m512 d16(const uint8_t *g, int words) { return f16x16(g + 64 * words); }

/* the sum of a Q8_0 activation block's 32 quants, in every lane */
static inline __m512i act_sum(const block_q8_0 *a) {
    const __m256i s8 = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1),
                                           _mm256_loadu_si256((const __m256i *)a->qs));
    return _mm512_set1_epi32(mf_hsum_i32_8(s8));
}

static inline void fold8_store(float *s, __m512 acc[8]) {
    for (int i = 0; i < 4; i++) acc[i] = _mm512_add_ps(acc[i], acc[i + 4]);
    for (int i = 0; i < 2; i++) acc[i] = _mm512_add_ps(acc[i], acc[i + 2]);
    _mm512_storeu_ps(s, _mm512_add_ps(acc[0], acc[1]));
}

/* exact sum of levels * activation over a block, minus off * sum(activation) */
static inline __m512i q8_0_isum(const uint8_t *g, const block_q8_0 *a) {
    __m512i p0 = _mm512_setzero_si512(), p1 = p0;
    #pragma GCC unroll 8
    for (int w = 0; w < 8; w += 2) {
        p0 = _mm512_dpbusd_epi32(p0, line_f(g, w), bcast4(a->qs + 4 * w));
        p1 = _mm512_dpbusd_epi32(p1, line_f(g, w + 1), bcast4(a->qs + 4 * w + 4));
    }
    /* the stored bytes are q + 128 */
    return _mm512_sub_epi32(_mm512_add_epi32(p0, p1), _mm512_slli_epi32(act_sum(a), 7));
}

static inline __m512i q4_0_isum(const uint8_t *g, const block_q8_0 *a) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i p0 = _mm512_setzero_si512(), p1 = p0;
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i v = line(g, c);
        p0 = _mm512_dpbusd_epi32(p0, _mm512_and_si512(v, m4), bcast4(a->qs + 4 * c));
        p1 = _mm512_dpbusd_epi32(p1, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), bcast4(a->qs + 16 + 4 * c));
    }
    return _mm512_sub_epi32(_mm512_add_epi32(p0, p1), _mm512_slli_epi32(act_sum(a), 3));
}

static inline __m512i q5_0_isum(const uint8_t *g, const block_q8_0 *a) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
    const __m512i qh = line(g, 0); /* regrouped: bit t of byte i = 5th bit of element 4t + i */
    __m512i p0 = _mm512_setzero_si512(), p1 = p0;
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i v = line(g, 1 + c);
        /* elements 4c..4c+3 (bit t = c) and 16+4c.. (bit t = 4 + c) */
        const __m512i hlo = _mm512_and_si512(_mm512_slli_epi16(qh, 4 - c), m10);
        const __m512i hhi = c == 0 ? _mm512_and_si512(qh, m10) : _mm512_and_si512(_mm512_srli_epi16(qh, c), m10);
        p0 = _mm512_dpbusd_epi32(p0, _mm512_or_si512(_mm512_and_si512(v, m4), hlo), bcast4(a->qs + 4 * c));
        p1 = _mm512_dpbusd_epi32(p1, _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), hhi),
                                 bcast4(a->qs + 16 + 4 * c));
    }
    return _mm512_sub_epi32(_mm512_add_epi32(p0, p1), _mm512_slli_epi32(act_sum(a), 4));
}

static inline __m512i iq4_nl_isum(const uint8_t *g, const block_q8_0 *a) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), tbl = iq4_table_u();
    __m512i p0 = _mm512_setzero_si512(), p1 = p0;
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i v = line(g, c);
        p0 = _mm512_dpbusd_epi32(p0, _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4)), bcast4(a->qs + 4 * c));
        p1 = _mm512_dpbusd_epi32(p1, _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4)),
                                 bcast4(a->qs + 16 + 4 * c));
    }
    return _mm512_sub_epi32(_mm512_add_epi32(p0, p1), _mm512_slli_epi32(act_sum(a), 7));
}

/* Q4_1 / Q5_1 against Q8_1: unsigned levels, no offset (the min goes
 * through the activation's s) */
static inline __m512i q4_1_isum(const uint8_t *g, const block_q8_1 *a) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i p0 = _mm512_setzero_si512(), p1 = p0;
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i v = line(g, 1 + c);
        p0 = _mm512_dpbusd_epi32(p0, _mm512_and_si512(v, m4), bcast4(a->qs + 4 * c));
        p1 = _mm512_dpbusd_epi32(p1, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4), bcast4(a->qs + 16 + 4 * c));
    }
    return _mm512_add_epi32(p0, p1);
}

static inline __m512i q5_1_isum(const uint8_t *g, const block_q8_1 *a) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), m10 = _mm512_set1_epi8(0x10);
    const __m512i qh = line(g, 1); /* regrouped as Q5_0's */
    __m512i p0 = _mm512_setzero_si512(), p1 = p0;
    #pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const __m512i v = line(g, 2 + c);
        const __m512i hlo = _mm512_and_si512(_mm512_slli_epi16(qh, 4 - c), m10);
        const __m512i hhi = c == 0 ? _mm512_and_si512(qh, m10) : _mm512_and_si512(_mm512_srli_epi16(qh, c), m10);
        p0 = _mm512_dpbusd_epi32(p0, _mm512_or_si512(_mm512_and_si512(v, m4), hlo), bcast4(a->qs + 4 * c));
        p1 = _mm512_dpbusd_epi32(p1, _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), hhi),
                                 bcast4(a->qs + 16 + 4 * c));
    }
    return _mm512_add_epi32(p0, p1);
}

static inline __m512 f16bcast(mf_fp16 h) { return _mm512_cvtph_ps(_mm256_set1_epi16((short)h)); }

/* One kernel body per type: ISUM gives block b's exact sums, VALUE its float
 * value exactly as the type's reference writes it (dx: the 16 rows' scales,
 * dy: the activation block's, fi: the sums as floats). */
#define X16_LEGACY(name, block_t, WORDS, ISUM, VALUE)                                                \
    static void name(int n, float *s, const void *vg, const void *vy) {                             \
        const uint8_t *g = vg;                                                                       \
        const block_q8_0 *y = vy;                                                                    \
        const size_t gs = 16 * sizeof(block_t);                                                      \
        const int nb = n / 32;                                                                       \
        __m512 acc[8];                                                                               \
        for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_ps();                                   \
        for (int b0 = 0; b0 < nb; b0 += 8) {                                                         \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) {                                    \
                const int b = b0 + l;                                                                \
                if (b >= nb) break;                                                                  \
                const uint8_t *gb = g + (size_t)b * gs;                                              \
                prefetch_group(gb, gs);                                                              \
                const __m512 dx = d16(gb, WORDS), dy = f16bcast(y[b].d);                             \
                const __m512 fi = _mm512_cvtepi32_ps(ISUM(gb, &y[b]));                               \
                acc[l] = _mm512_add_ps(acc[l], VALUE);                                               \
            }                                                                                        \
        }                                                                                            \
        fold8_store(s, acc);                                                                         \
    }

/* references: Q8_0 (float)sumi * (dx * dy); Q4_0 (float)sumi * dx * dy; Q5_0 (dx * dy) * (float)sumi;
 * IQ4_NL (dy * dx) * (float)sumi (products commute exactly) */
X16_LEGACY(dot_x16_q8_0, block_q8_0, 8, q8_0_isum, _mm512_mul_ps(fi, _mm512_mul_ps(dx, dy)))
X16_LEGACY(dot_x16_q4_0, block_q4_0, 4, q4_0_isum, _mm512_mul_ps(_mm512_mul_ps(fi, dx), dy))
X16_LEGACY(dot_x16_q5_0, block_q5_0, 5, q5_0_isum, _mm512_mul_ps(_mm512_mul_ps(dx, dy), fi))
X16_LEGACY(dot_x16_iq4_nl, block_iq4_nl, 4, iq4_nl_isum, _mm512_mul_ps(_mm512_mul_ps(dx, dy), fi))

/* Q4_1 / Q5_1: line 0 = d | m << 16; per block (dx * dy) * sumi + mx * sy,
 * as the reference */
#define X16_DM(name, block_t, ISUM)                                                                  \
    static void name(int n, float *s, const void *vg, const void *vy) {                             \
        const uint8_t *g = vg;                                                                       \
        const block_q8_1 *y = vy;                                                                    \
        const size_t gs = 16 * sizeof(block_t);                                                      \
        const int nb = n / 32;                                                                       \
        __m512 acc[8];                                                                               \
        for (int i = 0; i < 8; i++) acc[i] = _mm512_setzero_ps();                                   \
        for (int b0 = 0; b0 < nb; b0 += 8) {                                                         \
            _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) {                                    \
                const int b = b0 + l;                                                                \
                if (b >= nb) break;                                                                  \
                const uint8_t *gb = g + (size_t)b * gs;                                              \
                prefetch_group(gb, gs);                                                              \
                const __m512i dm = line(gb, 0);                                                      \
                const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));                        \
                const __m512 mx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))); \
                const __m512 fi = _mm512_cvtepi32_ps(ISUM(gb, &y[b]));                               \
                const __m512 v = _mm512_add_ps(_mm512_mul_ps(_mm512_mul_ps(dx, f16bcast(y[b].d)), fi), \
                                               _mm512_mul_ps(mx, f16bcast(y[b].s)));                 \
                acc[l] = _mm512_add_ps(acc[l], v);                                                   \
            }                                                                                        \
        }                                                                                            \
        fold8_store(s, acc);                                                                         \
    }

X16_DM(dot_x16_q4_1, block_q4_1, q4_1_isum)
X16_DM(dot_x16_q5_1, block_q5_1, q5_1_isum)

/* ---------------- F16 ----------------
 * The reference adds element i into lane i % 64 and folds the 64 lanes
 * pairwise (quant/lanes.h). Here each of the 64 lanes is one 16-row vector
 * (kept in memory: 64 registers do not exist), column c adds into vector
 * c % 64 in column order, and the fold is the same pairwise halving between
 * vectors. The product of two halves is exact in float, so the fma is the
 * reference's add. */
static void dot_x16_f16(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const mf_fp16 *y = vy;
    __m512 acc[64];
    _Alignas(64) float xf[64];
    for (int l = 0; l < 64; l++) acc[l] = _mm512_setzero_ps();
    for (int c0 = 0; c0 < n; c0 += 64) {
        const int cnt = n - c0 < 64 ? n - c0 : 64;
        if (cnt == 64) {
            for (int q = 0; q < 4; q++)
                _mm512_store_ps(xf + 16 * q, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(y + c0 + 16 * q))));
            #pragma GCC unroll 64
            for (int j = 0; j < 64; j++) {
                if (!(j & 1)) _mm_prefetch((const char *)g + 32 * (c0 + j) + X16_PREFETCH, _MM_HINT_T0);
                const __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + 32 * (size_t)(c0 + j))));
                acc[j] = _mm512_fmadd_ps(w, _mm512_set1_ps(xf[j]), acc[j]);
            }
        } else {
            for (int j = 0; j < cnt; j++) {
                const __m512 w = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(g + 32 * (size_t)(c0 + j))));
                acc[j] = _mm512_fmadd_ps(w, _mm512_set1_ps(mf_fp16_to_fp32(y[c0 + j])), acc[j]);
            }
        }
    }
    for (int h = 32; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) acc[l] = _mm512_add_ps(acc[l], acc[l + h]);
    _mm512_storeu_ps(s, acc[0]);
}

/* ---------------- BF16 ----------------
 * quant/lanes.h order 4: line w (columns 2w and 2w + 1, quant/interleave.c)
 * feeds lanes 2w % 32 and (2w + 1) % 32. A bf16 is the top half of a float:
 * a shift (even column) or a mask (odd column) of the line gives that
 * column's 16 rows as floats, and one f32 fma per column adds them to the
 * lane's run (16 rows in one register; the product of two bf16 is exact in
 * f32). Every 256 columns the 32 runs are widened and added to the double
 * lanes (two 8-double vectors each). That is two fmas per 64-byte line where
 * all-double lanes took four conversions and four double fmas. */
static void dot_x16_bf16(int n, float *s, const void *vg, const void *vy) {
    enum { BLK = MF_DDOT_LANES * MF_BF16_RUN, E = 8 };
    const uint8_t *g = vg;
    const uint16_t *y = vy;
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512d acc[32][2];
    _Alignas(64) float yf[BLK];
    for (int l = 0; l < 32; l++) acc[l][0] = acc[l][1] = _mm512_setzero_pd();
    for (int c0 = 0; c0 < n; c0 += BLK) {
        const int len = n - c0 < BLK ? n - c0 : BLK; /* even (the layout's rule) */
        int c = 0;
        for (; c + 16 <= len; c += 16)
            _mm512_store_ps(yf + c, _mm512_castsi512_ps(_mm512_slli_epi32(
                                        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(y + c0 + c))), 16)));
        for (; c < len; c++) yf[c] = mf_bf16_to_fp32(y[c0 + c]);
        /* Lanes 2j .. 2j + 15 (lines j .. j + 7, plus 16t) at a time; each
         * lane still adds its columns in order. The next block is prefetched
         * line by line in memory order, one line per line used (a half
         * block ahead measured 0.8x). Against the line-order walk on a Zen 5
         * (synth llama-3.2-1b BF16, -t 2, docs/PERFORMANCE.md): 1.07x. As
         * GCC 12 builds it (the lane loop unrolled by 4), the 16 runs live in
         * a stack array in L1, a load and a store around each fma; the same
         * walk unrolled whole, runs in registers, measured 0.90x, and 2 or 4
         * lane pairs at a time (runs in registers) were slower too. Why the
         * register forms lose is not known (no hardware counters here). */
        const uint8_t *gc = g + 32 * (size_t)c0;
        const int nw = len / 2;
        int pk = 0;
        for (int j = 0; j < 16; j += E) {
            __m512 r[2 * E];
            for (int l = 0; l < 2 * E; l++) r[l] = _mm512_setzero_ps();
            if (nw == BLK / 2) {
                #pragma GCC unroll 8
                for (int t = 0; t < 8; t++) {
                    #pragma GCC unroll 4
                    for (int e = 0; e < E; e++) {
                        const int w = j + 16 * t + e;
                        _mm_prefetch((const char *)gc + 64 * (pk++ + BLK / 2), _MM_HINT_T0);
                        const __m512i v = line(gc, w);
                        r[2 * e] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), _mm512_set1_ps(yf[2 * w]), r[2 * e]);
                        r[2 * e + 1] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, hi)), _mm512_set1_ps(yf[2 * w + 1]),
                                                       r[2 * e + 1]);
                    }
                }
            } else {
                for (int w = j; w < nw; w += 16)
                    for (int e = 0; e < E && w + e < nw; e++) {
                        const __m512i v = _mm512_loadu_si512(gc + 64 * (w + e));
                        r[2 * e] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), _mm512_set1_ps(yf[2 * (w + e)]), r[2 * e]);
                        r[2 * e + 1] = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(v, hi)), _mm512_set1_ps(yf[2 * (w + e) + 1]),
                                                       r[2 * e + 1]);
                    }
            }
            for (int l = 0; l < 2 * E; l++) {
                acc[2 * j + l][0] = _mm512_add_pd(acc[2 * j + l][0], _mm512_cvtps_pd(_mm512_castps512_ps256(r[l])));
                acc[2 * j + l][1] = _mm512_add_pd(acc[2 * j + l][1], _mm512_cvtps_pd(_mm512_extractf32x8_ps(r[l], 1)));
            }
        }
    }
    for (int h = 16; h >= 1; h /= 2)
        for (int l = 0; l < h; l++)
            for (int p = 0; p < 2; p++) acc[l][p] = _mm512_add_pd(acc[l][p], acc[l + h][p]);
    _mm256_storeu_ps(s, _mm512_cvtpd_ps(acc[0][0]));
    _mm256_storeu_ps(s + 8, _mm512_cvtpd_ps(acc[0][1]));
}

void mf_cpu_reg_dotx16_vnni_avx512(mf_type_traits *tab) {
    tab[MF_TYPE_Q4_K].vec_dot_x16 = dot_x16_q4_k;
    tab[MF_TYPE_Q6_K].vec_dot_x16 = dot_x16_q6_k;
    /* GFNI where the CPU has it (Ice Lake, Zen 4 and later), unless
     * MINFER_NO_GFNI=1 (the tests run both) */
    const bool gfni = mf_cpu_gfni();
    tab[MF_TYPE_Q2_K].vec_dot_x16 = gfni ? dot_x16_q2_k_gfni : dot_x16_q2_k;
    tab[MF_TYPE_Q3_K].vec_dot_x16 = gfni ? dot_x16_q3_k_gfni : dot_x16_q3_k;
    tab[MF_TYPE_Q5_K].vec_dot_x16 = dot_x16_q5_k;
    tab[MF_TYPE_Q4_0].vec_dot_x16 = dot_x16_q4_0;
    tab[MF_TYPE_Q5_0].vec_dot_x16 = dot_x16_q5_0;
    tab[MF_TYPE_Q8_0].vec_dot_x16 = dot_x16_q8_0;
    tab[MF_TYPE_F16].vec_dot_x16 = dot_x16_f16;
    tab[MF_TYPE_IQ4_XS].vec_dot_x16 = dot_x16_iq4_xs;
    tab[MF_TYPE_IQ4_NL].vec_dot_x16 = dot_x16_iq4_nl;
    tab[MF_TYPE_Q4_1].vec_dot_x16 = dot_x16_q4_1;
    tab[MF_TYPE_Q5_1].vec_dot_x16 = dot_x16_q5_1;
    tab[MF_TYPE_BF16].vec_dot_x16 = dot_x16_bf16;
}
