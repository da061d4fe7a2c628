/* k_mmq.cu - products of 9..64 activation rows (batched decode of several
 * sequences, short prompt chunks) for Q4_K, Q6_K and Q8_0 on the int8
 * tensor cores: mma.sync m16n8k32 (m16n8k16 for Q6_K, whose scales cover
 * 16 weights) of the weights' integer levels with the activations' int8
 * blocks (mfc_quant_x), each 32 (16) wide product scaled in f32.
 *
 * Beyond 8 rows the dp4a kernel (k_mmvq.cu) re-reads each activation byte
 * for every weight row, so L1 traffic grows with rows x weights and the
 * product stops being bound by the weights' bytes; an mma reuses each
 * activation fragment for 8 weight rows and each weight fragment for 16
 * rows.
 *
 * A warp takes 8 weight rows (the mma's n) and every activation row of its
 * chunk of 64 (up to four m16 tiles); a team of W warps splits the
 * super-blocks of k between them (W a function of k alone) and sums in warp
 * order, so an output's value depends only on its own activation row, the
 * weights and k: never on how many rows the step has, nor on which chunk or
 * tile the row falls in (the mma's integer sums are exact).
 *
 * Lanes: g = lane / 4 picks the weight row whose levels the lane loads (the
 * mma's B column) and the activation rows g, g + 8 of each tile (A rows);
 * t = lane % 4 picks k positions. The sum over k does not care which k
 * position sits in which fragment slot as long as A and B agree, so each
 * lane takes 8 consecutive levels (one 8-byte load): slots 4t..4t+3 hold
 * positions 8t..8t+3 and slots 16+4t.. positions 8t+4..8t+7 (Q4_K, Q8_0);
 * Q6_K's k16 takes positions 4t..4t+3 in place. The C fragment's rows 2t,
 * 2t+1 are the weight rows whose scales the lane applies. */
#include "cuda/dequant.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"

#define MQ_ROWS 64 /* activation rows per chunk: four m16 tiles */

int mfc_mmq_rows = MQ_ROWS;

__device__ __forceinline__ void mma_k32(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_k16(int *c, uint32_t a0, uint32_t a1, uint32_t b0) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b0));
}

