/* knn_vnni_avx512.c - the q8_0 gates' integer pre-scan on AVX-512 VNNI,
 * bitwise equal to q8pre_scalar (knn_kern.c; knn_kern.h fixes the order).
 * A 512-bit register holds two 32-blocks of one row; vpdpbusd multiplies
 * the query's unsigned bytes (u = q + 128) by the row's signed ones, and a
 * second vpdpbusd by 1s gives the row's byte sums, so I = P - 128 S is the
 * exact integer dot of each 4-byte group. Four rows at a time; each
 * prefetches the bytes it is at in the row VX_PF_ROWS further on, as one
 * thread's few row streams did not keep DRAM busy by themselves. */
#include "vindex/knn_kern.h"
#include "quant/blocks.h"

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#ifndef VX_PF_ROWS
#define VX_PF_ROWS 8
#endif

static inline void red16(__m512 v, float *out) {
    float l[16];
    _mm512_storeu_ps(l, v);
    *out = vx_reduce8(l) + vx_reduce8(l + 8);
}

static void q8pre_vnni(const void *rows, size_t rb, int nr, const vx_q8q *q, int n, float *s, float *e) {
    const int nb = n / 32, np = nb / 2;
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i didx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512 sign = _mm512_set1_ps(-0.0f);
    int r = 0;
    for (; r < nr; r += 4) {
        const int m = nr - r < 4 ? nr - r : 4;
        const block_q8_0 *w[4];
        for (int k = 0; k < 4; k++) w[k] = (const block_q8_0 *)((const uint8_t *)rows + (size_t)(r + (k < m ? k : 0)) * rb);
        __m512 acc[4], err[4];
        for (int k = 0; k < 4; k++) acc[k] = _mm512_setzero_ps(), err[k] = _mm512_setzero_ps();
        for (int p = 0; p <= np; p++) {
            const int b = 2 * p;
            if (b >= nb) break;
            const int two = b + 1 < nb;
            const __m512i u = _mm512_loadu_si512(q->u + 32 * b);
            const __m512 dx = _mm512_loadu_ps(q->dx16 + 16 * p), c = _mm512_loadu_ps(q->c16 + 16 * p);
#pragma GCC unroll 4
            for (int k = 0; k < 4; k++) {
                /* the same bytes of the row VX_PF_ROWS on (a prefetch never faults, past the rows too) */
                _mm_prefetch((const char *)((uintptr_t)w[k] + VX_PF_ROWS * rb + 68 * (size_t)p), _MM_HINT_T0);
                const __m256i lo = _mm256_loadu_si256((const __m256i *)w[k][b].qs);
                const __m256i hi = two ? _mm256_loadu_si256((const __m256i *)w[k][b + 1].qs) : _mm256_setzero_si256();
                const __m512i wq = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                const __m512i P = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, wq);
                const __m512i S = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, wq);
                const __m512 I = _mm512_cvtepi32_ps(_mm512_sub_epi32(P, _mm512_slli_epi32(S, 7)));
                const uint32_t dd = (uint32_t)w[k][b].d | (two ? (uint32_t)w[k][b + 1].d << 16 : 0u);
                const __m512 d = _mm512_permutexvar_ps(didx, _mm512_castps128_ps512(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd))));
                acc[k] = _mm512_fmadd_ps(I, _mm512_mul_ps(d, dx), acc[k]);
                err[k] = _mm512_fmadd_ps(_mm512_andnot_ps(sign, d), c, err[k]);
            }
        }
        for (int k = 0; k < m; k++) red16(acc[k], &s[r + k]), red16(err[k], &e[r + k]);
    }
}

vx_q8pre_fn vx_q8pre_vnni(void) { return q8pre_vnni; }
