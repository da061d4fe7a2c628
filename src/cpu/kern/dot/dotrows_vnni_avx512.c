/* dotrows_vnni_avx512.c - multi-row quantized dots (vec_dot_rows) with
 * AVX-512 VNNI (vpdpbusd, vpdpwssd); the kernels are in dotrows_avx512.h. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("no-avx512bf16")
#endif
#define MF_VNNI 1
#include "cpu/kern/dot/dotrows_avx512.h"

void mf_cpu_reg_dotrows_vnni_avx512(mf_type_traits *tab) { register_rows_int8(tab); }
