/* k_mmq.cu - products of more than 8 activation rows (batched decode of
 * several sequences, prefill in chunks) for Q4_K, Q6_K and Q8_0 (as
 * regrouped at upload, MFC_T_Q8_0R) on
 * the int8 tensor cores: mma.sync m16n8k32 of the weights' integer levels
 * with the activations' int8 blocks (mfc_quant_x), each 32-wide product
 * scaled in f32 (Q6_K's 16-wide scales: two products, each with the other
 * half's levels zero).
 *
 * Beyond 8 rows the dp4a kernel (k_mmvq.cu) re-reads each activation byte
 * for every weight row, so L1 traffic grows with rows x weights and the
 * product stops being bound by the weights' bytes; an mma reuses each
 * activation fragment for 8 weight rows and each weight fragment for 16
 * rows. The activations come in the tiled layout (kernels.h,
 * mfc_q8_tiled_kb): a tile's fragment for one block of 32 is 512
 * contiguous bytes in lane order and its scales 16 contiguous pairs, so a
 * warp's loads are whole lines (scattered 8-byte loads from 8 rows were
 * the bound: about 48 L1 wavefronts per mma).
 *
 * A warp takes 8 weight rows (the mma's n) and every activation row of
 * its chunk (16, 32 or 64 rows: up to four m16 tiles; chunk_rows); a team of W warps splits the
 * super-blocks of k between them (W a function of k alone) and sums in warp
 * order, so an output's value depends only on its own activation row, the
 * weights and k: never on how many rows the step has, nor on which chunk or
 * tile the row falls in (the mma's integer sums are exact). Steps of up to
 * 8 rows take the dp4a kernel, whose sums run in another order: a row's
 * bits differ between steps of at most 8 rows and of more.
 *
 * Lanes: g = lane / 4 picks the weight row whose levels the lane loads (the
 * mma's B column) and the activation rows g, g + 8 of each tile (A rows);
 * t = lane % 4 picks k positions. The sum over k does not care which k
 * position sits in which fragment slot as long as A and B agree, so each
 * lane takes 8 consecutive levels (one 8-byte load): slots 4t..4t+3 hold
 * positions 8t..8t+3 and slots 16+4t.. positions 8t+4..8t+7. Q6_K's scales
 * cover 16 weights, lanes 0-1 and 2-3 of a block: two mmas, each with the
 * other half's levels zero. The C fragment's rows 2t, 2t+1 are the weight
 * rows whose scales the lane applies. Activation rows past the step's
 * (the rest of a last tile) hold whatever the buffer held: an mma's output
 * row depends only on its own A row, and those rows are never written. */
#include "cuda/dequant.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/mmq.cuh"

#define MQ_ROWS 64 /* the most activation rows per chunk: four m16 tiles */

/* rows per chunk, 16, 32 or 64 (MINFER_CUDA_MMQ_CHUNK; the values do not
 * depend on it): smaller chunks give the grid more blocks and each warp
 * fewer accumulators, and read the weights once per chunk (from L2 after
 * the first, except for an output head larger than the L2). 0, the
 * default: 32. At 64 rows on an H100 (bench_mmvq -r 64, qwen3-4b Q4_K
 * shapes), with the activations read per mma, chunks of 16 took 23.5-96.5
 * us where chunks of 64 took 33-122 (down: 48 against 78); with them
 * staged in halves of a super-block (below), chunks of 32 took 16.8-63.8
 * us where chunks of 16 took 18.9-79.3, and 64 sequences decoded at 6100
 * t/s against 5445. The output head (319 MB) in chunks of 32 rather than 64
 * (read twice, but staged) then took 64 sequences from 6418 to 6532 t/s
 * and 32 from 5232 to 5335, 16 unchanged (3551 against 3562). */
int mfc_mmq_chunk = 0;

static int chunk_rows(void) {
    return mfc_mmq_chunk == 16 || mfc_mmq_chunk == 32 || mfc_mmq_chunk == 64 ? mfc_mmq_chunk : 32;
}

/* the most rows these kernels take (MINFER_CUDA_MMQ_ROWS): every count by
 * default, prefill included (measured faster than the f16 tiles at 512) */
int mfc_mmq_rows = 1 << 30;

/* one super-block of 256 weights: this lane's levels of its B row (qv), and
 * what it needs of the two rows it scales (e: 2t, 2t+1) */
