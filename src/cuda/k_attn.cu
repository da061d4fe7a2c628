/* k_attn.cu - the paged KV cache on the device and attention over it.
 *
 * Cache layout: per layer, one row per cell (cell = page * page_size + slot)
 * of k_width (v_width) elements in the cache type, f16, f32 or q8_0 (rows of
 * 34-byte blocks of 32: an f16 scale, 32 int8 levels, quantized as the CPU's
 * q8_0 does, bit for bit): the bytes kv_read hands out, so sessions save and
 * restore the same bytes on every backend. The engine's block tables (one per sequence, uploaded with the
 * step) map a position to its page.
 *
 * Attention: one block per (query row, query head), four warps; each warp
 * takes every fourth visible key, scores it (lanes split the head's
 * dimensions, a warp-wide sum), and keeps an online softmax (running max,
 * sum, and its lanes' share of the weighted V); the four partial states are
 * merged at the end. Decode steps (up to 64 rows) split each query's keys
 * into shares (mfc_att_share: 32 keys, more only past 2048), merged by a
 * second kernel (flash-decoding), so a deep cache keeps every
 * multiprocessor busy. A row's shares depend only on its own position,
 * never on the other rows of the step, nor on how many blocks the launch
 * has along z, so a captured step launched with the context's capacity
 * replays at any depth. A share is taken by attn_mma_k in k_attn_mma.cu
 * (f16 caches, heads of 64 or 128, groups of up to 16: K and V tiles in
 * shared memory, the f16 tensor cores, blocks walking shares), or with
 * MINFER_CUDA_ATT=tile by attn_tile_k (the same with f32 FMAs, groups of
 * up to 8), by attn_dec_k (one block for all the query heads of a KV head; blocks past
 * a row's last share return at once), or by attn_k per query head for
 * shapes none of them takes. Every query reads only its own sequence's keys
 * through its own block table: rows of other sequences never enter its
 * sums. */
#include <cuda_fp16.h>
#include <math.h>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/rows.cuh"
#include "cuda/kvcache.cuh"

int mfc_att_kernel = 2;

#define AW 4           /* warps per block */
#define MAXD 256       /* largest head dimension */
#define DPL (MAXD / 32) /* dimensions per lane */

/* part == NULL: the block takes all of the query's keys and writes its
 * output. Otherwise (decode: flash-decoding) it takes share blockIdx.z (of
 * mfc_att_share keys) and writes its unnormalised state (max, sum, weighted V)
 * to part (nsplit shares per head) for attn_combine_k. */
__global__ void __launch_bounds__(AW * 32) attn_k(mfc_step_dev st, const float *__restrict__ q, const void *kc,
                                                  const void *vc, mfc_attn p, float *out, int nsplit, float *part,
                                                  mfc_q8 qo, int qkb) {
    pdl_enter();
    const int r = blockIdx.x, h = blockIdx.y;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int hk = h / (p.n_head / p.n_head_kv);
    const int dk = p.head_dim_k, dv = p.head_dim_v;
    __shared__ float qs[MAXD];
    __shared__ float wm[AW], wl[AW];
    __shared__ float wacc[AW][MAXD];
    const float *qr = q + ((size_t)r * p.n_head + h) * dk;
    for (int i = threadIdx.x; i < dk; i += blockDim.x) qs[i] = qr[i];
    __syncthreads();

    const int pos = st.pos[r];
    int first = mfc_att_first(p.window, pos), last = pos;
    if (part) {
        const int sk = mfc_att_share(pos - first + 1);
        first += blockIdx.z * sk;
        if (first > pos) return; /* past the row's last share: the whole block */
        last = min(pos, first + sk - 1);
    }
    const int32_t *pages = st.pages + st.seq_pg[st.rowseq[r]];
    float m = -INFINITY, l = 0.0f, acc[DPL];
#pragma unroll
    for (int i = 0; i < DPL; i++) acc[i] = 0.0f;
    for (int t = first + warp; t <= last; t += AW) {
        const size_t cell = (size_t)pages[t / p.page_size] * p.page_size + t % p.page_size;
        const size_t kb = cell * p.k_width + (size_t)hk * dk, vb = cell * p.v_width + (size_t)hk * dv;
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < dk) s += qs[d] * ld_cache(kc, kb + d, p.kvt);
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        s *= p.scale;
        if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
        const float mn = fmaxf(m, s);
        const float c = expf(m - mn), e = expf(s - mn);
        l = l * c + e;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < dv) acc[i] = acc[i] * c + e * ld_cache(vc, vb + d, p.kvt);
        }
        m = mn;
    }
    if (lane == 0) wm[warp] = m, wl[warp] = l;
