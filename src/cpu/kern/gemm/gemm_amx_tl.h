/* gemm_amx_tl.h - gemm_amx.h's tile operations as the AMX instructions
 * (the file including it is compiled with -mamx-tile -mamx-int8
 * -mamx-bf16). */
#include <immintrin.h>

#define TL_CONFIG(c) _tile_loadconfig(c)
#define TL_LOAD(n, p, s) _tile_loadd(n, p, s)
#define TL_STORE(n, p, s) _tile_stored(n, p, s)
#define TL_ZERO(n) _tile_zero(n)
#define TL_DPBSSD(c, a, b) _tile_dpbssd(c, a, b)
#define TL_DPBSUD(c, a, b) _tile_dpbsud(c, a, b)
#define TL_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)
