/* k_ops.cu - row and elementwise ops: norms, RoPE, gated activations, adds,
 * scales, column slices and row gathers, and the bandwidth probe's copy.
 *
 * Norm sums are f32 tree reductions (the CPU sums in double, one term after
 * another): the two agree to a few ulps of the scale. RoPE builds its angles
 * as the CPU does (repeated multiplication in f32) so positions give the same
 * angles; cosf/sinf and expf are CUDA's, within an ulp or two of libm. */
#include <cuda_fp16.h>
#include <math.h>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/rows.cuh"
#include "cuda/kvcache.cuh"

bool mfc_pdl_on = false;

static inline unsigned blocks_for(size_t n, unsigned t) { return (unsigned)((n + t - 1) / t); }

/* ---- norms: one block per row ---- */

__global__ void norm_k(bool layer, const float *x, const float *__restrict__ w, const float *__restrict__ b, int n,
                       float eps, float *out) {
    pdl_enter();
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = out + (size_t)blockIdx.x * n;
    float mean, scale;
    norm_stats_v(layer, xr, n, blockDim.x, eps, sh, mean, scale);
    for (int i = threadIdx.x; i < n; i += blockDim.x) yr[i] = norm_elem(xr[i], mean, scale, w, b, i);
}

extern "C" void mfc_norm(cudaStream_t s, bool layer_norm, const float *x, const float *w, const float *b, int rows,
                         int n, float eps, float *out) {
    launch_k(norm_k, rows, norm_threads(n), 0, s, layer_norm, x, w, b, n, eps, out);
}

/* ---- elementwise ---- */

__global__ void add_k(float *a, const float *b, size_t n) {
    pdl_enter();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}
__global__ void scale_k(float *a, float f, size_t n) {
    pdl_enter();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= f;
}
__global__ void softcap_k(float *a, float cap, size_t n) {
    pdl_enter();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = tanhf(a[i] * (1.0f / cap)) * cap;
}

extern "C" void mfc_add(cudaStream_t s, float *a, const float *b, size_t n) {
    if (n) launch_k(add_k, blocks_for(n, 256), 256, 0, s, a, b, n);
}
extern "C" void mfc_scale(cudaStream_t s, float *x, float f, size_t n) {
    if (n) launch_k(scale_k, blocks_for(n, 256), 256, 0, s, x, f, n);
}
extern "C" void mfc_softcap(cudaStream_t s, float *x, float cap, size_t n) {
    if (n) launch_k(softcap_k, blocks_for(n, 256), 256, 0, s, x, cap, n);
}

__global__ void glu_k(int act, const float *__restrict__ g, const float *__restrict__ u, size_t n, float *out) {
    pdl_enter();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = glu_act(act, g[i], u ? u[i] : 0.0f);
}

extern "C" void mfc_glu(cudaStream_t s, int act, const float *gate, const float *up, size_t n, float *out) {
    if (n) launch_k(glu_k, blocks_for(n, 256), 256, 0, s, act, gate, up, n, out);
}

/* ---- row movement ---- */

__global__ void copy_cols_k(const float *src, int sw, int col0, int n, int rows, float *dst) {
    pdl_enter();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * rows) return;
    const size_t r = i / n, c = i % n;
    dst[i] = src[r * sw + col0 + c];
}

extern "C" void mfc_copy_cols(cudaStream_t s, const float *src, int src_width, int col0, int n, int rows, float *dst) {
    const size_t t = (size_t)n * rows;
    if (t) launch_k(copy_cols_k, blocks_for(t, 256), 256, 0, s, src, src_width, col0, n, rows, dst);
}

__global__ void gather_k(const float *src, const int32_t *idx, int n, float *dst) {
    pdl_enter();
    const float *sr = src + (size_t)idx[blockIdx.x] * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[(size_t)blockIdx.x * n + i] = sr[i];
}

extern "C" void mfc_gather_rows(cudaStream_t s, const float *src, const int32_t *idx, int count, int n, float *dst) {
    if (count) launch_k(gather_k, count, 256, 0, s, src, idx, n, dst);
}

/* ---- RoPE: block per (row, head), a thread per pair ---- */

__global__ void rope_k(float *x, int n_head, int head_dim, const int32_t *__restrict__ pos, mfc_rope p) {
    pdl_enter();
    const int r = blockIdx.x, h = blockIdx.y;
    rope_head(x + ((size_t)r * n_head + h) * head_dim, pos[r], p);
}

extern "C" void mfc_rope_apply(cudaStream_t s, float *x, int rows, int n_head, int head_dim, const int32_t *pos,
                               const mfc_rope *p) {
    const int half = p->n_rot / 2, t = half >= 128 ? 128 : half >= 64 ? 64 : 32;
    if (rows) launch_k(rope_k, dim3(rows, n_head), t, 0, s, x, n_head, head_dim, pos, *p);
}