#pragma unroll
    for (int i = 0; i < DPL; i++) {
        const int d = lane + 32 * i;
        if (d < dv) wacc[warp][d] = acc[i];
    }
    __syncthreads();
    float M = -INFINITY;
    for (int w = 0; w < AW; w++) M = fmaxf(M, wm[w]);
    float L = 0.0f, f[AW];
    for (int w = 0; w < AW; w++) {
        f[w] = wm[w] == -INFINITY ? 0.0f : expf(wm[w] - M);
        L += wl[w] * f[w];
    }
    if (part) {
        float *pp = part + (((size_t)r * p.n_head + h) * nsplit + blockIdx.z) * (dv + 2);
        if (threadIdx.x == 0) pp[0] = M, pp[1] = L;
        for (int d = threadIdx.x; d < dv; d += blockDim.x) {
            float a = 0.0f;
            for (int w = 0; w < AW; w++) a += wacc[w][d] * f[w];
            pp[2 + d] = a;
        }
        return;
    }
    const size_t o0 = ((size_t)r * p.n_head + h) * dv;
    for (int d = threadIdx.x; d < dv; d += blockDim.x) {
        float a = 0.0f;
        for (int w = 0; w < AW; w++) a += wacc[w][d] * f[w];
        out[o0 + d] = a / L;
        if (qo.q) quant_block32(a / L, (o0 + d) / 32, qo.q, qo.d, qo.s, qkb); /* whole warps: dv % 32 == 0 */
    }
}

/* the shares a row at pos has */
__device__ __forceinline__ int n_shares(const mfc_attn &p, int pos) {
    const int first = mfc_att_first(p.window, pos);
    return mfc_att_n_shares(pos - first + 1);
}

/* merge the partial states of one (row, head) by the block's threads
 * (whole warps over the dimensions, lanes past dv idle but present for
 * the shuffles), with no shared memory and no barrier:
 * every warp finds the shares' maximum and weighted sum itself, a lane per
 * share (s and s + 32: MAX_SHARES <= 64), by xor shuffles, and hands share
 * s's weight to the dimension sums by a shuffle from lane s % 32. Each
 * thread issues the loads of all its dimension's shares before it sums
 * them, so a 44-share merge (a 4224-key row) waits on memory once, not
 * once per eight shares. Rows of up to CG shares take a copy of the loop
 * unrolled for CG: the 64-way one costs every row its predicates and
 * addresses (ncu, 64 rows of 6 shares: 930 instructions a warp, 15.6 us).
 * Both sum in share order, the same operations: the same bits. */
#define MAX_SHARES MFC_ATT_MAX_SHARES
#define CG 8 /* shares the short rows' path takes (no code for the other 56) */
__device__ __forceinline__ void combine_head(const mfc_step_dev &st, const float *part, const mfc_attn &p, int nsplit,
                                             float *out, const mfc_q8 &qo, int qkb, int r, int h) {
    static_assert(MAX_SHARES <= 64, "a lane holds two shares' weights");
    const int n_head = p.n_head, dv = p.head_dim_v, lane = threadIdx.x & 31, sd = dv + 2;
    const float *pp = part + ((size_t)r * n_head + h) * nsplit * sd;
    const int ns = n_shares(p, st.pos[r]);
    const float m0 = lane < ns ? pp[(size_t)lane * sd] : -INFINITY;
    const float m1 = lane + 32 < ns ? pp[(size_t)(lane + 32) * sd] : -INFINITY;
    const float l0 = lane < ns ? pp[(size_t)lane * sd + 1] : 0.0f;
    const float l1 = lane + 32 < ns ? pp[(size_t)(lane + 32) * sd + 1] : 0.0f;
    float M = fmaxf(m0, m1);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
    /* a share with no keys (-inf) weighs nothing; M is finite (a share has a key) */
    const float e0 = m0 == -INFINITY ? 0.0f : expf(m0 - M), e1 = m1 == -INFINITY ? 0.0f : expf(m1 - M);
    float L = l0 * e0 + l1 * e1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) L += __shfl_xor_sync(0xffffffffu, L, o);
    const size_t o0 = ((size_t)r * n_head + h) * dv;
    /* the warp's dimensions d0 + lane: every lane of a warp runs the
     * shuffles, also past dv (heads of 80 or 100) */
    for (int d0 = threadIdx.x & ~31; d0 < dv; d0 += blockDim.x) {
        const int d = d0 + lane;
        const bool in = d < dv;
        const float *pd = pp + 2 + d;
        float a = 0.0f;
        if (ns <= CG) { /* the common case (up to 256 keys): one group, loads first */
            float x[CG];
#pragma unroll
            for (int s = 0; s < CG; s++) x[s] = in && s < ns ? pd[(size_t)s * sd] : 0.0f;
#pragma unroll
            for (int s = 0; s < CG; s++)
                if (s < ns) a += x[s] * __shfl_sync(0xffffffffu, e0, s);
        } else {
            float x[MAX_SHARES];
#pragma unroll
            for (int s = 0; s < MAX_SHARES; s++) x[s] = in && s < ns ? pd[(size_t)s * sd] : 0.0f;
#pragma unroll
            for (int s = 0; s < MAX_SHARES; s++)
                if (s < ns) a += x[s] * __shfl_sync(0xffffffffu, s < 32 ? e0 : e1, s & 31);
        }
        if (!in) continue;
        out[o0 + d] = a / L;
        if (qo.q) quant_block32(a / L, (o0 + d) / 32, qo.q, qo.d, qo.s, qkb); /* whole warps: qo only when dv % 32 == 0 */
    }
}

