/* gemm_amxemu_avx512.c - the AMX kernels of gemm_amx.h over a C model of
 * the tile instructions: the same data flow (layouts, unit order, integer
 * and float steps) runs and is tested on every AVX-512 VNNI CPU, and the
 * model is the scalar twin of the tile instructions. Tests only: never
 * chosen for a matmul. */
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

#define TL_CONFIG(c) emu_config(c)
#define TL_LOAD(n, p, s) emu_load(n, p, s)
#define TL_STORE(n, p, s) emu_store(n, p, s)
#define TL_ZERO(n) emu_zero(n)
#define TL_DPBSSD(c, a, b) emu_dp(c, a, b, 1)
#define TL_DPBSUD(c, a, b) emu_dp(c, a, b, 0)
#define AMX_LVL_NAME "AMX (emulated)"
#include "cpu/kern/gemm/gemm_amx.h"

void mf_gemm_reg_amxemu(const mf_gemm_kind **tab, const mf_gemm_kind **tab_mt) { register_amx(tab, tab_mt); }
