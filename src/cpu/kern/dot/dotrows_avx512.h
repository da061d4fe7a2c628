/* dotrows_avx512.h - multi-row AVX-512 dots (vec_dot_rows) of the quantized
 * types, written once and compiled twice: by dotrows_avx512.c with MF_VNNI 0
 * (maddubs + madd) and by dotrows_vnni_avx512.c with MF_VNNI 1 (vpdpbusd /
 * vpdpwssd). Everything here is static; each includer registers its copies.
 *
 * A call dots nr weight rows with one activation row. Rows go in tiles of
 * TILE32 (32-element blocks) or TILEK (super-blocks) rows; a last tile of
 * fewer rows runs the same code compiled for its row count. Within a tile the
 * activation data of a step (its quants, scales, block sums) is loaded and
 * prepared once and serves every row; the partial-group setup is done once
 * per call; the final lane folds of the tile's rows run together.
 *
 * Bitwise equality with vec_dot (and so with the references):
 *
 * Q4_0, Q5_0, Q8_0, IQ4_NL (32-element blocks, quant/lanes.h order 1): each
 * row keeps one 8-lane float accumulator and adds, per group of 8 blocks, one
 * vector of the 8 blocks' values, each formed by the reference's expression
 * ((sumi * dx) * dy for Q4_0, (dx * dy) * sumi for the others). The lanes sit
 * in the order P = 0 2 4 6 1 3 5 7 (what the integer reduction produces; the
 * scale loads use the same order), so block b still lands in the chain of
 * lane b % 8, in block order; the accumulator is put back in natural order
 * once, before the fold. The fold of 8 rows is one transposed network whose
 * every add is the add mf_lanes_fold makes for that row, operands in the same
 * order. Rows whose block count is not a multiple of 8 end with a partial
 * group: its blocks past the row's end are read at the last real block (no
 * read past the row), their integer sums are masked to 0 and their scales
 * load as 0, so those lanes add +0 * +0 * 0 = +0, which changes no lane (a
 * lane is never -0).
 *   Integer sums are exact: the level offset (8 for Q4_0, 16 for Q5_0; with
 *   VNNI also the +128 bias that makes Q8_0 / IQ4_NL weights unsigned) is
 *   subtracted as offset * (sum of the block's activation bytes), computed
 *   once per tile; vpdpbusd never saturates; without VNNI maddubs pair sums
 *   of levels <= 31 stay below 31 * 128 * 2, and signed weights use
 *   |w| * sign(a, w), exact because activations never hold -128.
 *
 * Q4_K, Q5_K, Q6_K (super-blocks, order 2): each row's super-block integer
 * sums are exactly those of vec_dot (same levels, sub-block scales applied in
 * int16 x int16 -> int32, mins and offsets through bsums); the sums of 4 rows
 * are reduced together, and the reference's scalar expression
 * (d * isum - dmin * summ with d = f16(x.d) * y.d, or d * isum) is evaluated
 * lane-wise for the tile's rows, each lane a row's own float chain over
 * super-blocks, in order.
 *
 * Rows of any length the type allows are handled (one block upward); loads
 * never go past a row's last byte or the activation row's. */
#ifndef MF_VNNI
#error "define MF_VNNI (0 or 1) before including dotrows_avx512.h"
#endif

#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/qsearch.h"

#define AI static inline __attribute__((always_inline))

#define TILE32 8 /* rows per tile, 32-element block types */
#define TILEK 8  /* rows per tile, super-block types */
#define KCHUNK 16 /* super-blocks whose values are formed before they are summed */

/* ---------------- integer primitives ---------------- */

/* sums over groups of 4 bytes of u * s (u unsigned, s signed): 16 int32 */
AI __m512i dr_dot_us(__m512i u, __m512i s) {
#if MF_VNNI
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
#endif
}

#if !MF_VNNI
/* signed w times signed a as |w| * sign(a, w) (a never -128) */
AI __m512i dr_dot_ss(__m512i w, __m512i a) {
    const __mmask64 neg = _mm512_movepi8_mask(w);
    return dr_dot_us(_mm512_abs_epi8(w), _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a));
}
#endif

/* acc + the int16 products of p and sc summed in pairs */
AI __m512i dr_dpwssd(__m512i acc, __m512i p, __m512i sc) {
#if MF_VNNI
    return _mm512_dpwssd_epi32(acc, p, sc);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
#endif
}

/* [32 bytes at a | 32 bytes at b] */
AI __m512i dr_ld2(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

AI __m512i dr_dup256(const void *p) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1);
}

/* ---------------- 32-element blocks ---------------- */

enum { B_Q4_0, B_Q5_0, B_Q8_0, B_IQ4_NL };

/* bytes per weight block */
AI int bbytes(int T) { return T == B_Q5_0 ? 22 : T == B_Q8_0 ? 34 : 18; }
#define YBS 34 /* bytes per block_q8_0 */

/* log2 of the offset subtracted through activation sums; -1: none */
AI int boffset_log2(int T) {
    if (T == B_Q4_0) return 3;
    if (T == B_Q5_0) return 4;
    return MF_VNNI ? 7 : -1;
}

/* lane i of a group vector holds block P(i) of the group */
#define P(i) ((i) < 4 ? 2 * (i) : 2 * ((i) - 4) + 1)

/* nibbles of the 16 bytes at a and at b: [a low | a high | b low | b high],
 * by broadcast loads and a per-granule shift */
AI __m512i nib_pair(const uint8_t *a, const uint8_t *b) {
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)a));
    v = _mm512_mask_broadcast_i32x4(v, (__mmask16)0xff00, _mm_loadu_si128((const __m128i *)b));
    v = _mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

/* 16 int32: 8 partial sums of block p0 | 8 of block p1 (both weight blocks of
 * type T) against a = [activation quants of p0's block | of p1's]; without
 * the level offset */