template <int T> struct mq_w;
template <> struct mq_w<T_Q4_K> {
    uint2 qv[4];   /* bytes 8t..8t+7 of each 32-byte group of levels */
    uint4 hd[2];   /* d, dmin, 12 scale bytes of rows 2t, 2t+1 */
};
template <> struct mq_w<T_Q6_K> {
    uint2 ql[2][2], qh[2]; /* per half: bytes 8t..8t+7 of each 32 of the low bits, of the high bits */
    uint32_t sc[2][4];     /* 16 scale bytes of rows 2t, 2t+1 */
    float d[2];
};
template <> struct mq_w<T_Q6_KP> : mq_w<T_Q6_K> {};
/* Q8_0 in the device's layout (MFC_T_Q8_0R): runs of 8 scales, then 8 x 32
 * levels */
template <> struct mq_w<T_Q8_0R> {
    uint2 qv[8];  /* bytes 8t..8t+7 of each block's 32 levels */
    uint4 dh[2];  /* the 8 blocks' f16 scales of rows 2t, 2t+1 */
};

/* f16 j (0..7) of the 8 in v, as a float (exact) */
__device__ __forceinline__ float h8_at(const uint4 &v, int j) {
    const uint32_t w = j < 2 ? v.x : j < 4 ? v.y : j < 6 ? v.z : v.w;
    return __half2float(__ushort_as_half((unsigned short)((j & 1) ? w >> 16 : w & 0xFFFFu)));
}

/* every row pointer is a real row (mmq_k points rows past the segment's n
 * at its last row, whose outputs are then never written): no predicates,
 * no zeroed registers per super-block */
template <int T>
__device__ __forceinline__ void wload(mq_w<T> &w, const uint8_t *__restrict__ wb, const uint8_t *__restrict__ we0,
                                      const uint8_t *__restrict__ we1, int sb, int t) {
    if constexpr (T == T_Q4_K) {
#pragma unroll
        for (int i = 0; i < 4; i++) w.qv[i] = *(const uint2 *)(wb + (size_t)sb * 144 + 16 + 32 * i + 8 * t);
        w.hd[0] = *(const uint4 *)(we0 + (size_t)sb * 144);
        w.hd[1] = *(const uint4 *)(we1 + (size_t)sb * 144);
    } else if constexpr (T == T_Q6_K || T == T_Q6_KP) {
        const q6_at p = q6_parts<T>(wb + (size_t)sb * 210, sb);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            w.ql[h][0] = ld64_q6<T>(p.ql + 64 * h + 8 * t);
            w.ql[h][1] = ld64_q6<T>(p.ql + 64 * h + 32 + 8 * t);
            w.qh[h] = ld64_q6<T>(p.qh + 32 * h + 8 * t);
        }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const q6_at pe = q6_parts<T>((e ? we1 : we0) + (size_t)sb * 210, sb);
#pragma unroll
            for (int i = 0; i < 4; i++) w.sc[e][i] = ld32_q6<T>(pe.sc + 4 * i);
            w.d[e] = ld_h(pe.d);
        }
    } else { /* block b's levels at 16 + 32 b of the run, lane t's 8 at + 8 t; the run's scales first */
        const uint8_t *run = wb + (size_t)sb * 272;
#pragma unroll
        for (int b = 0; b < 8; b++) w.qv[b] = *(const uint2 *)(run + 16 + 32 * b + 8 * t);
        w.dh[0] = *(const uint4 *)(we0 + (size_t)sb * 272);
        w.dh[1] = *(const uint4 *)(we1 + (size_t)sb * 272);
    }
}

/* tile m's fragment (rows g, g + 8) of block blk, and its scale pairs */
struct mq_a {
    uint4 q;
    float2 da, db; /* (d, d * sum of levels) of rows g, g + 8 */
};
__device__ __forceinline__ mq_a a_load(const int8_t *__restrict__ xq, const float2 *__restrict__ xd, size_t unit,
                                       int lane, int g) {
    mq_a a;
    a.q = *(const uint4 *)(xq + unit * 512 + (size_t)lane * 16);
    a.da = xd[unit * 16 + g], a.db = xd[unit * 16 + g + 8];
    return a;
}

/* A staged in shared memory: half a super-block's units (4 blocks of 32)
 * of each of the chunk's tiles, a warp's own copy, two of them (the next
 * half's loaded by cp.async while this one multiplies) */
template <int MT> struct mq_stage {
    uint4 q[MT][4][32];   /* a unit's 512 bytes, lane order */
    float2 d[MT][4][16];  /* its 16 (d, s) pairs */
};

