/* gemm.h - the prefill GEMM: weight rows packed into 16-row panels, activation
 * rows into token tiles, and register-blocked SIMD kernels that reuse each
 * decoded weight block across a tile of tokens (private to src/cpu).
 *
 * Bitwise contract: every output element equals what the type's vec_dot gives
 * for that (weight row, token), whatever the tile shape, the batch size or the
 * thread count. The kernels keep the float orders of quant/lanes.h:
 *   - K-quants: one float chain per (row, token), one term per super-block in
 *     super-block order, each term the reference's own expression of exact
 *     integer sums;
 *   - 32-element blocks: block b into lane b % 8, lanes folded by
 *     mf_lanes_fold (the kernels walk the blocks lane by lane: each lane is an
 *     independent chain in block order, so visiting lane 0's blocks first,
 *     then lane 1's, ... adds the same values in the same order per lane);
 *   - F16/F32: element i into lane i % 64 by fma, then mf_lanes_fold.
 * Integer sums are exact in any order; gemm_kern.h says why no intermediate
 * overflows.
 *
 * Flow of one matmul (matmul.c drives it):
 *   1. tiles: the activation rows, already converted to the weight type's
 *      vec_dot_type, are regrouped per tile of nt tokens (mf_gemm_tile_build);
 *   2. each thread takes a range of panel groups (rows_per_call weight rows),
 *      packs them (kind->pack, once per call of the matmul) and runs the kernel
 *      over every token tile. */
#ifndef MF_CPU_GEMM_H
#define MF_CPU_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/kern/features.h"
#include "quant/types.h"

/* Activation tile layouts (gemm_layout.h), one per vec_dot_type a GEMM reads. */
typedef enum mf_gemm_act {
    MF_GEMM_ACT_Q8K, /* K-quants: Q8_K */
    MF_GEMM_ACT_Q80, /* 32-element block types: Q8_0 */
    MF_GEMM_ACT_F16, /* F16 */
    MF_GEMM_ACT_BF16, /* BF16 */
    /* AMX kernels: the Q8K / Q80 tile followed by the activation bytes
     * token-major, the operand a tile multiply loads (gemm_layout.h) */
    MF_GEMM_ACT_Q8K_AMX,
    MF_GEMM_ACT_Q80_AMX,
    /* AMX bf16 kernels: bf16 activations (BF16 weights), the F16 conversion
     * as bf16 hi + lo planes (F16 weights) (gemm_layout.h) */
    MF_GEMM_ACT_BF16_AMX,
    MF_GEMM_ACT_F16HL_AMX,
    MF_GEMM_ACT_COUNT
} mf_gemm_act;

/* Packs rows [0, nrows) (nrows <= panel_rows; the rest of the panel is
 * zero) of a weight whose rows are row_bytes apart, k columns, into panel. */
typedef void (*mf_gemm_pack_fn)(const uint8_t *w, size_t row_bytes, int nrows, int64_t k, uint8_t *panel);
/* The same panel from weights in the x16 layout (quant/interleave.h): rows
 * row0 .. row0 + nrows - 1 of the matrix whose groups start at x16. row0
 * is a multiple of the kind's panel_rows (matmul.c packs panel p of call u
 * at u * rows_per_call + p * panel_rows). */
typedef void (*mf_gemm_pack_x16_fn)(const uint8_t *x16, int64_t row0, int nrows, int64_t k, uint8_t *panel);

/* out[t * ldo + r] for r < nrows, t < ntok: the products of the
 * rows_per_call rows packed in `panels` (consecutive panels of panel_bytes)
 * with the nt tokens of `tile`. Rows and tokens past nrows / ntok are padding
 * and never stored. */
/* Kernels may write with non-temporal stores: callers issue a store fence
 * (mf_gemm_fence) before other threads read the output. */
typedef void (*mf_gemm_kernel_fn)(const uint8_t *panels, size_t panel_bytes, const uint8_t *tile, int64_t k,
                                  float *out, size_t ldo, int nrows, int ntok);

/* Several token tiles per call (AMX kinds): tile i of ntiles at
 * tiles + i * tile_bytes holds tokens 16i.. of the call; ntok tokens in all
 * (the last tile may be partial); out row t is token t. Lets a kernel load
 * each weight tile once for all the call's tokens. */
typedef void (*mf_gemm_kernel_tiles_fn)(const uint8_t *panels, size_t panel_bytes, const uint8_t *tiles,
                                        size_t tile_bytes, int ntiles, int64_t k, float *out, size_t ldo, int nrows,
                                        int ntok);

