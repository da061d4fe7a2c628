/* k_mmvq.cu - decode products (up to 8 rows) for Q4_K and Q6_K, the types
 * of Q4_K_M files, Q8_0, and Q2_K, Q3_K, IQ4_NL, IQ4_XS (their lanes in
 * mmvq_lowbit.cuh), over activations quantized to int8 in blocks
 * of 32 (one f32 scale and the scaled sum of each block): the weights'
 * 4-, 6- and 8-bit levels meet the int8 activations in dp4a (four products per instruction),
 * so a lane moves 16 weight bytes and a quarter of the activation bytes the
 * f32 path needs.
 *
 * Lanes: 8 per super-block of 256 weights, so a warp covers four
 * super-blocks of one weight row per step. Q4_K: a lane takes 16 bytes of
 * levels (32 weights: the same 16 positions of two sub-blocks). Q6_K: a lane
 * takes 8 positions of each quarter of a 128-weight half (32 weights).
 * Q8_0 (rows regrouped at upload, MFC_T_Q8_0R): a lane takes one block
 * of 32. Q2_K, Q3_K, IQ4_NL, IQ4_XS: 32
 * weights a lane too (mmvq_lowbit.cuh says which); rows of these over 8
 * are not taken (k_mmq.cu has no path for them).
 *
 * The activations' rounding to 8 bits is the CPU's approach too (q8_K
 * there, per 256; q8 per 32 here): results agree with the CPU within the
 * tolerance the tests state, not bitwise. */
#include "cuda/dequant.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/mmvq_lowbit.cuh"
#include "cuda/rows.cuh"

/* ---- activations to int8 blocks of 32: one warp per block, 4 a block of
 * threads (g8: 8, the 8 blocks of a super-block sharing its largest scale) ---- */
__global__ void quant_x_k(const float *__restrict__ x, int n_blocks, int8_t *xq, float *xd, float *xs, int kbt,
                          bool g8) {
    pdl_enter();
    __shared__ float sh[2][8];
    const int lane = threadIdx.x & 31, gb = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (gb >= n_blocks) return; /* g8: n_blocks % 8 == 0, whole blocks of threads */
    const float v = x[(size_t)gb * 32 + lane];
    float a = warp_amax(v);
    if (g8) a = group8_max(a, sh, 0, 1);
    quant_block32_a(v, a, gb, xq, xd, xs, kbt);
}

/* ---- a norm whose output is quantized on the way out: one block per row
 * with norm_k's thread count (the same sums); each warp then takes whole
 * blocks of 32 ---- */
/* Rows of up to NQ_E x the block's threads take them in registers: the
 * thread of norm_stats_v's order (one element in nt = blockDim.x, as
 * norm_threads gives it) holds elements t, t + nt, ..., which are also
 * lane t % 32 of the blocks of 32 its warp quantizes, so the row is read
 * once, and the norm's weights and bias (which no kernel of a step writes)
 * are loaded before pdl_wait, off the chain of a decode step. The same
 * sums in the same order as norm_quant_row, so the same bits. */
#define NQ_E 8

__global__ void __launch_bounds__(1024) norm_quant_k(bool layer, const float *x, const float *__restrict__ w,
                                                     const float *__restrict__ b, int n, float eps, float *out,
                                                     int8_t *xq, float *xd, float *xs, int kbt, bool g8) {
    __shared__ float sh[32];
    __shared__ float gsh[4][2][8];
    const int nt = blockDim.x, tid = threadIdx.x;
    if (n > NQ_E * nt) {
        pdl_enter();
        norm_quant_row(layer, x + (size_t)blockIdx.x * n, n, nt, eps, w, b, out + (size_t)blockIdx.x * n, xq, xd,
                       xs, blockIdx.x, kbt, g8, gsh, sh);
        return;
    }
    float wv[NQ_E], bv[NQ_E], xv[NQ_E];
#pragma unroll
    for (int k = 0; k < NQ_E; k++) {
        const int i = tid + k * nt;
        wv[k] = w && i < n ? w[i] : 1.0f;
        bv[k] = b && i < n ? b[i] : -0.0f;
    }
    pdl_enter();
    const float *xr = x + (size_t)blockIdx.x * n;
#pragma unroll
    for (int k = 0; k < NQ_E; k++) {
        const int i = tid + k * nt;
        xv[k] = i < n ? xr[i] : 0.0f;
    }
    float mean = 0.0f;
    if (layer) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < NQ_E; k++)
            if (tid + k * nt < n) s += xv[k];
        mean = vblock_sum(&s, 1, sh) / (float)n;
    }
    float s2 = 0.0f;