template <bool STG, int MT>
__device__ __forceinline__ mq_a a_get(const int8_t *__restrict__ xq, const float2 *__restrict__ xd, size_t unit,
                                      const mq_stage<MT> *st, int m, int j, int lane, int g) {
    if constexpr (STG) {
        mq_a a;
        a.q = st->q[m][j & 3][lane];
        a.da = st->d[m][j & 3][g], a.db = st->d[m][j & 3][g + 8];
        return a;
    } else {
        return a_load(xq, xd, unit, lane, g);
    }
}

/* acc[u][m][0..3] += the super-block's products of weight tile u (rows 2t,
 * 2t + 1 of it) with activation tile m (rows g, g + 8); tiles from mt0 (the
 * chunk's first), nr rows; Q4_K's minimum terms go to accm instead. Each
 * activation fragment is loaded once for the NT weight tiles. With STG only
 * half HF of the super-block (blocks 4 HF .. 4 HF + 3 of 32), whose units
 * st holds; then every tile of the chunk is multiplied, also those past its
 * rows (whatever the shared memory holds: their outputs are never written),
 * because the early exit kept the compiler from loading the next tile's
 * fragment before the current tile's sums (ncu, 64 rows: each mma a chain
 * of shared load, mma and multiply-adds; without the exit QKV / O / gate+up
 * / down Q4_K / Q6_K took 8 / 16 / 6 / 16 / 16% less time). */
