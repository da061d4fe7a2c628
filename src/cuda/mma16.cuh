/* mma16.cuh - f16 tensor-core pieces shared by the attention kernels
 * (k_fattn.cu for prompts, k_attn_mma.cu for decode): mma.sync m16n8k16
 * with f32 sums, transposed ldmatrix, f16 pairs as one register.
 *
 * Fragments (g = lane / 4, t = lane % 4): A (16 x 16, row-major) a0 = rows
 * g, columns 2t, 2t + 1; a1 = row g + 8; a2 = row g, columns 2t + 8, +9;
 * a3 = row g + 8, those columns. B (16 x 8) b0 = rows 2t, 2t + 1 of column
 * g; b1 = rows 2t + 8, +9. C (16 x 8) c0, c1 = row g, columns 2t, 2t + 1;
 * c2, c3 = row g + 8. */
#ifndef MF_CUDA_MMA16_CUH
#define MF_CUDA_MMA16_CUH

#include <cuda_fp16.h>
#include <stdint.h>
#include <string.h>

__device__ __forceinline__ uint32_t h2_bits(float a, float b) {
    const __half2 h = __floats2half2_rn(a, b);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
}

/* a and b as f16 (hi) and the f16 roundings of what that left (lo): hi +
 * lo carries about 22 bits of each (an absolute error near 2^-25 where
 * the rest falls below f16's normal range) */
__device__ __forceinline__ void h2_split(float a, float b, uint32_t &hi, uint32_t &lo) {
    const __half2 h = __floats2half2_rn(a, b);
    const float2 f = __half22float2(h);
    memcpy(&hi, &h, 4);
    lo = h2_bits(a - f.x, b - f.y);
}

__device__ __forceinline__ void mma_f16(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* A tile's online-softmax step after its maxima (both flash-attention
 * kernels): each score of the C fragments sc (row j >> 1 of element j)
 * becomes exp(score - base[row]), each row's l becomes l * cf + the tile's
 * sum (the row's four lanes added by xor shuffles), and, with rescale, the
 * output's C fragments o are scaled by cf. */
template <int NT, int NO>
__device__ __forceinline__ void softmax_tile(float (&sc)[NT][4], const float *base, const float *cf, float *l,
                                             float (&o)[NO][4], bool rescale) {
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < NT; n++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const float e = expf(sc[n][j] - base[j >> 1]);
            sc[n][j] = e;
            rs[j >> 1] += e;
        }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        rs[i] += __shfl_xor_sync(0xffffffffu, rs[i], 1);
        rs[i] += __shfl_xor_sync(0xffffffffu, rs[i], 2);
        l[i] = l[i] * cf[i] + rs[i];
    }
    if (rescale)
#pragma unroll
        for (int n = 0; n < NO; n++) o[n][0] *= cf[0], o[n][1] *= cf[0], o[n][2] *= cf[1], o[n][3] *= cf[1];
}

/* four 8x8 f16 matrices, transposed: the B fragments of two n-tiles */
__device__ __forceinline__ void ldsm_x4_t(const __half *p, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}

#endif