__global__ void attn_combine_k(mfc_step_dev st, const float *__restrict__ part, mfc_attn p, int nsplit, float *out,
                               mfc_q8 qo, int qkb) {
    pdl_enter();
    combine_head(st, part, p, nsplit, out, qo, qkb, blockIdx.x, blockIdx.y);
}

/* Decode attention over one share of the keys, for all G query heads of
 * one KV head at once (grouped-query attention reads each key once, not G
 * times). A block of DT threads walks the share in tiles of DT keys: each
 * thread scores one key against the G queries (its K row in 16-byte loads,
 * issued together), the block takes the tile's softmax step, then each warp
 * accumulates every fourth key of the tile into its lanes' VPL dimensions
 * of V (one coalesced row per key, eight keys' loads in flight). The warps'
 * sums are added in warp order at the end and the share's unnormalised
 * state written per head, as attn_k writes it, for attn_combine_k. The
 * order of every sum depends only on the row's own keys. */
#define DT 128
#define MAXG 8
#define RED (4 * 1024) /* the warps' V sums: G * dv <= 1024 */

__device__ __forceinline__ __half2 u32_h2(uint32_t u) {
    __half2 h;
    memcpy(&h, &u, 4);
    return h;
}

__device__ __forceinline__ void ld8(const void *c, size_t i, int kvt, float *o) {
    if (kvt == MFC_KV_Q8) {
        ld_q8(c, i, 8, o);
    } else if (kvt == MFC_KV_F16) {
        const uint4 raw = *(const uint4 *)((const __half *)c + i);
        const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const float2 f = __half22float2(u32_h2(w[j]));
            o[2 * j] = f.x, o[2 * j + 1] = f.y;
        }
    } else {
        const float4 a = *(const float4 *)((const float *)c + i), b = *(const float4 *)((const float *)c + i + 4);
        o[0] = a.x, o[1] = a.y, o[2] = a.z, o[3] = a.w, o[4] = b.x, o[5] = b.y, o[6] = b.z, o[7] = b.w;
    }
}

/* VPL consecutive elements from element i (aligned to VPL) */
template <int VPL>
__device__ __forceinline__ void ldv(const void *c, size_t i, int kvt, float *o) {
    if (kvt == MFC_KV_Q8) {
        ld_q8(c, i, VPL, o);
    } else if (kvt == MFC_KV_F16) {
        const __half *h = (const __half *)c + i;
        if constexpr (VPL == 1) {
            o[0] = __half2float(h[0]);
        } else {
            uint32_t w[VPL / 2];
            if constexpr (VPL == 2) {
                w[0] = *(const uint32_t *)h;
            } else if constexpr (VPL == 4) {
                const uint2 u = *(const uint2 *)h;
                w[0] = u.x, w[1] = u.y;
            } else {
                const uint4 u = *(const uint4 *)h;
                w[0] = u.x, w[1] = u.y, w[2] = u.z, w[3] = u.w;
            }
#pragma unroll
            for (int j = 0; j < VPL / 2; j++) {
                const float2 f = __half22float2(u32_h2(w[j]));
                o[2 * j] = f.x, o[2 * j + 1] = f.y;
            }
        }
    } else {
        const float *f = (const float *)c + i;
#pragma unroll
        for (int j = 0; j < VPL; j++) o[j] = f[j];
    }
}