template <int T, int MT, int NT, bool STG, int HF, bool IS>
__device__ __forceinline__ void wmma(const mq_w<T> (&w)[NT], int sb, int kb, const int8_t *__restrict__ xq,
                                     const float2 *__restrict__ xd, const mq_stage<MT> *st, int mt0, int nr,
                                     int lane, int g, int t, float (*acc)[MT][4], float (*accm)[MT][4],
                                     int (*isum)[MT][4], float (*dsa)[2]) {
    if constexpr (T == T_Q4_K) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (STG && (j >> 2) != HF) continue;
            const int sh = 4 * (j & 1);
            uint32_t b0[NT], b1[NT];
            float dw[NT][2], mw[NT][2];
            int sc[NT][2];
#pragma unroll
            for (int u = 0; u < NT; u++) {
                b0[u] = (w[u].qv[j >> 1].x >> sh) & 0x0F0F0F0Fu, b1[u] = (w[u].qv[j >> 1].y >> sh) & 0x0F0F0F0Fu;
#pragma unroll
                for (int e = 0; e < 2; e++) { /* k4_sm's values, the packing shared by four sub-blocks */
                    const __half2 dm = *(const __half2 *)&w[u].hd[e].x;
                    const float d = __low2float(dm), dmin = __high2float(dm);
                    const uint32_t ps = k4_pack(w[u].hd[e], j >> 2, false);
                    if (IS) sc[u][e] = (int)__byte_perm(ps, 0u, 0x4440u | (unsigned)(j & 3));
                    else dw[u][e] = k4_mul(ps, j & 3, d, -8388608.0f * d);
                    mw[u][e] = k4_mul(k4_pack(w[u].hd[e], j >> 2, true), j & 3, dmin, -8388608.0f * dmin);
                }
            }
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (!STG && 16 * m >= nr) break;
                const mq_a a = a_get<STG, MT>(xq, xd, (size_t)(mt0 + m) * kb + sb * 8 + j, st, m, j, lane, g);
                if (IS && j == 0) dsa[m][0] = a.da.x, dsa[m][1] = a.db.x;
#pragma unroll
                for (int u = 0; u < NT; u++) {
                    int c[4] = {0, 0, 0, 0};
                    mma_k32(c, a.q.x, a.q.y, a.q.z, a.q.w, b0[u], b1[u]);
                    if (IS) {
                        isum[u][m][0] += sc[u][0] * c[0], isum[u][m][1] += sc[u][1] * c[1];
                        isum[u][m][2] += sc[u][0] * c[2], isum[u][m][3] += sc[u][1] * c[3];
                    } else {
                        acc[u][m][0] = fmaf(dw[u][0] * a.da.x, (float)c[0], acc[u][m][0]);
                        acc[u][m][1] = fmaf(dw[u][1] * a.da.x, (float)c[1], acc[u][m][1]);
                        acc[u][m][2] = fmaf(dw[u][0] * a.db.x, (float)c[2], acc[u][m][2]);
                        acc[u][m][3] = fmaf(dw[u][1] * a.db.x, (float)c[3], acc[u][m][3]);
                    }
                    accm[u][m][0] = fmaf(mw[u][0], a.da.y, accm[u][m][0]);
                    accm[u][m][1] = fmaf(mw[u][1], a.da.y, accm[u][m][1]);
                    accm[u][m][2] = fmaf(mw[u][0], a.db.y, accm[u][m][2]);
                    accm[u][m][3] = fmaf(mw[u][1], a.db.y, accm[u][m][3]);
                }
            }
        }
    } else if constexpr (T == T_Q6_K || T == T_Q6_KP) {
        const bool lo16 = t < 2; /* this lane's 8 positions are in the block's first 16 */
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int qq = 0; qq < 4; qq++) {
                if (STG && h != HF) continue;
                const int ns = 4 * (qq >> 1), hs = 2 * qq;
                const int gi = 8 * h + 2 * qq; /* the scales of the block's two 16-weight groups: gi, gi + 1 */
                uint32_t bx[NT], by[NT];
                float dw[NT][2][2];
                int sc[NT][2][2];
#pragma unroll
                for (int u = 0; u < NT; u++) {
                    const uint2 l = w[u].ql[h][qq & 1];
                    bx[u] = bsub4<32>(((l.x >> ns) & 0x0F0F0F0Fu) | (((w[u].qh[h].x >> hs) & 0x03030303u) << 4));
                    by[u] = bsub4<32>(((l.y >> ns) & 0x0F0F0F0Fu) | (((w[u].qh[h].y >> hs) & 0x03030303u) << 4));
#pragma unroll
                    for (int e = 0; e < 2; e++)
#pragma unroll
                        for (int s2 = 0; s2 < 2; s2++) {
                            sc[u][e][s2] = (int8_t)(w[u].sc[e][(gi + s2) >> 2] >> (8 * ((gi + s2) & 3)));
                            if (!IS) dw[u][e][s2] = w[u].d[e] * (float)sc[u][e][s2];
                        }
                }
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    if (!STG && 16 * m >= nr) break;
                    const mq_a a = a_get<STG, MT>(xq, xd, (size_t)(mt0 + m) * kb + sb * 8 + 4 * h + qq, st, m, 4 * h + qq,
                                                    lane, g);
                    if (IS && h == 0 && qq == 0) dsa[m][0] = a.da.x, dsa[m][1] = a.db.x;
#pragma unroll
                    for (int u = 0; u < NT; u++) {
                        int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
                        mma_k32(c0, a.q.x, a.q.y, a.q.z, a.q.w, lo16 ? bx[u] : 0u, lo16 ? by[u] : 0u);
                        mma_k32(c1, a.q.x, a.q.y, a.q.z, a.q.w, lo16 ? 0u : bx[u], lo16 ? 0u : by[u]);
                        if (IS) {
#pragma unroll
                            for (int e = 0; e < 4; e++)
                                isum[u][m][e] += sc[u][e & 1][0] * c0[e] + sc[u][e & 1][1] * c1[e];
                            continue;
                        }
                        acc[u][m][0] += a.da.x * (dw[u][0][0] * (float)c0[0] + dw[u][0][1] * (float)c1[0]);
                        acc[u][m][1] += a.da.x * (dw[u][1][0] * (float)c0[1] + dw[u][1][1] * (float)c1[1]);
                        acc[u][m][2] += a.db.x * (dw[u][0][0] * (float)c0[2] + dw[u][0][1] * (float)c1[2]);
                        acc[u][m][3] += a.db.x * (dw[u][1][0] * (float)c0[3] + dw[u][1][1] * (float)c1[3]);
                    }
                }
            }
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (STG && (j >> 2) != HF) continue;
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (!STG && 16 * m >= nr) break;
                const mq_a a = a_get<STG, MT>(xq, xd, (size_t)(mt0 + m) * kb + sb * 8 + j, st, m, j, lane, g);
#pragma unroll
                for (int u = 0; u < NT; u++) {
                    int c[4] = {0, 0, 0, 0};
                    mma_k32(c, a.q.x, a.q.y, a.q.z, a.q.w, w[u].qv[j].x, w[u].qv[j].y);
                    const float d0 = h8_at(w[u].dh[0], j), d1 = h8_at(w[u].dh[1], j);
                    acc[u][m][0] += d0 * a.da.x * (float)c[0];
                    acc[u][m][1] += d1 * a.da.x * (float)c[1];
                    acc[u][m][2] += d0 * a.db.x * (float)c[2];
                    acc[u][m][3] += d1 * a.db.x * (float)c[3];
                }
            }
        }
    }
}

