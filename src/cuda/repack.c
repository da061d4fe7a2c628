/* repack.c - the device's layouts of Q8_0 and Q6_K rows (kernels.h,
 * MFC_T_Q8_0R: per run of 8 blocks their scales, then their levels;
 * MFC_T_Q6_KP: every odd super-block's parts reversed). Host code, so the
 * loader and the tests pack alike. */
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

void mfc_q6_kp_pack(const void *src, void *dst, size_t n_rows, int k) {
    const uint8_t *s = src;
    uint8_t *d = dst;
    const size_t nsb = n_rows * (size_t)(k / 256); /* even per row, so pairs never straddle rows */
    for (size_t b = 0; b < nsb; b++, s += 210, d += 210) {
        if (!(b & 1)) {
            memcpy(d, s, 210);
            continue;
        }
        memcpy(d, s + 208, 2);         /* d */
        memcpy(d + 2, s + 192, 16);    /* scales */
        memcpy(d + 18, s + 128, 64);   /* high bits */
        memcpy(d + 82, s, 128);        /* low bits */
    }
}

bool mfc_dev_pack(int dev_type, const void *src, void *dst, size_t n_rows, int k) {
    if (dev_type == MFC_T_Q8_0R) mfc_q8_0r_pack(src, dst, n_rows, k);
    else if (dev_type == MFC_T_Q6_KP) mfc_q6_kp_pack(src, dst, n_rows, k);
    else return false;
    return true;
}