template <int VPL>
__global__ void __launch_bounds__(DT) attn_dec_k(mfc_step_dev st, const float *__restrict__ q, const void *kc,
                                                 const void *vc, mfc_attn p, int nsplit, float *part) {
    pdl_enter();
    const int r = blockIdx.x, hk = blockIdx.y, z = blockIdx.z, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int G = p.n_head / p.n_head_kv, dk = p.head_dim_k, dv = 32 * VPL;
    __shared__ float qs[MAXG][MAXD];
    __shared__ float ps[MAXG][DT];
    __shared__ float rmax[MAXG][DT / 32], rsum[MAXG][DT / 32];
    __shared__ size_t cs[DT];
    __shared__ float red[RED];
    const float *qr = q + ((size_t)r * p.n_head + (size_t)hk * G) * dk;
    for (int i = tid; i < G * dk; i += DT) qs[i / dk][i % dk] = qr[i];
    __syncthreads();

    const int pos = st.pos[r];
    int first = mfc_att_first(p.window, pos);
    const int sk = mfc_att_share(pos - first + 1);
    first += z * sk;
    if (first > pos) return; /* past the row's last share: the whole block, before any barrier */
    const int last = min(pos, first + sk - 1);
    const int32_t *pages = st.pages + st.seq_pg[st.rowseq[r]];
    float m[MAXG], l[MAXG], acc[MAXG][VPL];
#pragma unroll
    for (int g = 0; g < MAXG; g++) {
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < VPL; i++) acc[g][i] = 0.0f;
    }
    for (int t0 = first; t0 <= last; t0 += DT) {
        const int t = t0 + tid;
        float s[MAXG];
#pragma unroll
        for (int g = 0; g < MAXG; g++) s[g] = 0.0f;
        if (t <= last) {
            const size_t cell = (size_t)pages[t / p.page_size] * p.page_size + t % p.page_size;
            cs[tid] = cell;
            const size_t kb = cell * p.k_width + (size_t)hk * dk;
#pragma unroll 8
            for (int d = 0; d < dk; d += 8) {
                float kv[8];
                ld8(kc, kb + d, p.kvt, kv);
#pragma unroll
                for (int g = 0; g < MAXG; g++) {
                    if (g >= G) break;
#pragma unroll
                    for (int i = 0; i < 8; i++) s[g] += qs[g][d + i] * kv[i];
                }
            }
#pragma unroll
            for (int g = 0; g < MAXG; g++) {
                s[g] *= p.scale;
                if (p.softcap > 0.0f) s[g] = p.softcap * tanhf(s[g] / p.softcap);
            }
        } else {
#pragma unroll
            for (int g = 0; g < MAXG; g++) s[g] = -INFINITY;
        }
        /* the tile's max per head: warps, then the block */
#pragma unroll
        for (int g = 0; g < MAXG; g++) {
            if (g >= G) break;
            float v = s[g];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
            if (lane == 0) rmax[g][warp] = v;
        }
        __syncthreads();
        float mn[MAXG];
#pragma unroll
        for (int g = 0; g < MAXG; g++) {
            if (g >= G) break;
            float mt = rmax[g][0];
#pragma unroll
            for (int w = 1; w < DT / 32; w++) mt = fmaxf(mt, rmax[g][w]);
            mn[g] = fmaxf(m[g], mt); /* finite: the tile has a key */
            const float e = t <= last ? expf(s[g] - mn[g]) : 0.0f;
            ps[g][tid] = e;
            float v = e;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) rsum[g][warp] = v;
        }
        __syncthreads();
#pragma unroll
        for (int g = 0; g < MAXG; g++) {
            if (g >= G) break;
            float ts = rsum[g][0];
#pragma unroll
            for (int w = 1; w < DT / 32; w++) ts += rsum[g][w];
            const float c = expf(m[g] - mn[g]);
            l[g] = l[g] * c + ts;
            m[g] = mn[g];
#pragma unroll
            for (int i = 0; i < VPL; i++) acc[g][i] *= c;
        }
        const int nt = min(DT, last - t0 + 1);
        const size_t vo = (size_t)hk * dv + (size_t)lane * VPL;
