/* k_mmvq.cu - decode products (up to 8 rows) for Q4_K and Q6_K, the types
 * of Q4_K_M files, over activations quantized to int8 in blocks of 32 (one
 * f32 scale and the scaled sum of each block): the weights' 4- and 6-bit
 * levels meet the int8 activations in dp4a (four products per instruction),
 * so a lane moves 16 weight bytes and a quarter of the activation bytes the
 * f32 path needs.
 *
 * Lanes: 8 per super-block of 256 weights, so a warp covers four
 * super-blocks of one weight row per step. Q4_K: a lane takes 16 bytes of
 * levels (32 weights: the same 16 positions of two sub-blocks). Q6_K: a lane
 * takes 8 positions of each quarter of a 128-weight half (32 weights).
 *
 * The activations' rounding to 8 bits is the CPU's approach too (q8_K
 * there, per 256; q8 per 32 here): results agree with the CPU within the
 * tolerance the tests state, not bitwise. */
#include "cuda/dequant.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/rows.cuh"

/* ---- activations to int8 blocks of 32: one warp per block ---- */
__global__ void quant_x_k(const float *__restrict__ x, int n_blocks, int8_t *xq, float *xd, float *xs) {
    pdl_enter();
    const int lane = threadIdx.x & 31, gb = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (gb >= n_blocks) return;
    quant_block32(x[(size_t)gb * 32 + lane], gb, xq, xd, xs);
}

/* ---- a norm whose output is quantized on the way out: one block per row
 * with norm_k's thread count (the same sums); each warp then takes whole
 * blocks of 32 ---- */
__global__ void norm_quant_k(bool layer, const float *x, const float *__restrict__ w, const float *__restrict__ b,
                             int n, float eps, float *out, int8_t *xq, float *xd, float *xs) {
    pdl_enter();
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = out + (size_t)blockIdx.x * n;
    float mean, scale;
    norm_stats(layer, xr, n, eps, sh, mean, scale);
    const int lane = threadIdx.x & 31, nw = blockDim.x >> 5, nb = n / 32;
    for (int blk = threadIdx.x >> 5; blk < nb; blk += nw) {
        const int i = blk * 32 + lane;
        const float y = norm_elem(xr[i], mean, scale, w, b, i);
        yr[i] = y;
        quant_block32(y, (size_t)blockIdx.x * nb + blk, xq, xd, xs);
    }
}

extern "C" bool mfc_norm_quant(cudaStream_t s, bool layer_norm, const float *x, const float *w, const float *b, int rows,
                               int n, float eps, float *out, const mfc_q8 *q) {
    if (n % 32 || rows <= 0) return false;
    launch_k(norm_quant_k, rows, norm_threads(n), 0, s, layer_norm, x, w, b, n, eps, out, q->q, q->d, q->s);
    return true;
}

