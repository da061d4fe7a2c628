/* gemm_avx512.c - the prefill GEMM kernels for AVX-512 CPUs without VNNI
 * (maddubs + madd, 512-bit); the code is in gemm_kern.h. */
#if defined(__GNUC__) && !defined(__clang__)
/* must run on AVX-512 CPUs without VNNI/BF16: CMake compiles every
 * *_avx512.c with those flags, and GCC may turn int8 loops into vpdpbusd */
#pragma GCC target("no-avx512vnni,no-avx512bf16")
#endif
#define MF_GEMM_W 512
#define MF_GEMM_VNNI 0
#include "cpu/kern/gemm/gemm_kern.h"

void mf_gemm_reg_avx512(const mf_gemm_kind **tab) { register_gemm(tab); }
