/* k_matmul.cu - products with weights in the file's encoding.
 *
 * Decode (up to 8 rows): one warp per weight row; each lane decodes 8
 * consecutive weights at a time (dq8), so a warp walks a row 256 elements at
 * a time and its 32 lanes read one K-quant super-block (or 8 legacy blocks)
 * together; the decoded weights serve every activation row before the next
 * load. Prefill (more rows): a 64 x 64 output tile per block over 32-element
 * slices, weights decoded into shared memory once per tile, f32 FMA.
 *
 * Both accumulate in f32 over f32 activations, so they differ from the CPU's
 * integer dots over q8 activations by the activations' rounding (about 2^-8
 * relative per product, averaging out over a row): tests compare with a
 * tolerance, never bitwise. The order of a row's sum depends only on k, never
 * on the number of rows, except across the decode / prefill switch. */
#include "cuda/dequant.cuh"
#include "cuda/kernels.h"

#define MV_WARPS 4

static_assert(T_Q8_0R == MFC_T_Q8_0R && T_Q6_KP == MFC_T_Q6_KP, "one id for each device layout in C and CUDA");

template <int T, int R, bool V>
__global__ void __launch_bounds__(MV_WARPS * 32) matvec_k(const uint8_t *__restrict__ w, size_t row_bytes, int k, int n,
                                                          const float *__restrict__ x, int rows, float *out,
                                                          const float *__restrict__ b, float *res) {
    const int lane = threadIdx.x & 31;
    const int j = blockIdx.x * MV_WARPS + (threadIdx.x >> 5);
    if (j >= n) return;
    const uint8_t *wr = w + (size_t)j * row_bytes;
    float acc[R];
#pragma unroll
    for (int r = 0; r < R; r++) acc[r] = 0.0f;
    if constexpr (V) {
        for (int e0 = lane * 8; e0 < k; e0 += 256) {
            float v[8];
            dq8<T>(wr, e0, v);
#pragma unroll
            for (int r = 0; r < R; r++) {
                if (r < rows) {
                    const float4 *xp = (const float4 *)(x + (size_t)r * k + e0);
                    const float4 a = xp[0], c = xp[1];
                    acc[r] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * c.x + v[5] * c.y +
                              v[6] * c.z + v[7] * c.w;
                }
            }
        }
    } else {
        /* rows of float types of any length, or unaligned activations */
        for (int e = lane; e < k; e += 32) {
            const float w1 = dq1<T>(wr, e);
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < rows) acc[r] += w1 * x[(size_t)r * k + e];
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

#define BM 64
#define BN 64
#define BK 32

template <int T>
__global__ void __launch_bounds__(256) gemm_k(const uint8_t *__restrict__ w, size_t row_bytes, int k, int n,
                                              const float *__restrict__ x, int rows, float *out,
                                              const float *__restrict__ b, float *res) {
    __shared__ __align__(16) float xs[BK][BM + 4];
    __shared__ __align__(16) float ws[BK][BN + 4];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int lr = tid / 4, le = (tid % 4) * 8; /* the row and slice this thread loads */
    float acc[4][4] = {};
    for (int k0 = 0; k0 < k; k0 += BK) {
        float v[8] = {};
        if (n0 + lr < n && k0 + le + 8 <= k && !(k & 7)) dq8<T>(w + (size_t)(n0 + lr) * row_bytes, k0 + le, v);
        else if (n0 + lr < n)
            for (int i = 0; i < 8 && k0 + le + i < k; i++) v[i] = dq1<T>(w + (size_t)(n0 + lr) * row_bytes, k0 + le + i);
#pragma unroll
        for (int i = 0; i < 8; i++) ws[le + i][lr] = v[i];
        float a[8] = {};
        if (m0 + lr < rows && k0 + le + 8 <= k && !((k | ((uintptr_t)x >> 2)) & 3)) {
            const float4 *xp = (const float4 *)(x + (size_t)(m0 + lr) * k + k0 + le);
            const float4 p = xp[0], q = xp[1];
            a[0] = p.x, a[1] = p.y, a[2] = p.z, a[3] = p.w, a[4] = q.x, a[5] = q.y, a[6] = q.z, a[7] = q.w;
        } else if (m0 + lr < rows) {
            for (int i = 0; i < 8 && k0 + le + i < k; i++) a[i] = x[(size_t)(m0 + lr) * k + k0 + le + i];
        }
#pragma unroll
        for (int i = 0; i < 8; i++) xs[le + i][lr] = a[i];
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < BK; kk++) {
            const float4 xa = *(const float4 *)&xs[kk][ty * 4];
            const float4 wb = *(const float4 *)&ws[kk][tx * 4];
            const float xv[4] = {xa.x, xa.y, xa.z, xa.w}, wv[4] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int jj = 0; jj < 4; jj++) acc[i][jj] += xv[i] * wv[jj];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int r = m0 + ty * 4 + i;
        if (r >= rows) continue;
#pragma unroll
        for (int jj = 0; jj < 4; jj++) {
            const int c = n0 + tx * 4 + jj;
            if (c >= n) continue;
            const float y = acc[i][jj] + (b ? b[c] : 0.0f);
            out[(size_t)r * n + c] = y;
            if (res) res[(size_t)r * n + c] += y;
        }
    }
}

template <int T>
static void launch_mm(cudaStream_t s, const void *w, size_t rb, int k, int n, const float *x, int rows, float *out,
                      const float *b, float *res) {
    const uint8_t *wp = (const uint8_t *)w;
    if (rows <= 8) {
        const dim3 g((n + MV_WARPS - 1) / MV_WARPS), t(MV_WARPS * 32);
        const bool vec = k % 8 == 0 && ((uintptr_t)x & 15) == 0;
        if constexpr (T == T_F32 || T == T_F16 || T == T_BF16) {
            if (!vec) {
                if (rows == 1) matvec_k<T, 1, false><<<g, t, 0, s>>>(wp, rb, k, n, x, rows, out, b, res);
                else matvec_k<T, 8, false><<<g, t, 0, s>>>(wp, rb, k, n, x, rows, out, b, res);
                return;
            }
        }
        if (rows == 1) matvec_k<T, 1, true><<<g, t, 0, s>>>(wp, rb, k, n, x, rows, out, b, res);
        else if (rows == 2) matvec_k<T, 2, true><<<g, t, 0, s>>>(wp, rb, k, n, x, rows, out, b, res);
        else if (rows <= 4) matvec_k<T, 4, true><<<g, t, 0, s>>>(wp, rb, k, n, x, rows, out, b, res);
        else matvec_k<T, 8, true><<<g, t, 0, s>>>(wp, rb, k, n, x, rows, out, b, res);
        return;
    }
    const dim3 g((n + BN - 1) / BN, (rows + BM - 1) / BM);
    gemm_k<T><<<g, 256, 0, s>>>(wp, rb, k, n, x, rows, out, b, res);
}

extern "C" bool mfc_type_ok(int t) {
    switch (t) {
    case T_F32: case T_F16: case T_BF16: case T_Q4_0: case T_Q4_1: case T_Q5_0: case T_Q5_1: case T_Q8_0:
    case T_Q2_K: case T_Q3_K: case T_Q4_K: case T_Q5_K: case T_Q6_K: case T_IQ4_NL: case T_IQ4_XS:
        return true;
    default:
        return false;
    }
}

#define MF_TYPE_SWITCH(t, F, ...)                                                                                      \
    switch (t) {                                                                                                       \
    case T_F32: F<T_F32>(__VA_ARGS__); break;                                                                          \
    case T_F16: F<T_F16>(__VA_ARGS__); break;                                                                          \
    case T_BF16: F<T_BF16>(__VA_ARGS__); break;                                                                        \
    case T_Q4_0: F<T_Q4_0>(__VA_ARGS__); break;                                                                        \
    case T_Q4_1: F<T_Q4_1>(__VA_ARGS__); break;                                                                        \
    case T_Q5_0: F<T_Q5_0>(__VA_ARGS__); break;                                                                        \
    case T_Q5_1: F<T_Q5_1>(__VA_ARGS__); break;                                                                        \
    case T_Q8_0: F<T_Q8_0>(__VA_ARGS__); break;                                                                        \
    case T_Q8_0R: F<T_Q8_0R>(__VA_ARGS__); break;                                                                      \
    case T_Q2_K: F<T_Q2_K>(__VA_ARGS__); break;                                                                        \
    case T_Q3_K: F<T_Q3_K>(__VA_ARGS__); break;                                                                        \
    case T_Q4_K: F<T_Q4_K>(__VA_ARGS__); break;                                                                        \
    case T_Q5_K: F<T_Q5_K>(__VA_ARGS__); break;                                                                        \
    case T_Q6_K: F<T_Q6_K>(__VA_ARGS__); break;                                                                        \
    case T_Q6_KP: F<T_Q6_KP>(__VA_ARGS__); break;                                                                      \
    case T_IQ4_NL: F<T_IQ4_NL>(__VA_ARGS__); break;                                                                    \
    case T_IQ4_XS: F<T_IQ4_XS>(__VA_ARGS__); break;                                                                    \
    default: return false;                                                                                             \
    }

extern "C" bool mfc_matmul(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, int n, const float *x,
                           int rows, float *out, const float *b, float *res) {
    /* quantized rows are whole blocks; float rows of any length take the
     * one-element paths, as do activations not 16-byte aligned */
    const bool flt = type == T_F32 || type == T_F16 || type == T_BF16;
    if ((!flt && (k % 32 || ((uintptr_t)x & 15))) || rows <= 0) return false;
    MF_TYPE_SWITCH(type, launch_mm, s, w, row_bytes, k, n, x, rows, out, b, res)
    return true;
}

/* ---- embedding rows ---- */

template <int T>
__global__ void get_rows_k(const uint8_t *__restrict__ w, size_t row_bytes, int k, const int32_t *__restrict__ ids,
                           float *out) {
    const int r = blockIdx.x;
    const uint8_t *wr = w + (size_t)ids[r] * row_bytes;
    for (int e0 = threadIdx.x * 8; e0 < k; e0 += blockDim.x * 8) {
        float v[8];
        if (e0 + 8 <= k && !(k & 7)) { /* aligned rows: the vector loads */
            dq8<T>(wr, e0, v);
#pragma unroll
            for (int i = 0; i < 8; i++) out[(size_t)r * k + e0 + i] = v[i];
        } else {
            for (int i = 0; e0 + i < k; i++) out[(size_t)r * k + e0 + i] = dq1<T>(wr, e0 + i);
        }
    }
}

template <int T>
static void launch_rows(cudaStream_t s, const void *w, size_t rb, int k, const int32_t *ids, int rows, float *out) {
    get_rows_k<T><<<rows, 128, 0, s>>>((const uint8_t *)w, rb, k, ids, out);
}

extern "C" bool mfc_get_rows(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, const int32_t *ids,
                             int rows, float *out) {
    if (rows <= 0) return false;
    MF_TYPE_SWITCH(type, launch_rows, s, w, row_bytes, k, ids, rows, out)
    return true;
}
