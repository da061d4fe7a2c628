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

static inline unsigned blocks_for(size_t n, unsigned t) { return (unsigned)((n + t - 1) / t); }

/* ---- norms: one block per row ---- */

__device__ __forceinline__ float block_sum(float v, float *sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads(); /* sh may still be read by a previous call */
    if (l == 0) sh[w] = v;
    __syncthreads();
    float t = l < nw ? sh[l] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}

__global__ void norm_k(bool layer, const float *x, const float *__restrict__ w, const float *__restrict__ b, int n,
                       float eps, float *out) {
    __shared__ float sh[32];
    const float *xr = x + (size_t)blockIdx.x * n;
    float *yr = out + (size_t)blockIdx.x * n;
    float mean = 0.0f;
    if (layer) {
        float s = 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
        mean = block_sum(s, sh) / (float)n;
    }
    float s2 = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = xr[i] - mean;
        s2 += d * d;
    }
    const float scale = 1.0f / sqrtf(block_sum(s2, sh) / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float y = (xr[i] - mean) * scale;
        if (w) y *= w[i];
        if (b) y += b[i];
        yr[i] = y;
    }
}

extern "C" void mfc_norm(cudaStream_t s, bool layer_norm, const float *x, const float *w, const float *b, int rows,
                         int n, float eps, float *out) {
    const int t = n >= 1024 ? 1024 : n >= 256 ? 256 : n >= 128 ? 128 : 64;
    norm_k<<<rows, t, 0, s>>>(layer_norm, x, w, b, n, eps, out);
}

/* ---- elementwise ---- */

__global__ void add_k(float *a, const float *b, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += b[i];
}
__global__ void scale_k(float *a, float f, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= f;
}
__global__ void softcap_k(float *a, float cap, size_t n) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = tanhf(a[i] * (1.0f / cap)) * cap;
}

extern "C" void mfc_add(cudaStream_t s, float *a, const float *b, size_t n) {
    if (n) add_k<<<blocks_for(n, 256), 256, 0, s>>>(a, b, n);
}
extern "C" void mfc_scale(cudaStream_t s, float *x, float f, size_t n) {
    if (n) scale_k<<<blocks_for(n, 256), 256, 0, s>>>(x, f, n);
}
extern "C" void mfc_softcap(cudaStream_t s, float *x, float cap, size_t n) {
    if (n) softcap_k<<<blocks_for(n, 256), 256, 0, s>>>(x, cap, n);
}

/* GELU as the CPU takes it: tanh-GELU of the f16 rounding of x, rounded to
 * f16, for |x| < 10 (a table of f16 results there) */
__device__ __forceinline__ float gelu_f16(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = __half2float(__float2half_rn(x));
    const float c = 0.797884560802865355f;
    return __half2float(__float2half_rn(0.5f * h * (1.0f + tanhf(c * h * (1.0f + 0.044715f * h * h)))));
}

__device__ __forceinline__ float silu(float x) {
    const float t = expf(-fabsf(x));
    return x * ((x >= 0.0f ? 1.0f : t) / (1.0f + t));
}

__global__ void glu_k(int act, const float *__restrict__ g, const float *__restrict__ u, size_t n, float *out) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    if (act == 0) out[i] = silu(g[i]) * u[i];
    else if (act == 1) out[i] = gelu_f16(g[i]) * u[i];
    else out[i] = gelu_f16(g[i]);
}

extern "C" void mfc_glu(cudaStream_t s, int act, const float *gate, const float *up, size_t n, float *out) {
    if (n) glu_k<<<blocks_for(n, 256), 256, 0, s>>>(act, gate, up, n, out);
}

/* ---- row movement ---- */

__global__ void copy_cols_k(const float *src, int sw, int col0, int n, int rows, float *dst) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)n * rows) return;
    const size_t r = i / n, c = i % n;
    dst[i] = src[r * sw + col0 + c];
}

extern "C" void mfc_copy_cols(cudaStream_t s, const float *src, int src_width, int col0, int n, int rows, float *dst) {
    const size_t t = (size_t)n * rows;
    if (t) copy_cols_k<<<blocks_for(t, 256), 256, 0, s>>>(src, src_width, col0, n, rows, dst);
}

__global__ void gather_k(const float *src, const int32_t *idx, int n, float *dst) {
    const float *sr = src + (size_t)idx[blockIdx.x] * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) dst[(size_t)blockIdx.x * n + i] = sr[i];
}

extern "C" void mfc_gather_rows(cudaStream_t s, const float *src, const int32_t *idx, int count, int n, float *dst) {
    if (count) gather_k<<<count, 256, 0, s>>>(src, idx, n, dst);
}

/* ---- RoPE: block per (row, head), a thread per pair ---- */

__global__ void rope_k(float *x, int n_head, int head_dim, const int32_t *__restrict__ pos, mfc_rope p) {
    const int r = blockIdx.x, h = blockIdx.y;
    const int half = p.n_rot / 2;
    for (int ip = threadIdx.x; ip < half; ip += blockDim.x) {
        const int i = 2 * ip;
        /* theta = pos * theta_scale^ip by repeated multiplication, as the CPU */
        float theta = (float)pos[r];
        for (int q = 0; q < ip; q++) theta *= p.theta_scale;
        const float th_ext = p.freq_factors ? theta / p.freq_factors[ip] : theta;
        const float th_int = p.freq_scale * th_ext;
        float th = th_int, ms = p.attn_factor;
        if (p.ext_factor != 0.0f) {
            const float y = ((float)ip - p.corr0) / fmaxf(0.001f, p.corr1 - p.corr0);
            const float ramp = (1 - fminf(1, fmaxf(0, y))) * p.ext_factor;
            th = th_int * (1 - ramp) + th_ext * ramp;
            ms *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
        }
        const float c = cosf(th) * ms, sn = sinf(th) * ms;
        float *v = x + ((size_t)r * n_head + h) * head_dim;
        const int a = p.neox ? ip : i, bb = p.neox ? ip + half : i + 1;
        const float x0 = v[a], x1 = v[bb];
        v[a] = x0 * c - x1 * sn;
        v[bb] = x0 * sn + x1 * c;
    }
}

extern "C" void mfc_rope_apply(cudaStream_t s, float *x, int rows, int n_head, int head_dim, const int32_t *pos,
                               const mfc_rope *p) {
    const int half = p->n_rot / 2, t = half >= 128 ? 128 : half >= 64 ? 64 : 32;
    if (rows) rope_k<<<dim3(rows, n_head), t, 0, s>>>(x, n_head, head_dim, pos, *p);
}

/* ---- the bandwidth probe: 16-byte loads and stores ---- */

__global__ void copy_k(uint4 *dst, const uint4 *src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

extern "C" void mfc_copy_bytes(cudaStream_t s, void *dst, const void *src, size_t n) {
    copy_k<<<132 * 16, 256, 0, s>>>((uint4 *)dst, (const uint4 *)src, n / 16);
}
