/* interleave.c - the x16 layouts (interleave.h): packing, unpacking and the
 * reference kernel.
 *
 * A block group is the 16 rows' blocks b transposed in 32-bit words: word w
 * of row r's block sits at byte 64 * w + 4 * r of the group, so a 512-bit
 * load of "line" w holds word w of all 16 rows, row r in lane r. The bytes
 * keep the file's order inside each word, so a word of 4-bit levels still
 * holds four consecutive elements in its low nibbles and four in its high
 * nibbles, which is what vpdpbusd sums per lane. A type whose block has a
 * lone f16 scale not on a word boundary (Q6_K's d at byte 208) keeps it out
 * of the words: the 16 rows' scales follow the lines as 16 consecutive f16
 * (ready for one vcvtph2ps).
 *
 * Q4_K (144 bytes = 36 words): line 0 = d | dmin << 16, lines 1-3 = the
 * 12 scale bytes, lines 4 + q = qs bytes 4q..4q+3.
 * Q5_K (176 bytes = 44 words): as Q4_K, with lines 4-11 = qh and 12-43 = qs.
 * Q2_K (84 bytes = 21 words): lines 0-3 = scales, 4-19 = qs, 20 = d | dmin << 16.
 * Q3_K (110 bytes): lines 0-7 = hmask, 8-23 = qs, 24-26 = scales, then d[16].
 * Q6_K (210 bytes): lines 0-31 = ql, 32-47 = qh, 48-51 = the 16 int8
 * scales, then d[16].
 * Q4_0 (18), Q5_0 (22), Q8_0 (34), IQ4_NL (18 bytes): the words after d,
 * then d[16].
 * Q4_1 (20 bytes): line 0 = d | m << 16, lines 1-4 = qs.
 * Q5_1 (24 bytes): line 0 = d | m << 16, line 1 = qh, lines 2-5 = qs.
 * IQ4_XS (136 bytes): line 0 = d | scales_h << 16, line 1 = scales_l,
 * lines 2 + 4j + c = qs bytes 16j + 4c .. of sub-block j.
 * F16 is not in words: column c of the 16 rows is 16 consecutive halves at
 * byte 32c (one vcvtph2ps gives the column for all rows).
 * BF16 is in words of two columns (rows of even length): line w holds
 * columns 2w (low halves) and 2w + 1 (high halves) of the 16 rows, so one
 * shift or one mask turns a line into the floats of one column.
 * Two words are stored transformed so the kernels need fewer operations
 * (unpacking undoes it): Q8_0's quants as unsigned bytes q + 128 (vpdpbusd
 * multiplies unsigned by signed bytes), and Q5_0's (and Q5_1's) qh with its bits
 * regrouped: bit t of byte i is the 5th bit of element 4t + i, so a shift
 * and a mask put element 4t + i's bit at bit 4 of byte i for any t. */
#include "quant/interleave.h"
#include "quant/blocks.h"

#include <string.h>

/* a block's word part: `words` 32-bit words from byte `w0`; the f16 at byte
 * `half` (or -1) goes after the lines */
typedef struct x16_geom {
    int words, w0, half;
} x16_geom;

static bool geom(mf_type t, x16_geom *g) {
    switch (t) {
    case MF_TYPE_Q4_K: *g = (x16_geom){36, 0, -1}; return true;
    case MF_TYPE_Q5_K: *g = (x16_geom){44, 0, -1}; return true;
    case MF_TYPE_Q2_K: *g = (x16_geom){21, 0, -1}; return true;
    case MF_TYPE_Q3_K: *g = (x16_geom){27, 0, 108}; return true;
    case MF_TYPE_Q6_K: *g = (x16_geom){52, 0, 208}; return true;
    case MF_TYPE_Q4_0: *g = (x16_geom){4, 2, 0}; return true;
    case MF_TYPE_Q5_0: *g = (x16_geom){5, 2, 0}; return true;
    case MF_TYPE_Q8_0: *g = (x16_geom){8, 2, 0}; return true;
    case MF_TYPE_IQ4_NL: *g = (x16_geom){4, 2, 0}; return true;
    case MF_TYPE_Q4_1: *g = (x16_geom){5, 0, -1}; return true;
    case MF_TYPE_Q5_1: *g = (x16_geom){6, 0, -1}; return true;
    case MF_TYPE_IQ4_XS: *g = (x16_geom){34, 0, -1}; return true;
    default: return false;
    }
}

/* Q5_0 qh: bit e (element e) <-> bit (e / 4) of byte (e % 4). Byte i of the
 * regrouped word gathers bits i, i + 4, ..., i + 28 of qh: two helpers move
 * eight bits between "every 4th bit" and "one byte" with three shift-or-mask
 * steps (pairs, then quads, then the two halves), instead of a loop over the
 * 32 bits (this runs for every Q5_0 block at load and in prefill panels). */
