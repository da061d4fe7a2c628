/* dotrows_avx512.c - multi-row dots (vec_dot_rows) for AVX-512 CPUs without
 * VNNI: the quantized kernels of dotrows_avx512.h compiled with maddubs +
 * madd, and the F32 / F16 kernels (which the VNNI level keeps).
 *
 * F32 / F16 (quant/lanes.h order 3): a tile of TILEF rows keeps each row's 64
 * float lanes as four 16-float accumulators; every step of 64 elements loads
 * (and for F16 widens) the activations once for all rows, and each row adds
 * x_i * y_i into lane i % 64 by one FMA (F16 products are exact, so the FMA
 * equals the reference's multiply-add). A last step shorter than 64 uses
 * masked FMAs, leaving lanes without an element as they are (the tail of
 * vec_dot, done once per tile); its loads stay inside the rows (see tilef). The fold is vec_dot's: +32, +16
 * lanes per row in registers, +8 (256-bit halves), then the 8-lane fold of the
 * tile's rows together (fold8x8), each add with vec_dot's operands. */
#if defined(__GNUC__) && !defined(__clang__)
/* must run on AVX-512 CPUs without VNNI/BF16: keep the compiler from emitting
 * them (CMake compiles every *_avx512.c with those flags) */
#pragma GCC target("no-avx512vnni,no-avx512bf16")
#endif
#define MF_VNNI 0
#include "cpu/kern/dot/dotrows_avx512.h"
#include "quant/lanes.h"

#define TILEF 4 /* rows per tile, float types */

/* 16 elements of an F32 or F16 row at p as floats */
AI __m512 fld16(int f16, const uint8_t *p) {
    if (f16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    return _mm512_loadu_ps(p);
}

AI __mmask16 first16(int c) { return (__mmask16)(c >= 16 ? 0xffff : c <= 0 ? 0 : (1u << c) - 1); }

AI void tilef(int f16, int R, int n, float *s, const uint8_t *x, size_t xs, const uint8_t *y) {
    const int es = f16 ? 2 : 4;
    __m512 acc[TILEF][4];
    #pragma GCC unroll 8
    for (int r = 0; r < TILEF; r++)
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) acc[r][j] = _mm512_setzero_ps();
    int i = 0;
    for (; i + MF_FDOT_LANES <= n; i += MF_FDOT_LANES) {
        __m512 yv[4];
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) yv[j] = fld16(f16, y + (size_t)(i + 16 * j) * es);
        #pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            #pragma GCC unroll 8
            for (int j = 0; j < 4; j++)
                acc[r][j] = _mm512_fmadd_ps(fld16(f16, x + r * xs + (size_t)(i + 16 * j) * es), yv[j], acc[r][j]);
    }
    if (i < n) {
        /* the tail (rem < 64 elements): activations from a zero-padded copy;
         * whole 16-element chunks of x by plain loads, the last partial one by
         * a load of x's last 16 elements moved down to its lanes (no masked
         * load reaches past the row: one that touches a page the row does
         * not own can take a slow assist) */
        const int rem = n - i, cnt = rem % 16;
        uint8_t ybuf[MF_FDOT_LANES * 4];
        memset(ybuf, 0, sizeof ybuf);
        memcpy(ybuf, y + (size_t)i * es, (size_t)rem * es);
        const __mmask16 m = first16(cnt);
        const __m512i down = _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32(16 - cnt));
#pragma GCC unroll 8
        for (int j = 0; j < 4; j++) {
            if (16 * j >= rem) break;
            const __m512 yv = fld16(f16, ybuf + 16 * j * es);
            if (16 * (j + 1) <= rem) {
#pragma GCC unroll 8
                for (int r = 0; r < R; r++)
                    acc[r][j] = _mm512_fmadd_ps(fld16(f16, x + r * xs + (size_t)(i + 16 * j) * es), yv, acc[r][j]);
                continue;
            }
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m512 xv;
                if (n >= 16) xv = _mm512_maskz_permutexvar_ps(m, down, fld16(f16, x + r * xs + (size_t)(n - 16) * es));
                else { /* a row shorter than 16 elements */
                    uint8_t xbuf[64];
                    memset(xbuf, 0, sizeof xbuf);
                    memcpy(xbuf, x + r * xs, (size_t)n * es);
                    xv = fld16(f16, xbuf);
                }
                acc[r][j] = _mm512_mask3_fmadd_ps(xv, yv, acc[r][j], m);
            }
        }
    }
    __m256 v[8];
    #pragma GCC unroll 8
    for (int r = 0; r < 8; r++) {
        if (r < R) {
            /* 64 -> 16 lanes: +32, +16; then +8 */
            const __m512 a = _mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][2]), _mm512_add_ps(acc[r][1], acc[r][3]));
            v[r] = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
        } else v[r] = _mm256_setzero_ps();
    }
    store_rows(s, fold8x8(v), R);
}

#define DEFINE_ROWSF(NAME, F16)                                                                          \
    static void NAME(int n, float *s, const void *vx, size_t xs, const void *vy, int nr) {             \
        const uint8_t *x = vx, *y = vy;                                                                \
        int r = 0;                                                                                     \
        for (; r + TILEF <= nr; r += TILEF) tilef(F16, TILEF, n, s + r, x + (size_t)r * xs, xs, y);    \
        x += (size_t)r * xs;                                                                           \
        s += r;                                                                                        \
        switch (nr - r) {                                                                              \
        case 1: tilef(F16, 1, n, s, x, xs, y); break;                                                  \
        case 2: tilef(F16, 2, n, s, x, xs, y); break;                                                  \
        case 3: tilef(F16, 3, n, s, x, xs, y); break;                                                  \
        default: break;                                                                                \
        }                                                                                              \
    }

DEFINE_ROWSF(rows_f32, 0)
DEFINE_ROWSF(rows_f16, 1)

void mf_cpu_reg_dotrows_avx512(mf_type_traits *tab) {
    register_rows_int8(tab);
    tab[MF_TYPE_F32].vec_dot_rows = rows_f32;
    tab[MF_TYPE_F16].vec_dot_rows = rows_f16;
}