__device__ __forceinline__ uint32_t ld_u32_2(const uint8_t *p) { /* 2-byte aligned */
    const uint16_t *h = (const uint16_t *)p;
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

/* byte i (0..11) of the 12 scale bytes held in three words */
__device__ __forceinline__ int sbyte(uint32_t a, uint32_t b, uint32_t c, int i) {
    const uint32_t w = i < 4 ? a : i < 8 ? b : c;
    return (int)((w >> (8 * (i & 3))) & 0xFF);
}

/* k4_scale_min over the scale bytes in registers */
__device__ __forceinline__ void k4_scale_min_r(int j, uint32_t a, uint32_t b, uint32_t c, int &sc, int &mn) {
    if (j < 4) {
        sc = sbyte(a, b, c, j) & 63;
        mn = sbyte(a, b, c, j + 4) & 63;
    } else {
        sc = (sbyte(a, b, c, j + 4) & 0x0f) | ((sbyte(a, b, c, j - 4) >> 6) << 4);
        mn = (sbyte(a, b, c, j + 4) >> 4) | ((sbyte(a, b, c, j) >> 6) << 4);
    }
}

/* One weight row's dot products with R activation rows (rows of them
 * real) into acc, summed over the warp: each lane's partial sums, in an
 * order that depends only on k. */
template <int T, int R>
__device__ __forceinline__ void row_dot(const uint8_t *__restrict__ wr, int k, const int8_t *__restrict__ xq,
                                        const float *__restrict__ xd, const float *__restrict__ xs, int rows,
                                        float *acc) {
    const int lane = threadIdx.x & 31;
    const int nsb = k / 256, t = lane & 7, kb = k / 32;
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    /* NB super-blocks per lane per round: their loads are all issued before
     * the first is used, so a warp keeps NB x 16 bytes per lane in flight
     * (one round covers a 4096-wide row) instead of waiting on each in turn */
    constexpr int NB = T == T_Q4_K ? 4 : 2;
    for (int sb0 = lane >> 3; sb0 < nsb; sb0 += 4 * NB) {
        if constexpr (T == T_Q4_K) {
            const int kk = t >> 1, h = t & 1;
            uint4 hd[NB], qv[NB];
#pragma unroll
            for (int u = 0; u < NB; u++) {
                const int sb = sb0 + 4 * u;
                if (sb < nsb) {
                    const uint8_t *blk = wr + (size_t)sb * 144;
                    hd[u] = *(const uint4 *)blk; /* d, dmin, the 12 scale bytes */
                    qv[u] = *(const uint4 *)(blk + 16 + 32 * kk + 16 * h);
                }
            }
#pragma unroll
            for (int u = 0; u < NB; u++) {
                const int sb = sb0 + 4 * u;
                if (sb >= nsb) break;
                const __half2 dm = *(const __half2 *)&hd[u].x;
                const float d = __low2float(dm), dmin = __high2float(dm);
                int sc0, m0, sc1, m1;
                k4_scale_min_r(2 * kk, hd[u].y, hd[u].z, hd[u].w, sc0, m0);
                k4_scale_min_r(2 * kk + 1, hd[u].y, hd[u].z, hd[u].w, sc1, m1);
                const uint32_t qw[4] = {qv[u].x, qv[u].y, qv[u].z, qv[u].w};
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (r >= rows) break;
                    const int8_t *xr = xq + (size_t)r * k + sb * 256 + 64 * kk + 16 * h;
                    const int4 xa = *(const int4 *)xr, xb = *(const int4 *)(xr + 32);
                    const int xav[4] = {xa.x, xa.y, xa.z, xa.w}, xbv[4] = {xb.x, xb.y, xb.z, xb.w};
                    int s0 = 0, s1 = 0;
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        s0 = __dp4a((int)(qw[i] & 0x0F0F0F0Fu), xav[i], s0);
                        s1 = __dp4a((int)((qw[i] >> 4) & 0x0F0F0F0Fu), xbv[i], s1);
                    }
                    const size_t xb0 = (size_t)r * kb + sb * 8 + 2 * kk;
                    float v = d * (float)sc0 * xd[xb0] * (float)s0 + d * (float)sc1 * xd[xb0 + 1] * (float)s1;
                    if (h == 0) v -= dmin * ((float)m0 * xs[xb0] + (float)m1 * xs[xb0 + 1]);
                    acc[r] += v;
                }
            }
        } else { /* T_Q6_K: 210-byte blocks are only 2-byte aligned */
            const int h = t >> 2, l0 = (t & 3) * 8;
            uint32_t la[NB][2], lb[NB][2], lh[NB][2], scb[NB];
            float dd[NB];
#pragma unroll
            for (int u = 0; u < NB; u++) {
                const int sb = sb0 + 4 * u;
                if (sb < nsb) {
                    const uint8_t *blk = wr + (size_t)sb * 210;
                    const uint8_t *qa = blk + 64 * h + l0, *qh = blk + 128 + 32 * h + l0;
#pragma unroll
                    for (int wd = 0; wd < 2; wd++) {
                        la[u][wd] = ld_u32_2(qa + 4 * wd);
                        lb[u][wd] = ld_u32_2(qa + 32 + 4 * wd);
                        lh[u][wd] = ld_u32_2(qh + 4 * wd);
                    }
                    const uint8_t *sc = blk + 192 + 8 * h + l0 / 16;
                    scb[u] = (uint32_t)sc[0] | (uint32_t)sc[2] << 8 | (uint32_t)sc[4] << 16 | (uint32_t)sc[6] << 24;
                    dd[u] = ld_h(blk + 208);
                }
            }
#pragma unroll
            for (int u = 0; u < NB; u++) {
                const int sb = sb0 + 4 * u;
                if (sb >= nsb) break;
                int v[4][2];
#pragma unroll
                for (int wd = 0; wd < 2; wd++) {
                    const uint32_t a = la[u][wd], bq = lb[u][wd], hh = lh[u][wd];
                    v[0][wd] = (int)__vsubss4((a & 0x0F0F0F0Fu) | ((hh << 4) & 0x30303030u), 0x20202020u);
                    v[1][wd] = (int)__vsubss4((bq & 0x0F0F0F0Fu) | ((hh << 2) & 0x30303030u), 0x20202020u);
                    v[2][wd] = (int)__vsubss4(((a >> 4) & 0x0F0F0F0Fu) | (hh & 0x30303030u), 0x20202020u);
                    v[3][wd] = (int)__vsubss4(((bq >> 4) & 0x0F0F0F0Fu) | ((hh >> 2) & 0x30303030u), 0x20202020u);
                }
                float sc[4];
#pragma unroll
                for (int qq = 0; qq < 4; qq++) sc[qq] = dd[u] * (float)(int8_t)(scb[u] >> (8 * qq));
#pragma unroll
                for (int r = 0; r < R; r++) {
                    if (r >= rows) break;
                    const int8_t *xr = xq + (size_t)r * k + sb * 256 + 128 * h + l0;
                    float sum = 0.0f;
#pragma unroll
                    for (int qq = 0; qq < 4; qq++) {
                        const int2 xv = *(const int2 *)(xr + 32 * qq);
                        const int is = __dp4a(v[qq][1], xv.y, __dp4a(v[qq][0], xv.x, 0));
                        sum += sc[qq] * xd[(size_t)r * kb + sb * 8 + 4 * h + qq] * (float)is;
                    }
                    acc[r] += sum;
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
}

template <int R>
__device__ __forceinline__ void row_dot_t(int type, const uint8_t *wr, int k, const mfc_q8 &q, int rows, float *acc) {
    if (type == T_Q4_K) row_dot<T_Q4_K, R>(wr, k, q.q, q.d, q.s, rows, acc);
    else row_dot<T_Q6_K, R>(wr, k, q.q, q.d, q.s, rows, acc);
}

/* Ask L2 for bytes [p, p + n) (rounded inwards to 16 bytes) ahead of the
 * loads: issued before pdl_wait, the weights stream in while the previous
 * kernel finishes. */
__device__ __forceinline__ void prefetch_l2(const void *p, size_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const uintptr_t a = ((uintptr_t)p + 15) & ~(uintptr_t)15, e = ((uintptr_t)p + n) & ~(uintptr_t)15;
    if (e > a) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(a), "r"((uint32_t)(e - a)) : "memory");
#endif
}

/* up to MFC_MAX_SEGS products in one grid: segment i takes blocks
 * [blk0[i], blk0[i + 1]), four weight rows (one per warp) per block */
struct mm_segs {
    mfc_mm_seg seg[MFC_MAX_SEGS];
    int blk0[MFC_MAX_SEGS + 1];
    int nseg;
};

template <int R>
__global__ void __launch_bounds__(128) mmvq_k(mm_segs S, int k, mfc_q8 q, int rows) {
    int si = 0;
    while (si + 1 < S.nseg && (int)blockIdx.x >= S.blk0[si + 1]) si++;
    const mfc_mm_seg &g = S.seg[si];
    const int j0 = ((int)blockIdx.x - S.blk0[si]) * 4, j = j0 + (threadIdx.x >> 5);
    const uint8_t *w = (const uint8_t *)g.w;
    if (threadIdx.x == 0) prefetch_l2(w + (size_t)j0 * g.row_bytes, (size_t)min(4, g.n - j0) * g.row_bytes);
    pdl_enter();
    if (j >= g.n) return;
    float acc[R];
    row_dot_t<R>(g.type, w + (size_t)j * g.row_bytes, k, q, rows, acc);
    if ((threadIdx.x & 31) == 0) {
        const float bj = g.b ? g.b[j] : 0.0f;
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r < rows) {
                const float y = acc[r] + bj;
                g.out[(size_t)r * g.n + j] = y;
                if (g.res) g.res[(size_t)r * g.n + j] += y;
            }
        }
    }
}