#pragma unroll
    for (int k = 0; k < NQ_E; k++) {
        if (tid + k * nt < n) {
            const float d = xv[k] - mean;
            s2 = __fmaf_rn(d, d, s2);
        }
    }
    const float scale = 1.0f / sqrtf(vblock_sum(&s2, 1, sh) / (float)n + eps);
    const int lane = tid & 31, warp = tid >> 5, nw = nt >> 5, nb = n / 32;
    float *yr = out + (size_t)blockIdx.x * n;
#pragma unroll
    for (int k = 0; k < NQ_E; k++) {
        const int blk = warp + k * nw; /* whole groups of 8 warps stop together (g8: nb % 8 == 0) */
        if (blk >= nb) break;
        const float y = norm_elem_v(xv[k], mean, scale, wv[k], bv[k]);
        yr[blk * 32 + lane] = y;
        float a = warp_amax(y);
        if (g8) a = group8_max(a, gsh[warp / 8], k & 1, 1 + warp / 8);
        quant_block32_a(y, a, (size_t)blockIdx.x * nb + blk, xq, xd, xs, kbt);
    }
}

extern "C" bool mfc_norm_quant(cudaStream_t s, bool layer_norm, const float *x, const float *w, const float *b, int rows,
                               int n, float eps, float *out, const mfc_q8 *q) {
    if (n % 32 || rows <= 0) return false;
    const int kbt = mfc_q8_tiled_kb(rows, n);
    launch_k(norm_quant_k, rows, norm_threads(n), 0, s, layer_norm, x, w, b, n, eps, out, q->q, q->d, q->s, kbt,
             q8_g8_on(q->g8, kbt));
    return true;
}

/* One round of a lane's weights: NB super-blocks, ST = 4 W apart (a team
 * of W warps covers 16 W super-blocks per round, a 4096 W-wide row), their
 * loads all issued before the first is used. */
constexpr int NB = 4;

template <int T> struct wround;
template <> struct wround<T_Q4_K> {
    uint4 hd[NB], qv[NB]; /* d, dmin and the 12 scale bytes; 16 bytes of levels */
};
template <> struct wround<T_Q6_K> {
    uint32_t la[NB][2], lb[NB][2], lh[NB][2], scb[NB];
    float dd[NB];
};
template <> struct wround<T_Q6_KP> : wround<T_Q6_K> {};
/* Q8_0 (the device's layout, MFC_T_Q8_0R): a "super-block" is a run of 8
 * blocks of 32 (272 bytes: 8 scales, then 8 x 32 levels), lane t takes
 * block t: its scale and its 32 levels in two 16-byte loads */
template <> struct wround<T_Q8_0R> {
    uint4 q[NB][2];
    float d[NB];
};
template <> struct wround<T_Q2_K> : w_q2k<NB> {};
template <> struct wround<T_Q3_K> : w_q3k<NB> {};
template <> struct wround<T_IQ4_NL> : w_iq4nl<NB> {};
template <> struct wround<T_IQ4_XS> : w_iq4xs<NB> {};