AI __m512i xpair(int T, const uint8_t *p0, const uint8_t *p1, __m512i a) {
    if (T == B_Q4_0) return dr_dot_us(nib_pair(p0 + 2, p1 + 2), a);
    if (T == B_Q5_0) {
        __m512i q = nib_pair(p0 + 6, p1 + 6);
        /* bit j of qh is the 5th bit of element j, which sits in byte j */
        const __mmask64 h = _cvtu64_mask64((uint64_t)mf_ld32(p0 + 2) | (uint64_t)mf_ld32(p1 + 2) << 32);
        q = _mm512_mask_add_epi8(q, h, q, _mm512_set1_epi8(16));
        return dr_dot_us(q, a);
    }
    if (T == B_Q8_0) {
        const __m512i w = dr_ld2(p0 + 2, p1 + 2);
#if MF_VNNI
        return dr_dot_us(_mm512_xor_si512(w, _mm512_set1_epi8((char)0x80)), a); /* w + 128 */
#else
        return dr_dot_ss(w, a);
#endif
    }
    /* IQ4_NL: table values */
    __m128i t = _mm_loadu_si128((const __m128i *)mf_iq4nl_values);
#if MF_VNNI
    t = _mm_xor_si128(t, _mm_set1_epi8((char)0x80)); /* value + 128, unsigned */
    return dr_dot_us(_mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), nib_pair(p0 + 2, p1 + 2)), a);
#else
    return dr_dot_ss(_mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), nib_pair(p0 + 2, p1 + 2)), a);
#endif
}

/* z[k] = [block 2k: 8 partials | block 2k+1: 8 partials] -> the 8 block sums
 * in lane order P (exact) */
AI __m256i reduce8p(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
    const __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
    const __m512i u23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
    /* granule g, lane k: the sum of granule g of z[k] */
    const __m512i q = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23), _mm512_unpackhi_epi64(u01, u23));
    /* blocks 2k = granules 0 + 1, blocks 2k + 1 = granules 2 + 3 */
    const __m512i t = _mm512_shuffle_i32x4(q, q, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_add_epi32(_mm512_castsi512_si256(t), _mm512_extracti64x4_epi64(t, 1));
}

/* Scale loads. The f16 scale of each block sits at its byte 0; a group's
 * scales are gathered from whole 64-byte loads by word permutes (two loads
 * and one permute per 4 scales instead of 8 scalar inserts). Of a region of
 * L readable bytes (the group's blocks), chunk c is the 64 bytes at offset
 * dofs(c, L): 64c, pulled back so as to end at L, so nothing past the last
 * block is read (and no masked load touches a page the rows do not own:
 * those can take a slow assist). A scale at byte p comes from the first
 * chunk holding both its bytes. */
AI int dofs(int c, int L) { return 64 * c < L - 64 ? 64 * c : L - 64; }
AI int dchunk(int p, int L) {
    return p + 2 <= dofs(0, L) + 64 ? 0 : p + 2 <= dofs(1, L) + 64 ? 1 : p + 2 <= dofs(2, L) + 64 ? 2 : 3;
}
/* permutex2var index of the scale at byte p: chunks 0 / 2 are words 0..31, chunks 1 / 3 words 32..63 */
AI int dword(int p, int L) { return (dchunk(p, L) & 1) * 32 + (p - dofs(dchunk(p, L), L)) / 2; }

/* The scales of the 8 blocks (bs bytes each) of a whole group at g, in lane
 * order P, as floats. */
AI __m256 load_d8(const uint8_t *g, int bs) {
    const int L = 8 * bs, nc = dchunk(7 * bs, L) + 1;
    __m512i c[4];
    #pragma GCC unroll 8
    for (int j = 0; j < 4; j++) c[j] = j < nc ? _mm512_loadu_si512(g + dofs(j, L)) : _mm512_setzero_si512();
#define W_(i) dword(P(i) * bs, L)
    const __m512i idx = _mm512_set_epi16(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                         W_(7), W_(6), W_(5), W_(4), W_(3), W_(2), W_(1), W_(0));
#undef W_
    __m512i r = _mm512_permutex2var_epi16(c[0], idx, c[1]);
    if (nc > 2) {
        __mmask32 hi = 0;
        #pragma GCC unroll 8
        for (int i = 0; i < 8; i++)
            if (dchunk(P(i) * bs, L) >= 2) hi |= (__mmask32)1 << i;
        r = _mm512_mask_mov_epi16(r, hi, _mm512_permutex2var_epi16(c[2], idx, c[3]));
    }
    return _mm256_cvtph_ps(_mm512_castsi512_si128(r));
}

/* What a partial last group needs, worked out once per call. */
typedef struct part32 {
    int m;            /* blocks in it (0: none) */
    int np;           /* block pairs in it, (m + 1) / 2: the others are skipped */
    int xo[8], yo[8]; /* byte offsets of its blocks, clamped to the last real one */
    __mmask8 lanes;   /* lanes (order P) of real blocks */
    /* weight scales: chunk loads as load_d8 does for L = m * bs (chunks may
     * start before the group: the row's earlier groups), or, when the row is
     * shorter than one chunk, 8 scalar loads */
    int dscalar, dnc, dofs[4];
    __mmask32 dhi;
    __m512i didx;
} part32;

/* the partial group of m blocks (bs bytes each) of rows with (long) or
 * without (!long) whole groups before it */
static void part32_init(part32 *pt, int m, int bs, int long_row) {
    memset(pt, 0, sizeof *pt);
    pt->m = m;
    pt->np = (m + 1) / 2;
    if (!m) return;
    for (int k = 0; k < 8; k++) {
        const int kk = k < m ? k : m - 1;
        pt->xo[k] = kk * bs;
        pt->yo[k] = kk * YBS;
    }
    for (int i = 0; i < 8; i++)
        if (P(i) < m) pt->lanes |= (__mmask8)(1u << i);
    const int L = m * bs;
    pt->dscalar = L < 64 && !long_row;
    int16_t idx[32] = {0};
    for (int i = 0; i < 8; i++) {
        const int p = pt->xo[P(i)];
        idx[i] = (int16_t)dword(p, L);
        if (dchunk(p, L) >= 2) pt->dhi |= (__mmask32)1 << i;
        if (dchunk(p, L) + 1 > pt->dnc) pt->dnc = dchunk(p, L) + 1;
    }
    for (int c = 0; c < 4; c++) pt->dofs[c] = dofs(c, L);
    pt->didx = _mm512_loadu_si512(idx);
}

/* per type, row with whole groups or not, and block count mod 8: built once
 * when the kernels are registered (dispatch does that before any call) */