extern "C" bool mfc_mmvq_takes(int type, int k, int rows) {
    return (type == T_Q4_K || type == T_Q6_K) && k % 256 == 0 && rows >= 1 && rows <= 8;
}

extern "C" void mfc_quant_x(cudaStream_t s, const float *x, int k, int rows, const mfc_q8 *q) {
    const int nb = rows * k / 32;
    launch_k(quant_x_k, (nb + 3) / 4, 128, 0, s, x, nb, q->q, q->d, q->s);
}

extern "C" void mfc_mmvq_n(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows) {
    mm_segs S = {};
    S.nseg = nseg;
    int nb = 0;
    for (int i = 0; i < nseg; i++) {
        S.seg[i] = seg[i];
        S.blk0[i] = nb;
        nb += (seg[i].n + 3) / 4;
    }
    S.blk0[nseg] = nb;
    if (!nb) return;
    if (rows == 1) launch_k(mmvq_k<1>, nb, 128, 0, s, S, k, *q, rows);
    else if (rows == 2) launch_k(mmvq_k<2>, nb, 128, 0, s, S, k, *q, rows);
    else if (rows <= 4) launch_k(mmvq_k<4>, nb, 128, 0, s, S, k, *q, rows);
    else launch_k(mmvq_k<8>, nb, 128, 0, s, S, k, *q, rows);
}

