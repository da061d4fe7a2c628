/* repack.c - the device's Q8_0 layout for rows of whole super-blocks
 * (kernels.h, MFC_T_Q8_0R): per run of 8 blocks their scales, then their
 * levels. Host code, so the loader and the tests pack alike. */
#include "cuda/kernels.h"

#include <string.h>

void mfc_q8_0r_pack(const void *src, void *dst, size_t n_rows, int k) {
    const uint8_t *s = src;
    uint8_t *d = dst;
    const size_t runs = n_rows * (size_t)(k / 256);
    for (size_t r = 0; r < runs; r++, s += 272, d += 272)
        for (int b = 0; b < 8; b++) {
            memcpy(d + 2 * b, s + 34 * b, 2);
            memcpy(d + 16 + 32 * b, s + 34 * b + 2, 32);
        }
}