static uint32_t gather4(uint32_t x) { /* bits 0, 4, ..., 28 -> bits 0..7 */
    x &= 0x11111111u;
    x = (x | x >> 3) & 0x03030303u;
    x = (x | x >> 6) & 0x000F000Fu;
    return (x | x >> 12) & 0xFFu;
}
static uint32_t spread4(uint32_t x) { /* bits 0..7 -> bits 0, 4, ..., 28 */
    x &= 0xFFu;
    x = (x | x << 12) & 0x000F000Fu;
    x = (x | x << 6) & 0x03030303u;
    return (x | x << 3) & 0x11111111u;
}
static uint32_t qh_regroup(uint32_t qh) {
    return gather4(qh) | gather4(qh >> 1) << 8 | gather4(qh >> 2) << 16 | gather4(qh >> 3) << 24;
}
static uint32_t qh_ungroup(uint32_t v) {
    return spread4(v) | spread4(v >> 8) << 1 | spread4(v >> 16) << 2 | spread4(v >> 24) << 3;
}

/* a word as stored in a group, from the file's (and back) */
static uint32_t word_in(mf_type t, int w, uint32_t v) {
    if (t == MF_TYPE_Q8_0) return v ^ 0x80808080u;
    if ((t == MF_TYPE_Q5_0 && w == 0) || (t == MF_TYPE_Q5_1 && w == 1)) return qh_regroup(v);
    return v;
}
static uint32_t word_out(mf_type t, int w, uint32_t v) {
    if (t == MF_TYPE_Q8_0) return v ^ 0x80808080u;
    if ((t == MF_TYPE_Q5_0 && w == 0) || (t == MF_TYPE_Q5_1 && w == 1)) return qh_ungroup(v);
    return v;
}

bool mf_x16_layout(mf_type t, int64_t k) {
    if (t == MF_TYPE_F16) return k > 0;
    if (t == MF_TYPE_BF16) return k > 0 && k % 2 == 0;
    x16_geom g;
    const mf_type_geom *tg = mf_type_geom_get(t);
    return geom(t, &g) && tg && k > 0 && k % tg->blck == 0;
}

/* Moves row r of a 16-row group between the file's layout (row) and the
 * group's, in either direction: pack (to_group) and unpack are the same walk.
 * Only the destination side is written (the callers cast const away from
 * the source side). */
static void move_row(mf_type t, uint8_t *row, uint8_t *group, int r, int64_t k, bool to_group) {
    if (t == MF_TYPE_F16) {
        for (int64_t c = 0; c < k; c++) {
            uint8_t *a = row + 2 * c, *b = group + (size_t)c * 32 + 2 * r;
            memcpy(to_group ? b : a, to_group ? a : b, 2);
        }
        return;
    }
    if (t == MF_TYPE_BF16) {
        for (int64_t w = 0; w < k / 2; w++) {
            uint8_t *a = row + 4 * w, *b = group + (size_t)w * 64 + 4 * r;
            memcpy(to_group ? b : a, to_group ? a : b, 4);
        }
        return;
    }
    x16_geom g;
    if (!geom(t, &g)) return;
    const mf_type_geom *tg = mf_type_geom_get(t);
    const size_t bs = (size_t)tg->size;
    const int64_t nb = k / tg->blck;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *x = row + (size_t)b * bs, *grp = group + (size_t)b * MF_X16 * bs;
        for (int w = 0; w < g.words; w++) {
            uint8_t *a = x + g.w0 + 4 * w, *p = grp + 64 * w + 4 * r;
            uint32_t v;
            memcpy(&v, to_group ? a : p, 4);
            v = to_group ? word_in(t, w, v) : word_out(t, w, v);
            memcpy(to_group ? p : a, &v, 4);
        }
        if (g.half >= 0) {
            uint8_t *a = x + g.half, *p = grp + 64 * g.words + 2 * r;
            memcpy(to_group ? p : a, to_group ? a : p, 2);
        }
    }
}

void mf_x16_pack(mf_type t, const void *src, size_t src_row, int64_t k, void *dst) {
    for (int r = 0; r < MF_X16; r++) move_row(t, (uint8_t *)src + (size_t)r * src_row, dst, r, k, true);
}

void mf_x16_unpack_row(mf_type t, const void *group, int r, int64_t k, void *dst) {
    move_row(t, dst, (uint8_t *)group, r, k, false);
}

void mf_x16_dot_ref(mf_type t, int k, float *s, const void *group, const void *y, void *row) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    for (int r = 0; r < MF_X16; r++) {
        mf_x16_unpack_row(t, group, r, k, row);
        ref->vec_dot(k, &s[r], row, y);
    }
}
