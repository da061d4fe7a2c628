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

#include "quant/fp16.h"

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

/* ---- MF_GEMM_ACT_BF16_AMX / MF_GEMM_ACT_F16HL_AMX (nt = 16) ----
 * The operands of TDPBF16PS (gemm_amx.h), per step of 32 columns and per
 * plane: 16 tokens x 32 bf16 (1 KiB, rows 64 bytes apart: one tile load).
 * BF16_AMX: one plane, the BF16 conversion vec_dot reads. F16HL_AMX: the
 * F16 conversion vec_dot reads, split into bf16 hi and lo planes (exact,
 * mf_bf16_split). Columns past k are zero. Panels of 16 weight rows use
 * the same steps: per step and plane, 16 lines of 64 bytes, line j holding
 * columns 2j, 2j + 1 of the 16 rows as one dword per row (low half the
 * even column): the B operand, and for BF16 the x16 layout itself. */
#define MF_TBF_COLS 32
#define MF_TBF_BYTES 1024
static inline int64_t mf_gemm_bf_steps(int64_t k) { return (k + MF_TBF_COLS - 1) / MF_TBF_COLS; }

/* v = hi + lo with hi = bf16(v) (nearest even) and lo = v - hi. For v an
 * f16 value (11-bit significand, exponent >= -24) lo has at most 3
 * significant bits and is exact in bf16, so the pair is v exactly.
 * Infinities and NaN: lo = 0. */
static inline void mf_bf16_split(float v, uint16_t *hi, uint16_t *lo) {
    *hi = mf_fp32_to_bf16(v);
    const float r = v - mf_bf16_to_fp32(*hi);
    *lo = r == r && r - r == 0.0f ? (uint16_t)(mf_f32_bits(r) >> 16) : 0;
}

/* ---- MF_GEMM_ACT_F16: per column, nt f16 values (2 bytes each) ----
 * The F16 kernel keeps tokens in vector lanes and broadcasts weights, so a
 * tile entry is the column's nt values side by side. Columns are stored lane
 * by lane (lane l = column % 64 of quant/lanes.h, each lane's columns in
 * order), the lanes in the bit-reversed order 0, 32, 16, 48, 8, ...: then the
 * pairwise fold of mf_lanes_fold can run as the lanes finish, as a stack of at
 * most 6 partial sums (the first lane of each pair the fold adds is always
 * the one finished earlier, which keeps the operand order). */
/* v's low `bits` bits in reverse order */
static inline int mf_gemm_revbits(int v, int bits) {
    int r = 0;
    for (int i = 0; i < bits; i++) r |= ((v >> i) & 1) << (bits - 1 - i);
    return r;
}
static inline int mf_gemm_rev6(int v) { return mf_gemm_revbits(v, 6); }

/* Columns of lane l of L (column % L) in a row of k. */
static inline int64_t mf_gemm_lanes_count(int l, int L, int64_t k) { return l < k ? (k - l + L - 1) / L : 0; }
static inline int64_t mf_gemm_lane_count(int l, int64_t k) { return mf_gemm_lanes_count(l, 64, k); }

/* start[l]: where lane l of L (64: F16, 32: BF16 below) begins in a column
 * order that takes the lanes bit-reversed */
static inline void mf_gemm_lane_starts(int64_t k, int L, int64_t *start) {
    const int bits = L == 64 ? 6 : 5;
    int64_t pos = 0;
    for (int kk = 0; kk < L; kk++) {
        const int l = mf_gemm_revbits(kk, bits);
        start[l] = pos;
        pos += mf_gemm_lanes_count(l, L, k);
    }
}

/* Position of column c of k in the F16 order. */
static inline int64_t mf_gemm_f16_pos(int64_t c, int64_t k) {
    const int kk = mf_gemm_rev6((int)(c % 64));
    int64_t before = 0;
    for (int i = 0; i < kk; i++) before += mf_gemm_lane_count(mf_gemm_rev6(i), k);
    return before + c / 64;
}

/* ---- MF_GEMM_ACT_BF16: per column, nt bf16 values ----
 * As F16's, over BF16's 32 lanes (quant/lanes.h order 4: lane l = column %
 * 32, f32 runs of MF_BF16_RUN columns added to a double per lane), the
 * lanes in the bit-reversed order 0, 16, 8, 24, 4, ... (mf_gemm_revbits(kk,
 * 5)): the lanes' fold (+16, +8, +4, then mf_fold4_pd's +2 and +1) then
 * runs as a stack too. */

#endif