#pragma unroll 8
        for (int j = warp; j < nt; j += DT / 32) {
            float v[VPL];
            ldv<VPL>(vc, cs[j] * p.v_width + vo, p.kvt, v);
#pragma unroll
            for (int g = 0; g < MAXG; g++) {
                if (g >= G) break;
                const float pj = ps[g][j];
#pragma unroll
                for (int i = 0; i < VPL; i++) acc[g][i] += pj * v[i];
            }
        }
        __syncthreads(); /* ps, cs and the partials are rewritten by the next tile */
    }
#pragma unroll
    for (int g = 0; g < MAXG; g++) {
        if (g >= G) break;
#pragma unroll
        for (int i = 0; i < VPL; i++) red[(warp * G + g) * dv + lane * VPL + i] = acc[g][i];
        if (tid == 0) {
            float *pp = part + (((size_t)r * p.n_head + (size_t)hk * G + g) * nsplit + z) * (dv + 2);
            pp[0] = m[g], pp[1] = l[g];
        }
    }
    __syncthreads();
    for (int x = tid; x < G * dv; x += DT) {
        const int g = x / dv, d = x % dv;
        float a = red[g * dv + d];
#pragma unroll
        for (int w = 1; w < DT / 32; w++) a += red[(w * G + g) * dv + d];
        float *pp = part + (((size_t)r * p.n_head + (size_t)hk * G + g) * nsplit + z) * (dv + 2);
        pp[2 + d] = a;
    }
}

/* Decode attention over shares of the keys, in tiles of TK keys whose K
 * and V rows are copied into shared memory by cp.async, the next tile's
 * while the block works on the current one, so a block has a whole tile's
 * loads in flight (attn_dec_k has each thread wait on its own K row, then
 * each warp on its V rows). A block of four warps takes one row and one KV
 * head; warp w owns query heads w and w + 4, each lane scores one key of the
 * tile against them, the tile's softmax step is a warp's shuffles (no block
 * barrier), and the V sums run over the tile's keys with the lanes split
 * along the dimensions. A block walks shares blockIdx.z, + gridDim.z, ...
 * of its row: a share's arithmetic never depends on which block takes it,
 * so the grid is sized to fill the device (at most the step's most shares)
 * and the results do not depend on it. A row has at most nsplit shares
 * (the backend sizes att_split for its longest row). Every sum runs in an order fixed by the
 * row's own keys: the dot products along the dimensions, a tile's
 * exponentials by xor shuffles, V in key order. */
#define TK 32 /* keys a tile: one a lane */
#define TW 4  /* warps a block */