__device__ __forceinline__ uint32_t ld32_2(const uint8_t *p) { /* 2-byte aligned */
    const uint16_t *h = (const uint16_t *)p;
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

/* 8 bytes at p, 2-byte aligned, as two words: aligned word loads and a
 * funnel shift (never past p + 10, which stays inside the Q8_0 row: see
 * wload) */
__device__ __forceinline__ uint2 ld64_2(const uint8_t *p) {
    const uint32_t *w = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
    if (((uintptr_t)p & 3) == 0) return make_uint2(w[0], w[1]);
    const uint32_t a = w[0], b = w[1], c = w[2];
    return make_uint2(__funnelshift_r(a, b, 16), __funnelshift_r(b, c, 16));
}

__device__ __forceinline__ int sbyte(uint32_t a, uint32_t b, uint32_t c, int i) {
    const uint32_t w = i < 4 ? a : i < 8 ? b : c;
    return (int)((w >> (8 * (i & 3))) & 0xFF);
}

/* one super-block of 256 weights: this lane's levels of its B row (qv), and
 * what it needs of the two rows it scales (e: 2t, 2t+1) */
template <int T> struct mq_w;
template <> struct mq_w<T_Q4_K> {
    uint2 qv[4];   /* bytes 8t..8t+7 of each 32-byte group of levels */
    uint4 hd[2];   /* d, dmin, 12 scale bytes of rows 2t, 2t+1 */
};
template <> struct mq_w<T_Q6_K> {
    uint32_t ql[2][2][2], qh[2][2]; /* [half][sixteenth]([low/high 32]) words at 4t */
    uint32_t sc[2][4];              /* 16 scale bytes of rows 2t, 2t+1 */
    float d[2];
};
template <> struct mq_w<T_Q8_0> {
    uint2 qv[8];    /* bytes 8t..8t+7 of each block's 32 levels */
    float d[2][8];  /* the blocks' scales of rows 2t, 2t+1 */
};

/* rows at or past n are loaded as zeros (their outputs are not written) */
template <int T>
__device__ __forceinline__ void wload(mq_w<T> &w, const uint8_t *__restrict__ wb, const uint8_t *__restrict__ we0,
                                      const uint8_t *__restrict__ we1, int sb, int t) {
    if constexpr (T == T_Q4_K) {
#pragma unroll
        for (int i = 0; i < 4; i++)
            w.qv[i] = wb ? *(const uint2 *)(wb + (size_t)sb * 144 + 16 + 32 * i + 8 * t) : make_uint2(0, 0);
        w.hd[0] = we0 ? *(const uint4 *)(we0 + (size_t)sb * 144) : make_uint4(0, 0, 0, 0);
        w.hd[1] = we1 ? *(const uint4 *)(we1 + (size_t)sb * 144) : make_uint4(0, 0, 0, 0);
    } else if constexpr (T == T_Q6_K) {
        const uint8_t *b = wb + (size_t)sb * 210;
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int s = 0; s < 2; s++) {
                w.ql[h][s][0] = wb ? ld32_2(b + 64 * h + 16 * s + 4 * t) : 0u;
                w.ql[h][s][1] = wb ? ld32_2(b + 64 * h + 32 + 16 * s + 4 * t) : 0u;
                w.qh[h][s] = wb ? ld32_2(b + 128 + 32 * h + 16 * s + 4 * t) : 0u;
            }
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const uint8_t *r = e ? we1 : we0;
            const uint8_t *be = r + (size_t)sb * 210;
#pragma unroll
            for (int i = 0; i < 4; i++) w.sc[e][i] = r ? ld32_2(be + 192 + 4 * i) : 0u;
            w.d[e] = r ? ld_h(be + 208) : 0.0f;
        }
    } else {
        /* block b's levels start at 34 b + 2; lane t's 8 at + 8 t. Even
         * blocks are 2 mod 4 and read 2 bytes past their 8 into the next
         * block, which exists: a row's last block (8 per super-block) is odd */
#pragma unroll
        for (int b = 0; b < 8; b++)
            w.qv[b] = wb ? ld64_2(wb + ((size_t)sb * 8 + b) * 34 + 2 + 8 * t) : make_uint2(0, 0);
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const uint8_t *r = e ? we1 : we0;
#pragma unroll
            for (int b = 0; b < 8; b++) w.d[e][b] = r ? ld_h(r + ((size_t)sb * 8 + b) * 34) : 0.0f;
        }
    }
}

/* acc[m][0..3] += the super-block's products for tile m's rows g, g + 8
 * (ra, rb; beyond the chunk's rows: zeros, not read) with rows 2t, 2t + 1 */