template <int T, int W>
__device__ __forceinline__ void wload(wround<T> &w, const uint8_t *__restrict__ wr, int nsb, int sb0, int t) {
    constexpr int ST = 4 * W;
#pragma unroll
    for (int u = 0; u < NB; u++) {
        const int sb = sb0 + ST * u;
        if (sb >= nsb) break;
        if constexpr (T == T_Q4_K) {
            const int kk = t >> 1, h = t & 1;
            const uint8_t *blk = wr + (size_t)sb * 144;
            w.hd[u] = *(const uint4 *)blk;
            w.qv[u] = *(const uint4 *)(blk + 16 + 32 * kk + 16 * h);
        } else if constexpr (T == T_Q8_0R) {
            const uint8_t *run = wr + (size_t)sb * 272;
            w.d[u] = ld_h(run + 2 * t);
            w.q[u][0] = *(const uint4 *)(run + 16 + 32 * t);
            w.q[u][1] = *(const uint4 *)(run + 32 + 32 * t);
        } else if constexpr (T == T_Q2_K) {
            q2k_load<NB>(w, u, wr + (size_t)sb * 84, t);
        } else if constexpr (T == T_Q3_K) {
            q3k_load<NB>(w, u, wr + (size_t)sb * 110, t);
        } else if constexpr (T == T_IQ4_NL) {
            iq4nl_load<NB>(w, u, wr + (size_t)sb * 144, t);
        } else if constexpr (T == T_IQ4_XS) {
            iq4xs_load<NB>(w, u, wr + (size_t)sb * 136, t);
        } else if constexpr (T == T_Q6_KP) { /* every part on 4 bytes (kernels.h) */
            const int h = t >> 2, l0 = (t & 3) * 8;
            const q6_at p = q6_parts<T>(wr + (size_t)sb * 210, sb);
            const uint32_t *qa = (const uint32_t *)(p.ql + 64 * h + l0), *qh = (const uint32_t *)(p.qh + 32 * h + l0);
#pragma unroll
            for (int wd = 0; wd < 2; wd++) {
                w.la[u][wd] = qa[wd];
                w.lb[u][wd] = qa[8 + wd];
                w.lh[u][wd] = qh[wd];
            }
            /* scales 8h + l0 / 16 + {0, 2, 4, 6}: two words, one byte permute */
            const uint32_t *sc = (const uint32_t *)(p.sc + 8 * h);
            w.scb[u] = __byte_perm(sc[0], sc[1], l0 >= 16 ? 0x7531 : 0x6420);
            w.dd[u] = ld_h(p.d);
        } else { /* 210-byte blocks are only 2-byte aligned */
            const int h = t >> 2, l0 = (t & 3) * 8;
            const uint8_t *blk = wr + (size_t)sb * 210;
            const uint8_t *qa = blk + 64 * h + l0, *qh = blk + 128 + 32 * h + l0;
#pragma unroll
            for (int wd = 0; wd < 2; wd++) {
                w.la[u][wd] = ld_u32_2(qa + 4 * wd);
                w.lb[u][wd] = ld_u32_2(qa + 32 + 4 * wd);
                w.lh[u][wd] = ld_u32_2(qh + 4 * wd);
            }
            const uint8_t *sc = blk + 192 + 8 * h + l0 / 16;
            w.scb[u] = (uint32_t)sc[0] | (uint32_t)sc[2] << 8 | (uint32_t)sc[4] << 16 | (uint32_t)sc[6] << 24;
            w.dd[u] = ld_h(blk + 208);
        }
    }
}

