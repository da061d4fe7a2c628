/* gemm_amx.c - the prefill GEMM kernels on AMX int8 tiles (the code is in
 * gemm_amx.h). Registered only where mf_amx_init() granted the tiles. */
#include <immintrin.h>

#define TL_CONFIG(c) _tile_loadconfig(c)
#define TL_LOAD(n, p, s) _tile_loadd(n, p, s)
#define TL_STORE(n, p, s) _tile_stored(n, p, s)
#define TL_ZERO(n) _tile_zero(n)
#define TL_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#define TL_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#define AMX_LVL_NAME "AMX"
#include "cpu/kern/gemm/gemm_amx.h"

void mf_gemm_reg_amx(const mf_gemm_kind **tab) { register_amx(tab); }