/* the rows of weight tile u a lane loads (B: row g) and scales (2t, 2t+1);
 * past the segment's rows, its last row */
struct mq_rows {
    const uint8_t *b, *e0, *e1;
};

/* half hf of super-block sb's units of the chunk's tiles into st
 * (cp.async, one group) */
template <int MT>
__device__ __forceinline__ void stage_load(mq_stage<MT> *st, const mfc_q8 &q, int kb, int sb, int hf, int mt0, int nr,
                                           int lane) {
#pragma unroll
    for (int m = 0; m < MT; m++) {
        if (16 * m >= nr) break;
        const size_t u0 = (size_t)(mt0 + m) * kb + (size_t)sb * 8 + 4 * hf;
        const uint8_t *qs = (const uint8_t *)q.q + u0 * 512, *ds = (const uint8_t *)q.d + u0 * 128;
#pragma unroll
        for (int i = 0; i < 4; i++) cp16((uint8_t *)st->q[m] + (lane + 32 * i) * 16, qs + (lane + 32 * i) * 16, true);
        cp16((uint8_t *)st->d[m] + lane * 16, ds + lane * 16, true);
    }
    cp_commit();
}

/* this warp's share of super-blocks (tw, tw + W, ...), the next one's
 * weights loaded while the current one multiplies; the first before
 * pdl_enter (weights are never written by a step). With STG the
 * activations come through st in halves of a super-block (two stages, the
 * next half's on its way while this one multiplies): each unit's loads are
 * then issued half a super-block ahead, where a_load's wait at every mma. */
template <int T, int MT, int W, int NT, bool STG, bool IS>
__device__ __forceinline__ void mq_run(const mq_rows (&wr)[NT], int k, const mfc_q8 &q, mq_stage<MT> *st, int mt0,
                                       int nr, int tw, int lane, int g, int t, float (*acc)[MT][4]) {
    const int nsb = k / 256, kb = k / 32;
    /* IS (the activations' super-blocks of one scale each, mfc_q8.g8): each
     * mma's integers times the weights' integer sub-block scales summed
     * over the super-block, then scaled once by the two d's (dsa: the
     * activation rows' from its first block) */
    int isum[NT][MT][4];
    float dsa[MT][2];
#pragma unroll
    for (int u = 0; u < NT; u++)
#pragma unroll
        for (int m = 0; m < MT; m++) isum[u][m][0] = isum[u][m][1] = isum[u][m][2] = isum[u][m][3] = 0;
    /* Q4_K: the minimums' sums apart, subtracted once at the end (one
     * multiply-add a product instead of two multiplies, a multiply-add and
     * an add) */
    float accm[NT][MT][4];
#pragma unroll
    for (int u = 0; u < NT; u++)
#pragma unroll
        for (int m = 0; m < MT; m++) accm[u][m][0] = accm[u][m][1] = accm[u][m][2] = accm[u][m][3] = 0.0f;
    mq_w<T> cur[NT];
#pragma unroll
    for (int u = 0; u < NT; u++)
        if (tw < nsb) wload<T>(cur[u], wr[u].b, wr[u].e0, wr[u].e1, tw, t);
    pdl_enter();
    if constexpr (STG)
        if (tw < nsb) stage_load<MT>(st, q, kb, tw, 0, mt0, nr, lane);
    int buf = 0;
    /* two super-blocks an iteration, so cur and nxt swap roles instead of
     * being copied (16 moves a super-block) */
#pragma unroll 2
    for (int sb = tw; sb < nsb; sb += W) {
        mq_w<T> nxt[NT];
#pragma unroll
        for (int u = 0; u < NT; u++)
            if (sb + W < nsb) wload<T>(nxt[u], wr[u].b, wr[u].e0, wr[u].e1, sb + W, t);
        if constexpr (STG) {
            stage_load<MT>(st + (buf ^ 1), q, kb, sb, 1, mt0, nr, lane);
            cp_wait_1();
            __syncwarp();
            wmma<T, MT, NT, true, 0, IS>(cur, sb, kb, q.q, (const float2 *)q.d, st + buf, mt0, nr, lane, g, t, acc, accm,
                                         isum, dsa);
            __syncwarp(); /* every lane done with st[buf] before it is loaded again */
            buf ^= 1;
            if (sb + W < nsb) {
                stage_load<MT>(st + (buf ^ 1), q, kb, sb + W, 0, mt0, nr, lane);
                cp_wait_1();
            } else {
                cp_wait_all();
            }
            __syncwarp();
            wmma<T, MT, NT, true, 1, IS>(cur, sb, kb, q.q, (const float2 *)q.d, st + buf, mt0, nr, lane, g, t, acc, accm,
                                         isum, dsa);
            __syncwarp();
            buf ^= 1;
        } else {
            wmma<T, MT, NT, false, 0, IS>(cur, sb, kb, q.q, (const float2 *)q.d, st, mt0, nr, lane, g, t, acc, accm,
                                          isum, dsa);
        }
        if constexpr (IS) {
#pragma unroll
            for (int u = 0; u < NT; u++) {
                float dw[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    if constexpr (T == T_Q4_K) dw[e] = __low2float(*(const __half2 *)&cur[u].hd[e].x);
                    else dw[e] = cur[u].d[e];
                }
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    if (16 * m >= nr) break;
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        acc[u][m][e] = fmaf(dw[e & 1] * dsa[m][e >> 1], (float)isum[u][m][e], acc[u][m][e]);
                        isum[u][m][e] = 0;
                    }
                }
            }
        }