static part32 g_part32[4][2][8];

static void part32_tables(void) {
    for (int t = 0; t < 4; t++)
        for (int l = 0; l < 2; l++)
            for (int m = 0; m < 8; m++) part32_init(&g_part32[t][l][m], m, bbytes(t), l);
}

/* the scales of a partial group at g (lanes past its blocks are 0); bo: its clamped block offsets */
AI __m256 load_d8_part(const uint8_t *g, const int *bo, const part32 *pt, int scalar) {
    __m512i r;
    if (scalar) {
        r = _mm512_castsi128_si512(_mm_setr_epi16(
            (short)mf_ld16(g + bo[P(0)]), (short)mf_ld16(g + bo[P(1)]), (short)mf_ld16(g + bo[P(2)]),
            (short)mf_ld16(g + bo[P(3)]), (short)mf_ld16(g + bo[P(4)]), (short)mf_ld16(g + bo[P(5)]),
            (short)mf_ld16(g + bo[P(6)]), (short)mf_ld16(g + bo[P(7)])));
    } else {
        __m512i c[4];
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) c[j] = j < pt->dnc ? _mm512_loadu_si512(g + pt->dofs[j]) : _mm512_setzero_si512();
        r = _mm512_permutex2var_epi16(c[0], pt->didx, c[1]);
        if (pt->dnc > 2) r = _mm512_mask_mov_epi16(r, pt->dhi, _mm512_permutex2var_epi16(c[2], pt->didx, c[3]));
    }
    return _mm256_maskz_mov_ps(pt->lanes, _mm256_cvtph_ps(_mm512_castsi512_si128(r)));
}

/* Activation side of one group, prepared once per call for all its rows.
 * Pair layout: a[k] = quants of blocks 2k, 2k + 1; quad layout: a[2h] /
 * a[2h + 1] = elements 0..15 / 16..31 of blocks 4h .. 4h + 3. off and dy
 * are in the layout's lane order (P or P2). */
typedef struct __attribute__((aligned(64))) ygrp {
    __m512i a[4];
    __m256i off; /* offset * block sums */
    __m256 dy;   /* scales (0 in a partial group's missing lanes) */
} ygrp;

/* groups a call prepares on the stack (rows of up to 64 * 256 elements;
 * longer rows go through this level's vec_dot row by row) */
#define YPREP_MAX 64

/* this level's vec_dot of each 32-element type, for those longer rows */
static mf_vec_dot_fn g_vdot32[4];

AI void y_group(int T, const uint8_t *yg, const part32 *pt, ygrp *Y) {
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        const int o0 = pt ? pt->yo[2 * k] : 2 * k * YBS, o1 = pt ? pt->yo[2 * k + 1] : (2 * k + 1) * YBS;
        Y->a[k] = pt && k >= pt->np ? _mm512_setzero_si512() : dr_ld2(yg + o0 + 2, yg + o1 + 2);
    }
    if (boffset_log2(T) >= 0) {
        const __m512i one = _mm512_set1_epi8(1);
        const __m256i bsum =
            reduce8p(dr_dot_us(one, Y->a[0]), dr_dot_us(one, Y->a[1]), dr_dot_us(one, Y->a[2]), dr_dot_us(one, Y->a[3]));
        Y->off = _mm256_slli_epi32(bsum, boffset_log2(T));
    } else Y->off = _mm256_setzero_si256();
    /* a partial group's activation scales: scalar loads (once per tile) */
    Y->dy = pt ? load_d8_part(yg, pt->yo, pt, 1) : load_d8(yg, YBS);
}

/* One row's values of a group: the vector to add to its accumulator. */
AI __m256 row_group(int T, const uint8_t *xg, const part32 *pt, const ygrp *Y) {
    const int bs = bbytes(T);
    __m512i z[4];
    #pragma GCC unroll 8
    for (int k = 0; k < 4; k++) {
        const int o0 = pt ? pt->xo[2 * k] : 2 * k * bs, o1 = pt ? pt->xo[2 * k + 1] : (2 * k + 1) * bs;
        /* a partial group skips its pairs past the last block (same branch for every row) */
        z[k] = pt && k >= pt->np ? _mm512_setzero_si512() : xpair(T, xg + o0, xg + o1, Y->a[k]);
    }
    __m256i si = reduce8p(z[0], z[1], z[2], z[3]);
    if (pt) si = _mm256_maskz_sub_epi32(pt->lanes, si, Y->off);
    else if (boffset_log2(T) >= 0) si = _mm256_sub_epi32(si, Y->off);
    const __m256 sf = _mm256_cvtepi32_ps(si);
    const __m256 dx = pt ? load_d8_part(xg, pt->xo, pt, pt->dscalar) : load_d8(xg, bs);
    if (T == B_Q4_0) return _mm256_mul_ps(_mm256_mul_ps(sf, dx), Y->dy);
    return _mm256_mul_ps(_mm256_mul_ps(dx, Y->dy), sf);
}

/* ---- quad layout: whole groups of Q4_0, Q5_0, IQ4_NL ----
 * A register holds 4 blocks, one 16-byte granule each: their elements 0..15
 * (the low nibbles) or 16..31 (the high nibbles); the two dpbusd of a quad
 * accumulate into one register of 4 partial sums per block, which makes the
 * reduction to block sums half as long as the pair layout's. The group's
 * bytes arrive as 3 whole 64-byte loads (dofs), and word permutes pick out
 * each quad's quants, the scales and (Q5_0) the high-bit words from them.
 * Lanes of the group vectors are in the order P2 = 0 4 1 5 2 6 3 7. */
#define P2(i) (((i) & 1) ? 4 + (i) / 2 : (i) / 2)

AI int quad_type(int T) { return T == B_Q4_0 || T == B_Q5_0 || T == B_IQ4_NL; }
AI int qs_off(int T) { return T == B_Q5_0 ? 6 : 2; }

/* z0 = blocks 0..3, z1 = blocks 4..7 (granule g: 4 partials of block g / g + 4)
 * -> the 8 block sums in lane order P2 (exact) */
