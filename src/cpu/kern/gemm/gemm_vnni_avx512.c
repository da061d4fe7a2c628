/* gemm_vnni_avx512.c - the prefill GEMM kernels with AVX-512 VNNI (vpdpbusd,
 * vpdpwssd); the code is in gemm_kern.h. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("no-avx512bf16")
#endif
#define MF_GEMM_W 512
#define MF_GEMM_VNNI 1
#include "cpu/kern/gemm/gemm_kern.h"

void mf_gemm_reg_vnni_avx512(const mf_gemm_kind **tab) { register_gemm(tab); }
