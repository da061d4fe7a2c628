/* ref.h - plain-C reference kernels for every implemented type (the slow twins
 * that SIMD kernels are tested against). Naming: mf_ref_<op>_<type>, and
 * mf_ref_vec_dot_<weight type>_<activation type>.
 *
 * from_float writes exactly the bytes llama-quantize writes for the type when
 * it has no importance matrix; vec_dot keeps the per-block float operations of
 * ggml's scalar kernels in order, so a SIMD kernel can be tested bitwise
 * equal to it. Row lengths must be multiples of the type's block size. */
#ifndef MF_QUANT_REF_H
#define MF_QUANT_REF_H

#include <stdint.h>

/* float types */
void mf_ref_to_float_f32(const void *src, float *dst, int64_t n);
void mf_ref_from_float_f32(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_f32(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_f16(const void *src, float *dst, int64_t n);
void mf_ref_from_float_f16(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_f16(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_bf16(const void *src, float *dst, int64_t n);
void mf_ref_from_float_bf16(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_bf16(int n, float *s, const void *x, const void *y);

/* 8-bit types (ref_q8.c); Q8_0, Q8_1 and Q8_K are also the activation types */
void mf_ref_to_float_q8_0(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q8_0(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q8_0_q8_0(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q8_1(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q8_1(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q8_1_q8_1(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q8_k(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q8_k(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q8_k_q8_k(int n, float *s, const void *x, const void *y);

/* legacy 32-weight blocks (ref_legacy.c) */
void mf_ref_to_float_q4_0(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q4_0(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q4_0_q8_0(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q4_1(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q4_1(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q4_1_q8_1(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q5_0(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q5_0(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q5_0_q8_0(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q5_1(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q5_1(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q5_1_q8_1(int n, float *s, const void *x, const void *y);

/* K-quants, 256-weight super-blocks (ref_kquant_23.c, ref_kquant_456.c) */
void mf_ref_to_float_q2_k(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q2_k(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q2_k_q8_k(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q3_k(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q3_k(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q3_k_q8_k(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q4_k(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q4_k(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q4_k_q8_k(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q5_k(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q5_k(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q5_k_q8_k(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_q6_k(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q6_k(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q6_k_q8_k(int n, float *s, const void *x, const void *y);

/* non-linear 4-bit (ref_iq4.c); from_float is llama-quantize's search */
void mf_ref_to_float_iq4_nl(const void *src, float *dst, int64_t n);
void mf_ref_from_float_iq4_nl(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_iq4_nl_q8_0(int n, float *s, const void *x, const void *y);
void mf_ref_to_float_iq4_xs(const void *src, float *dst, int64_t n);
void mf_ref_from_float_iq4_xs(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_iq4_xs_q8_k(int n, float *s, const void *x, const void *y);

#endif