#pragma unroll
        for (int u = 0; u < NT; u++) cur[u] = nxt[u];
    }
    if constexpr (T == T_Q4_K)
#pragma unroll
        for (int u = 0; u < NT; u++)
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int e = 0; e < 4; e++) acc[u][m][e] -= accm[u][m][e];
}

/* TS: the types the launch's segments have: 0 Q4_K/Q6_K (either layout), 1 Q8_0, 2 any.
 * A warp takes NT tiles of 8 weight rows; a block 4 / W such groups. */
template <int MT, int W, int TS, int NT, bool STG, int MINB, bool IS>
__global__ void __launch_bounds__(128, MINB) mmq_k(mq_segs S, int k, mfc_q8 q, int rows, int nch, int crow) {
    extern __shared__ uint4 mq_dyn[]; /* STG: two mq_stage<MT> a warp */
    constexpr int GPB = 4 / W;
    const int ch = (int)blockIdx.x % nch, wblk = (int)blockIdx.x / nch;
    int si = 0;
    while (si + 1 < S.nseg && wblk >= S.blk0[si + 1]) si++;
    const mfc_mm_seg &sg = S.seg[si];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int grp = warp / W, tw = warp % W;
    const int n0 = ((wblk - S.blk0[si]) * GPB + grp) * 8 * NT;
    const int r0 = ch * crow, nr = min(crow, rows - r0);
    const uint8_t *w = (const uint8_t *)sg.w;
    mq_rows wr[NT];
#pragma unroll
    for (int u = 0; u < NT; u++) {
        const int nu = n0 + 8 * u;
        /* rows past n read the last row: real bytes, outputs never written */
        wr[u].b = w + (size_t)min(nu + g, sg.n - 1) * sg.row_bytes;
        wr[u].e0 = w + (size_t)min(nu + 2 * t, sg.n - 1) * sg.row_bytes;
        wr[u].e1 = w + (size_t)min(nu + 2 * t + 1, sg.n - 1) * sg.row_bytes;
    }
    float acc[NT][MT][4];
#pragma unroll
    for (int u = 0; u < NT; u++)
#pragma unroll
        for (int m = 0; m < MT; m++) acc[u][m][0] = acc[u][m][1] = acc[u][m][2] = acc[u][m][3] = 0.0f;
    const int mt0 = r0 / 16;
    mq_stage<MT> *st = STG ? (mq_stage<MT> *)mq_dyn + 2 * warp : NULL;
    if (n0 >= sg.n) pdl_enter();
    else if (TS != 0 && (TS == 1 || sg.type == T_Q8_0R))
        mq_run<T_Q8_0R, MT, W, NT, STG, false>(wr, k, q, st, mt0, nr, tw, lane, g, t, acc);
    else if (TS != 1 && sg.type == T_Q4_K) mq_run<T_Q4_K, MT, W, NT, STG, IS>(wr, k, q, st, mt0, nr, tw, lane, g, t, acc);
    else if (TS != 1 && sg.type == T_Q6_KP) mq_run<T_Q6_KP, MT, W, NT, STG, IS>(wr, k, q, st, mt0, nr, tw, lane, g, t, acc);
    else if (TS != 1) mq_run<T_Q6_K, MT, W, NT, STG, IS>(wr, k, q, st, mt0, nr, tw, lane, g, t, acc);
    if constexpr (W > 1) { /* the team's warps summed in warp order */
        __shared__ float red[4][NT * MT * 4][32];
#pragma unroll
        for (int u = 0; u < NT; u++)
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int e = 0; e < 4; e++) red[warp][(u * MT + m) * 4 + e][lane] = acc[u][m][e];
        __syncthreads();
        if (tw) return;
#pragma unroll
        for (int u = 0; u < NT; u++)
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    float s = red[warp][(u * MT + m) * 4 + e][lane];
#pragma unroll
                    for (int i = 1; i < W; i++) s += red[warp + i][(u * MT + m) * 4 + e][lane];
                    acc[u][m][e] = s;
                }
    }
    if (n0 >= sg.n) return;
