/* walk_kern.c - the scalar twins of the walk's gather kernels (the order
 * walk_kern.h fixes) and the choice of kernel for the CPU. */
#include "vindex/walk_kern.h"
#include "cpu/kern/features.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <math.h>
#include <stdint.h>

static void axpy_f32(float a, const void *row, int n, float *acc) {
    const float *w = row;
    for (int i = 0; i < n; i++) acc[i] = fmaf(a, w[i], acc[i]);
}

static void axpy_f16(float a, const void *row, int n, float *acc) {
    const mf_fp16 *w = row;
    for (int i = 0; i < n; i++) acc[i] = fmaf(a, mf_fp16_to_fp32(w[i]), acc[i]);
}

static void axpy_q8_0(float a, const void *row, int n, float *acc) {
    const block_q8_0 *w = row;
    for (int b = 0; b < n / 32; b++) {
        const float d = mf_fp16_to_fp32(w[b].d);
        for (int j = 0; j < 32; j++) acc[32 * b + j] = fmaf(a, d * (float)w[b].qs[j], acc[32 * b + j]);
    }
}

vx_axpy_fn vx_axpy_scalar(mf_type t) {
    switch (t) {
    case MF_TYPE_F32: return axpy_f32;
    case MF_TYPE_F16: return axpy_f16;
    case MF_TYPE_Q8_0: return axpy_q8_0;
    default: return NULL;
    }
}

vx_axpy_fn vx_axpy_best(mf_type t) {
    const mf_cpu_level lv = mf_cpu_init();
    vx_axpy_fn f = lv >= MF_CPU_AVX512 ? vx_axpy_avx512(t) : NULL;
    if (!f && lv >= MF_CPU_AVX2) f = vx_axpy_avx2(t);
    return f ? f : vx_axpy_scalar(t);
}