template <int D, int HPW>
__global__ void __launch_bounds__(TW * 32) attn_tile_k(mfc_step_dev st, const float *__restrict__ q,
                                                       const __half *kc, const __half *vc, mfc_attn p, int nsplit,
                                                       float *part) {
    constexpr int RS = D + 8;      /* row stride in halves: 16 bytes of padding, so the lanes' 16-byte
                                    * reads of eight consecutive keys hit distinct banks */
    constexpr int CPR = D / 8;     /* 16-byte pieces a row */
    constexpr int KPP = TW * 32 / CPR; /* keys one pass of the block's copies covers */
    constexpr int VPL = D / 32;    /* V dimensions a lane */
    __shared__ __align__(16) __half ks[2][TK][RS];
    __shared__ __align__(16) __half vs[2][TK][RS];
    __shared__ __align__(16) float qs[TW * HPW][D];
    /* the step's arrays are written before the step, never by its kernels:
     * read before the wait */
    const int r = blockIdx.x, hk = blockIdx.y, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int G = p.n_head / p.n_head_kv;
    const int pos = st.pos[r];
    const int first0 = mfc_att_first(p.window, pos);
    const int n = pos - first0 + 1, sk = mfc_att_share(n), ns = (n + sk - 1) / sk;
    if ((int)blockIdx.z >= ns) return; /* the whole block, before any barrier */
    const int32_t *pages = st.pages + st.seq_pg[st.rowseq[r]];
    const __half *kh = kc + (size_t)hk * D, *vh = vc + (size_t)hk * D;
    const int piece = tid % CPR, key0 = tid / CPR;

    /* The block's work is a flat run of tiles, share after share; the
     * copies run one tile ahead along it, across the shares' boundaries
     * too, so a block that walks several shorter shares still has the next
     * one's K and V on the way while it scores the current one. */
    int pz = blockIdx.z, pit = 0; /* the next tile to copy: share, tile */
    /* sel 0: the tile's keys; 1: those below pos only, the tile left open
     * (copies before the wait); 2: the key at pos only, closing the tile */
    auto issue = [&](int b, int sel) {
        if (pz < ns) {
            const int f = first0 + pz * sk, last = min(pos, f + sk - 1), t0 = f + pit * TK;
            const int nt = min(TK, last - t0 + 1);
            /* V is summed over the tile's nt keys only: no zeros needed past them */
            copy_key_rows<TK, KPP, RS, false>(ks[b], vs[b], kh, vh, pages, p, t0, nt, pos, sel, lane, key0, piece);
            if (sel != 1) {
                if (t0 + TK > last) pz += gridDim.z, pit = 0;
                else pit++;
            }
        }
        if (sel != 1) cp_commit(); /* an empty group past the last tile keeps the waits uniform */
    };

    /* With p.early the first tile's older keys are on their way while the
     * kernel before (the RoPE + store that writes the key at pos) runs */
    if (p.early) issue(0, 1);
    pdl_enter();
    const float *qr = q + ((size_t)r * p.n_head + (size_t)hk * G) * D;
    for (int i = tid; i < G * D; i += TW * 32) qs[i / D][i % D] = qr[i];
    int b = 0;
    issue(0, p.early ? 2 : 0);
    for (int z = blockIdx.z; z < ns; z += gridDim.z) {
        const int f = first0 + z * sk, last = min(pos, f + sk - 1), ntile = (last - f + TK) / TK;
        float m[HPW], l[HPW], acc[HPW][VPL];
#pragma unroll
        for (int h = 0; h < HPW; h++) {
            m[h] = -INFINITY, l[h] = 0.0f;
#pragma unroll
            for (int i = 0; i < VPL; i++) acc[h][i] = 0.0f;
        }
        for (int it = 0; it < ntile; it++, b ^= 1) {
            const int t0 = f + it * TK, nt = min(TK, last - t0 + 1);
            issue(b ^ 1, 0); /* refills the buffer the previous tile used: every warp is past it */
            cp_wait_1();
            __syncthreads(); /* the tile (and q) visible to every warp */
            /* scores: lane = key, against this warp's heads; four partial
             * sums along the dimensions (c % 4), added in that order */
            float s4[HPW][4];
#pragma unroll
            for (int h = 0; h < HPW; h++) s4[h][0] = s4[h][1] = s4[h][2] = s4[h][3] = 0.0f;
#pragma unroll
            for (int c = 0; c < CPR; c++) {
                float kf[8];
                ld8(&ks[b][lane][0], (size_t)c * 8, MFC_KV_F16, kf);
#pragma unroll
                for (int h = 0; h < HPW; h++) {
                    const int g = warp + TW * h;
                    if (g < G) {
                        const float4 qa = *(const float4 *)&qs[g][c * 8], qb = *(const float4 *)&qs[g][c * 8 + 4];
                        float &a = s4[h][c & 3];
                        a += qa.x * kf[0], a += qa.y * kf[1], a += qa.z * kf[2], a += qa.w * kf[3];
                        a += qb.x * kf[4], a += qb.y * kf[5], a += qb.z * kf[6], a += qb.w * kf[7];
                    }
                }
            }
            float s[HPW];
#pragma unroll
            for (int h = 0; h < HPW; h++) s[h] = ((s4[h][0] + s4[h][1]) + s4[h][2]) + s4[h][3];
            /* the tile's online-softmax step, per head, in the warp */
            float e[HPW];
#pragma unroll
            for (int h = 0; h < HPW; h++) {
                float x = s[h] * p.scale;
                if (p.softcap > 0.0f) x = p.softcap * tanhf(x / p.softcap);
                x = lane < nt ? x : -INFINITY;
                float mt = x;
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
                const float mn = fmaxf(m[h], mt); /* finite: the tile has a key */
                e[h] = lane < nt ? expf(x - mn) : 0.0f;
                float ts = e[h];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) ts += __shfl_xor_sync(0xffffffffu, ts, o);
                const float c = expf(m[h] - mn);
                l[h] = l[h] * c + ts;
                m[h] = mn;
#pragma unroll
                for (int i = 0; i < VPL; i++) acc[h][i] *= c;
            }
            /* V: key by key, the lanes along the dimensions */
#pragma unroll 8
            for (int j = 0; j < nt; j++) {
                float v[VPL];
                ldv<VPL>(&vs[b][j][0], (size_t)lane * VPL, MFC_KV_F16, v);
#pragma unroll
                for (int h = 0; h < HPW; h++) {
                    const float pj = __shfl_sync(0xffffffffu, e[h], j);
#pragma unroll
                    for (int i = 0; i < VPL; i++) acc[h][i] += pj * v[i];
                }
            }
            __syncthreads(); /* the next tile's copies refill buffer b */
        }
#pragma unroll
        for (int h = 0; h < HPW; h++) {
            const int g = warp + TW * h;
            if (g >= G) continue;
            float *pp = part + (((size_t)r * p.n_head + (size_t)hk * G + g) * nsplit + z) * (D + 2);
            if (lane == 0) pp[0] = m[h], pp[1] = l[h];
#pragma unroll
            for (int i = 0; i < VPL; i++) pp[2 + lane * VPL + i] = acc[h][i];
        }
    }
}