#pragma unroll
    for (int u = 0; u < NT; u++)
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = 16 * m + g + 8 * (e >> 1), j = n0 + 8 * u + 2 * t + (e & 1);
                if (r >= nr || j >= sg.n) continue;
                const size_t o = (size_t)(r0 + r) * sg.n + j;
                const float y = acc[u][m][e] + (sg.b ? sg.b[j] : 0.0f);
                sg.out[o] = y;
                if (sg.res) sg.res[o] += y;
            }
}

/* warps per group of 8 weight rows: enough warps in the grid, and loads in
 * flight, for the narrow products (n of 2560 at k of 4096 and more); a
 * function of k alone, so the sum order is too */
int mfc_mmq_w = 0;

extern "C" int mfc_mmq_team(int k) {
    if (mfc_mmq_w == 1 || mfc_mmq_w == 2 || mfc_mmq_w == 4) return mfc_mmq_w;
    const int nsb = k / 256;
    return nsb >= 16 ? 4 : nsb >= 8 ? 2 : 1;
}

/* Activations staged in shared memory (mq_stage, halves of a super-block:
 * two stages of 2.5 KiB a warp per 16 rows) for Q4_K/Q6_K in chunks of up
 * to 32 rows (MINFER_CUDA_MMQ_STAGE=0: read per mma, the A/B). Where the
 * activations come from changes nothing in the arithmetic. On an H100
 * (bench_mmvq, qwen3-4b shapes) whole super-blocks staged took 16 rows'
 * QKV / O / gate+up / down Q4_K from 13.8 / 10.8 / 27.8 / 24.4 us to 12.7 /
 * 7.6 / 23.8 / 16.2, and 64 rows' from 37.5 / 23.5 / 96.6 / 48.4 to 27.9 /
 * 18.8 / 80.3 / 41.3; but Q8_0 (13.9 -> 15.5 us at 16 rows) and 64-row
 * chunks (an output head's then: 259 -> 279) lost, so those read per mma.
 * Halves of a super-block kept chunks of 32 rows at 40 KiB a block, where
 * they beat chunks of 16, and the head now takes chunks of 32 as well
 * (chunk_rows). */
int mfc_mmq_stage = 1;

/* Activations of one scale a super-block for the K-quant products
 * (mfc_q8.g8; MINFER_CUDA_Q8_G8=0: per 32 everywhere, the A/B). A mma's
 * int32 sums then meet the weights' integer sub-block scales in one
 * integer multiply-add each, and the super-block's sum is scaled once,
 * where per-32 scales take a conversion (a quarter-rate instruction), a
 * multiply and a multiply-add per output and mma. */
int mfc_q8_g8 = 1;

/* Blocks a multiprocessor the Q4_K/Q6_K chunks of 16 rows are compiled
 * for: five, what 96 registers gave before the A-order layout and the
 * split minimum sums, which took 111 (four blocks). On an H100 against
 * that build (bench_mmvq -r 16, qwen3-4b shapes) the bound took O / gate+up
 * / down Q4_K / Q6_K from 9.3 / 29.1 / 19.9 / 32.0 us to 7.5 / 22.5 / 15.9
 * / 24.9, and 16 sequences from 3441 to 3771 t/s. Bounds on the Q8_0 (and
 * mixed) kernels, four blocks of 128 registers, lost: 64 rows' down 59 ->
 * 103 us (the loads of the next super-block's 8 blocks then wait), so
 * they keep the registers they take. The integer sums over super-blocks
 * (IS) took 32-row blocks from 128 registers to 137-142, three blocks a
 * multiprocessor; they are held to four (123-127, no spills). */
constexpr int mq_minb(int mt, int ts, bool is) { return ts != 0 ? 1 : mt == 1 ? 5 : mt == 2 && is ? 4 : 1; }