template <int T, int MT>
__device__ __forceinline__ void wmma(const mq_w<T> &w, int sb, int k, const int8_t *__restrict__ xq,
                                     const float *__restrict__ xd, const float *__restrict__ xs, int r0, int nr,
                                     int g, int t, float (*acc)[4]) {
    const int kb = k / 32;
    if constexpr (T == T_Q4_K) {
        float dw[2][8], mw[2][8];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const __half2 dm = *(const __half2 *)&w.hd[e].x;
            const float d = __low2float(dm), dmin = __high2float(dm);
#pragma unroll
            for (int j = 0; j < 8; j++) {
                int sc, mn;
                if (j < 4) {
                    sc = sbyte(w.hd[e].y, w.hd[e].z, w.hd[e].w, j) & 63;
                    mn = sbyte(w.hd[e].y, w.hd[e].z, w.hd[e].w, j + 4) & 63;
                } else {
                    sc = (sbyte(w.hd[e].y, w.hd[e].z, w.hd[e].w, j + 4) & 0x0f) |
                         ((sbyte(w.hd[e].y, w.hd[e].z, w.hd[e].w, j - 4) >> 6) << 4);
                    mn = (sbyte(w.hd[e].y, w.hd[e].z, w.hd[e].w, j + 4) >> 4) |
                         ((sbyte(w.hd[e].y, w.hd[e].z, w.hd[e].w, j) >> 6) << 4);
                }
                dw[e][j] = d * (float)sc;
                mw[e][j] = dmin * (float)mn;
            }
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int sh = 4 * (j & 1);
            const uint32_t b0 = (w.qv[j >> 1].x >> sh) & 0x0F0F0F0Fu, b1 = (w.qv[j >> 1].y >> sh) & 0x0F0F0F0Fu;
            const int blk = sb * 8 + j;
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (16 * m >= nr) break;
                const int ra = 16 * m + g, rb = ra + 8;
                uint2 ua = make_uint2(0, 0), ub = make_uint2(0, 0);
                float dxa = 0.0f, sxa = 0.0f, dxb = 0.0f, sxb = 0.0f;
                if (ra < nr) {
                    const size_t r = (size_t)(r0 + ra);
                    ua = *(const uint2 *)(xq + r * k + (size_t)blk * 32 + 8 * t);
                    dxa = xd[r * kb + blk], sxa = xs[r * kb + blk];
                }
                if (rb < nr) {
                    const size_t r = (size_t)(r0 + rb);
                    ub = *(const uint2 *)(xq + r * k + (size_t)blk * 32 + 8 * t);
                    dxb = xd[r * kb + blk], sxb = xs[r * kb + blk];
                }
                int c[4] = {0, 0, 0, 0};
                mma_k32(c, ua.x, ub.x, ua.y, ub.y, b0, b1);
                acc[m][0] += dw[0][j] * dxa * (float)c[0] - mw[0][j] * sxa;
                acc[m][1] += dw[1][j] * dxa * (float)c[1] - mw[1][j] * sxa;
                acc[m][2] += dw[0][j] * dxb * (float)c[2] - mw[0][j] * sxb;
                acc[m][3] += dw[1][j] * dxb * (float)c[3] - mw[1][j] * sxb;
            }
        }
    } else if constexpr (T == T_Q6_K) {
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int qq = 0; qq < 4; qq++)
#pragma unroll
                for (int s = 0; s < 2; s++) {
                    const uint32_t lo = (w.ql[h][s][qq & 1] >> (4 * (qq >> 1))) & 0x0F0F0F0Fu;
                    const uint32_t hi = ((w.qh[h][s] >> (2 * qq)) & 0x03030303u) << 4;
                    const uint32_t b0 = __vsubss4(lo | hi, 0x20202020u);
                    const int gi = 8 * h + 2 * qq + s; /* the 16-weight group's scale */
                    const float dw0 = w.d[0] * (float)(int8_t)(w.sc[0][gi >> 2] >> (8 * (gi & 3)));
                    const float dw1 = w.d[1] * (float)(int8_t)(w.sc[1][gi >> 2] >> (8 * (gi & 3)));
                    const int p0 = sb * 256 + 128 * h + 32 * qq + 16 * s, blk = p0 / 32;
#pragma unroll
                    for (int m = 0; m < MT; m++) {
                        if (16 * m >= nr) break;
                        const int ra = 16 * m + g, rb = ra + 8;
                        uint32_t ua = 0, ub = 0;
                        float dxa = 0.0f, dxb = 0.0f;
                        if (ra < nr) {
                            const size_t r = (size_t)(r0 + ra);
                            ua = *(const uint32_t *)(xq + r * k + p0 + 4 * t);
                            dxa = xd[r * kb + blk];
                        }
                        if (rb < nr) {
                            const size_t r = (size_t)(r0 + rb);
                            ub = *(const uint32_t *)(xq + r * k + p0 + 4 * t);
                            dxb = xd[r * kb + blk];
                        }
                        int c[4] = {0, 0, 0, 0};
                        mma_k16(c, ua, ub, b0);
                        acc[m][0] += dw0 * dxa * (float)c[0];
                        acc[m][1] += dw1 * dxa * (float)c[1];
                        acc[m][2] += dw0 * dxb * (float)c[2];
                        acc[m][3] += dw1 * dxb * (float)c[3];
                    }
                }
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int blk = sb * 8 + j;
#pragma unroll
            for (int m = 0; m < MT; m++) {
                if (16 * m >= nr) break;
                const int ra = 16 * m + g, rb = ra + 8;
                uint2 ua = make_uint2(0, 0), ub = make_uint2(0, 0);
                float dxa = 0.0f, dxb = 0.0f;
                if (ra < nr) {
                    const size_t r = (size_t)(r0 + ra);
                    ua = *(const uint2 *)(xq + r * k + (size_t)blk * 32 + 8 * t);
                    dxa = xd[r * kb + blk];
                }
                if (rb < nr) {
                    const size_t r = (size_t)(r0 + rb);
                    ub = *(const uint2 *)(xq + r * k + (size_t)blk * 32 + 8 * t);
                    dxb = xd[r * kb + blk];
                }
                int c[4] = {0, 0, 0, 0};
                mma_k32(c, ua.x, ub.x, ua.y, ub.y, w.qv[j].x, w.qv[j].y);
                acc[m][0] += w.d[0][j] * dxa * (float)c[0];
                acc[m][1] += w.d[1][j] * dxa * (float)c[1];
                acc[m][2] += w.d[0][j] * dxb * (float)c[2];
                acc[m][3] += w.d[1][j] * dxb * (float)c[3];
            }
        }
    }
}