/* QK-norm then RoPE, per (row, head), in place: the norm's block has the
 * thread count norm_k would have over head_dim (the same sums); the normed
 * head waits in shared memory for its rotation. */
__global__ void norm_rope_k(float *x, const float *__restrict__ w, int n_head, int head_dim, float eps,
                            const int32_t *__restrict__ pos, mfc_rope p) {
    __shared__ float sh[32];
    __shared__ float hv[MFC_MAX_HEAD_DIM];
    const int r = blockIdx.x, h = blockIdx.y;
    const mfc_rope_grp g = {x, w, n_head, true, eps};
    head_pre pr;
    head_pre_load(pr, g, head_dim, pos[r], p); /* weights and the step's positions: before the wait */
    pdl_enter();
    rope_head_store(g, pr, x + ((size_t)r * n_head + h) * head_dim, head_dim, blockDim.x, p, NULL, 0, 0, sh, hv);
}

extern "C" bool mfc_norm_rope(cudaStream_t s, float *x, const float *w, int rows, int n_head, int head_dim, float eps,
                              const int32_t *pos, const mfc_rope *p) {
    if (head_dim > MFC_MAX_HEAD_DIM || p->n_rot > head_dim) return false;
    if (rows) launch_k(norm_rope_k, dim3(rows, n_head), norm_threads(head_dim), 0, s, x, w, n_head, head_dim, eps, pos, *p);
    return true;
}

/* The attention inputs of a decode step in one launch: RoPE (after a
 * QK-norm where the group has one) of group a's heads (Q) and group b's
 * heads (K), b's rotated heads and the V rows stored into the cache at the
 * step's cells. Block (row, y): y < a.n_head a head of a, then b's heads,
 * then one block for the row's V. Each head as norm_rope_k (the same
 * thread count, so the same sums) or rope_k computes it, the cache as
 * kv_store_k writes it. */
__global__ void rope_store_k(mfc_step_dev st, mfc_rope_grp a, mfc_rope_grp b, int head_dim, mfc_rope p,
                             const float *__restrict__ vr, void *kc, void *vc, int kw, int vw, int kvt) {
    __shared__ float sh[32];
    __shared__ float hv[MFC_MAX_HEAD_DIM];
    const int r = blockIdx.x;
    int h = blockIdx.y;
    const size_t cell = (size_t)st.cell[r];
    if (h == a.n_head + b.n_head) {
        pdl_enter();
        for (int i = threadIdx.x; i < vw; i += blockDim.x) {
            const float x = vr[(size_t)r * vw + i];
            st_cache(vc, cell * vw + i, x, kvt);
        }
        return;
    }
    const bool kh = h >= a.n_head;
    if (kh) h -= a.n_head;
    const mfc_rope_grp g = kh ? b : a;
    head_pre pr;
    head_pre_load(pr, g, head_dim, st.pos[r], p); /* weights and the step's positions: before the wait */
    pdl_enter();
    rope_head_store(g, pr, g.x + ((size_t)r * g.n_head + h) * head_dim, head_dim, blockDim.x, p, kh ? kc : NULL,
                    cell * kw + (size_t)h * head_dim, kvt, sh, hv);
}

extern "C" bool mfc_rope_store(cudaStream_t s, const mfc_step_dev *st, int rows, const mfc_rope_grp *a,
                               const mfc_rope_grp *b, int head_dim, const mfc_rope *p, const float *v, void *kc,
                               void *vc, int k_width, int v_width, int kvt) {
    /* q8_0 quantizes blocks of 32 across a warp: each warp must hold whole
     * blocks of a head (the block sizes are multiples of 32 threads) */
    if (kvt == MFC_KV_Q8 && head_dim % 32) return false;
    if (head_dim > MFC_MAX_HEAD_DIM || p->n_rot > head_dim || k_width != b->n_head * head_dim) return false;
    if (rows)
        launch_k(rope_store_k, dim3(rows, a->n_head + b->n_head + 1), norm_threads(head_dim), 0, s, *st, *a, *b,
                 head_dim, *p, v, kc, vc, k_width, v_width, kvt);
    return true;
}

/* ---- an empty kernel: what a kernel boundary costs in a graph (bench_attn) ---- */
__global__ void empty_k() { pdl_enter(); }

extern "C" void mfc_empty(cudaStream_t s, int blocks) { launch_k(empty_k, blocks, 128, 0, s); }

/* ---- the bandwidth probe: 16-byte loads and stores ---- */

__global__ void copy_k(uint4 *dst, const uint4 *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" void mfc_copy_bytes(cudaStream_t s, void *dst, const void *src, size_t n) {
    copy_k<<<132 * 16, 256, 0, s>>>((uint4 *)dst, (const uint4 *)src, n / 16);
}