AI __m256i reduce_quad(__m512i z0, __m512i z1) {
    /* granule g: [g part, g + 4 part, g part, g + 4 part] */
    const __m512i t = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
    const __m512i ia = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i ib = _mm512_setr_epi32(2, 3, 6, 7, 10, 11, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm256_add_epi32(_mm512_castsi512_si256(_mm512_permutexvar_epi32(ia, t)),
                            _mm512_castsi512_si256(_mm512_permutexvar_epi32(ib, t)));
}

/* sum of u1 * a1 + u2 * a2 per 4 bytes (unsigned levels <= 31 without VNNI) */
AI __m512i dot_us2(__m512i u1, __m512i a1, __m512i u2, __m512i a2) {
#if MF_VNNI
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u1, a1), u2, a2);
#else
    /* two maddubs pair sums of levels <= 31 add to at most 2 * 31 * 128 * 2 in int16 */
    return _mm512_madd_epi16(_mm512_add_epi16(_mm512_maddubs_epi16(u1, a1), _mm512_maddubs_epi16(u2, a2)),
                             _mm512_set1_epi16(1));
#endif
}

/* Where a group's weight bytes come from, for a whole group (m = 8) or the
 * partial last group of m blocks of a row with whole groups before it:
 * chunk c = the 64 bytes at cofs[c] (dofs: inside the row), and the word
 * permutes that pick each quad's quants (qidx[h], from chunks h and h + 1)
 * and G = the scales (words 0..7, order P2) and Q5_0's high-bit words
 * (words 8..23: the low halves of blocks 0..3, the high halves of 0..3, the
 * low halves of 4..7, the high halves of 4..7), from chunks 0 and 1, or 2
 * for the words in ghi. Words of blocks past m read word 0: their
 * activations are 0 and their lanes masked. Built at registration. */
typedef struct qsrc {
    int m, nq;       /* blocks, quads holding one */
    int cofs[3];
    __mmask32 ghi;
    __mmask8 lanes;  /* lanes (order P2) of real blocks */
    __m512i gidx, qidx[2];
} qsrc;

static qsrc g_qsrc[4][9]; /* [type][m], m = 8: a whole group */

/* index of the word at byte p for a permute of chunks a, b (-1: in neither) */
static int qs_pick(const qsrc *q, int p, int a, int b) {
    if (p >= q->cofs[a] && p + 2 <= q->cofs[a] + 64) return (p - q->cofs[a]) / 2;
    if (p >= q->cofs[b] && p + 2 <= q->cofs[b] + 64) return 32 + (p - q->cofs[b]) / 2;
    return -1;
}

static void qsrc_init(qsrc *q, int T, int m) {
    const int bs = bbytes(T), L = m * bs, o = qs_off(T);
    memset(q, 0, sizeof *q);
    q->m = m;
    q->nq = (m + 3) / 4;
    for (int c = 0; c < 3; c++) q->cofs[c] = dofs(c, L);
    int16_t gi[32] = {0}, qi[2][32] = {{0}};
    for (int w = 0; w < 24; w++) {
        int b, p;
        if (w < 8) b = P2(w), p = b * bs;
        else {
            b = (w - 8) % 4 + 4 * (w >= 16);
            p = b * bs + 2 + 2 * (((w - 8) / 4) & 1);
            if (T != B_Q5_0) continue;
        }
        if (b >= m) continue;
        int k = qs_pick(q, p, 0, 1);
        if (k < 0) {
            k = qs_pick(q, p, 2, 2);
            q->ghi |= (__mmask32)1 << w;
        }
        gi[w] = (int16_t)k;
    }
    for (int h = 0; h < 2; h++)
        for (int w = 0; w < 32; w++) {
            const int b = 4 * h + w / 8;
            if (b < m) qi[h][w] = (int16_t)qs_pick(q, b * bs + o + 2 * (w % 8), h, h + 1);
        }
    for (int i = 0; i < 8; i++)
        if (P2(i) < m) q->lanes |= (__mmask8)(1u << i);
    q->gidx = _mm512_loadu_si512(gi);
    q->qidx[0] = _mm512_loadu_si512(qi[0]);
    q->qidx[1] = _mm512_loadu_si512(qi[1]);
}

/* [elements 16 half .. 16 half + 15 of blocks 4h .. 4h + 3] (blocks past m: 0) */
AI __m512i y_quad(const uint8_t *yg, int h, int half, int m) {
    const uint8_t *p = yg + 4 * h * YBS + 2 + 16 * half;
    __m128i v[4];
    #pragma GCC unroll 4
    for (int g = 0; g < 4; g++)
        v[g] = 4 * h + g < m ? _mm_loadu_si128((const __m128i *)(p + g * YBS)) : _mm_setzero_si128();
    return _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(v[0]), v[1], 1), v[2], 2),
                              v[3], 3);
}

AI void y_group_quad(int T, const uint8_t *yg, int m, ygrp *Y) {
    #pragma GCC unroll 8
    for (int h = 0; h < 2; h++) {
        Y->a[2 * h] = y_quad(yg, h, 0, m);
        Y->a[2 * h + 1] = y_quad(yg, h, 1, m);
    }
    if (boffset_log2(T) >= 0) {
        const __m512i one = _mm512_set1_epi8(1);
        const __m256i bsum = reduce_quad(_mm512_add_epi32(dr_dot_us(one, Y->a[0]), dr_dot_us(one, Y->a[1])),
                                         _mm512_add_epi32(dr_dot_us(one, Y->a[2]), dr_dot_us(one, Y->a[3])));
        Y->off = _mm256_slli_epi32(bsum, boffset_log2(T));
    } else Y->off = _mm256_setzero_si256();
    uint16_t d[8];
    #pragma GCC unroll 8
    for (int i = 0; i < 8; i++) d[i] = P2(i) < m ? mf_ld16(yg + P2(i) * YBS) : 0;
    Y->dy = _mm256_cvtph_ps(_mm_setr_epi16((short)d[0], (short)d[1], (short)d[2], (short)d[3], (short)d[4], (short)d[5],
                                           (short)d[6], (short)d[7]));
}

/* One row's values of a group in the quad layout (order P2); q: a local copy
 * of the group's qsrc (whole: m = 8). */
