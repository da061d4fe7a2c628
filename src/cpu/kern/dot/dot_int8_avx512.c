/* dot_int8_avx512.c - the AVX-512 quantized dots for CPUs without VNNI
 * (maddubs + madd); the kernels are in dot_int8_avx512.h. */
#if defined(__GNUC__) && !defined(__clang__)
/* must run on AVX-512 CPUs without VNNI/BF16: keep the compiler from emitting
 * them (CMake compiles every *_avx512.c with those flags, and GCC turns plain
 * int8 loops into vpdpbusd when it may) */
#pragma GCC target("no-avx512vnni,no-avx512bf16")
#endif
#define MF_VNNI 0
#include "cpu/kern/dot/dot_int8_avx512.h"

void mf_cpu_reg_dot_int8_avx512(mf_type_traits *tab) { register_int8(tab); }
