/* gemm_avx2.c - the prefill GEMM kernels for AVX2 (maddubs + madd, 256-bit);
 * the code is in gemm_kern.h. */
#define MF_GEMM_W 256
#define MF_GEMM_VNNI 0
#include "cpu/kern/gemm/gemm_kern.h"

void mf_gemm_reg_avx2(const mf_gemm_kind **tab) { register_gemm(tab); }