typedef struct mf_gemm_kind {
    const char *name;       /* e.g. "q4_K 32x6 AVX-512 VNNI" */
    mf_gemm_act act;
    int nt;                 /* tokens per tile */
    int panel_rows;         /* weight rows per packed panel */
    int rows_per_call;      /* weight rows per kernel call (a multiple of panel_rows) */
    int k_multiple;         /* k must be a multiple of this (else: vec_dot) */
    int min_rows;           /* batches of fewer tokens use vec_dot: below this the
                               pack and the padded tile cost more than decoding
                               each block per token (measured, docs/PERFORMANCE.md) */
    size_t (*panel_bytes)(int64_t k);
    mf_gemm_pack_fn pack;
    mf_gemm_kernel_fn kernel;
    mf_gemm_pack_x16_fn pack_x16; /* optional: NULL means unpack the rows, then pack */
    mf_gemm_kernel_tiles_fn kernel_tiles; /* optional: the driver then passes tiles_per_call tiles per call */
    int tiles_per_call;
} mf_gemm_kind;

/* The GEMM of weight type `type` at the SIMD level mf_cpu_init chose; NULL
 * when there is none (the matmul then uses vec_dot) or MINFER_NO_GEMM is set. */
const mf_gemm_kind *mf_gemm_get(mf_type type);
/* The kind for a batch of `rows` tokens: mf_gemm_get's, or below the AMX
 * kind's min_rows the VNNI kind it replaces (the caller still checks the
 * result's min_rows against vec_dot). */
const mf_gemm_kind *mf_gemm_pick(mf_type type, int rows);
/* The GEMM that `level` would use (NULL if none or the CPU lacks the level);
 * for tests and benchmarks that compare levels in one process. */
const mf_gemm_kind *mf_gemm_get_level(mf_type type, mf_cpu_level level);

/* Bytes of one tile of nt tokens over k columns. */
size_t mf_gemm_tile_bytes(mf_gemm_act act, int nt, int64_t k);
/* The type a tile layout is built from (Q8_K, Q8_0, F16, BF16). */
mf_type mf_gemm_act_type(mf_gemm_act act);
/* Bytes of the scratch mf_gemm_tile_build needs (converted rows). */
size_t mf_gemm_tile_tmp_bytes(mf_gemm_act act, int nt, int64_t k);
/* Builds one tile of nt tokens from ntok <= nt rows of k floats (ld apart):
 * each row goes through from_float (the conversion vec_dot would see) into
 * tmp (mf_gemm_tile_tmp_bytes), then into the tile; tokens past ntok are zero. */
void mf_gemm_tile_build(mf_gemm_act act, int nt, const float *x, size_t ld, int ntok, int64_t k,
                        mf_from_float_fn from_float, uint8_t *tmp, uint8_t *tile);

/* Orders the kernels' non-temporal stores before later stores (sfence). */
void mf_gemm_fence(void);

/* The AMX kinds (gemm_amx.h): the tile-multiply kernel of `type`, NULL if
 * none; with `emulated`, the same kernels over a C model of the tile
 * instructions (any AVX-512 VNNI CPU: tests of the data flow where there is
 * no AMX). The real ones only where mf_amx_init() is true. mf_gemm_get
 * returns the real kind at the VNNI level when mf_amx_enabled(). */
const mf_gemm_kind *mf_gemm_get_amx(mf_type type, int emulated);
/* The tile-mins variant of the AMX kind (Q4_K, Q5_K, Q2_K: the mins as a
 * third tile plane instead of vector steps; NULL for other types). mf_gemm_get
 * returns it instead of mf_gemm_get_amx's where MINFER_AMX_MINS=tile. */
const mf_gemm_kind *mf_gemm_get_amx_mt(mf_type type, int emulated);

/* The AMX bf16 kinds (TDPBF16PS, gemm_amx.h) of BF16 and F16 weights, NULL
 * for other types; `emulated` as above. Not bitwise vec_dot's: gemm_amx.h
 * states the bound. mf_gemm_get returns the real kind at the VNNI level when
 * mf_amx_bf16_enabled(), the emulated one under MINFER_AMX_EMULATE=1 unless
 * MINFER_AMX_BF16=0. */
const mf_gemm_kind *mf_gemm_get_amx_bf16(mf_type type, int emulated);

/* Per-level tables, filled by the ISA files (gemm_*_avx2.c / *_avx512.c). */
void mf_gemm_reg_avx2(const mf_gemm_kind **tab);
void mf_gemm_reg_avx512(const mf_gemm_kind **tab);
void mf_gemm_reg_vnni_avx512(const mf_gemm_kind **tab);
void mf_gemm_reg_amx(const mf_gemm_kind **tab, const mf_gemm_kind **tab_mt);
void mf_gemm_reg_amxemu(const mf_gemm_kind **tab, const mf_gemm_kind **tab_mt);
void mf_gemm_reg_amx_bf16(const mf_gemm_kind **tab);
void mf_gemm_reg_amxemu_bf16(const mf_gemm_kind **tab);

#endif