AI __m256 row_group_quad(int T, const uint8_t *xg, const qsrc *q, int whole, const ygrp *Y) {
    const __m512i c0 = _mm512_loadu_si512(xg + q->cofs[0]), c1 = _mm512_loadu_si512(xg + q->cofs[1]);
    const __m512i c2 = whole || q->ghi || q->nq > 1 ? _mm512_loadu_si512(xg + q->cofs[2]) : c1;
    __m512i G = _mm512_permutex2var_epi16(c0, q->gidx, c1);
    if (q->ghi) G = _mm512_mask_permutexvar_epi16(G, q->ghi, q->gidx, c2);
    __mmask64 km[4] = {0, 0, 0, 0};
    if (T == B_Q5_0) {
        /* through memory: mask loads of the stored words are cheaper than
         * moving each out of the vector unit */
        __mmask64 gq[8] __attribute__((aligned(64)));
        _mm512_store_si512(gq, G);
        __asm__("" : "+m"(*(__mmask64(*)[8])gq));
        km[0] = _load_mask64(&gq[2]), km[1] = _load_mask64(&gq[3]);
        km[2] = _load_mask64(&gq[4]), km[3] = _load_mask64(&gq[5]);
    }
    __m512i z[2];
    #pragma GCC unroll 8
    for (int h = 0; h < 2; h++) {
        if (!whole && h >= q->nq) {
            z[h] = _mm512_setzero_si512();
            continue;
        }
        /* quants of blocks 4h .. 4h + 3 */
        const __m512i w = _mm512_permutex2var_epi16(h ? c1 : c0, q->qidx[h], h ? c2 : c1);
        const __m512i m4 = _mm512_set1_epi8(0x0f);
        __m512i lo = _mm512_and_si512(w, m4), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
        if (T == B_Q5_0) {
            lo = _mm512_mask_add_epi8(lo, km[2 * h], lo, _mm512_set1_epi8(16));
            hi = _mm512_mask_add_epi8(hi, km[2 * h + 1], hi, _mm512_set1_epi8(16));
        }
        if (T == B_IQ4_NL) {
            __m128i t = _mm_loadu_si128((const __m128i *)mf_iq4nl_values);
#if MF_VNNI
            t = _mm_xor_si128(t, _mm_set1_epi8((char)0x80)); /* value + 128, unsigned */
            z[h] = _mm512_dpbusd_epi32(
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), lo), Y->a[2 * h]),
                _mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), hi), Y->a[2 * h + 1]);
#else
            z[h] = _mm512_add_epi32(dr_dot_ss(_mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), lo), Y->a[2 * h]),
                                    dr_dot_ss(_mm512_shuffle_epi8(_mm512_broadcast_i32x4(t), hi), Y->a[2 * h + 1]));
#endif
        } else z[h] = dot_us2(lo, Y->a[2 * h], hi, Y->a[2 * h + 1]);
    }
    __m256i si = reduce_quad(z[0], z[1]);
    if (boffset_log2(T) >= 0) si = _mm256_sub_epi32(si, Y->off);
    const __m256 sf = _mm256_cvtepi32_ps(si);
    __m256 dx = _mm256_cvtph_ps(_mm512_castsi512_si128(G));
    if (!whole) dx = _mm256_maskz_mov_ps(q->lanes, dx);
    if (T == B_Q4_0) return _mm256_mul_ps(_mm256_mul_ps(sf, dx), Y->dy);
    return _mm256_mul_ps(_mm256_mul_ps(dx, Y->dy), sf);
}

/* The fold of quant/lanes.h (mf_fold8_ps) for 8 rows at once: lane r of the
 * result is row r's fold; every add is the one mf_lanes_fold makes. */
AI __m256 fold8x8(const __m256 a[8]) {
    __m256 t[4];
    #pragma GCC unroll 8
    for (int i = 0; i < 4; i++) /* l[j] + l[j + 4]: [row 2i | row 2i+1] */
        t[i] = _mm256_add_ps(_mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x20),
                             _mm256_permute2f128_ps(a[2 * i], a[2 * i + 1], 0x31));
    /* l[j] + l[j + 2]: [rows 0, 2 | rows 1, 3] and [rows 4, 6 | rows 5, 7], two lanes each */
    const __m256 u0 = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t[0]), _mm256_castps_pd(t[1]))),
                                    _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t[0]), _mm256_castps_pd(t[1]))));
    const __m256 u1 = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(t[2]), _mm256_castps_pd(t[3]))),
                                    _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(t[2]), _mm256_castps_pd(t[3]))));
    /* l[0] + l[1]: rows 0 2 4 6 | 1 3 5 7 */
    const __m256 v = _mm256_add_ps(_mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* lanes 0 .. R-1 of v to s (a whole store when R is 8) */
AI void store_rows(float *s, __m256 v, int R) {
    if (R == 8) _mm256_storeu_ps(s, v);
    else _mm256_mask_storeu_ps(s, (__mmask8)((1u << R) - 1), v);
}

/* R rows (1..TILE32) of a 32-element block type */
/* R rows (1..TILE32) of a 32-element block type with at least one whole
 * group. Yb: the call's prepared activation groups (the partial one last),
 * or NULL: prepare each group here, from y (a call of at most one tile:
 * preparing as it goes overlaps that work with the rows'). */
AI void tile32(int T, int R, int n, float *s, const uint8_t *x, size_t xs, const ygrp *Yb, const uint8_t *y,
               const part32 *pt) {
    const int bs = bbytes(T);
    const int ng = n / 32 / 8, m = n / 32 % 8;
    __m256 acc[TILE32];
    #pragma GCC unroll 8
    for (int r = 0; r < TILE32; r++) acc[r] = _mm256_setzero_ps();
    ygrp Yl;
    const ygrp *Y;
    if (quad_type(T)) {
        const qsrc qw = g_qsrc[T][8];
        for (int g = 0; g < ng; g++) {
            const uint8_t *xg = x + (size_t)g * 8 * bs;
            if (Yb) Y = &Yb[g];
            else y_group_quad(T, y + (size_t)g * 8 * YBS, 8, &Yl), Y = &Yl;
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r] = _mm256_add_ps(acc[r], row_group_quad(T, xg + r * xs, &qw, 1, Y));
        }
        if (m) { /* the partial group, reading back into the row's whole groups where it must */
            const qsrc qp = g_qsrc[T][m];
            const uint8_t *xg = x + (size_t)ng * 8 * bs;
            if (Yb) Y = &Yb[ng];
            else y_group_quad(T, y + (size_t)ng * 8 * YBS, m, &Yl), Y = &Yl;
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r] = _mm256_add_ps(acc[r], row_group_quad(T, xg + r * xs, &qp, 0, Y));
        }
    } else {
        for (int g = 0; g < ng; g++) {
            const uint8_t *xg = x + (size_t)g * 8 * bs;
            if (Yb) Y = &Yb[g];
            else y_group(T, y + (size_t)g * 8 * YBS, NULL, &Yl), Y = &Yl;
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r] = _mm256_add_ps(acc[r], row_group(T, xg + r * xs, NULL, Y));
        }
        if (m) {
            const uint8_t *xg = x + (size_t)ng * 8 * bs;
            if (Yb) Y = &Yb[ng];
            else y_group(T, y + (size_t)ng * 8 * YBS, pt, &Yl), Y = &Yl;
            #pragma GCC unroll 8
            for (int r = 0; r < R; r++) acc[r] = _mm256_add_ps(acc[r], row_group(T, xg + r * xs, pt, Y));
        }
    }
    /* back to natural lane order (from P2 or P), then the fold */
    const __m256i unp = quad_type(T) ? _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7) : _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    #pragma GCC unroll 8
    for (int r = 0; r < TILE32; r++) acc[r] = r < R ? _mm256_permutevar8x32_ps(acc[r], unp) : _mm256_setzero_ps();
    store_rows(s, fold8x8(acc), R);
}

