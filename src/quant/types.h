/* types.h - tensor element types: ids as stored in GGUF, block geometry, and the
 * compute traits table (dequantize / quantize / dot) every matmul dispatches through.
 *
 * The ids are GGUF's (ggml's) numbering, so a type read from a file indexes the
 * table directly. Geometry is known for every id a GGUF can carry so the reader can
 * validate any file; compute traits exist only for the types minfer implements. */
#ifndef MF_QUANT_TYPES_H
#define MF_QUANT_TYPES_H

#include <stddef.h>
#include <stdint.h>

typedef enum mf_type {
    MF_TYPE_F32 = 0,
    MF_TYPE_F16 = 1,
    MF_TYPE_Q4_0 = 2,
    MF_TYPE_Q4_1 = 3,
    MF_TYPE_Q5_0 = 6,
    MF_TYPE_Q5_1 = 7,
    MF_TYPE_Q8_0 = 8,
    MF_TYPE_Q8_1 = 9,
    MF_TYPE_Q2_K = 10,
    MF_TYPE_Q3_K = 11,
    MF_TYPE_Q4_K = 12,
    MF_TYPE_Q5_K = 13,
    MF_TYPE_Q6_K = 14,
    MF_TYPE_Q8_K = 15,
    MF_TYPE_IQ2_XXS = 16,
    MF_TYPE_IQ2_XS = 17,
    MF_TYPE_IQ3_XXS = 18,
    MF_TYPE_IQ1_S = 19,
    MF_TYPE_IQ4_NL = 20,
    MF_TYPE_IQ3_S = 21,
    MF_TYPE_IQ2_S = 22,
    MF_TYPE_IQ4_XS = 23,
    MF_TYPE_I8 = 24,
    MF_TYPE_I16 = 25,
    MF_TYPE_I32 = 26,
    MF_TYPE_I64 = 27,
    MF_TYPE_F64 = 28,
    MF_TYPE_IQ1_M = 29,
    MF_TYPE_BF16 = 30,
    MF_TYPE_TQ1_0 = 34,
    MF_TYPE_TQ2_0 = 35,
    MF_TYPE_MXFP4 = 39,
    MF_TYPE_NVFP4 = 40,
    MF_TYPE_Q1_0 = 41,
    MF_TYPE_Q2_0 = 42,
    MF_TYPE_COUNT = 43,
} mf_type;

/* Geometry of a type: `blck` elements are stored in `size` bytes. */
typedef struct mf_type_geom {
    const char *name; /* lower-case as in llama.cpp ("q4_K"); NULL for unused ids */
    int32_t blck;
    int32_t size;
} mf_type_geom;

/* NULL when `t` is not a type id any GGUF writer uses. */
const mf_type_geom *mf_type_geom_get(int t);
const char *mf_type_name(int t); /* "?" for unknown ids */
/* Bytes of a row of n elements (n must be a multiple of the block size). */
size_t mf_row_size(mf_type t, int64_t n);

/* Compute traits. A weight row of type T is dotted with an activation row that
 * was converted to T's vec_dot_type (F32 -> F32, F16 -> F16, Q8_0 -> Q8_0, K-quants
 * -> Q8_K ...), which is how llama.cpp pairs them and what the goldens assume. */
typedef void (*mf_to_float_fn)(const void *src, float *dst, int64_t n);
typedef void (*mf_from_float_fn)(const float *src, void *dst, int64_t n);
/* s = dot of n elements of row x (this type) and row y (vec_dot_type). */
typedef void (*mf_vec_dot_fn)(int n, float *s, const void *x, const void *y);
/* Several weight rows against one activation row: for r < nr, s[r] = what
 * vec_dot(n, &s[r], (const char *)x + r * x_stride, y) gives, bit for bit.
 * nr may be any count >= 0 (kernels work through it in tiles of 4 or 8 rows:
 * pass whole row ranges, or multiples of 8); x_stride is in bytes and keeps
 * every row on its blocks' C alignment (rows of a weight matrix do). Decode
 * (one token) spends its time here: sharing the activation loads and each
 * tile's setup across rows is what makes short rows fast. */
typedef void (*mf_vec_dot_rows_fn)(int n, float *s, const void *x, size_t x_stride, const void *y, int nr);
/* 16 interleaved weight rows (one group of quant/interleave.h's layout)
 * against one activation row: s[r] = vec_dot of row r, bit for bit. */
typedef void (*mf_vec_dot_x16_fn)(int n, float *s, const void *group, const void *y);

/* One weight row against several activation rows (a batched decode: one
 * token of each of nc sequences): for c < nc, s[c * s_stride] = what
 * vec_dot(n, ..., x, (const char *)y + c * y_stride) gives, bit for bit.
 * The weight blocks are decoded once for all columns. nc <= MF_DOT_COLS. */
#define MF_DOT_COLS 4
typedef void (*mf_vec_dot_cols_fn)(int n, float *s, size_t s_stride, const void *x, const void *y, size_t y_stride,
                                   int nc);

typedef struct mf_type_traits {
    mf_to_float_fn to_float;       /* dequantize */
    mf_from_float_fn from_float_ref; /* reference quantizer (bytes equal llama-quantize's) */
    mf_from_float_fn from_float;   /* fast quantizer for activations (may differ in rounding) */
    mf_vec_dot_fn vec_dot;
    mf_type vec_dot_type;
    mf_vec_dot_rows_fn vec_dot_rows; /* optional: NULL means vec_dot per row (mf_vec_dot_rows does that) */
    mf_vec_dot_x16_fn vec_dot_x16;   /* optional: the x16 layout's kernel; NULL: weights stay as stored */
    mf_vec_dot_cols_fn vec_dot_cols; /* optional: NULL means vec_dot per column */
} mf_type_traits;

/* vec_dot_rows where the table has one, else vec_dot row by row (same bits). */
static inline void mf_vec_dot_rows(const mf_type_traits *tr, int n, float *s, const void *x, size_t x_stride,
                                   const void *y, int nr) {
    if (tr->vec_dot_rows) {
        tr->vec_dot_rows(n, s, x, x_stride, y, nr);
        return;
    }
    for (int r = 0; r < nr; r++) tr->vec_dot(n, &s[r], (const char *)x + (size_t)r * x_stride, y);
}

/* NULL when minfer cannot compute with `t`. The table starts with the scalar
 * reference kernels, and stays so: the CPU backend keeps its own tables of
 * SIMD kernels per level (cpu/kern/dispatch.c). */
const mf_type_traits *mf_type_traits_get(int t);
/* The table of plain-C reference kernels, never modified (tests compare against it). */
const mf_type_traits *mf_type_traits_ref(int t);

#endif