/* this warp's share of super-blocks (tw, tw + W, ...), the next one's
 * weights loaded while the current one multiplies; the first before
 * pdl_enter (weights are never written by a step) */
template <int T, int MT, int W>
__device__ __forceinline__ void mq_run(const uint8_t *wb, const uint8_t *we0, const uint8_t *we1, int k,
                                       const mfc_q8 &q, int r0, int nr, int tw, int g, int t, float (*acc)[4]) {
    const int nsb = k / 256;
    mq_w<T> cur;
    if (tw < nsb) wload<T>(cur, wb, we0, we1, tw, t);
    pdl_enter();
    for (int sb = tw; sb < nsb; sb += W) {
        mq_w<T> nxt;
        if (sb + W < nsb) wload<T>(nxt, wb, we0, we1, sb + W, t);
        wmma<T, MT>(cur, sb, k, q.q, q.d, q.s, r0, nr, g, t, acc);
        cur = nxt;
    }
}

struct mq_segs {
    mfc_mm_seg seg[MFC_MAX_SEGS];
    int blk0[MFC_MAX_SEGS + 1]; /* first weight block of each segment */
    int nseg;
};

/* TS: the types the launch's segments have: 0 Q4_K/Q6_K, 1 Q8_0, 2 any */
template <int MT, int W, int TS>
__global__ void __launch_bounds__(128) mmq_k(mq_segs S, int k, mfc_q8 q, int rows, int nch) {
    constexpr int GPB = 4 / W; /* groups of 8 weight rows per block */
    const int ch = (int)blockIdx.x % nch, wblk = (int)blockIdx.x / nch;
    int si = 0;
    while (si + 1 < S.nseg && wblk >= S.blk0[si + 1]) si++;
    const mfc_mm_seg &sg = S.seg[si];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int grp = warp / W, tw = warp % W;
    const int n0 = ((wblk - S.blk0[si]) * GPB + grp) * 8;
    const int r0 = ch * MQ_ROWS, nr = min(MQ_ROWS, rows - r0);
    const uint8_t *w = (const uint8_t *)sg.w;
    const uint8_t *wb = n0 + g < sg.n ? w + (size_t)(n0 + g) * sg.row_bytes : NULL;
    const uint8_t *we0 = n0 + 2 * t < sg.n ? w + (size_t)(n0 + 2 * t) * sg.row_bytes : NULL;
    const uint8_t *we1 = n0 + 2 * t + 1 < sg.n ? w + (size_t)(n0 + 2 * t + 1) * sg.row_bytes : NULL;
    float acc[MT][4];
#pragma unroll
    for (int m = 0; m < MT; m++) acc[m][0] = acc[m][1] = acc[m][2] = acc[m][3] = 0.0f;
    if (n0 >= sg.n) pdl_enter();
    else if (TS != 0 && (TS == 1 || sg.type == T_Q8_0)) mq_run<T_Q8_0, MT, W>(wb, we0, we1, k, q, r0, nr, tw, g, t, acc);
    else if (TS != 1 && sg.type == T_Q4_K) mq_run<T_Q4_K, MT, W>(wb, we0, we1, k, q, r0, nr, tw, g, t, acc);
    else if (TS != 1) mq_run<T_Q6_K, MT, W>(wb, we0, we1, k, q, r0, nr, tw, g, t, acc);
    if constexpr (W > 1) { /* the team's warps summed in warp order */
        __shared__ float red[4][MT * 4][32];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int e = 0; e < 4; e++) red[warp][m * 4 + e][lane] = acc[m][e];
        __syncthreads();
        if (tw) return;
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float s = red[warp][m * 4 + e][lane];
#pragma unroll
                for (int i = 1; i < W; i++) s += red[warp + i][m * 4 + e][lane];
                acc[m][e] = s;
            }
    }
    if (n0 >= sg.n) return;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = 16 * m + g + 8 * (e >> 1), j = n0 + 2 * t + (e & 1);
            if (r >= nr || j >= sg.n) continue;
            const size_t o = (size_t)(r0 + r) * sg.n + j;
            const float y = acc[m][e] + (sg.b ? sg.b[j] : 0.0f);
            sg.out[o] = y;
            if (sg.res) sg.res[o] += y;
        }
}

