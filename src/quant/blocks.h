/* blocks.h - the on-disk block layouts of quantized types, identical to GGUF's.
 * Every struct carries a static size check against the format's byte count.
 *
 * Field order is the file's byte order: a block is read straight out of the
 * mapping, so nothing here may be reordered or padded. All members are bytes or
 * 16-bit values (plus one float in Q8_K, which never appears in files), so the
 * natural alignment of each struct never inserts padding. */
#ifndef MF_QUANT_BLOCKS_H
#define MF_QUANT_BLOCKS_H

#include <assert.h>
#include <stdint.h>
#include "quant/fp16.h"

/* ---- legacy formats: 32 weights per block, one scale (and maybe a min) ---- */

#define QK4_0 32
typedef struct {
    mf_fp16 d;               /* x = d * (q - 8) */
    uint8_t qs[QK4_0 / 2];   /* low nibble: element j, high nibble: element j + 16 */
} block_q4_0;
static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");

#define QK4_1 32
typedef struct {
    mf_fp16 d;               /* x = d * q + m */
    mf_fp16 m;
    uint8_t qs[QK4_1 / 2];   /* nibbles as in Q4_0 */
} block_q4_1;
static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");

#define QK5_0 32
typedef struct {
    mf_fp16 d;               /* x = d * (q - 16) */
    uint8_t qh[4];           /* bit j = 5th bit of element j (little-endian uint32) */
    uint8_t qs[QK5_0 / 2];   /* low 4 bits, nibbles as in Q4_0 */
} block_q5_0;
static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");

#define QK5_1 32
typedef struct {
    mf_fp16 d;               /* x = d * q + m */
    mf_fp16 m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;
static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");

#define QK8_0 32
typedef struct {
    mf_fp16 d;          /* scale */
    int8_t qs[QK8_0];   /* x = d * q */
} block_q8_0;
static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");

/* Activation type of Q4_1/Q5_1: s = d * sum(q) lets the dot fold in the
 * weight's min with one multiply per block. */
#define QK8_1 32
typedef struct {
    mf_fp16 d;
    mf_fp16 s;          /* d * sum(qs), rounded to f16 */
    int8_t qs[QK8_1];
} block_q8_1;
static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");

/* ---- K-quants: super-blocks of 256 weights split into 16 or 32 sub-blocks ---- */

#define QK_K 256
#define K_SCALE_SIZE 12 /* 8 six-bit scales + 8 six-bit mins, packed (Q4_K, Q5_K) */

/* 16 sub-blocks of 16; x = d * sc * q - dmin * m, with 4-bit sc and m per sub-block. */
typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble: scale, high nibble: min */
    uint8_t qs[QK_K / 4];      /* 2 bits each: byte l of 32-byte group g holds elements
                                  l, l+32, l+64, l+96 of that 128-element half */
    mf_fp16 d;
    mf_fp16 dmin;
} block_q2_K;
static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");

/* 16 sub-blocks of 16; x = d * (sc - 32) * (q - 4), 6-bit signed scales. */
typedef struct {
    uint8_t hmask[QK_K / 8];   /* 3rd bit: bit b of byte l is element 32*b + l */
    uint8_t qs[QK_K / 4];      /* low 2 bits, packed as in Q2_K */
    uint8_t scales[12];        /* 16 six-bit scales: low nibbles in bytes 0..7,
                                  top 2 bits in bytes 8..11 */
    mf_fp16 d;
} block_q3_K;
static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");

/* 8 sub-blocks of 32; x = d * sc * q - dmin * m, 6-bit sc and m. */
typedef struct {
    mf_fp16 d;
    mf_fp16 dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];      /* per 64 elements: 32 bytes, low nibble first 32, high next 32 */
} block_q4_K;
static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");

/* Q4_K plus a 5th bit per weight. */
typedef struct {
    mf_fp16 d;
    mf_fp16 dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];      /* bit 2k (2k+1) of byte l: element 64k + l (64k + 32 + l) */
    uint8_t qs[QK_K / 2];
} block_q5_K;
static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");

/* 16 sub-blocks of 16; x = d * sc * (q - 32), 8-bit signed scales. */
typedef struct {
    uint8_t ql[QK_K / 2];      /* low 4 bits */
    uint8_t qh[QK_K / 4];      /* high 2 bits */
    int8_t scales[QK_K / 16];
    mf_fp16 d;
} block_q6_K;
static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");

/* Activation type of the K-quants and IQ4_XS. Never stored in files; the float
 * scale and the 16-element sums (for the weights' mins) are what the dots use. */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;
static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");

/* ---- non-linear 4-bit: quants index a fixed table of 16 values ---- */

#define QK4_NL 32
typedef struct {
    mf_fp16 d;                 /* x = d * table[q] */
    uint8_t qs[QK4_NL / 2];    /* nibbles as in Q4_0 */
} block_iq4_nl;
static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");

/* 8 sub-blocks of 32; x = d * (ls - 32) * table[q], 6-bit ls per sub-block. */
typedef struct {
    mf_fp16 d;
    uint16_t scales_h;         /* top 2 bits of ls: bits 2*ib, 2*ib+1 */
    uint8_t scales_l[QK_K / 64]; /* low 4 bits of ls: nibble ib%2 of byte ib/2 */
    uint8_t qs[QK_K / 2];      /* per 32-element sub-block: 16 bytes, nibbles as in Q4_0 */
} block_iq4_xs;
static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");

#endif