template <int T, int R, int W>
__device__ __forceinline__ void wdot(const wround<T> &w, int nsb, int sb0, int t, int k, const int8_t *__restrict__ xq,
                                     const float *__restrict__ xd, const float *__restrict__ xs, int rows, float *acc) {
    constexpr int ST = 4 * W;
    const int kb = k / 32;
#pragma unroll
    for (int u = 0; u < NB; u++) {
        const int sb = sb0 + ST * u;
        if (sb >= nsb) break;
        if constexpr (T == T_Q4_K) {
            const int kk = t >> 1, h = t & 1;
            const __half2 dm = *(const __half2 *)&w.hd[u].x;
            const float d = __low2float(dm), dmin = __high2float(dm);
            /* sub-blocks 2kk, 2kk + 1: bytes 2 (kk % 2) and + 1 of their
             * group's words; the two lanes of the pair take one minimum
             * each (the half with h 0 took both, the other idle beside it) */
            const int sh = 16 * (kk & 1);
            const uint32_t s4 = k4_pack(w.hd[u], kk >> 1, false), m4 = k4_pack(w.hd[u], kk >> 1, true);
            const int sc0 = (int)((s4 >> sh) & 0xFF), sc1 = (int)((s4 >> (sh + 8)) & 0xFF);
            const int mh = (int)((m4 >> (sh + 8 * h)) & 0xFF);
            const uint32_t qw[4] = {w.qv[u].x, w.qv[u].y, w.qv[u].z, w.qv[u].w};
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r >= rows) break;
                const int8_t *xr = xq + (size_t)r * k + sb * 256 + 64 * kk + 16 * h;
                const int4 a4 = *(const int4 *)xr, b4 = *(const int4 *)(xr + 32);
                const size_t xb0 = (size_t)r * kb + sb * 8 + 2 * kk;
                const float2 dv = *(const float2 *)(xd + xb0);
                const float sv = xs[xb0 + h]; /* the minimum term of sub-block 2kk + h */
                const int xav[4] = {a4.x, a4.y, a4.z, a4.w}, xbv[4] = {b4.x, b4.y, b4.z, b4.w};
                int s0 = 0, s1 = 0;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    s0 = __dp4a((int)(qw[i] & 0x0F0F0F0Fu), xav[i], s0);
                    s1 = __dp4a((int)((qw[i] >> 4) & 0x0F0F0F0Fu), xbv[i], s1);
                }
                const float v = d * i2f_exact(sc0) * dv.x * i2f_exact(s0) + d * i2f_exact(sc1) * dv.y * i2f_exact(s1);
                acc[r] += v - dmin * (i2f_exact(mh) * sv);
            }
        } else if constexpr (T == T_Q8_0R) {
            const uint32_t qw[8] = {w.q[u][0].x, w.q[u][0].y, w.q[u][0].z, w.q[u][0].w,
                                    w.q[u][1].x, w.q[u][1].y, w.q[u][1].z, w.q[u][1].w};
            const int b = sb * 8 + t;
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r >= rows) break;
                const int8_t *xr = xq + (size_t)r * k + (size_t)b * 32;
                const int4 a4 = *(const int4 *)xr, b4 = *(const int4 *)(xr + 16);
                const int xv[8] = {a4.x, a4.y, a4.z, a4.w, b4.x, b4.y, b4.z, b4.w};
                int is = 0;
#pragma unroll
                for (int i = 0; i < 8; i++) is = __dp4a((int)qw[i], xv[i], is);
                acc[r] += w.d[u] * xd[(size_t)r * kb + b] * i2f_exact(is); /* |is| <= 32 * 127 * 127 */
            }
        } else if constexpr (T == T_Q2_K) {
            q2k_dot<R, NB>(w, u, sb, t, k, xq, xd, rows, acc);
        } else if constexpr (T == T_Q3_K) {
            q3k_dot<R, NB>(w, u, sb, t, k, xq, xd, rows, acc);
        } else if constexpr (T == T_IQ4_NL) {
            iq4nl_dot<R, NB>(w, u, sb, t, k, xq, xd, rows, acc);
        } else if constexpr (T == T_IQ4_XS) {
            iq4xs_dot<R, NB>(w, u, sb, t, k, xq, xd, rows, acc);
        } else {
            const int h = t >> 2, l0 = (t & 3) * 8;
            int v[4][2];
#pragma unroll
            for (int wd = 0; wd < 2; wd++) {
                const uint32_t a = w.la[u][wd], bq = w.lb[u][wd], hh = w.lh[u][wd];
                v[0][wd] = (int)bsub4<32>((a & 0x0F0F0F0Fu) | ((hh << 4) & 0x30303030u));
                v[1][wd] = (int)bsub4<32>((bq & 0x0F0F0F0Fu) | ((hh << 2) & 0x30303030u));
                v[2][wd] = (int)bsub4<32>(((a >> 4) & 0x0F0F0F0Fu) | (hh & 0x30303030u));
                v[3][wd] = (int)bsub4<32>(((bq >> 4) & 0x0F0F0F0Fu) | ((hh >> 2) & 0x30303030u));
            }
            float sc[4];
#pragma unroll
            for (int qq = 0; qq < 4; qq++) sc[qq] = w.dd[u] * i2f_exact((int8_t)(w.scb[u] >> (8 * qq)));
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r >= rows) break;
                const int8_t *xr = xq + (size_t)r * k + sb * 256 + 128 * h + l0;
                const float4 d4 = *(const float4 *)(xd + (size_t)r * kb + sb * 8 + 4 * h);
                const float dq[4] = {d4.x, d4.y, d4.z, d4.w};
                float sum = 0.0f;