/* warps per group of 8 weight rows: enough warps in the grid, and loads in
 * flight, for the narrow products (n of 2560 at k of 4096 and more); a
 * function of k alone, so the sum order is too */
extern "C" int mfc_mmq_team(int k) {
    const int nsb = k / 256;
    return nsb >= 16 ? 4 : nsb >= 8 ? 2 : 1;
}

template <int MT, int W>
static void mmq_launch_t(cudaStream_t s, const mq_segs &S, int nb, int k, const mfc_q8 *q, int rows, int nch) {
    int n8 = 0;
    for (int i = 0; i < S.nseg; i++) n8 += S.seg[i].type == T_Q8_0;
    const int TS = n8 == 0 ? 0 : n8 == S.nseg ? 1 : 2;
    const dim3 grid((unsigned)(nb * nch));
    if (TS == 0) launch_k(mmq_k<MT, W, 0>, grid, 128, 0, s, S, k, *q, rows, nch);
    else if (TS == 1) launch_k(mmq_k<MT, W, 1>, grid, 128, 0, s, S, k, *q, rows, nch);
    else launch_k(mmq_k<MT, W, 2>, grid, 128, 0, s, S, k, *q, rows, nch);
}

template <int W>
static void mmq_launch(cudaStream_t s, const mq_segs &S, int nb, int k, const mfc_q8 *q, int rows) {
    const int nch = (rows + MQ_ROWS - 1) / MQ_ROWS;
    const int mt = nch > 1 ? 4 : (rows + 15) / 16;
    if (mt == 1) mmq_launch_t<1, W>(s, S, nb, k, q, rows, nch);
    else if (mt == 2) mmq_launch_t<2, W>(s, S, nb, k, q, rows, nch);
    else if (mt == 3) mmq_launch_t<3, W>(s, S, nb, k, q, rows, nch);
    else mmq_launch_t<4, W>(s, S, nb, k, q, rows, nch);
}

extern "C" void mfc_mmq_n(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows) {
    const int W = mfc_mmq_team(k), rpb = 8 * (4 / W);
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
    if (W == 1) mmq_launch<1>(s, S, nb, k, q, rows);
    else if (W == 2) mmq_launch<2>(s, S, nb, k, q, rows);
    else mmq_launch<4>(s, S, nb, k, q, rows);
}