extern "C" void mfc_mmvq(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, int n, const mfc_q8 *q,
                         int rows, float *out, const float *b, float *res) {
    const mfc_mm_seg g = {w, row_bytes, type, n, out, b, res};
    mfc_mmvq_n(s, &g, 1, k, q, rows);
}

/* ---- gate and up with the gated activation: a block of GW warps takes 32
 * consecutive rows j of both (each warp the rows warp and warp + GW, gate and
 * up together), so the block holds a whole int8 block of the activation
 * and can quantize it for the down product ---- */
#define GW 16

template <int R>
__global__ void __launch_bounds__(GW * 32) mmvq_glu_k(mfc_mm_seg G, mfc_mm_seg U, int act, int k, mfc_q8 q, int rows,
                                                      float *out, mfc_q8 qo) {
    __shared__ float a_s[R][32];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, j0 = blockIdx.x * 32, n = G.n;
    const uint8_t *gw = (const uint8_t *)G.w, *uw = (const uint8_t *)U.w;
    if (threadIdx.x == 0) prefetch_l2(gw + (size_t)j0 * G.row_bytes, 32 * G.row_bytes);
    if (threadIdx.x == 32) prefetch_l2(uw + (size_t)j0 * U.row_bytes, 32 * U.row_bytes);
    pdl_enter();
#pragma unroll 1
    for (int h = 0; h < 2; h++) {
        const int jj = warp + GW * h, j = j0 + jj;
        float ag[R], au[R];
        row_dot_t<R>(G.type, gw + (size_t)j * G.row_bytes, k, q, rows, ag);
        row_dot_t<R>(U.type, uw + (size_t)j * U.row_bytes, k, q, rows, au);
        if (lane == 0) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r < rows) {
                    G.out[(size_t)r * n + j] = ag[r];
                    U.out[(size_t)r * n + j] = au[r];
                    a_s[r][jj] = glu_act(act, ag[r], au[r]);
                }
            }
        }
    }
    __syncthreads();
    if (warp < rows) {
        const float v = a_s[warp][lane];
        out[(size_t)warp * n + j0 + lane] = v;
        if (qo.q) quant_block32(v, ((size_t)warp * n + j0) / 32, qo.q, qo.d, qo.s);
    }
}

extern "C" bool mfc_mmvq_glu(cudaStream_t s, int act, const mfc_mm_seg *gate, const mfc_mm_seg *up, int k,
                             const mfc_q8 *q, int rows, float *act_out, const mfc_q8 *qout) {
    if (gate->n != up->n || gate->n % 32 || gate->b || up->b || gate->res || up->res || (act != 0 && act != 1) ||
        rows < 1 || rows > 8)
        return false;
    const mfc_q8 qo = qout ? *qout : mfc_q8{NULL, NULL, NULL};
    const int nb = gate->n / 32;
    if (rows == 1) launch_k(mmvq_glu_k<1>, nb, GW * 32, 0, s, *gate, *up, act, k, *q, rows, act_out, qo);
    else if (rows == 2) launch_k(mmvq_glu_k<2>, nb, GW * 32, 0, s, *gate, *up, act, k, *q, rows, act_out, qo);
    else if (rows <= 4) launch_k(mmvq_glu_k<4>, nb, GW * 32, 0, s, *gate, *up, act, k, *q, rows, act_out, qo);
    else launch_k(mmvq_glu_k<8>, nb, GW * 32, 0, s, *gate, *up, act, k, *q, rows, act_out, qo);
    return true;
}