#pragma unroll
                for (int qq = 0; qq < 4; qq++) {
                    const int2 xv = *(const int2 *)(xr + 32 * qq);
                    const int is = __dp4a(v[qq][1], xv.y, __dp4a(v[qq][0], xv.x, 0));
                    sum += sc[qq] * dq[qq] * i2f_exact(is);
                }
                acc[r] += sum;
            }
        }
    }
}

/* One weight row's dot products with R activation rows (rows of them
 * real) into acc, by a team of W warps (vl: this lane's index in the team,
 * 0..32W): each lane's partial sums in an order that depends only on k and
 * W, summed over the warp; the caller sums the team's warps. The first
 * round of weights is loaded before pdl_enter (nothing in a step writes
 * weights), so under programmatic dependent launch that latency passes
 * while the previous kernel still runs; activations are read after it. */
template <int T, int R, int W>
__device__ __forceinline__ void row_dot(const uint8_t *__restrict__ wr, int k, const int8_t *__restrict__ xq,
                                        const float *__restrict__ xd, const float *__restrict__ xs, int rows,
                                        float *acc, int vl) {
    const int nsb = k / 256, t = vl & 7, first = vl >> 3;
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    wround<T> w;
    wload<T, W>(w, wr, nsb, first, t);
    pdl_enter();
    for (int sb0 = first; sb0 < nsb; sb0 += 4 * W * NB) {
        if (sb0 != first) wload<T, W>(w, wr, nsb, sb0, t);
        wdot<T, R, W>(w, nsb, sb0, t, k, xq, xd, xs, rows, acc);
    }
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
}

/* TS, the set of types a launch's segments have (one bit per type): a
 * kernel holds the registers of the largest path it has, so a launch of one
 * type gets a kernel of that path alone (Q4_K and Q6_K, which Q4_K_M files
 * mix in one launch, share one), and other mixes the kernel of all */
enum {
    S_Q4_K = 1, S_Q6_K = 2, S_Q8_0 = 4, S_Q2_K = 8, S_Q3_K = 16, S_IQ4_NL = 32, S_IQ4_XS = 64, S_Q6_KP = 128,
    S_ALL = 255, S_K46 = S_Q4_K | S_Q6_KP, S_K46F = S_Q4_K | S_Q6_K /* Q6_K in the device's layout, or the file's */
};

static int type_bit(int type) {
    switch (type) {
    case T_Q4_K: return S_Q4_K;
    case T_Q6_K: return S_Q6_K;
    case T_Q6_KP: return S_Q6_KP;
    case T_Q8_0R: return S_Q8_0;
    case T_Q2_K: return S_Q2_K;
    case T_Q3_K: return S_Q3_K;
    case T_IQ4_NL: return S_IQ4_NL;
    case T_IQ4_XS: return S_IQ4_XS;
    default: return 0;
    }
}

/* type's path when the set TS has it: no comparison when TS is that type
 * alone */
template <int T, int S, int R, int W, int TS>
__device__ __forceinline__ bool row_dot_if(int type, const uint8_t *wr, int k, const mfc_q8 &q, int rows, float *acc,
                                           int vl) {
    if constexpr ((TS & S) != 0) {
        if (TS == S || type == T) {
            row_dot<T, R, W>(wr, k, q.q, q.d, q.s, rows, acc, vl);
            return true;
        }
    }
    return false;
}

