/* k_gemm_tc.cu - prefill products on the tensor cores: a 128 x 64 output
 * tile (tokens x weight rows) per block of 8 warps, 32-element slices of k.
 * Each slice's weights are decoded from the file's encoding (dq8) and its
 * activations converted, both to f16, into shared memory; each warp then runs
 * mma.sync m16n8k16 (f16 in, f32 accumulate) over its 32 x 32 share.
 *
 * f16 keeps 11 bits of each activation and weight (the CPU rounds
 * activations to 8 bits for quantized weights); activations beyond f16's
 * range are clamped to +-65504. F32 and BF16 weights stay on the f32 tiles
 * (k_matmul.cu), where nothing is rounded. Rows of shared memory are padded
 * by 16 bytes so a fragment's 32 lanes hit 32 different banks. */
#include <cuda_fp16.h>

#include "cuda/dequant.cuh"
#include "cuda/kernels.h"

#define TM 128
#define TN 64
#define TK 32
#define LDS (TK + 8) /* halves per shared row */

__device__ __forceinline__ uint32_t pack_h2(float a, float b) {
    const __half2 h = __floats2half2_rn(fminf(fmaxf(a, -65504.0f), 65504.0f), fminf(fmaxf(b, -65504.0f), 65504.0f));
    return *(const uint32_t *)&h;
}

__device__ __forceinline__ void mma16816(float *c, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template <int T>
__global__ void __launch_bounds__(256) gemm_tc_k(const uint8_t *__restrict__ w, size_t row_bytes, int k, int n,
                                                 const float *__restrict__ x, int rows, float *out,
                                                 const float *__restrict__ b, float *res) {
    __shared__ __align__(16) __half xs[TM][LDS];
    __shared__ __align__(16) __half ws[TN][LDS];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int m0 = blockIdx.y * TM, n0 = blockIdx.x * TN;
    const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32; /* this warp's share of the tile */
    const int g = lane >> 2, c4 = lane & 3;
    float acc[2][4][4] = {};
    const int wr = tid >> 2, we = (tid & 3) * 8;  /* weight row and slice this thread decodes */
    const int xr = tid >> 1, xe = (tid & 1) * 16; /* activation row and slice it converts */
    for (int k0 = 0; k0 < k; k0 += TK) {
        {
            float v[8] = {};
            if (n0 + wr < n) dq8<T>(w + (size_t)(n0 + wr) * row_bytes, k0 + we, v);
            uint4 p;
            p.x = pack_h2(v[0], v[1]), p.y = pack_h2(v[2], v[3]), p.z = pack_h2(v[4], v[5]), p.w = pack_h2(v[6], v[7]);
            *(uint4 *)&ws[wr][we] = p;
        }
        {
            float a[16] = {};
            if (m0 + xr < rows) {
                const float4 *xp = (const float4 *)(x + (size_t)(m0 + xr) * k + k0 + xe);
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float4 f = xp[i];
                    a[4 * i] = f.x, a[4 * i + 1] = f.y, a[4 * i + 2] = f.z, a[4 * i + 3] = f.w;
                }
            }
            uint4 p, q;
            p.x = pack_h2(a[0], a[1]), p.y = pack_h2(a[2], a[3]), p.z = pack_h2(a[4], a[5]), p.w = pack_h2(a[6], a[7]);
            q.x = pack_h2(a[8], a[9]), q.y = pack_h2(a[10], a[11]), q.z = pack_h2(a[12], a[13]),
            q.w = pack_h2(a[14], a[15]);
            *(uint4 *)&xs[xr][xe] = p;
            *(uint4 *)&xs[xr][xe + 8] = q;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TK; kk += 16) {
            uint32_t af[2][4], bf[4][2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                const int r = wm + 16 * i + g;
                af[i][0] = *(const uint32_t *)&xs[r][kk + 2 * c4];
                af[i][1] = *(const uint32_t *)&xs[r + 8][kk + 2 * c4];
                af[i][2] = *(const uint32_t *)&xs[r][kk + 8 + 2 * c4];
                af[i][3] = *(const uint32_t *)&xs[r + 8][kk + 8 + 2 * c4];
            }
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int cn = wn + 8 * j + g;
                bf[j][0] = *(const uint32_t *)&ws[cn][kk + 2 * c4];
                bf[j][1] = *(const uint32_t *)&ws[cn][kk + 8 + 2 * c4];
            }
#pragma unroll
            for (int i = 0; i < 2; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) mma16816(acc[i][j], af[i], bf[j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int h = 0; h < 4; h++) {
                const int r = m0 + wm + 16 * i + g + (h >> 1) * 8, cc = n0 + wn + 8 * j + 2 * c4 + (h & 1);
                if (r >= rows || cc >= n) continue;
                const float y = acc[i][j][h] + (b ? b[cc] : 0.0f);
                out[(size_t)r * n + cc] = y;
                if (res) res[(size_t)r * n + cc] += y;
            }
}

extern "C" bool mfc_gemm_tc_takes(int type, int k, int rows) {
    return rows > 8 && k % 32 == 0 && type != T_F32 && type != T_BF16;
}

extern "C" bool mfc_gemm_tc(cudaStream_t s, int type, const void *w, size_t row_bytes, int k, int n, const float *x,
                            int rows, float *out, const float *b, float *res) {
    if (((uintptr_t)x & 15) || !mfc_gemm_tc_takes(type, k, rows)) return false;
    const dim3 grid((n + TN - 1) / TN, (rows + TM - 1) / TM);
    const uint8_t *wp = (const uint8_t *)w;
    switch (type) {
    case T_F16: gemm_tc_k<T_F16><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q4_0: gemm_tc_k<T_Q4_0><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q4_1: gemm_tc_k<T_Q4_1><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q5_0: gemm_tc_k<T_Q5_0><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q5_1: gemm_tc_k<T_Q5_1><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q8_0: gemm_tc_k<T_Q8_0><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q8_0R: gemm_tc_k<T_Q8_0R><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q4_K: gemm_tc_k<T_Q4_K><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q5_K: gemm_tc_k<T_Q5_K><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q6_K: gemm_tc_k<T_Q6_K><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q6_KP: gemm_tc_k<T_Q6_KP><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q2_K: gemm_tc_k<T_Q2_K><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_Q3_K: gemm_tc_k<T_Q3_K><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_IQ4_NL: gemm_tc_k<T_IQ4_NL><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    case T_IQ4_XS: gemm_tc_k<T_IQ4_XS><<<grid, 256, 0, s>>>(wp, row_bytes, k, n, x, rows, out, b, res); break;
    default: return false;
    }
    return true;
}