/* the activation groups of a row of n (256 .. YPREP_MAX * 256) elements */
static inline __attribute__((always_inline)) void prep32(int T, int n, const uint8_t *y, const part32 *pt, ygrp *Yb) {
    const int ng = n / 32 / 8, m = n / 32 % 8;
    for (int g = 0; g < ng; g++) {
        if (quad_type(T)) y_group_quad(T, y + (size_t)g * 8 * YBS, 8, &Yb[g]);
        else y_group(T, y + (size_t)g * 8 * YBS, NULL, &Yb[g]);
    }
    if (m) {
        if (quad_type(T)) y_group_quad(T, y + (size_t)ng * 8 * YBS, m, &Yb[ng]);
        else y_group(T, y + (size_t)ng * 8 * YBS, pt, &Yb[ng]);
    }
}

/* Rows of fewer than 8 blocks (n < 256) and of more than YPREP_MAX groups
 * go through this level's vec_dot row by row. A call of more than one tile
 * prepares the activation groups once, for its whole tiles; a call of one
 * tile, and the last tile of fewer rows, prepare them as they go. */
#define DEFINE_ROWS32(NAME, T)                                                                             \
    static void NAME(int n, float *s, const void *vx, size_t xs, const void *vy, int nr) {                \
        const uint8_t *x = vx, *y = vy;                                                                   \
        if (n < 256 || n > YPREP_MAX * 256) {                                                             \
            for (int r = 0; r < nr; r++) g_vdot32[T](n, &s[r], x + (size_t)r * xs, y);                   \
            return;                                                                                       \
        }                                                                                                 \
        const part32 *pt = &g_part32[T][1][n / 32 % 8];                                                  \
        int r = 0;                                                                                        \
        if (nr > TILE32) {                                                                                \
            ygrp Yb[YPREP_MAX];                                                                           \
            prep32(T, n, y, pt, Yb);                                                                      \
            for (; r + TILE32 <= nr; r += TILE32) tile32(T, TILE32, n, s + r, x + (size_t)r * xs, xs, Yb, y, pt); \
        }                                                                                                 \
        x += (size_t)r * xs;                                                                              \
        s += r;                                                                                           \
        switch (nr - r) {                                                                                 \
        case 1: tile32(T, 1, n, s, x, xs, NULL, y, pt); break;                                            \
        case 2: tile32(T, 2, n, s, x, xs, NULL, y, pt); break;                                            \
        case 3: tile32(T, 3, n, s, x, xs, NULL, y, pt); break;                                            \
        case 4: tile32(T, 4, n, s, x, xs, NULL, y, pt); break;                                            \
        case 5: tile32(T, 5, n, s, x, xs, NULL, y, pt); break;                                            \
        case 6: tile32(T, 6, n, s, x, xs, NULL, y, pt); break;                                            \
        case 7: tile32(T, 7, n, s, x, xs, NULL, y, pt); break;                                            \
        case 8: tile32(T, 8, n, s, x, xs, NULL, y, pt); break;                                            \
        default: break;                                                                                   \
        }                                                                                                 \
    }

DEFINE_ROWS32(rows_q4_0, B_Q4_0)
DEFINE_ROWS32(rows_q5_0, B_Q5_0)
DEFINE_ROWS32(rows_q8_0, B_Q8_0)
DEFINE_ROWS32(rows_iq4_nl, B_IQ4_NL)

/* ---------------- super-blocks ---------------- */

enum { K_Q4, K_Q5, K_Q6 };

/* [scale j x 16 | scale j + 1 x 16] from 8 int16 scales repeated per granule */
AI __m512i k_sub_scales(__m512i half, int j) {
    const __m512i lo = _mm512_set1_epi16((short)(0x0100 + 0x0202 * j)); /* bytes 2j, 2j + 1 */
    const __m512i hi = _mm512_set1_epi16((short)(0x0100 + 0x0202 * (j + 1)));
    return _mm512_shuffle_epi8(half, _mm512_mask_mov_epi64(lo, 0xf0, hi));
}

/* granule i: scale first + i, x 8 (one scale per 16 elements) */
AI __m512i k_group_scales(__m512i half, int first) {
    const __m512i m = _mm512_setr_epi32(
        0x01000100 + 0x02020202 * first, 0x01000100 + 0x02020202 * first, 0x01000100 + 0x02020202 * first,
        0x01000100 + 0x02020202 * first, 0x01000100 + 0x02020202 * (first + 1), 0x01000100 + 0x02020202 * (first + 1),
        0x01000100 + 0x02020202 * (first + 1), 0x01000100 + 0x02020202 * (first + 1),
        0x01000100 + 0x02020202 * (first + 2), 0x01000100 + 0x02020202 * (first + 2),
        0x01000100 + 0x02020202 * (first + 2), 0x01000100 + 0x02020202 * (first + 2),
        0x01000100 + 0x02020202 * (first + 3), 0x01000100 + 0x02020202 * (first + 3),
        0x01000100 + 0x02020202 * (first + 3), 0x01000100 + 0x02020202 * (first + 3));
    return _mm512_shuffle_epi8(half, m);
}