template <int R, int W, int TS>
__device__ __forceinline__ void row_dot_t(int type, const uint8_t *wr, int k, const mfc_q8 &q, int rows, float *acc,
                                          int vl) {
    if (row_dot_if<T_Q8_0R, S_Q8_0, R, W, TS>(type, wr, k, q, rows, acc, vl)) return;
    if (row_dot_if<T_Q4_K, S_Q4_K, R, W, TS>(type, wr, k, q, rows, acc, vl)) return;
    if (row_dot_if<T_Q6_KP, S_Q6_KP, R, W, TS>(type, wr, k, q, rows, acc, vl)) return;
    if (row_dot_if<T_Q6_K, S_Q6_K, R, W, TS>(type, wr, k, q, rows, acc, vl)) return;
    if (row_dot_if<T_Q2_K, S_Q2_K, R, W, TS>(type, wr, k, q, rows, acc, vl)) return;
    if (row_dot_if<T_Q3_K, S_Q3_K, R, W, TS>(type, wr, k, q, rows, acc, vl)) return;
    if (row_dot_if<T_IQ4_NL, S_IQ4_NL, R, W, TS>(type, wr, k, q, rows, acc, vl)) return;
    row_dot_if<T_IQ4_XS, S_IQ4_XS, R, W, TS>(type, wr, k, q, rows, acc, vl);
}

/* up to MFC_MAX_SEGS products in one grid: segment i takes blocks
 * [blk0[i], blk0[i + 1]), 4 / W weight rows per block of four warps (a
 * team of W warps per row) */
struct mm_segs {
    mfc_mm_seg seg[MFC_MAX_SEGS];
    int blk0[MFC_MAX_SEGS + 1];
    int nseg;
};

/* MINB: blocks a multiprocessor the register allocator must leave room
 * for (launch bounds); it changes the registers and the schedule, not the
 * arithmetic */
