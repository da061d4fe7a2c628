/* k_attn.cu - the paged KV cache on the device and attention over it.
 *
 * Cache layout: per layer, one row per cell (cell = page * page_size + slot)
 * of k_width (v_width) elements in the cache type, f16 or f32: the bytes
 * kv_read hands out, so sessions save and restore the same bytes on every
 * backend. The engine's block tables (one per sequence, uploaded with the
 * step) map a position to its page.
 *
 * Attention: one block per (query row, query head), four warps; each warp
 * takes every fourth visible key, scores it (lanes split the head's
 * dimensions, a warp-wide sum), and keeps an online softmax (running max,
 * sum, and its lanes' share of the weighted V); the four partial states are
 * merged at the end. Decode steps (a few rows) split each query's keys into
 * nsplit equal shares, one block each, merged by a second kernel
 * (flash-decoding), so a deep cache keeps every multiprocessor busy; nsplit
 * is fixed per context, so a captured step replays at any depth. Every query reads only its own sequence's keys through
 * its own block table: rows of other sequences never enter its sums. */
#include <cuda_fp16.h>
#include <math.h>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/rows.cuh"

#define AW 4           /* warps per block */
#define MAXD 256       /* largest head dimension */
#define DPL (MAXD / 32) /* dimensions per lane */

__device__ __forceinline__ float ld_cache(const void *c, size_t i, bool f16) {
    return f16 ? __half2float(((const __half *)c)[i]) : ((const float *)c)[i];
}

/* part == NULL: the block takes all of the query's keys and writes its
 * output. Otherwise (decode: flash-decoding) it takes split blockIdx.z of
 * nsplit equal shares of them and writes its unnormalised state
 * (max, sum, weighted V) to part for attn_combine_k. */
__global__ void __launch_bounds__(AW * 32) attn_k(mfc_step_dev st, const float *__restrict__ q, const void *kc,
                                                  const void *vc, mfc_attn p, float *out, int nsplit, float *part,
                                                  mfc_q8 qo) {
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
    int first = p.window > 0 && pos >= p.window ? pos - p.window + 1 : 0, last = pos;
    if (part) {
        const int chunk = (pos - first + nsplit) / nsplit; /* ceil(visible / nsplit) */
        first += blockIdx.z * chunk;
        last = min(pos, first + chunk - 1);
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
            if (d < dk) s += qs[d] * ld_cache(kc, kb + d, p.f16);
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
            if (d < dv) acc[i] = acc[i] * c + e * ld_cache(vc, vb + d, p.f16);
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
        if (qo.q) quant_block32(a / L, (o0 + d) / 32, qo.q, qo.d, qo.s); /* whole warps: dv % 32 == 0 */
    }
}

/* merge the nsplit partial states of one (row, head), in split order */
__global__ void attn_combine_k(const float *__restrict__ part, int n_head, int dv, int nsplit, float *out, mfc_q8 qo) {
    pdl_enter();
    const int r = blockIdx.x, h = blockIdx.y;
    const float *pp = part + ((size_t)r * n_head + h) * nsplit * (dv + 2);
    float M = -INFINITY;
    for (int s = 0; s < nsplit; s++) M = fmaxf(M, pp[(size_t)s * (dv + 2)]);
    float L = 0.0f;
    for (int s = 0; s < nsplit; s++) {
        const float ms = pp[(size_t)s * (dv + 2)];
        if (ms != -INFINITY) L += pp[(size_t)s * (dv + 2) + 1] * expf(ms - M);
    }
    const size_t o0 = ((size_t)r * n_head + h) * dv;
    for (int d = threadIdx.x; d < dv; d += blockDim.x) {
        float a = 0.0f;
        for (int s = 0; s < nsplit; s++) {
            const float ms = pp[(size_t)s * (dv + 2)];
            if (ms != -INFINITY) a += pp[(size_t)s * (dv + 2) + 2 + d] * expf(ms - M);
        }
        out[o0 + d] = a / L;
        if (qo.q) quant_block32(a / L, (o0 + d) / 32, qo.q, qo.d, qo.s); /* whole warps: dv % 32 == 0 */
    }
}

extern "C" void mfc_attention(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc,
                              const void *vc, const mfc_attn *p, float *out, int nsplit, float *part,
                              const mfc_q8 *qout) {
    if (!rows) return;
    mfc_q8 qo = {NULL, NULL, NULL};
    if (qout && p->head_dim_v % 32 == 0) qo = *qout;
    if (nsplit > 1 && part) {
        launch_k(attn_k, dim3(rows, p->n_head, nsplit), AW * 32, 0, s, *st, q, kc, vc, *p, out, nsplit, part, mfc_q8{NULL, NULL, NULL});
        launch_k(attn_combine_k, dim3(rows, p->n_head), 128, 0, s, (const float *)part, p->n_head, p->head_dim_v, nsplit, out, qo);
        return;
    }
    launch_k(attn_k, dim3(rows, p->n_head), AW * 32, 0, s, *st, q, kc, vc, *p, out, 1, (float *)NULL, qo);
}

__global__ void kv_store_k(mfc_step_dev st, const float *__restrict__ k, const float *__restrict__ v, void *kc,
                           void *vc, int kw, int vw, bool f16) {
    pdl_enter();
    const int r = blockIdx.x;
    const size_t cell = (size_t)st.cell[r];
    for (int i = threadIdx.x; i < kw; i += blockDim.x) {
        const float x = k[(size_t)r * kw + i];
        if (f16) ((__half *)kc)[cell * kw + i] = __float2half_rn(x);
        else ((float *)kc)[cell * kw + i] = x;
    }
    for (int i = threadIdx.x; i < vw; i += blockDim.x) {
        const float x = v[(size_t)r * vw + i];
        if (f16) ((__half *)vc)[cell * vw + i] = __float2half_rn(x);
        else ((float *)vc)[cell * vw + i] = x;
    }
}

extern "C" void mfc_kv_store(cudaStream_t s, const mfc_step_dev *st, int rows, const float *k, const float *v, void *kc,
                             void *vc, int k_width, int v_width, bool f16) {
    if (rows) launch_k(kv_store_k, rows, 256, 0, s, *st, k, v, kc, vc, k_width, v_width, f16);
}
