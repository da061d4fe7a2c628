/* knn_kern.h - the gate KNN's dot kernels: nr stored gate rows (f32, f16 or
 * q8_0, row_bytes apart) against nx float queries (x_stride floats apart),
 * s[q * s_stride + r] = score of row r for query q.
 *
 * The float order is fixed so that the AVX2 kernels equal their scalar twins
 * bit for bit: element i of a row goes to lane i % 8 (a product, then an add,
 * never fused), lanes are combined as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)),
 * and elements past the last multiple of 8 are added one by one after that.
 * q8_0: per 32-block, lane j sums its four products q*x in order, and the
 * lane accumulator then adds d * that sum. */
#ifndef MF_VINDEX_KNN_KERN_H
#define MF_VINDEX_KNN_KERN_H

#include <stddef.h>

#include "quant/types.h"

typedef void (*vx_dot_fn)(const void *rows, size_t row_bytes, int nr, const float *x, size_t x_stride, int nx,
                          int n, float *s, size_t s_stride);

/* The scalar twin for f32 / f16 / q8_0 gates, NULL for other types. */
vx_dot_fn vx_dot_scalar(mf_type t);
/* The AVX2 kernel (NULL when not built for this type). */
vx_dot_fn vx_dot_avx2(mf_type t);
/* The AVX-512 kernel (F + BW + VL + DQ; NULL when not built for this type):
 * two rows' 8 lanes per 512-bit register, so it equals the same twin. */
vx_dot_fn vx_dot_avx512(mf_type t);
/* The fastest this CPU runs: AVX-512, else AVX2, else the twin
 * (MINFER_NO_AVX512=1 caps it at AVX2, MINFER_NO_AVX2=1 at the twin). All
 * three give the same bits. */
vx_dot_fn vx_dot_best(mf_type t);

static inline float vx_reduce8(const float l[8]) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

#endif