/* Q4_K / Q5_K 12-byte scale field: the 8 scales as int16 in every granule,
 * and the 8 mins as 16 int16 (each twice, one per 16-element bsum) */
AI void k4_unpack(const uint8_t *p, __m512i *sc, __m256i *mn) {
    uint32_t w[3];
    memcpy(w, p, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t sc_lo = w[0] & m6, mn_lo = w[1] & m6;
    const uint32_t sc_hi = (w[2] & m4) | ((w[0] >> 6) & m2) << 4;
    const uint32_t mn_hi = ((w[2] >> 4) & m4) | ((w[1] >> 6) & m2) << 4;
    const __m128i sc8 = _mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0);
    const __m128i mn8 = _mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0);
    *sc = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sc8));
    *mn = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
}

/* One row's super-block: *acc = the 8 int32 partials of the scaled level
 * sums (Q6_K: minus its level offset), *mn = the 8 partials of the min sums
 * (Q4_K / Q5_K). ya[j] = activation quants 64j .. 64j + 63. */
AI void k_row(int T, const uint8_t *xb, const __m512i ya[4], __m256i bsums, __m256i *acc8, __m256i *mn8) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    __m512i acc = _mm512_setzero_si512();
    if (T == K_Q4 || T == K_Q5) {
        const int qs_off = T == K_Q4 ? 16 : 48, qh_off = 16;
        __m512i sc;
        __m256i mn;
        k4_unpack(xb + 4, &sc, &mn);
        *mn8 = _mm256_madd_epi16(mn, bsums);
        const __m512i qh = T == K_Q5 ? dr_dup256(xb + qh_off) : _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            /* 64 bytes of nibbles: sub-blocks 4h .. 4h + 3 as [4h | 4h + 1] and [4h + 2 | 4h + 3] */
            const __m512i q = _mm512_loadu_si512(xb + qs_off + 64 * h);
            const __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            __m512i c[2];
            c[0] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
            c[1] = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
            #pragma GCC unroll 8
            for (int t = 0; t < 2; t++) {
                const int j = 4 * h + 2 * t;
                __m512i w = c[t];
                if (T == K_Q5) { /* 5th bits of sub-blocks j, j + 1: bits j, j + 1 of qh[l] */
                    const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << j)),
                                                            _mm256_set1_epi8((char)(1 << (j + 1))), 1);
                    w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(qh, bits), w, _mm512_set1_epi8(16));
                }
                acc = dr_dpwssd(acc, _mm512_maddubs_epi16(w, ya[2 * h + t]), k_sub_scales(sc, j));
            }
        }
        *acc8 = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
    } else { /* Q6_K */
        const block_q6_K *x = (const block_q6_K *)xb;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        /* the level offset: 32 * sum_j sc_j * bsum_j */
        const __m256i voff = _mm256_slli_epi32(_mm256_madd_epi16(sc16, bsums), 5);
        const __m512i mask01 = _mm512_inserti64x4(_mm512_set1_epi8(0x03), _mm256_set1_epi8(0x0c), 1);
        const __m512i mask23 = _mm512_inserti64x4(_mm512_set1_epi8(0x30), _mm256_set1_epi8((char)0xc0), 1);
        const __m512i sh01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
        const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            /* elements 128h + 32k + l: low nibbles of ql[64h + l] (k = 0), ql[64h + 32 + l]
             * (k = 1), their high nibbles (k = 2, 3); top bits 2k, 2k + 1 of qh[32h + l] */
            const __m512i l = _mm512_loadu_si512(x->ql + 64 * h);
            const __m512i qh = dr_dup256(x->qh + 32 * h);
            const __m512i half =
                _mm512_broadcast_i32x4(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m512i w01 =
                _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_sllv_epi16(_mm512_and_si512(qh, mask01), sh01));
            const __m512i w23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                                _mm512_srlv_epi16(_mm512_and_si512(qh, mask23), sh23));
            acc = dr_dpwssd(acc, _mm512_maddubs_epi16(w01, ya[2 * h]), k_group_scales(half, 0));
            acc = dr_dpwssd(acc, _mm512_maddubs_epi16(w23, ya[2 * h + 1]), k_group_scales(half, 4));
        }
        *acc8 = _mm256_sub_epi32(_mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1)), voff);
        *mn8 = _mm256_setzero_si256();
    }
}

/* [sum of a0, a1, a2, a3 | sum of b0, b1, b2, b3] (exact) */
AI __m256i hsum4x2(const __m256i a[4], const __m256i b[4]) {
    const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(a[0], a[1]), _mm256_unpackhi_epi32(a[0], a[1]));
    const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(a[2], a[3]), _mm256_unpackhi_epi32(a[2], a[3]));
    const __m256i t2 = _mm256_add_epi32(_mm256_unpacklo_epi32(b[0], b[1]), _mm256_unpackhi_epi32(b[0], b[1]));
    const __m256i t3 = _mm256_add_epi32(_mm256_unpacklo_epi32(b[2], b[3]), _mm256_unpackhi_epi32(b[2], b[3]));
    const __m256i u0 = _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
    const __m256i u1 = _mm256_add_epi32(_mm256_unpacklo_epi64(t2, t3), _mm256_unpackhi_epi64(t2, t3));
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* R rows (1..TILEK) of a super-block type */
AI void tilek(int T, int R, int n, float *s, const uint8_t *x, size_t xs, const block_q8_K *y) {
    const int xbs = T == K_Q4 ? (int)sizeof(block_q4_K) : T == K_Q5 ? (int)sizeof(block_q5_K) : (int)sizeof(block_q6_K);
    const int nb = n / QK_K;
    __m256 sum = _mm256_setzero_ps(); /* lane r: row r's float chain */
    /* Super-block values go to vals first and are added into sum in a second
     * loop (same adds, same order): the chain of adds then never waits on a
     * register the decode work pushed out to memory. */
    __m256 vals[KCHUNK];
    for (int b0 = 0; b0 < nb; b0 += KCHUNK) {
    const int b1 = nb - b0 < KCHUNK ? nb : b0 + KCHUNK;
    for (int b = b0; b < b1; b++) {
        __m512i ya[4];
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) ya[j] = _mm512_loadu_si512(y[b].qs + 64 * j);
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)y[b].bsums);
        const uint8_t *xb = x + (size_t)b * xbs;
        __m256i a[8], m[8];
        #pragma GCC unroll 8
        for (int r = 0; r < 8; r++) {
            if (r < R) k_row(T, xb + r * xs, ya, bsums, &a[r], &m[r]);
            else a[r] = m[r] = _mm256_setzero_si256();
        }
        const __m256 yd = _mm256_set1_ps(y[b].d);
        /* row r's block (rows past R read row 0's; their lanes are never stored) */
