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
#include <stdint.h>

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

/* Two rows a and b, each anywhere, against one query x[n]: s[0] and s[1],
 * each bitwise the twin's score of that row. */
typedef void (*vx_dot2_fn)(const void *a, const void *b, const float *x, int n, float *s);
/* The AVX-512 kernel (one pass over both rows; NULL when not built), and the
 * fastest this CPU runs (else its vx_dot_fn once per row). */
vx_dot2_fn vx_dot2_avx512(mf_type t);
vx_dot2_fn vx_dot2_best(mf_type t);

/* The q8_0 gates' integer pre-scan (knn.c uses it for exact top-K): the
 * query quantized to int8 per 32-block once, each row's approximate score
 * from integer dot products, with a bound on its distance from the twin's
 * float score (knn_q8pre.c derives it).
 *   u[n]            round(x / dx_b) + 128 per element (1..255), n padded to 64
 *   dx16, c16       per pair of blocks p: 16 floats, lanes 0-7 for block 2p and
 *                   8-15 for block 2p+1 (0 past the last block): dx_b, and
 *                   c_b / 8, c_b the error coefficient of block b
 * Per row, 16 lanes: lane (h, j) of pair p takes bytes 4j..4j+3 of block
 * b = 2p + h: I = that 4-byte integer dot, then acc = fmaf((float)I,
 * d_b * dx_b, acc) and err = fmaf(|d_b|, c_b / 8, err), over p in order;
 * s = vx_reduce8(acc) + vx_reduce8(acc + 8), e likewise. */
typedef struct vx_q8q {
    const uint8_t *u;
    const float *dx16, *c16;
} vx_q8q;
typedef void (*vx_q8pre_fn)(const void *rows, size_t row_bytes, int nr, const vx_q8q *q, int n, float *s, float *e);
/* Quantizes the query x[n] (n a multiple of 32) into u, dx16 and c16
 * (sized for (n / 32 + 1) / 2 pairs); 0 when x has a value beyond 1e20 or
 * not finite (then the float scan must be used). knn.c derives c. */
int vx_q8_prep(const float *x, int n, uint8_t *u, float *dx16, float *c16);
/* The bound on |twin score - s| from the kernel's e: widened for the
 * roundings of e itself and of s - e, s + e (knn.c). */
static inline float vx_q8_widen(float s, float e) {
    return e * (1.0f + 0x1p-10f) + (s < 0 ? -s : s) * 0x1p-20f + 1e-30f;
}
/* The scalar twin, and the AVX-512 VNNI kernel (bitwise equal). */
vx_q8pre_fn vx_q8pre_scalar(void);
vx_q8pre_fn vx_q8pre_vnni(void);

static inline float vx_reduce8(const float l[8]) {
    return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
}

#endif
