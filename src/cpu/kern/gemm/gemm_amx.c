/* gemm_amx.c - the prefill GEMM kernels on AMX int8 and bf16 tiles (the
 * code is in gemm_amx.h). Registered only where mf_amx_init() (int8) or mf_amx_bf16_init()
 * (bf16) granted the tiles. */
#include "cpu/kern/gemm/gemm_amx_tl.h"
#define AMX_LVL_NAME "AMX"
#include "cpu/kern/gemm/gemm_amx.h"

void mf_gemm_reg_amx(const mf_gemm_kind **tab, const mf_gemm_kind **tab_mt) { register_amx(tab, tab_mt); }
void mf_gemm_reg_amx_bf16(const mf_gemm_kind **tab) { register_amx_bf16(tab); }
