/* gemm_layout.h - byte layouts of the GEMM's activation tiles, shared by the
 * tile builder (gemm.c) and the kernels (gemm_kern.h).
 *
 * A tile holds nt tokens. Every entry is one 32-bit word per token, stored as
 * nt consecutive words, so a kernel reaches token t of entry e at
 * tile + 4 * (e * nt + t) and broadcasts it to all lanes (one weight row per
 * lane). Padding tokens (past the batch) are all zero. */
#ifndef MF_CPU_GEMM_LAYOUT_H
#define MF_CPU_GEMM_LAYOUT_H

#include <stdint.h>

/* ---- MF_GEMM_ACT_Q8K: per super-block of 256 columns, entries: ---- */
#define MF_T8K_QS 0      /* 64 steps: quants 4s..4s+3 of the super-block (4 int8) */
#define MF_T8K_D 64      /* the Q8_K scale d (float) */
#define MF_T8K_BS32P 65  /* 4 entries: int16 pair (sum of quants 64m..64m+31, of 64m+32..64m+63) */
#define MF_T8K_N16 69    /* 16 entries: -16 * bsums[g] (int32) */
#define MF_T8K_N32 85    /* 32 entries: -32 * (sum of quants 8u..8u+7) (int32) */
#define MF_T8K_BSP 117   /* 8 entries: int16 pair (bsums[2m], bsums[2m+1]) */
#define MF_T8K_N128 125  /* 8 entries: -128 * (sum of quants 32j..32j+31) (int32) */
#define MF_T8K_WORDS 133 /* entries per super-block */

/* ---- MF_GEMM_ACT_Q80: per 32-element block, blocks in lane order ---- */
#define MF_T80_QS 0     /* 8 steps: quants 4s..4s+3 of the block */
#define MF_T80_D 8      /* the block's d as float */
#define MF_T80_NEG 9    /* -(sum of the block's quants) (int32) */
#define MF_T80_WORDS 10

/* The 32-element block types visit blocks lane by lane (gemm.h): position of
 * block b of nb in that order. Lane l holds blocks l, l + 8, l + 16, ... */
static inline int64_t mf_gemm_lane_pos(int64_t b, int64_t nb) {
    const int64_t l = b % 8;
    int64_t before = 0; /* blocks in lanes 0 .. l-1 */
    for (int64_t i = 0; i < l; i++) before += (nb - i + 7) / 8;
    return before + b / 8;
}

/* ---- MF_GEMM_ACT_Q8K_AMX / MF_GEMM_ACT_Q80_AMX (nt = 16) ----
 * The Q8K / Q80 tile of 16 tokens, then the activation quants token-major:
 * per super-block 16 tokens x 256 bytes (Q8K), per 32-element block in lane
 * order 16 tokens x 32 bytes (Q80), so the 16 x K operand of a tile multiply
 * is one strided load. */
#define MF_TAMX_NT 16
#define MF_TAMX_SB_BYTES (MF_TAMX_NT * 256)
#define MF_TAMX_B_BYTES (MF_TAMX_NT * 32)

/* ---- MF_GEMM_ACT_F16: per column, nt f16 values (2 bytes each) ----
 * The F16 kernel keeps tokens in vector lanes and broadcasts weights, so a
 * tile entry is the column's nt values side by side. Columns are stored lane
 * by lane (lane l = column % 64 of quant/lanes.h, each lane's columns in
 * order), the lanes in the bit-reversed order 0, 32, 16, 48, 8, ...: then the
 * pairwise fold of mf_lanes_fold can run as the lanes finish, as a stack of at
 * most 6 partial sums (the first lane of each pair the fold adds is always
 * the one finished earlier, which keeps the operand order). */
static inline int mf_gemm_rev6(int v) {
    int r = 0;
    for (int i = 0; i < 6; i++) r |= ((v >> i) & 1) << (5 - i);
    return r;
}

/* Columns of lane l in a row of k. */
static inline int64_t mf_gemm_lane_count(int l, int64_t k) { return l < k ? (k - l + 63) / 64 : 0; }

/* Position of column c of k in the F16 order. */
static inline int64_t mf_gemm_f16_pos(int64_t c, int64_t k) {
    const int kk = mf_gemm_rev6((int)(c % 64));
    int64_t before = 0;
    for (int i = 0; i < kk; i++) before += mf_gemm_lane_count(mf_gemm_rev6(i), k);
    return before + c / 64;
}

#endif