/* whether the tile kernel takes the shape: an f16 cache whose rows start
 * on 16 bytes, K and V heads of 64 or 128, groups of up to 8 */
static bool tile_takes(const mfc_attn *p, int nsplit, const float *part, const void *kc, const void *vc) {
    const int G = p->n_head_kv ? p->n_head / p->n_head_kv : 0, d = p->head_dim_k;
    return mfc_att_kernel != 1 && part && nsplit >= 1 && nsplit <= MAX_SHARES && p->kvt == MFC_KV_F16 && G >= 1 &&
           p->n_head % p->n_head_kv == 0 && G <= 2 * TW && (d == 64 || d == 128) && p->head_dim_v == d &&
           p->k_width % 8 == 0 && p->v_width % 8 == 0 && ((uintptr_t)kc | (uintptr_t)vc) % 16 == 0;
}

/* blocks along the shares: enough for about four resident blocks a
 * multiprocessor over the step's rows and KV heads (on an H100, 8 a
 * multiprocessor took 64 rows' attention from 38.9 to 35.6 us but 16 rows'
 * from 14.0 to 15.8; 2 gave 41.1 and 13.1) */
int mfc_att_tile_nz = 0;

static int tile_nz(int rows, int n_kv, int nz) {
    if (mfc_att_tile_nz > 0) return mfc_att_tile_nz < nz ? mfc_att_tile_nz : nz;
    static int n_sm;
    if (!n_sm) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            n_sm = 132;
    }
    const int want = (4 * n_sm + rows * n_kv - 1) / (rows * n_kv);
    return want < 1 ? 1 : want < nz ? want : nz;
}

static void tile_launch(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc,
                        const void *vc, const mfc_attn *p, int nsplit, int nz, float *part) {
    const dim3 grid(rows, p->n_head_kv, tile_nz(rows, p->n_head_kv, nz));
    const bool two = p->n_head / p->n_head_kv > TW;
    const __half *k = (const __half *)kc, *v = (const __half *)vc;
    if (p->head_dim_k == 128) {
        if (two) launch_k(attn_tile_k<128, 2>, grid, TW * 32, 0, s, *st, q, k, v, *p, nsplit, part);
        else launch_k(attn_tile_k<128, 1>, grid, TW * 32, 0, s, *st, q, k, v, *p, nsplit, part);
    } else {
        if (two) launch_k(attn_tile_k<64, 2>, grid, TW * 32, 0, s, *st, q, k, v, *p, nsplit, part);
        else launch_k(attn_tile_k<64, 1>, grid, TW * 32, 0, s, *st, q, k, v, *p, nsplit, part);
    }
}

/* whether the grouped decode kernel takes the shape: heads of 32..256 (V),
 * K rows of whole 16-byte pieces, groups of up to 8 whose V sums fit its
 * buffer */
static bool dec_takes(const mfc_attn *p, int nsplit, const float *part) {
    const int G = p->n_head_kv ? p->n_head / p->n_head_kv : 0, dv = p->head_dim_v, vpl = dv / 32;
    return nsplit >= 1 && nsplit <= MAX_SHARES && part && G >= 1 && p->n_head % p->n_head_kv == 0 && G <= MAXG && p->head_dim_k % 8 == 0 &&
           p->k_width % 8 == 0 && dv % 32 == 0 && (vpl == 1 || vpl == 2 || vpl == 4 || vpl == 8) &&
           p->v_width % vpl == 0 && G * dv * 4 <= RED && p->head_dim_k <= MAXD;
}

