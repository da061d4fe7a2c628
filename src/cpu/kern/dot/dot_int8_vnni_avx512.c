/* dot_int8_vnni_avx512.c - the AVX-512 quantized dots with VNNI (vpdpbusd,
 * vpdpwssd); the kernels are in dot_int8_avx512.h. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("no-avx512bf16")
#endif
#define MF_VNNI 1
#include "cpu/kern/dot/dot_int8_avx512.h"

void mf_cpu_reg_dot_int8_vnni_avx512(mf_type_traits *tab) { register_int8(tab); }