template <int R, int W, int TS, int MINB = 1>
__global__ void __launch_bounds__(128, MINB) mmvq_k(mm_segs S, int k, mfc_q8 q, int rows) {
    constexpr int RPB = 4 / W;
    int si = 0;
    while (si + 1 < S.nseg && (int)blockIdx.x >= S.blk0[si + 1]) si++;
    const mfc_mm_seg &g = S.seg[si];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int j0 = ((int)blockIdx.x - S.blk0[si]) * RPB, j = j0 + warp / W;
    const uint8_t *w = (const uint8_t *)g.w;
    const bool ok = j < g.n;
    float acc[R];
    if (ok) row_dot_t<R, W, TS>(g.type, w + (size_t)j * g.row_bytes, k, q, rows, acc, (warp % W) * 32 + lane);
    else pdl_enter();
    if constexpr (W > 1) { /* the team's warps summed in their order */
        __shared__ float red[4][R];
        if (ok && lane == 0)
#pragma unroll
            for (int r = 0; r < R; r++) red[warp][r] = acc[r];
        __syncthreads();
        if (warp % W) return;
        if (ok && lane == 0)
#pragma unroll
            for (int r = 0; r < R; r++) {
                float t = red[warp][r];
#pragma unroll
                for (int i = 1; i < W; i++) t += red[warp + i][r];
                acc[r] = t;
            }
    }
    if (ok && lane == 0) {
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
    if (k % 256 || rows < 1) return false;
    if (type == T_Q4_K || type == T_Q6_K || type == T_Q6_KP || type == T_Q8_0R) return rows <= 8 || rows <= mfc_mmq_rows;
    /* dp4a only: more rows of these take the f16 tensor-core tiles
     * (k_gemm_tc.cu), the int8 mma kernel (k_mmq.cu) has no paths for them */
    return (type == T_Q2_K || type == T_Q3_K || type == T_IQ4_NL || type == T_IQ4_XS) && rows <= 8;
}

extern "C" void mfc_quant_x(cudaStream_t s, const float *x, int k, int rows, const mfc_q8 *q) {
    const int nb = rows * k / 32, kbt = mfc_q8_tiled_kb(rows, k);
    const bool g8 = q8_g8_on(q->g8, kbt);
    const int wpb = g8 ? 8 : 4; /* warps a block: one decode's launch as before the g8 scales */
    launch_k(quant_x_k, (nb + wpb - 1) / wpb, 32 * wpb, 0, s, x, nb, q->q, q->d, q->s, kbt, g8);
}

int mfc_mmvq_w = 0;

/* Warps per weight row: one while a round (16 super-blocks) covers the row,
 * more for long rows so that each lane still has one round of loads in
 * flight and the grid has enough warps. A function of k alone, so a row's
 * sum order is the same in every launch that takes it (fused or not, any
 * batch). */
extern "C" int mfc_mmvq_team(int k) {
    if (mfc_mmvq_w == 1 || mfc_mmvq_w == 2 || mfc_mmvq_w == 4) return mfc_mmvq_w;
    const int nsb = k / 256;
    return nsb <= 16 ? 1 : nsb <= 32 ? 2 : 4;
}

/* One-row Q4_K/Q6_K products of a grid too large to be resident at once
 * (1024 blocks or more: QKV, gate+up and the head of a 4B model) take a
 * variant held to 64 registers, 8 blocks a multiprocessor where the plain
 * one (90 registers) fits 5. ncu found the one-row products latency-bound
 * (long-scoreboard stalls, 37% of warps resident); on an H100 the variant
 * took QKV from 7.62 to 7.01 us, gate+up from 17.48 to 15.41 and the head
 * from 198.7 to 164.1, but O (640 blocks, all resident either way) from
 * 4.03 to 4.46 and down (teams of 4) from 10.00 to 10.33, hence the
 * condition. MINFER_CUDA_MMVQ_OCC=0 keeps the plain kernel (A/B). */
int mfc_mmvq_occ = 1;

template <int W, int TS>
static void mmvq_launch_r(cudaStream_t s, const mm_segs &S, int nb, int k, const mfc_q8 *q, int rows) {
    if constexpr (W == 1 && (TS == S_K46 || TS == S_K46F))
        if (rows == 1 && nb >= 1024 && mfc_mmvq_occ) {
            launch_k(mmvq_k<1, 1, TS, 8>, nb, 128, 0, s, S, k, *q, rows);
            return;
        }
    if (rows == 1) launch_k(mmvq_k<1, W, TS>, nb, 128, 0, s, S, k, *q, rows);
    else if (rows == 2) launch_k(mmvq_k<2, W, TS>, nb, 128, 0, s, S, k, *q, rows);
    else if (rows <= 4) launch_k(mmvq_k<4, W, TS>, nb, 128, 0, s, S, k, *q, rows);
    else launch_k(mmvq_k<8, W, TS>, nb, 128, 0, s, S, k, *q, rows);
}

template <int W>
static void mmvq_launch(cudaStream_t s, const mm_segs &S, int nb, int k, const mfc_q8 *q, int rows) {
    int set = 0;
    for (int i = 0; i < S.nseg; i++) set |= type_bit(S.seg[i].type);
    if (set && !(set & ~S_K46)) {
        mmvq_launch_r<W, S_K46>(s, S, nb, k, q, rows);
        return;
    }
    if (set && !(set & ~S_K46F)) {
        mmvq_launch_r<W, S_K46F>(s, S, nb, k, q, rows);
        return;
    }
    if (set == S_Q8_0) {
        mmvq_launch_r<W, S_Q8_0>(s, S, nb, k, q, rows);
        return;
    }
    if ((set & S_Q8_0) && !(set & ~(S_Q8_0 | S_K46))) {
        mmvq_launch_r<W, S_Q8_0 | S_K46>(s, S, nb, k, q, rows);
        return;
    }
    if ((set & S_Q8_0) && !(set & ~(S_Q8_0 | S_K46F))) {
        mmvq_launch_r<W, S_Q8_0 | S_K46F>(s, S, nb, k, q, rows);
        return;
    }
    switch (set) {
    case S_Q2_K: mmvq_launch_r<W, S_Q2_K>(s, S, nb, k, q, rows); break;
    case S_Q3_K: mmvq_launch_r<W, S_Q3_K>(s, S, nb, k, q, rows); break;
    case S_IQ4_NL: mmvq_launch_r<W, S_IQ4_NL>(s, S, nb, k, q, rows); break;
    case S_IQ4_XS: mmvq_launch_r<W, S_IQ4_XS>(s, S, nb, k, q, rows); break;
    default: mmvq_launch_r<W, S_ALL>(s, S, nb, k, q, rows); break;
    }
}

/* the segments' block ranges; the blocks in all */
static int mm_segs_of(mm_segs &S, const mfc_mm_seg *seg, int nseg, int rpb) {
    S = mm_segs{};
    S.nseg = nseg;
    int nb = 0;
    for (int i = 0; i < nseg; i++) {
        S.seg[i] = seg[i];
        S.blk0[i] = nb;
        nb += (seg[i].n + rpb - 1) / rpb;
    }
    S.blk0[nseg] = nb;
    return nb;
}

static void mmvq_go(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows) {
    const int W = mfc_mmvq_team(k), rpb = 4 / W;
    mm_segs S;
    const int nb = mm_segs_of(S, seg, nseg, rpb);
    if (!nb) return;
    if (W == 1) mmvq_launch<1>(s, S, nb, k, q, rows);
    else if (W == 2) mmvq_launch<2>(s, S, nb, k, q, rows);
    else mmvq_launch<4>(s, S, nb, k, q, rows);
}

extern "C" void mfc_mmvq_n(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows) {
    if (rows > 8) {
        mfc_mmq_n(s, seg, nseg, k, q, rows);
        return;
    }
    mmvq_go(s, seg, nseg, k, q, rows);
}

extern "C" void mfc_mmvq(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, int n, const mfc_q8 *q,
                         int rows, float *out, const float *b, float *res) {
    const mfc_mm_seg g = {w, row_bytes, type, n, out, b, res};
    mfc_mmvq_n(s, &g, 1, k, q, rows);
}

/* ---- the gated activation quantized on the way out: one warp per block
 * of 32, as quant_x_k's blocks of threads (the bits of glu_k then
 * quant_x_k) ---- */
__global__ void glu_quant_k(int act, const float *__restrict__ g, const float *__restrict__ u, int n_blocks,
                            float *out, int8_t *xq, float *xd, float *xs, int kbt, bool g8) {
    pdl_enter();
    __shared__ float sh[2][8];
    const int lane = threadIdx.x & 31, gb = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (gb >= n_blocks) return; /* g8: n_blocks % 8 == 0 */
    glu_quant_one(act, g, u, (size_t)gb * 32 + lane, gb, out, mfc_q8{xq, xd, xs, 0}, kbt, g8, sh);
}

/* gate and up as one two-product launch, then the activation (and its
 * quantization) in one small kernel. A kernel that also formed the
 * activation needs 32 consecutive rows of both per block, so each warp did
 * four rows in turn: 26 us for the 28 MB of a qwen3-4b layer on the H200
 * (ncu), about 1 TB/s. */
extern "C" bool mfc_mmvq_glu(cudaStream_t s, int act, const mfc_mm_seg *gate, const mfc_mm_seg *up, int k,
                             const mfc_q8 *q, int rows, float *act_out, const mfc_q8 *qout) {
    if (gate->n != up->n || gate->n % 32 || gate->b || up->b || gate->res || up->res || (act != 0 && act != 1) ||
        !mfc_mmvq_takes(gate->type, k, rows) || !mfc_mmvq_takes(up->type, k, rows))
        return false;
    const mfc_mm_seg seg[2] = {*gate, *up};
    mfc_mmvq_n(s, seg, 2, k, q, rows);
    const int nb = rows * gate->n / 32;
    const int kbt = mfc_q8_tiled_kb(rows, gate->n);
    const bool g8 = qout && q8_g8_on(qout->g8, kbt);
    const int wpb = g8 ? 8 : 4;
    if (qout) launch_k(glu_quant_k, (nb + wpb - 1) / wpb, 32 * wpb, 0, s, act, gate->out, up->out, nb, act_out,
                       qout->q, qout->d, qout->s, kbt, g8);
    else mfc_glu(s, act, gate->out, up->out, (size_t)rows * gate->n, act_out);
    return true;
}