static void dec_launch(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc,
                       const void *vc, const mfc_attn *p, int nsplit, int nz, float *part) {
    const dim3 grid(rows, p->n_head_kv, nz);
    const int vpl = p->head_dim_v / 32;
    if (vpl == 1) launch_k(attn_dec_k<1>, grid, DT, 0, s, *st, q, kc, vc, *p, nsplit, part);
    else if (vpl == 2) launch_k(attn_dec_k<2>, grid, DT, 0, s, *st, q, kc, vc, *p, nsplit, part);
    else if (vpl == 4) launch_k(attn_dec_k<4>, grid, DT, 0, s, *st, q, kc, vc, *p, nsplit, part);
    else launch_k(attn_dec_k<8>, grid, DT, 0, s, *st, q, kc, vc, *p, nsplit, part);
}

extern "C" void mfc_attention(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc,
                              const void *vc, const mfc_attn *p, float *out, int nsplit, int nz, float *part,
                              const mfc_q8 *qout) {
    if (!rows) return;
    mfc_q8 qo = {NULL, NULL, NULL};
    if (qout && p->head_dim_v % 32 == 0) qo = *qout;
    const int qkb = mfc_q8_tiled_kb(rows, p->n_head * p->head_dim_v);
    if (mfc_att_kernel == 2 && mfc_att_mma(s, st, rows, q, kc, vc, p, nsplit, nz, part)) {
        launch_k(attn_combine_k, dim3(rows, p->n_head), 128, 0, s, *st, (const float *)part, *p, nsplit, out, qo, qkb);
        return;
    }
    if (tile_takes(p, nsplit, part, kc, vc)) {
        tile_launch(s, st, rows, q, kc, vc, p, nsplit, nz, part);
        launch_k(attn_combine_k, dim3(rows, p->n_head), 128, 0, s, *st, (const float *)part, *p, nsplit, out, qo, qkb);
        return;
    }
    if (dec_takes(p, nsplit, part)) {
        dec_launch(s, st, rows, q, kc, vc, p, nsplit, nz, part);
        launch_k(attn_combine_k, dim3(rows, p->n_head), 128, 0, s, *st, (const float *)part, *p, nsplit, out, qo, qkb);
        return;
    }
    if (nsplit > 1 && nsplit <= MAX_SHARES && part) {
        launch_k(attn_k, dim3(rows, p->n_head, nz), AW * 32, 0, s, *st, q, kc, vc, *p, out, nsplit, part, mfc_q8{NULL, NULL, NULL}, 0);
        launch_k(attn_combine_k, dim3(rows, p->n_head), 128, 0, s, *st, (const float *)part, *p, nsplit, out, qo, qkb);
        return;
    }
    /* a prompt's rows: the tensor-core kernel where it takes the shape */
    if (!part && !qo.q && mfc_fattn(s, st, rows, q, kc, vc, p, out)) return;
    launch_k(attn_k, dim3(rows, p->n_head), AW * 32, 0, s, *st, q, kc, vc, *p, out, 1, (float *)NULL, qo, qkb);
}

/* 256 threads a row: with q8_0 (widths multiples of 32) each warp takes
 * whole blocks, all its lanes together */
__global__ void kv_store_k(mfc_step_dev st, const float *__restrict__ k, const float *__restrict__ v, void *kc,
                           void *vc, int kw, int vw, int kvt) {
    pdl_enter();
    const int r = blockIdx.x;
    const size_t cell = (size_t)st.cell[r];
    for (int i = threadIdx.x; i < kw; i += blockDim.x) st_cache(kc, cell * kw + i, k[(size_t)r * kw + i], kvt);
    for (int i = threadIdx.x; i < vw; i += blockDim.x) st_cache(vc, cell * vw + i, v[(size_t)r * vw + i], kvt);
}

extern "C" void mfc_kv_store(cudaStream_t s, const mfc_step_dev *st, int rows, const float *k, const float *v, void *kc,
                             void *vc, int k_width, int v_width, int kvt) {
    if (rows) launch_k(kv_store_k, rows, 256, 0, s, *st, k, v, kc, vc, k_width, v_width, kvt);
}