#define XR(r) (xb + ((r) < R ? (r) : 0) * xs)
        if (T == K_Q6) {
            const __m256i si = hsum4x2(a, a + 4); /* isum of rows 0..7 */
            const size_t o = offsetof(block_q6_K, d);
            const __m256 dx = _mm256_cvtph_ps(_mm_setr_epi16(
                (short)mf_ld16(XR(0) + o), (short)mf_ld16(XR(1) + o), (short)mf_ld16(XR(2) + o), (short)mf_ld16(XR(3) + o),
                (short)mf_ld16(XR(4) + o), (short)mf_ld16(XR(5) + o), (short)mf_ld16(XR(6) + o), (short)mf_ld16(XR(7) + o)));
            /* d = f16(x.d) * y.d; value d * isum */
            vals[b - b0] = _mm256_mul_ps(_mm256_mul_ps(dx, yd), _mm256_cvtepi32_ps(si));
        } else {
            const __m256i lo = hsum4x2(a, m); /* [isum | summ] of rows 0..3 */
            const __m256i hi = R > 4 ? hsum4x2(a + 4, m + 4) : lo;
            const __m256i si = _mm256_permute2x128_si256(lo, hi, 0x20), sm = _mm256_permute2x128_si256(lo, hi, 0x31);
            /* d and dmin are the block's first two f16 */
            const __m256i w = _mm256_setr_epi32((int)mf_ld32(XR(0)), (int)mf_ld32(XR(1)), (int)mf_ld32(XR(2)),
                                                (int)mf_ld32(XR(3)), (int)mf_ld32(XR(4)), (int)mf_ld32(XR(5)),
                                                (int)mf_ld32(XR(6)), (int)mf_ld32(XR(7)));
            const __m256i dw = _mm256_permute4x64_epi64(
                _mm256_packus_epi32(_mm256_and_si256(w, _mm256_set1_epi32(0xffff)), _mm256_srli_epi32(w, 16)),
                _MM_SHUFFLE(3, 1, 2, 0)); /* d of rows 0..7 | dmin of rows 0..7 */
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(dw)), yd);
            const __m256 dmin = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(dw, 1)), yd);
            /* value d * isum - dmin * summ */
            vals[b - b0] = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(si)), _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(sm)));
        }
#undef XR
    }
    for (int b = b0; b < b1; b++) sum = _mm256_add_ps(sum, vals[b - b0]);
    }
    store_rows(s, sum, R);
}

#define DEFINE_ROWSK(NAME, T)                                                                             \
    static void NAME(int n, float *s, const void *vx, size_t xs, const void *vy, int nr) {              \
        const uint8_t *x = vx;                                                                          \
        const block_q8_K *y = vy;                                                                       \
        int r = 0;                                                                                      \
        for (; r + TILEK <= nr; r += TILEK) tilek(T, TILEK, n, s + r, x + (size_t)r * xs, xs, y);       \
        x += (size_t)r * xs;                                                                            \
        s += r;                                                                                         \
        switch (nr - r) {                                                                               \
        case 1: tilek(T, 1, n, s, x, xs, y); break;                                                     \
        case 2: tilek(T, 2, n, s, x, xs, y); break;                                                     \
        case 3: tilek(T, 3, n, s, x, xs, y); break;                                                     \
        case 4: tilek(T, 4, n, s, x, xs, y); break;                                                     \
        case 5: tilek(T, 5, n, s, x, xs, y); break;                                                     \
        case 6: tilek(T, 6, n, s, x, xs, y); break;                                                     \
        case 7: tilek(T, 7, n, s, x, xs, y); break;                                                     \
        default: break;                                                                                 \
        }                                                                                               \
    }

DEFINE_ROWSK(rows_q4_k, K_Q4)
DEFINE_ROWSK(rows_q5_k, K_Q5)
DEFINE_ROWSK(rows_q6_k, K_Q6)

/* tab must already hold this level's vec_dot (dispatch registers the dots first) */
static void register_rows_int8(mf_type_traits *tab) {
    part32_tables();
    g_vdot32[B_Q4_0] = tab[MF_TYPE_Q4_0].vec_dot;
    g_vdot32[B_Q5_0] = tab[MF_TYPE_Q5_0].vec_dot;
    g_vdot32[B_Q8_0] = tab[MF_TYPE_Q8_0].vec_dot;
    g_vdot32[B_IQ4_NL] = tab[MF_TYPE_IQ4_NL].vec_dot;
    for (int t = 0; t < 4; t++)
        for (int m = 1; m <= 8; m++) qsrc_init(&g_qsrc[t][m], t, m);
    tab[MF_TYPE_Q4_0].vec_dot_rows = rows_q4_0;
    tab[MF_TYPE_Q5_0].vec_dot_rows = rows_q5_0;
    tab[MF_TYPE_Q8_0].vec_dot_rows = rows_q8_0;
    tab[MF_TYPE_IQ4_NL].vec_dot_rows = rows_iq4_nl;
    tab[MF_TYPE_Q4_K].vec_dot_rows = rows_q4_k;
    tab[MF_TYPE_Q5_K].vec_dot_rows = rows_q5_k;
    tab[MF_TYPE_Q6_K].vec_dot_rows = rows_q6_k;
}
