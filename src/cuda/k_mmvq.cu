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

/* ---- activations to int8 blocks of 32: one warp per block ---- */
__global__ void quant_x_k(const float *__restrict__ x, int n_blocks, int8_t *xq, float *xd, float *xs) {
    const int lane = threadIdx.x & 31, gb = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (gb >= n_blocks) return;
    const float v = x[(size_t)gb * 32 + lane];
    float a = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    const float d = a / 127.0f;
    const int q = d > 0.0f ? __float2int_rn(v / d) : 0;
    xq[(size_t)gb * 32 + lane] = (int8_t)q;
    int s = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) xd[gb] = d, xs[gb] = d * (float)s;
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

template <int T, int R>
__global__ void __launch_bounds__(128) mmvq_k(const uint8_t *__restrict__ w, size_t row_bytes, int k, int n,
                                              const int8_t *__restrict__ xq, const float *__restrict__ xd,
                                              const float *__restrict__ xs, int rows, float *out,
                                              const float *__restrict__ b, float *res) {
    const int lane = threadIdx.x & 31;
    const int j = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (j >= n) return;
    const uint8_t *wr = w + (size_t)j * row_bytes;
    const int nsb = k / 256, t = lane & 7, kb = k / 32;
    float acc[R];
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
    if (lane == 0) {
        const float bj = b ? b[j] : 0.0f;
#pragma unroll
        for (int r = 0; r < R; r++) {
            if (r < rows) {
                const float y = acc[r] + bj;
                out[(size_t)r * n + j] = y;
                if (res) res[(size_t)r * n + j] += y;
            }
        }
    }
}

extern "C" bool mfc_mmvq_takes(int type, int k, int rows) {
    return (type == T_Q4_K || type == T_Q6_K) && k % 256 == 0 && rows >= 1 && rows <= 8;
}

extern "C" void mfc_quant_x(cudaStream_t s, const float *x, int k, int rows, const mfc_q8 *q) {
    const int nb = rows * k / 32;
    quant_x_k<<<(nb + 3) / 4, 128, 0, s>>>(x, nb, q->q, q->d, q->s);
}

template <int T>
static void launch(cudaStream_t s, const uint8_t *w, size_t rb, int k, int n, const mfc_q8 *q, int rows, float *out,
                   const float *b, float *res) {
    const dim3 g((n + 3) / 4);
    if (rows == 1) mmvq_k<T, 1><<<g, 128, 0, s>>>(w, rb, k, n, q->q, q->d, q->s, rows, out, b, res);
    else if (rows == 2) mmvq_k<T, 2><<<g, 128, 0, s>>>(w, rb, k, n, q->q, q->d, q->s, rows, out, b, res);
    else if (rows <= 4) mmvq_k<T, 4><<<g, 128, 0, s>>>(w, rb, k, n, q->q, q->d, q->s, rows, out, b, res);
    else mmvq_k<T, 8><<<g, 128, 0, s>>>(w, rb, k, n, q->q, q->d, q->s, rows, out, b, res);
}

extern "C" void mfc_mmvq(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, int n, const mfc_q8 *q,
                         int rows, float *out, const float *b, float *res) {
    if (type == T_Q4_K) launch<T_Q4_K>(s, (const uint8_t *)w, row_bytes, k, n, q, rows, out, b, res);
    else launch<T_Q6_K>(s, (const uint8_t *)w, row_bytes, k, n, q, rows, out, b, res);
}
