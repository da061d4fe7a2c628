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
#include "cpu/kernels.h"
#include "quant/blocks.h"
#include "quant/interleave.h"

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

/* line w of a block group: word w of the 16 rows */
static inline __m512i line(const uint8_t *g, int w) { return _mm512_loadu_si512(g + 64 * w); }

static void dot_x16_q4_k(int n, float *s, const void *vg, const void *vy) {
    const uint8_t *g = vg;
    const block_q8_K *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0f), m6 = _mm512_set1_epi32(63), m2 = _mm512_set1_epi32(3),
                  m4w = _mm512_set1_epi32(15);
    __m512 sum = _mm512_setzero_ps();
    for (int b = 0; b < n / QK_K; b++, g += 16 * sizeof(block_q4_K)) {
        prefetch_group(g, 16 * sizeof(block_q4_K));
        const block_q8_K *a = &y[b];
        const __m512i w0 = line(g, 1), w1 = line(g, 2), w2 = line(g, 3);
        __m512i isum = _mm512_setzero_si512(), summ = _mm512_setzero_si512();
        #pragma GCC unroll 4
        for (int h = 0; h < 4; h++) {
            /* qs bytes 32h..32h+31 (lines 4+8h..): low nibbles are sub-block
             * 2h, high nibbles sub-block 2h+1, four consecutive elements per
             * word; two accumulators each to halve the dependency chains */
            __m512i lo[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()}, hi[2] = {lo[0], lo[0]};
            #pragma GCC unroll 8
            for (int c = 0; c < 8; c++) {
                const __m512i v = line(g, 4 + 8 * h + c);
                lo[c & 1] = _mm512_dpbusd_epi32(lo[c & 1], _mm512_and_si512(v, m4), bcast4(a->qs + 64 * h + 4 * c));
                hi[c & 1] = _mm512_dpbusd_epi32(hi[c & 1], _mm512_and_si512(_mm512_srli_epi16(v, 4), m4),
                                                bcast4(a->qs + 64 * h + 32 + 4 * c));
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
        sum = k_tail(sum, d, isum, dmin, summ);
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

void mf_cpu_reg_dotx16_vnni_avx512(mf_type_traits *tab) {
    tab[MF_TYPE_Q4_K].vec_dot_x16 = dot_x16_q4_k;
    tab[MF_TYPE_Q6_K].vec_dot_x16 = dot_x16_q6_k;
}
