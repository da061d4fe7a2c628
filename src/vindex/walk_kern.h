/* walk_kern.h - the walk FFN's gather kernel: acc[0..n) += a * (one down row
 * decoded), the row f32, f16 or q8_0.
 *
 * Each element is one fmaf(a, w_i, acc_i) with w_i the row's exact decoded
 * value (f16 widens exactly; a q8_0 value d * q is exact in f32: an 11-bit
 * by 8-bit product). No sums cross elements, so a SIMD kernel equals its
 * scalar twin bit for bit whatever its width or tail handling, and a q8_0 or
 * f16 row adds exactly what its f32 decoding would. */
#ifndef MF_VINDEX_WALK_KERN_H
#define MF_VINDEX_WALK_KERN_H

#include "quant/types.h"

typedef void (*vx_axpy_fn)(float a, const void *row, int n, float *acc);

/* The scalar twin for f32 / f16 / q8_0 rows (q8_0: n a multiple of 32), NULL
 * for other types. */
vx_axpy_fn vx_axpy_scalar(mf_type t);
/* The AVX2 (+ FMA + F16C) and AVX-512 (F + BW) kernels, NULL when not built. */
vx_axpy_fn vx_axpy_avx2(mf_type t);
vx_axpy_fn vx_axpy_avx512(mf_type t);
/* The fastest this CPU runs (capped like vx_dot_best); all give the same bits. */
vx_axpy_fn vx_axpy_best(mf_type t);

#endif
