/* interleave.h - weight rows interleaved 16 at a time ("x16"), the layout the
 * decode kernels read (cpu/dotx16_*.c).
 *
 * A matrix-vector product with one vec_dot per row reduces every row's block
 * sums horizontally and decodes every block's scales on its own; with 16 rows
 * interleaved, row r lives in 32-bit lane r of every 512-bit load, so one
 * activation broadcast feeds 16 rows, the per-row sums stay in their lanes
 * and the scales of 16 rows decode together, while the weights are still one
 * sequential stream. A group of 16 rows takes exactly the bytes the 16 rows
 * take in the file: for each block index b, the 16 rows' blocks b are
 * rearranged (transposed in 32-bit words) into one "block group" of
 * 16 * block_size bytes (layouts in interleave.c). Results are bit-for-bit those of the type's vec_dot: the
 * integer sums are exact whatever their order, and each row's float
 * expression is evaluated per lane in the reference's order. */
#ifndef MF_QUANT_INTERLEAVE_H
#define MF_QUANT_INTERLEAVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/types.h"

#define MF_X16 16

/* Whether `t` has an x16 layout for rows of k elements. */
bool mf_x16_layout(mf_type t, int64_t k);
/* 16 rows (row i at src + i * src_row) -> one interleaved group of
 * 16 * mf_row_size(t, k) bytes at dst. */
void mf_x16_pack(mf_type t, const void *src, size_t src_row, int64_t k, void *dst);
/* Row r (< 16) of a group, back in the file's layout (bytes equal). */
void mf_x16_unpack_row(mf_type t, const void *group, int r, int64_t k, void *dst);
/* The reference kernel: s[r] = vec_dot (the reference's) of row r of the
 * group with the activation row y, for the 16 rows; `row` is scratch of
 * mf_row_size(t, k) bytes. */
void mf_x16_dot_ref(mf_type t, int k, float *s, const void *group, const void *y, void *row);

#endif
