/* ref.h - plain-C reference kernels for every implemented type (the slow twins
 * that SIMD kernels are tested against). Naming: mf_ref_<op>_<type>. */
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

/* Q8_0 */
void mf_ref_to_float_q8_0(const void *src, float *dst, int64_t n);
void mf_ref_from_float_q8_0(const float *src, void *dst, int64_t n);
void mf_ref_vec_dot_q8_0_q8_0(int n, float *s, const void *x, const void *y);

#endif
