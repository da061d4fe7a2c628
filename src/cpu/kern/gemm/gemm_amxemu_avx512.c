/* gemm_amxemu_avx512.c - the AMX kernels of gemm_amx.h over a C model of
 * the tile instructions: the same data flow (layouts, unit order, integer
 * and float steps) runs and is tested on every AVX-512 VNNI CPU, and the
 * model is the scalar twin of the tile instructions. Tests only: never
 * chosen for a matmul. */
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef struct emu_tile {
    int rows, colsb;
    uint8_t d[16][64];
} emu_tile;
static _Thread_local emu_tile tl_t[8];

/* palette 1: colsb[i] at bytes 16 + 2i, rows[i] at byte 48 + i */
static void emu_config(const void *cfg) {
    const uint8_t *c = cfg;
    for (int i = 0; i < 8; i++) {
        uint16_t cb;
        memcpy(&cb, c + 16 + 2 * i, 2);
        tl_t[i].colsb = cb, tl_t[i].rows = c[48 + i];
        memset(tl_t[i].d, 0, sizeof tl_t[i].d);
    }
}
static void emu_load(int n, const void *p, long stride) {
    for (int r = 0; r < tl_t[n].rows; r++) memcpy(tl_t[n].d[r], (const uint8_t *)p + r * stride, (size_t)tl_t[n].colsb);
}
static void emu_store(int n, void *p, long stride) {
    for (int r = 0; r < tl_t[n].rows; r++) memcpy((uint8_t *)p + r * stride, tl_t[n].d[r], (size_t)tl_t[n].colsb);
}
static void emu_zero(int n) { memset(tl_t[n].d, 0, sizeof tl_t[n].d); }
/* C[m][j] += sum over k < colsb(A)/4, i < 4 of A[m][4k + i] * B[k][4j + i],
 * A signed, B signed (sb) or unsigned; int32 wrap-around as the instruction */
static void emu_dp(int c, int a, int b, int b_signed) {
    const emu_tile *A = &tl_t[a], *B = &tl_t[b];
    emu_tile *C = &tl_t[c];
    for (int m = 0; m < C->rows; m++)
        for (int j = 0; j < C->colsb / 4; j++) {
            int32_t acc;
            memcpy(&acc, &C->d[m][4 * j], 4);
            for (int k = 0; k < A->colsb / 4; k++)
                for (int i = 0; i < 4; i++) {
                    const int x = (int8_t)A->d[m][4 * k + i];
                    const int y = b_signed ? (int8_t)B->d[k][4 * j + i] : B->d[k][4 * j + i];
                    acc = (int32_t)((uint32_t)acc + (uint32_t)(x * y));
                }
            memcpy(&C->d[m][4 * j], &acc, 4);
        }
}

/* TDPBF16PS as the SDM's pseudo-code defines it: per C element two f32
 * partial sums (even and odd bf16 of each pair) start at 0, each takes its
 * products in k order as FMAs (round to nearest even), then C += (even +
 * odd). Modelled: make_fp32 (bf16 as the high half of an f32), every FMA
 * and add rounded to nearest even, DAZ on the bf16 inputs and on C, FTZ on
 * every result (signed zeros kept). Not modelled: which NaN's payload wins,
 * and anything the hardware does that the pseudo-code does not say; real
 * AMX may differ in the last bits (a wider internal sum, another order),
 * so tests of the real instruction use gemm_amx.h's bound, not bitwise. */
static float emu_daz(float x) { return fpclassify(x) == FP_SUBNORMAL ? copysignf(0.0f, x) : x; }
static float emu_bf(const uint8_t *p) {
    uint32_t u = (uint32_t)(p[0] | p[1] << 8) << 16;
    float f;
    memcpy(&f, &u, 4);
    return emu_daz(f);
}
static void emu_dpbf16(int c, int a, int b) {
    const emu_tile *A = &tl_t[a], *B = &tl_t[b];
    emu_tile *C = &tl_t[c];
    for (int m = 0; m < C->rows; m++)
        for (int n = 0; n < C->colsb / 4; n++) {
            float e = 0.0f, o = 0.0f, acc;
            for (int k = 0; k < A->colsb / 4; k++) {
                e = emu_daz(fmaf(emu_bf(&A->d[m][4 * k]), emu_bf(&B->d[k][4 * n]), e));
                o = emu_daz(fmaf(emu_bf(&A->d[m][4 * k + 2]), emu_bf(&B->d[k][4 * n + 2]), o));
            }
            memcpy(&acc, &C->d[m][4 * n], 4);
            acc = emu_daz(emu_daz(acc) + emu_daz(e + o));
            memcpy(&C->d[m][4 * n], &acc, 4);
        }
}

#define TL_CONFIG(c) emu_config(c)
#define TL_LOAD(n, p, s) emu_load(n, p, s)
#define TL_STORE(n, p, s) emu_store(n, p, s)
#define TL_ZERO(n) emu_zero(n)
#define TL_DPBSSD(c, a, b) emu_dp(c, a, b, 1)
#define TL_DPBSUD(c, a, b) emu_dp(c, a, b, 0)
#define TL_DPBF16PS(c, a, b) emu_dpbf16(c, a, b)
#define AMX_LVL_NAME "AMX (emulated)"
#include "cpu/kern/gemm/gemm_amx.h"

void mf_gemm_reg_amxemu(const mf_gemm_kind **tab, const mf_gemm_kind **tab_mt) { register_amx(tab, tab_mt); }
void mf_gemm_reg_amxemu_bf16(const mf_gemm_kind **tab) { register_amx_bf16(tab); }
