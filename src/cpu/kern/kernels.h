/* kernels.h - registration hooks of the SIMD kernel files (private to src/cpu).
 * Each hook fills in the traits entries its file implements and leaves the
 * others alone; dispatch.c calls a level's hooks only after CPUID said the
 * level is there, since the hooks themselves are compiled for that ISA. */
#ifndef MF_CPU_KERNELS_H
#define MF_CPU_KERNELS_H

#include "quant/types.h"

/* AVX2 + FMA + F16C */
void mf_cpu_reg_dot_float_avx2(mf_type_traits *tab);
void mf_cpu_reg_dot_legacy_avx2(mf_type_traits *tab);
void mf_cpu_reg_dot_kquant_avx2(mf_type_traits *tab);
void mf_cpu_reg_quantize_avx2(mf_type_traits *tab);
void mf_cpu_reg_dequant_avx2(mf_type_traits *tab);
void mf_cpu_reg_dotrows_avx2(mf_type_traits *tab); /* vec_dot_rows */
void mf_cpu_reg_dotx16_avx2(mf_type_traits *tab);  /* vec_dot_x16 */

/* AVX-512 F/BW/VL/DQ, without VNNI */
void mf_cpu_reg_dot_float_avx512(mf_type_traits *tab);
void mf_cpu_reg_dot_int8_avx512(mf_type_traits *tab);
void mf_cpu_reg_quantize_avx512(mf_type_traits *tab);
void mf_cpu_reg_dequant_avx512(mf_type_traits *tab);
void mf_cpu_reg_dotrows_avx512(mf_type_traits *tab); /* vec_dot_rows */

/* AVX-512 VNNI */
void mf_cpu_reg_dot_int8_vnni_avx512(mf_type_traits *tab);
void mf_cpu_reg_dotrows_vnni_avx512(mf_type_traits *tab); /* vec_dot_rows */
void mf_cpu_reg_dotx16_vnni_avx512(mf_type_traits *tab);  /* vec_dot_x16 */

#endif
