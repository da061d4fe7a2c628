/* attn_kernels_avx512.c - attention's scores and V accumulation on 512-bit
 * vectors, bitwise the AVX2 and scalar sets (attn_kernels.h):
 *  - scores: a dot keeps the reference's 8 lanes (element e in lane e % 8),
 *    so one 512-bit fma advances two keys' dots, key a in the low half and
 *    key b in the high one, against the query's 8 elements in both halves;
 *    the halves are folded as the AVX2 kernel folds its eight vectors.
 *  - accum: each accumulator element takes its fmas in key order whatever
 *    the vector width, so 16 columns a vector change nothing.
 * Half the fmas a key of the AVX2 kernels; the rest of the set is theirs. */
#include "cpu/kern/attn/attn_kernels.h"

#include <immintrin.h>

#include "cpu/kern/attn/fold_avx2.h"

/* elements [e, e + 8) of keys a and b side by side */
static inline __m512 key_pair(const float *a, const float *b, int e) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(a + e)), _mm256_loadu_ps(b + e), 1);
}

/* eight keys' 8-lane sums (four vectors of two keys) folded: lane r = key r */
static inline __m256 fold_pairs(const __m512 acc[4]) {
    __m256 s[8];
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        s[2 * r] = _mm512_castps512_ps256(acc[r]);
        s[2 * r + 1] = _mm512_extractf32x8_ps(acc[r], 1);
    }
    return fold8x8(s);
}

/* NQ (1 or 2) queries against keys [i, i + 8): the keys' pairs loaded once serve every query */
static inline __attribute__((always_inline)) void scores8(const int NQ, const float *const *q, const float *const *k,
                                                         int i, int d, __m256 vscale, float *const *o) {
    __m512 acc[2][4];
#pragma GCC unroll 2
    for (int j = 0; j < NQ; j++)
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) acc[j][r] = _mm512_setzero_ps();
    for (int e = 0; e < d; e += 8) {
        __m512 x[2];
#pragma GCC unroll 2
        for (int j = 0; j < NQ; j++) x[j] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q[j] + e));
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            const __m512 kp = key_pair(k[i + 2 * r], k[i + 2 * r + 1], e);
#pragma GCC unroll 2
            for (int j = 0; j < NQ; j++) acc[j][r] = _mm512_fmadd_ps(x[j], kp, acc[j][r]);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < NQ; j++) _mm256_storeu_ps(o[j] + i, _mm256_mul_ps(fold_pairs(acc[j]), vscale));
}

void mf_attn_scores_avx512(const float *const *q, int nq, const float *const *k, int nk, int d, float scale,
                           float *out, int ld) {
    const mf_attn_kernels *ref = mf_attn_kernels_avx2(MF_KV_F32);
    if (d % 8) {
        ref->scores(q, nq, k, nk, d, scale, out, ld);
        return;
    }
    const __m256 vscale = _mm256_set1_ps(scale);
    const int n8 = nk - nk % 8;
    int j = 0;
    for (; j + 2 <= nq; j += 2) {
        float *const o[2] = {out + (size_t)j * ld, out + (size_t)(j + 1) * ld};
        for (int i = 0; i < n8; i += 8) scores8(2, q + j, k, i, d, vscale, o);
    }
    for (; j < nq; j++) {
        float *const o[2] = {out + (size_t)j * ld, NULL};
        for (int i = 0; i < n8; i += 8) scores8(1, q + j, k, i, d, vscale, o);
    }
    for (j = 0; j < nq; j++) /* the last nk % 8 keys one dot each, as the AVX2 kernel */
        for (int i = n8; i < nk; i++) out[(size_t)j * ld + i] = ref->dot(q[j], k[i], d) * scale;
}

/* per query, NV * 16 accumulator columns in registers across the chunk's
 * keys (NV a compile-time constant in each instance, as in the AVX2 file) */
static inline __attribute__((always_inline)) void accum_zmm(const int NV, const float *w, int ld, int nq,
                                                           const float *const *v, int nk, int d, float *acc) {
    for (int j = 0; j < nq; j++) {
        __m512 r[16];
        float *a = acc + (size_t)j * d;
#pragma GCC unroll 16
        for (int e = 0; e < NV; e++) r[e] = _mm512_loadu_ps(a + 16 * e);
        const float *wj = w + (size_t)j * ld;
        for (int i = 0; i < nk; i++) {
            if (wj[i] == 0.0f) continue; /* as the reference: a zero weight adds nothing, not even -0 + 0 */
            const __m512 s = _mm512_set1_ps(wj[i]);
            const float *vi = v[i];
#pragma GCC unroll 16
            for (int e = 0; e < NV; e++) r[e] = _mm512_fmadd_ps(s, _mm512_loadu_ps(vi + 16 * e), r[e]);
        }
#pragma GCC unroll 16
        for (int e = 0; e < NV; e++) _mm512_storeu_ps(a + 16 * e, r[e]);
    }
}

void mf_attn_accum_avx512(const float *w, int ld, int nq, const float *const *v, int nk, int d, float *acc) {
    switch (d) { /* the common head sizes; others as the AVX2 set takes them */
    case 64: accum_zmm(4, w, ld, nq, v, nk, d, acc); return;
    case 128: accum_zmm(8, w, ld, nq, v, nk, d, acc); return;
    case 32: accum_zmm(2, w, ld, nq, v, nk, d, acc); return;
    case 96: accum_zmm(6, w, ld, nq, v, nk, d, acc); return;
    case 80: accum_zmm(5, w, ld, nq, v, nk, d, acc); return;
    case 256: accum_zmm(16, w, ld, nq, v, nk, d, acc); return;
    default: mf_attn_kernels_avx2(MF_KV_F32)->accum(w, ld, nq, v, nk, d, acc); return;
    }
}
