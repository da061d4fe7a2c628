/* kdot.h - the integer core shared by the reference K-quant dots.
 *
 * ggml's scalar K-quant dots accumulate in 8 int32 lanes (lane = element index
 * mod 8) and turn each lane into float separately: sums[l] += d * lane[l],
 * with the 8 float lanes added together only after the last super-block. The
 * float results depend on that shape, so the references keep it, and a SIMD
 * kernel that wants to be bitwise equal must keep it too (8 float lanes, one
 * multiply-add-free `sums[l] + d * (float)lane[l]` per super-block, then a
 * left-to-right reduction of lanes 0..7). */
#ifndef MF_QUANT_KDOT_H
#define MF_QUANT_KDOT_H

#include <stdint.h>

#include "quant/blocks.h"

/* lane[l] = sum over the 256 elements e with e % 8 == l of
 * scale[e / 16] * w[e] * a[e]. Integer arithmetic: exact in any order. */
static inline void mf_kdot_lanes(const int8_t w[QK_K], const int8_t a[QK_K], const int scale[QK_K / 16],
                                 int32_t lane[8]) {
    for (int l = 0; l < 8; l++) lane[l] = 0;
    for (int e = 0; e < QK_K; e++) lane[e & 7] += scale[e >> 4] * (w[e] * a[e]);
}

/* Adds one super-block's lanes into the float accumulators: sums[l] += d * lane[l]. */
static inline void mf_kdot_accumulate(float sums[8], float d, const int32_t lane[8]) {
    for (int l = 0; l < 8; l++) sums[l] += d * (float)lane[l];
}

#endif