template <int MT, int W, int TS, int NT, bool STG, bool IS>
static void mmq_go_t(cudaStream_t s, dim3 grid, const mq_segs &S, int k, const mfc_q8 *q, int rows, int nch,
                     int crow) {
    /* two stages a warp; the staged chunks (MT <= 2) stay within the 48 KiB
     * a launch gets without opting in */
    static_assert(!STG || 4 * 2 * sizeof(mq_stage<MT>) <= 48 * 1024, "mmq stages past 48 KiB");
    const size_t smem = STG ? 4 * 2 * sizeof(mq_stage<MT>) : 0;
    launch_k(mmq_k<MT, W, TS, NT, STG, mq_minb(MT, TS, IS), IS>, grid, 128, smem, s, S, k, *q, rows, nch, crow);
}

template <int MT, int W, int NT>
static void mmq_launch_t(cudaStream_t s, const mq_segs &S, int nb, int k, const mfc_q8 *q, int rows, int nch,
                         int crow) {
    int n8 = 0;
    for (int i = 0; i < S.nseg; i++) n8 += S.seg[i].type == T_Q8_0R;
    const int TS = n8 == 0 ? 0 : n8 == S.nseg ? 1 : 2;
    const dim3 grid((unsigned)(nb * nch));
    constexpr bool CAN = MT <= 2;
    const bool stg = CAN && mfc_mmq_stage && TS != 1 && crow < MQ_ROWS;
    /* K-quants alone over activations of one scale a super-block: the
     * integer sums (mixed launches, with Q8_0, keep the float ones) */
    const bool is = q8_g8_on(q->g8, mfc_q8_tiled_kb(rows, k));
    if (TS == 0) {
        if (stg && is) mmq_go_t<MT, W, 0, NT, CAN, true>(s, grid, S, k, q, rows, nch, crow);
        else if (stg) mmq_go_t<MT, W, 0, NT, CAN, false>(s, grid, S, k, q, rows, nch, crow);
        else if (is) mmq_go_t<MT, W, 0, NT, false, true>(s, grid, S, k, q, rows, nch, crow);
        else mmq_go_t<MT, W, 0, NT, false, false>(s, grid, S, k, q, rows, nch, crow);
    } else if (TS == 1) {
        mmq_go_t<MT, W, 1, NT, false, false>(s, grid, S, k, q, rows, nch, crow);
    } else {
        if (stg) mmq_go_t<MT, W, 2, NT, CAN, false>(s, grid, S, k, q, rows, nch, crow);
        else mmq_go_t<MT, W, 2, NT, false, false>(s, grid, S, k, q, rows, nch, crow);
    }
}

template <int W, int NT>
static void mmq_launch(cudaStream_t s, const mq_segs &S, int nb, int k, const mfc_q8 *q, int rows) {
    const int crow = chunk_rows();
    const int nch = (rows + crow - 1) / crow;
    const int mt = nch > 1 ? crow / 16 : (rows + 15) / 16;
    if (mt == 1) mmq_launch_t<1, W, NT>(s, S, nb, k, q, rows, nch, crow);
    else if (mt == 2) mmq_launch_t<2, W, NT>(s, S, nb, k, q, rows, nch, crow);
    else if (mt == 3) mmq_launch_t<3, W, NT>(s, S, nb, k, q, rows, nch, crow);
    else mmq_launch_t<4, W, NT>(s, S, nb, k, q, rows, nch, crow);
}

/* NT, the weight tiles per warp, stays 1: with two (each activation
 * fragment used twice) the kernel needs 190-255 registers and ran 5-90%
 * slower at 16, 32 and 64 rows on the H200 (bench_mmvq, 2026-12-02). */
extern "C" void mfc_mmq_n(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows) {
    if (mfc_mmq_tile(s, seg, nseg, k, q, rows)) return; /* a prompt's rows: k_mmq_tile.cu */
    const int W = mfc_mmq_team(k);
    const int rpb = 8 * (4 / W);
    mq_segs S = {};
    S.nseg = nseg;
    int nb = 0;
    for (int i = 0; i < nseg; i++) {
        S.seg[i] = seg[i];
        S.blk0[i] = nb;
        nb += (seg[i].n + rpb - 1) / rpb;
    }
    S.blk0[nseg] = nb;
    if (!nb || rows <= 0) return;
    if (W == 1) mmq_launch<1, 1>(s, S, nb, k, q, rows);
    else if (W == 2) mmq_launch<2, 1>(s, S, nb, k, q, rows);
    else mmq_launch<4, 1>(s, S, nb, k, q, rows);
}
