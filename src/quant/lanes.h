/* lanes.h - the float summation orders of the reference dots, written down once
 * so that the SIMD kernels in src/cpu/ can reproduce them bit for bit.
 *
 * Integer parts of the quantized dots are exact in any order; only the float
 * operations fix the result's bits. The references therefore choose orders a
 * vector unit reproduces cheaply, and the SIMD kernels follow them exactly:
 *
 * 1. 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL):
 *    each block gives one float value (its exact int32 sum, then the type's
 *    few scale products, in the order the type's reference writes them). Block
 *    b is added into lane b % MF_BLOCK_LANES of MF_BLOCK_LANES float partial
 *    sums (all +0 at the start), in block order; the lanes are folded by
 *    mf_lanes_fold at the end. A SIMD kernel computes the values of 8
 *    consecutive blocks as one 8-lane vector and adds it to one accumulator.
 *
 * 2. 256-element super-block types (K-quants, IQ4_XS, Q8_K): each super-block
 *    gives one float value, added in super-block order into a single float.
 *    The horizontal integer reduction per super-block is cheap next to the
 *    256 elements of integer work, so one float chain costs nothing.
 *
 * 3. F32 and F16 rows: element i goes into lane i % MF_FDOT_LANES as
 *    lane = fma(x_i, y_i, lane) (for F16 the product of two halves is exact
 *    in float, so lane + x_i*y_i is the same value), then the lanes are
 *    folded by mf_lanes_fold. 64 lanes are four 16-float AVX-512 or eight
 *    8-float AVX2 accumulators: enough independent chains to hide FMA latency.
 *
 * 4. BF16 rows: element i goes to lane i % MF_DDOT_LANES; per block of
 *    MF_DDOT_LANES * MF_BF16_RUN elements each lane sums its products in
 *    f32 (fma from +0; the product of two bf16 is exact in f32) and adds
 *    that run's sum to its double; the double lanes are folded by
 *    mf_lanes_fold_d and rounded to float once. ref_float.c says why bf16
 *    needs the double fold.
 *
 * A lane never holds -0 (it starts at +0, and a round-to-nearest sum is -0
 * only when both addends are), so a SIMD kernel may add +0 to a lane it has no
 * data for without changing its bits. */
#ifndef MF_QUANT_LANES_H
#define MF_QUANT_LANES_H

#define MF_BLOCK_LANES 8
#define MF_FDOT_LANES 64
#define MF_DDOT_LANES 32
#define MF_BF16_RUN 8

/* Pairwise fold of w lanes (w a power of two): the upper half is added onto
 * the lower half until one lane is left. This is the order of the usual
 * vector reduction (high 256 bits onto low, high 128 onto low, then within
 * 128 bits), so SIMD code folds its registers the same way. Clobbers l. */
static inline float mf_lanes_fold(float *l, int w) {
    for (int h = w / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) l[i] += l[i + h];
    return l[0];
}

static inline double mf_lanes_fold_d(double *l, int w) {
    for (int h = w / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) l[i] += l[i + h];
    return l[0];
}

#endif
