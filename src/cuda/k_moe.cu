/* k_moe.cu - mixture-of-experts ops: routing, the expert-indexed product,
 * and the per-slot weighting and sum.
 *
 * Routing is the CPU's own row function (engine/moe_route.h), one thread
 * per row (the device's expf may differ from the C library's by an ulp, so
 * a near-tie between two experts can still route differently). The routing
 * stays on the device: the product reads each slot's expert id there and
 * finds that expert's rows in the stacked tensor (experts are contiguous,
 * slice bytes apart), one warp per output row of a slot, in f32 over f32
 * activations like the other products. */
#include "cuda/dequant.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "engine/moe_route.h"

#include <math.h>

#define MOE_MAX_X 1024

/* one block of one thread per row: the X probabilities in shared memory
 * (a per-thread array of MOE_MAX_X would live in local memory, which the
 * device backs for every thread it can hold: about 1 GiB on an H200) */
__global__ void moe_route_k(const float *__restrict__ logits, int X, int K, bool sig, bool norm, float scale,
                            int32_t *sel, float *w) {
    pdl_enter();
    extern __shared__ float pr[];
    const int t = blockIdx.x;
    mf_route_row(logits + (size_t)t * X, X, K, sig, norm, scale, pr, sel + (size_t)t * K, w + (size_t)t * K);
}

extern "C" bool mfc_moe_route(cudaStream_t s, const float *logits, int n, int X, int K, bool sig, bool norm,
                              float scale, int32_t *sel, float *w) {
    if (X > MOE_MAX_X || K > X || n <= 0) return false;
    launch_k(moe_route_k, n, 1, (size_t)X * sizeof(float), s, logits, X, K, sig, norm, scale, sel, w);
    return true;
}

#define ID_WARPS 4

/* block (slot, output rows / ID_WARPS): warp j of the block takes output row
 * j of slot blockIdx.x's expert (slots on x: up to 2^31 of them) */
template <int T>
__global__ void __launch_bounds__(ID_WARPS * 32) matmul_id_k(const uint8_t *__restrict__ w, size_t slice,
                                                             size_t row_bytes, int k, int n, const float *__restrict__ x,
                                                             bool per_slot, int K, const int32_t *__restrict__ sel,
                                                             float *out) {
    pdl_enter();
    const int lane = threadIdx.x & 31;
    const int j = blockIdx.y * ID_WARPS + (threadIdx.x >> 5);
    const int slot = blockIdx.x;
    if (j >= n) return;
    const uint8_t *wr = w + (size_t)sel[slot] * slice + (size_t)j * row_bytes;
    const float *xr = x + (size_t)(per_slot ? slot : slot / K) * k;
    float acc = 0.0f;
    if (!(k & 7)) {
        for (int e0 = lane * 8; e0 < k; e0 += 256) {
            float v[8];
            dq8<T>(wr, e0, v);
#pragma unroll
            for (int i = 0; i < 8; i++) acc += v[i] * xr[e0 + i];
        }
    } else {
        for (int e = lane; e < k; e += 32) acc += dq1<T>(wr, e) * xr[e];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) out[(size_t)slot * n + j] = acc;
}

template <int T>
static void launch_id(cudaStream_t s, const void *w, size_t slice, size_t rb, int k, int n, const float *x, bool ps,
                      int slots, int K, const int32_t *sel, float *out) {
    launch_k(matmul_id_k<T>, dim3(slots, (n + ID_WARPS - 1) / ID_WARPS), ID_WARPS * 32, 0, s, (const uint8_t *)w, slice,
             rb, k, n, x, ps, K, sel, out);
}

extern "C" bool mfc_matmul_id(cudaStream_t s, int type, const void *w, size_t slice, size_t row_bytes, int k, int n,
                              const float *x, bool per_slot, int rows, int K, const int32_t *sel, float *out) {
    const int slots = rows * K;
    if (slots <= 0 || (n + ID_WARPS - 1) / ID_WARPS > 65535) return false;
    switch (type) {
    case T_F32: launch_id<T_F32>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_F16: launch_id<T_F16>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_BF16: launch_id<T_BF16>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q4_0: launch_id<T_Q4_0>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q4_1: launch_id<T_Q4_1>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q5_0: launch_id<T_Q5_0>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q5_1: launch_id<T_Q5_1>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q8_0: launch_id<T_Q8_0>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q8_0R: launch_id<T_Q8_0R>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q4_K: launch_id<T_Q4_K>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q5_K: launch_id<T_Q5_K>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q6_K: launch_id<T_Q6_K>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q6_KP: launch_id<T_Q6_KP>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q2_K: launch_id<T_Q2_K>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_Q3_K: launch_id<T_Q3_K>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_IQ4_NL: launch_id<T_IQ4_NL>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    case T_IQ4_XS: launch_id<T_IQ4_XS>(s, w, slice, row_bytes, k, n, x, per_slot, slots, K, sel, out); break;
    default: return false;
    }
    return true;
}

/* x[r][:] *= s[r] (or sigmoid(s[r])): one block per row */
__global__ void scale_rows_k(float *x, const float *__restrict__ sc, bool sig, int n) {
    pdl_enter();
    const int r = blockIdx.x;
    const float c = sig ? 1.0f / (1.0f + expf(-sc[r])) : sc[r];
    for (int j = threadIdx.x; j < n; j += blockDim.x) x[(size_t)r * n + j] = x[(size_t)r * n + j] * c;
}

extern "C" void mfc_scale_rows(cudaStream_t s, float *x, const float *sc, bool sig, int rows, int n) {
    if (rows > 0) launch_k(scale_rows_k, rows, 256, 0, s, x, sc, sig, n);
}

/* out[t] = sum over the k slots of src[t][k], in slot order */
__global__ void sum_slots_k(const float *__restrict__ src, int K, int n, float *out) {
    pdl_enter();
    const int t = blockIdx.x;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float a = src[((size_t)t * K) * n + j];
        for (int k = 1; k < K; k++) a += src[((size_t)t * K + k) * n + j];
        out[(size_t)t * n + j] = a;
    }
}

extern "C" void mfc_sum_slots(cudaStream_t s, const float *src, int rows, int K, int n, float *out) {
    if (rows > 0) launch_k(sum_slots_k, rows, 256, 0, s, src, K, n, out);
}
