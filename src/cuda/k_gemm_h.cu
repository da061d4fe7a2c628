/* k_gemm_h.cu - a prompt's products on the f16 tensor cores: weights decoded
 * from the file's encoding to f16 in shared memory, activations in f16,
 * f32 sums along the whole row.
 *
 * Why not int8: the int8 kernels (k_mmq.cu, k_mmq_tile.cu) must scale
 * every 32-wide block's integer sum by the weight's and the activation's
 * block factors, about ten instructions per lane after each m16n8k32 mma,
 * which leaves the tensor cores mostly idle (gate+up of a 4B model at 512
 * rows: 121 TOP/s on an H100). Here the block factors go into the f16 weights while
 * they are decoded (once per 128 activation rows), and the mma accumulates
 * in f32 across the whole row with nothing between two mmas.
 *
 * Activations: mfc_x_to_h writes each row in f16 scaled by a power of two
 * (the row's largest magnitude lands in [2^14, 2^15)), so no row overflows
 * f16 and the scaling itself is exact; outputs are multiplied back by the
 * same power. An output depends on its row, the weights and k only: the
 * same bits in any step that takes this kernel.
 *
 * Tiles: a block of 8 warps takes 128 activation rows x 128 weight rows,
 * k in stages of 64 held twice in shared memory (one multiplied while the
 * next is loaded: activations by cp.async, weights through registers and
 * decoded after the multiply); warp (wm, wn) owns 64 x 32 outputs, 16 mmas
 * m16n8k16 per 16 of k, fragments by ldmatrix from rows padded to 144
 * bytes (8 lanes' 16-byte reads fall in distinct banks). Products with few
 * weight tiles split k between blocks (mfc_gemm_h_parts) and add the parts
 * in order in hb_reduce_k.
 *
 * Decoding to f16: Q4_K, Q6_K and Q8_0 in pairs of levels (a level's bits
 * or'ed into the mantissa of 1024.0, 1024 and the level's offset
 * subtracted exactly, then one f16 fma or multiply with the block's scale
 * and min, each rounded once from f32); other types through dq8
 * (dequant.cuh) in f32, rounded to f16 and clamped to its range. */
#include <cuda_fp16.h>

#include "cuda/dequant.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/mmq.cuh"

#define HB_M 128
#define HB_N 128
#define HB_K 64
#define HB_LD (HB_K + 8) /* halves per shared row: 144 bytes */

struct hb_smem {
    __half a[2][HB_M][HB_LD];
    __half b[2][HB_N][HB_LD];
};

/* ---- activations to f16, a power-of-two factor per row ---- */
__global__ void x_to_h_k(const float *__restrict__ x, int k, __half *xh, float *xs) {
    pdl_enter();
    __shared__ float red[32];
    const float *xr = x + (size_t)blockIdx.x * k;
    float m = 0.0f;
    for (int i = threadIdx.x; i < k; i += blockDim.x) m = fmaxf(m, fabsf(xr[i]));
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x < 32) {
        m = threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.0f;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (threadIdx.x == 0) red[0] = m;
    }
    __syncthreads();
    m = red[0];
    /* e: the exponent that brings the largest magnitude into [2^14, 2^15);
     * zero and non-finite rows keep their values (a NaN stays a NaN) */
    int e = 0;
    if (m > 0.0f && isfinite(m)) {
        e = 14 - ilogbf(m); /* -113 .. 163 */
        if (e > 126) e = 126; /* 2^e and 2^-e stay normal floats; such rows stay below 2^14 */
    }
    if (threadIdx.x == 0) xs[blockIdx.x] = ldexpf(1.0f, -e);
    const float f = ldexpf(1.0f, e); /* a power of two: x * f is exact */
    const float2 *x2 = (const float2 *)xr;
    __half2 *hr = (__half2 *)(xh + (size_t)blockIdx.x * k);
    for (int i = threadIdx.x; i < k / 2; i += blockDim.x) {
        const float2 v = x2[i];
        hr[i] = __floats2half2_rn(v.x * f, v.y * f);
    }
}

/* ---- ldmatrix, mma (cp.async in mmq.cuh) ---- */
__device__ __forceinline__ void ldm4(uint32_t *r, const void *sm) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(sm);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}

__device__ __forceinline__ void mma_h(float *c, const uint32_t *a, uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t h2u(__half2 h) { return *(const uint32_t *)&h; }
__device__ __forceinline__ __half2 u2h(uint32_t u) { return *(const __half2 *)&u; }

/* 16 bytes at p, 2-byte aligned, never reading past p + 16 (the end of a
 * Q8_0 block may be the end of the tensor): four aligned words, or five
 * loads and funnel shifts */
__device__ __forceinline__ uint4 ld128_2e(const uint8_t *p) {
    if (((uintptr_t)p & 3) == 0) {
        const uint32_t *w = (const uint32_t *)p;
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
    const uint32_t *w = (const uint32_t *)(p - 2);
    const uint32_t a = w[0], b = w[1], c = w[2], d = w[3], e = *(const uint16_t *)(p + 14);
    return make_uint4(__funnelshift_r(a, b, 16), __funnelshift_r(b, c, 16), __funnelshift_r(c, d, 16),
                      __funnelshift_r(d, e, 16));
}

/* ---- one thread's weights of a stage: row n of the tile, half h of
 * each 32-wide block of the stage (16 columns of each) ---- */
template <int T> struct hb_raw {
    uint4 q;  /* Q4_K: 16 level bytes; Q6_K: low bits of the first 32; Q8_0: 16 levels of the first block */
    uint4 q2; /* Q6_K: low bits of the second 32; Q8_0: of the second block */
    uint4 qh; /* Q6_K: high bits */
    uint4 hd; /* Q4_K: d, dmin and the scale bytes */
    float s0, s1; /* Q6_K: d times the two scales; Q8_0: the two blocks' d */
};

template <int T>
__device__ __forceinline__ void hb_load(hb_raw<T> &r, const uint8_t *__restrict__ row, bool ok, int k0, int h) {
    if (!ok) return;
    const int sb = k0 >> 8, j = (k0 >> 6) & 3;
    if constexpr (T == T_Q4_K) {
        const uint8_t *b = row + (size_t)sb * 144;
        r.hd = *(const uint4 *)b;
        r.q = *(const uint4 *)(b + 16 + 32 * j + 16 * h);
    } else if constexpr (T == T_Q6_K || T == T_Q6_KP) {
        const q6_at b = q6_parts<T>(row + (size_t)sb * 210, sb);
        const int hh = j >> 1, p = j & 1;
        r.q = ld128_2e(b.ql + 64 * hh + 16 * h);
        r.q2 = ld128_2e(b.ql + 64 * hh + 32 + 16 * h);
        r.qh = ld128_2e(b.qh + 32 * hh + 16 * h);
        const float d = ld_h(b.d);
        r.s0 = d * (float)(int8_t)b.sc[8 * hh + h + 4 * p];
        r.s1 = d * (float)(int8_t)b.sc[8 * hh + h + 2 + 4 * p];
    } else if constexpr (T == T_Q8_0) {
        const uint8_t *b = row + (size_t)(k0 >> 5) * 34;
        r.q = ld128_2e(b + 2 + 16 * h);
        r.q2 = ld128_2e(b + 36 + 16 * h);
        r.s0 = ld_h(b);
        r.s1 = ld_h(b + 34);
    } else if constexpr (T == T_Q8_0R) { /* blocks 2j', 2j' + 1 of one run of 8 (k0 a multiple of 64) */
        const int bi = (k0 >> 5) & 7;
        const uint8_t *run = row + (size_t)(k0 >> 8) * 272;
        r.q = *(const uint4 *)(run + 16 + 32 * bi + 16 * h);
        r.q2 = *(const uint4 *)(run + 48 + 32 * bi + 16 * h);
        const __half2 sc = *(const __half2 *)(run + 2 * bi);
        r.s0 = __low2float(sc);
        r.s1 = __high2float(sc);
    }
}

/* bytes 0, 1 (sel 0x4140) or 2, 3 (0x4342) of w as the low bytes of two halves */
__device__ __forceinline__ uint32_t spread(uint32_t w, uint32_t sel) { return __byte_perm(w, 0u, sel); }

/* levels (bytes of w under mask, each below 1024) -> (level * s + c) pairs */
__device__ __forceinline__ void lev4(uint32_t w, uint32_t mask, __half2 s, __half2 c, uint32_t &o0, uint32_t &o1) {
    const __half2 k1024 = u2h(0x64006400u);
    const __half2 a = __hsub2(u2h((spread(w, 0x4140) & mask) | 0x64006400u), k1024);
    const __half2 b = __hsub2(u2h((spread(w, 0x4342) & mask) | 0x64006400u), k1024);
    o0 = h2u(__hfma2(a, s, c));
    o1 = h2u(__hfma2(b, s, c));
}

/* the stage's 32 decoded weights of this thread into shared row br:
 * columns 16h..16h+15 and 32+16h..32+16h+15 */
template <int T>
__device__ __forceinline__ void hb_store(const hb_raw<T> &r, __half *br, bool ok, const uint8_t *__restrict__ row,
                                         int k0, int h) {
    uint32_t lo[8], hi[8];
    if (!ok) {
#pragma unroll
        for (int i = 0; i < 8; i++) lo[i] = hi[i] = 0u;
    } else if constexpr (T == T_Q4_K) {
        const int j = (k0 >> 6) & 3;
        float d0, m0, d1, m1;
        k4_sm(r.hd, 2 * j, d0, m0);
        k4_sm(r.hd, 2 * j + 1, d1, m1);
        const __half2 s0 = __float2half2_rn(d0), c0 = __float2half2_rn(-m0);
        const __half2 s1 = __float2half2_rn(d1), c1 = __float2half2_rn(-m1);
        const uint32_t q[4] = {r.q.x, r.q.y, r.q.z, r.q.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            lev4(q[i], 0x000F000Fu, s0, c0, lo[2 * i], lo[2 * i + 1]);
            lev4(q[i] >> 4, 0x000F000Fu, s1, c1, hi[2 * i], hi[2 * i + 1]);
        }
    } else if constexpr (T == T_Q6_K || T == T_Q6_KP) {
        const int p = (k0 >> 6) & 1;
        const __half2 s0 = __float2half2_rn(r.s0), s1 = __float2half2_rn(r.s1);
        const uint32_t qa[4] = {r.q.x, r.q.y, r.q.z, r.q.w}, qb[4] = {r.q2.x, r.q2.y, r.q2.z, r.q2.w},
                       qh[4] = {r.qh.x, r.qh.y, r.qh.z, r.qh.w};
        const __half2 k1056 = u2h(0x64206420u); /* 1056 = 1024 + 32 */
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t h4 = qh[i] >> (4 * p);
            const uint32_t la = ((qa[i] >> (4 * p)) & 0x0F0F0F0Fu) | ((h4 << 4) & 0x30303030u);
            const uint32_t lb = ((qb[i] >> (4 * p)) & 0x0F0F0F0Fu) | ((h4 << 2) & 0x30303030u);
            /* levels - 32 exactly, then one rounding of (level - 32) * d * scale */
            lo[2 * i] = h2u(__hmul2(__hsub2(u2h(spread(la, 0x4140) | 0x64006400u), k1056), s0));
            lo[2 * i + 1] = h2u(__hmul2(__hsub2(u2h(spread(la, 0x4342) | 0x64006400u), k1056), s0));
            hi[2 * i] = h2u(__hmul2(__hsub2(u2h(spread(lb, 0x4140) | 0x64006400u), k1056), s1));
            hi[2 * i + 1] = h2u(__hmul2(__hsub2(u2h(spread(lb, 0x4342) | 0x64006400u), k1056), s1));
        }
    } else if constexpr (T == T_Q8_0 || T == T_Q8_0R) {
        /* levels + 128 as unsigned bytes, 1152 = 1024 + 128 subtracted
         * exactly, then one rounding of level * d (d is f16 in the file) */
        const __half2 s0 = __float2half2_rn(r.s0), s1 = __float2half2_rn(r.s1), k1152 = u2h(0x64806480u);
        const uint32_t qa[4] = {r.q.x, r.q.y, r.q.z, r.q.w}, qb[4] = {r.q2.x, r.q2.y, r.q2.z, r.q2.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t a = qa[i] ^ 0x80808080u, b = qb[i] ^ 0x80808080u;
            lo[2 * i] = h2u(__hmul2(__hsub2(u2h(spread(a, 0x4140) | 0x64006400u), k1152), s0));
            lo[2 * i + 1] = h2u(__hmul2(__hsub2(u2h(spread(a, 0x4342) | 0x64006400u), k1152), s0));
            hi[2 * i] = h2u(__hmul2(__hsub2(u2h(spread(b, 0x4140) | 0x64006400u), k1152), s1));
            hi[2 * i + 1] = h2u(__hmul2(__hsub2(u2h(spread(b, 0x4342) | 0x64006400u), k1152), s1));
        }
    } else {
        /* other types: 8 elements at a time in f32 */
#pragma unroll
        for (int part = 0; part < 2; part++)
#pragma unroll
            for (int e8 = 0; e8 < 2; e8++) {
                float v[8];
                dq8<T>(row, k0 + 32 * part + 16 * h + 8 * e8, v);
                uint32_t *o = part ? hi : lo;
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    const float a = fminf(fmaxf(v[2 * i], -65504.0f), 65504.0f);
                    const float b = fminf(fmaxf(v[2 * i + 1], -65504.0f), 65504.0f);
                    o[4 * e8 + i] = h2u(__floats2half2_rn(a, b));
                }
            }
    }
    *(uint4 *)(br + 16 * h) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    *(uint4 *)(br + 16 * h + 8) = make_uint4(lo[4], lo[5], lo[6], lo[7]);
    *(uint4 *)(br + 32 + 16 * h) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    *(uint4 *)(br + 32 + 16 * h + 8) = make_uint4(hi[4], hi[5], hi[6], hi[7]);
}

/* the activations of a stage: 128 rows x 64 halves, 4 chunks of 16 bytes a thread */
__device__ __forceinline__ void hb_fill_a(__half (*as)[HB_LD], const __half *__restrict__ xh, int k, int r0, int nr,
                                          int k0) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int c = threadIdx.x + 256 * i, r = c >> 3, c8 = (c & 7) * 8;
        const bool ok = r < nr;
        cp16(&as[r][c8], xh + (size_t)(r0 + (ok ? r : 0)) * k + k0 + c8, ok);
    }
}

/* one stage: warp (wm, wn) multiplies its 64 rows x 32 columns */
__device__ __forceinline__ void hb_mul(const hb_smem &sm, int buf, int wm, int wn, int lane, float (&acc)[4][4][4]) {
#pragma unroll
    for (int kk = 0; kk < HB_K; kk += 16) {
        uint32_t a[4][4], b[4][2];
#pragma unroll
        for (int i = 0; i < 4; i++) ldm4(a[i], &sm.a[buf][64 * wm + 16 * i + (lane & 15)][kk + 8 * (lane >> 4)]);
#pragma unroll
        for (int jj = 0; jj < 2; jj++) {
            uint32_t r[4];
            ldm4(r, &sm.b[buf][32 * wn + 16 * jj + (lane & 7) + 8 * (lane >> 4)][kk + 8 * ((lane >> 3) & 1)]);
            b[2 * jj][0] = r[0], b[2 * jj][1] = r[1], b[2 * jj + 1][0] = r[2], b[2 * jj + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) mma_h(acc[i][j], a[i], b[j][0], b[j][1]);
    }
}

template <int T>
__device__ __forceinline__ void hb_run(hb_smem &sm, const mfc_mm_seg &sg, int k, const __half *xh, int r0, int nr,
                                       int n0, int st0, int st1, float (&acc)[4][4][4]) {
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 1, wn = warp >> 1;
    const int bn = tid >> 1, h = tid & 1; /* this thread's weight row in the tile and half of each block */
    const bool ok = n0 + bn < sg.n;
    const uint8_t *row = (const uint8_t *)sg.w + (size_t)(ok ? n0 + bn : 0) * sg.row_bytes;
    hb_raw<T> raw;
    hb_load<T>(raw, row, ok, st0 * HB_K, h); /* weights before the wait: no step writes them */
    pdl_enter();
    hb_fill_a(sm.a[0], xh, k, r0, nr, st0 * HB_K);
    cp_commit();
    hb_store<T>(raw, sm.b[0][bn], ok, row, st0 * HB_K, h);
    cp_wait_all();
    __syncthreads();
    for (int s = st0; s < st1; s++) {
        const int cur = (s - st0) & 1, k1 = (s + 1) * HB_K;
        if (s + 1 < st1) {
            hb_fill_a(sm.a[cur ^ 1], xh, k, r0, nr, k1);
            cp_commit();
            hb_load<T>(raw, row, ok, k1, h);
        }
        hb_mul(sm, cur, wm, wn, lane, acc);
        if (s + 1 < st1) hb_store<T>(raw, sm.b[cur ^ 1][bn], ok, row, k1, h);
        cp_wait_all();
        __syncthreads();
    }
}

/* A launch's products. Segment i takes blocks [blk0[i], blk0[i + 1]):
 * split[i] parts of k (each a run of whole stages), nt[i] tiles of 128
 * weight rows per part. A product split in parts writes each part's sums
 * to part + off[i] ([part][row][n], unscaled) and hb_reduce_k adds them in
 * part order; unsplit ones finish in the kernel. */
struct hb_segs {
    mfc_mm_seg seg[MFC_MAX_SEGS];
    int blk0[MFC_MAX_SEGS + 1];
    int nt[MFC_MAX_SEGS], split[MFC_MAX_SEGS];
    size_t off[MFC_MAX_SEGS];
    float *part;
    int nseg;
};

/* grid: x over the segments' parts and tiles of 128 weight rows, y over
 * 128-row tiles of activations. A segment's type is TA or TB: a kernel
 * holds the registers of its largest path, so each launch gets the paths
 * it has (Q4_K_M files mix Q4_K and Q6_K in one launch). */
template <int TA, int TB>
__global__ void __launch_bounds__(256, 2) gemm_h_k(hb_segs S, int k, const __half *__restrict__ xh,
                                                   const float *__restrict__ xs, int rows) {
    extern __shared__ __align__(16) unsigned char smraw[];
    hb_smem &sm = *(hb_smem *)smraw;
    const int wblk = (int)blockIdx.x;
    int si = 0;
    while (si + 1 < S.nseg && wblk >= S.blk0[si + 1]) si++;
    const mfc_mm_seg &sg = S.seg[si];
    const int local = wblk - S.blk0[si], part = local / S.nt[si], nsplit = S.split[si];
    const int n0 = (local % S.nt[si]) * HB_N;
    const int nst = k / HB_K, st0 = part * nst / nsplit, st1 = (part + 1) * nst / nsplit;
    const int r0 = (int)blockIdx.y * HB_M, nr = min(HB_M, rows - r0);
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
    if (TA == TB || sg.type == TA) hb_run<TA>(sm, sg, k, xh, r0, nr, n0, st0, st1, acc);
    else hb_run<TB>(sm, sg, k, xh, r0, nr, n0, st0, st1, acc);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, wm = warp & 1, wn = warp >> 1;
    const int g = lane >> 2, t = lane & 3;
    float *pp = nsplit > 1 ? S.part + S.off[si] + (size_t)part * rows * sg.n : NULL;
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int r = 64 * wm + 16 * i + g + 8 * hr;
            if (r >= nr) continue;
            const float f = xs[r0 + r];
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int c = n0 + 32 * wn + 8 * j + 2 * t + e;
                    if (c >= sg.n) continue;
                    const size_t o = (size_t)(r0 + r) * sg.n + c;
                    if (pp) {
                        pp[o] = acc[i][j][2 * hr + e];
                        continue;
                    }
                    const float y = acc[i][j][2 * hr + e] * f + (sg.b ? sg.b[c] : 0.0f);
                    sg.out[o] = y;
                    if (sg.res) sg.res[o] += y;
                }
        }
}

/* a split product's parts added in part order, then as the kernel's own
 * epilogue: scaled back, bias, residual */
__global__ void hb_reduce_k(mfc_mm_seg sg, const float *__restrict__ part, int nsplit, int rows,
                            const float *__restrict__ xs) {
    pdl_enter();
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x, tot = (size_t)rows * sg.n;
    if (i >= tot) return;
    float a = part[i];
    for (int p = 1; p < nsplit; p++) a += part[(size_t)p * tot + i];
    const int c = (int)(i % (size_t)sg.n);
    const float y = a * xs[i / (size_t)sg.n] + (sg.b ? sg.b[c] : 0.0f);
    sg.out[i] = y;
    if (sg.res) sg.res[i] += y;
}

template <int TA, int TB>
static void h_launch(cudaStream_t s, dim3 grid, const hb_segs &S, int k, const mfc_xh *xh, int rows) {
    static bool attr;
    if (!attr) { /* over the 48 KiB default, two blocks a multiprocessor */
        cudaFuncSetAttribute(gemm_h_k<TA, TB>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sizeof(hb_smem));
        cudaFuncSetAttribute(gemm_h_k<TA, TB>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        attr = true;
    }
    launch_k(gemm_h_k<TA, TB>, grid, 256, sizeof(hb_smem), s, S, k, (const __half *)xh->h, (const float *)xh->s,
             rows);
}

int mfc_gemm_h_rows = 65;
int mfc_gemm_h_split = 8;

/* Parts of k for a product of n rows of k: enough blocks for the GPU when
 * the weight tiles alone are few (O and down of a 4B model: 20 tiles),
 * parts of at least 20 stages (1280 of k) so that the partial sums' traffic
 * (8 bytes per part and output) stays small against the products' 2 k
 * flops per output (on an H100, qkv of a 4B model at 512 rows took 162 us
 * in 8 parts of 320 against 100 unsplit; down, k 9728, 168 us in 6 parts
 * against 333), and at most MFC_H_PART_PER_ROW / 2 partial sums per
 * activation row (a launch whose segments need more than the scratch
 * holds is refused, and its products are launched one by one). A function
 * of k and n alone, never of the rows: a row gets the same bits in every
 * step. */
extern "C" int mfc_gemm_h_parts(int k, int n) {
    const int nt = (n + HB_N - 1) / HB_N, nst = k / HB_K;
    int p = 160 / nt;
    if (p > mfc_gemm_h_split) p = mfc_gemm_h_split;
    if (p > nst / 20) p = nst / 20;
    if ((size_t)p * (size_t)n > MFC_H_PART_PER_ROW / 2) p = (int)(MFC_H_PART_PER_ROW / 2 / (size_t)n);
    return p < 1 ? 1 : p;
}

static bool h_type(int type) {
    switch (type) {
    case T_Q4_K: case T_Q6_K: case T_Q6_KP: case T_Q8_0: case T_Q8_0R: case T_Q5_K: case T_F16: case T_Q4_0: case T_Q4_1:
    case T_Q5_0: case T_Q5_1: case T_Q2_K: case T_Q3_K: case T_IQ4_NL: case T_IQ4_XS: return true;
    default: return false;
    }
}

extern "C" bool mfc_gemm_h_takes(int type, int k, int rows) {
    return mfc_gemm_h_rows > 0 && rows >= mfc_gemm_h_rows && rows > 8 && k % 256 == 0 && h_type(type);
}

extern "C" void mfc_x_to_h(cudaStream_t s, const float *x, int k, int rows, const mfc_xh *xh) {
    launch_k(x_to_h_k, rows, 256, 0, s, x, k, (__half *)xh->h, xh->s);
}

extern "C" bool mfc_gemm_h(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const float *x, int rows,
                           const mfc_xh *xh) {
    if (nseg < 1 || nseg > MFC_MAX_SEGS) return false;
    bool k46 = true, k46f = true, same = true; /* Q6_K in the device's layout (k46) or the file's */
    for (int i = 0; i < nseg; i++) {
        if (!mfc_gemm_h_takes(seg[i].type, k, rows)) return false;
        k46 = k46 && (seg[i].type == T_Q4_K || seg[i].type == T_Q6_KP);
        k46f = k46f && (seg[i].type == T_Q4_K || seg[i].type == T_Q6_K);
        same = same && seg[i].type == seg[0].type;
    }
    if (!k46 && !k46f && !same) return false; /* the caller launches each product alone */
    hb_segs S = {};
    S.nseg = nseg;
    S.part = xh->part;
    int nb = 0;
    size_t off = 0;
    for (int i = 0; i < nseg; i++) {
        S.seg[i] = seg[i];
        S.blk0[i] = nb;
        S.nt[i] = (seg[i].n + HB_N - 1) / HB_N;
        S.split[i] = xh->part ? mfc_gemm_h_parts(k, seg[i].n) : 1;
        S.off[i] = off;
        if (S.split[i] > 1) off += (size_t)S.split[i] * rows * seg[i].n;
        nb += S.nt[i] * S.split[i];
    }
    S.blk0[nseg] = nb;
    /* each segment alone fits (mfc_gemm_h_parts); several together may not */
    if (off > (size_t)rows * MFC_H_PART_PER_ROW) return false;
    if (!nb) return true;
    if (x) mfc_x_to_h(s, x, k, rows, xh);
    const dim3 grid((unsigned)nb, (unsigned)((rows + HB_M - 1) / HB_M));
    if (k46) h_launch<T_Q4_K, T_Q6_KP>(s, grid, S, k, xh, rows);
    else if (k46f) h_launch<T_Q4_K, T_Q6_K>(s, grid, S, k, xh, rows);
    else switch (seg[0].type) {
    case T_Q8_0: h_launch<T_Q8_0, T_Q8_0>(s, grid, S, k, xh, rows); break;
    case T_Q8_0R: h_launch<T_Q8_0R, T_Q8_0R>(s, grid, S, k, xh, rows); break;
    case T_Q5_K: h_launch<T_Q5_K, T_Q5_K>(s, grid, S, k, xh, rows); break;
    case T_F16: h_launch<T_F16, T_F16>(s, grid, S, k, xh, rows); break;
    case T_Q4_0: h_launch<T_Q4_0, T_Q4_0>(s, grid, S, k, xh, rows); break;
    case T_Q4_1: h_launch<T_Q4_1, T_Q4_1>(s, grid, S, k, xh, rows); break;
    case T_Q5_0: h_launch<T_Q5_0, T_Q5_0>(s, grid, S, k, xh, rows); break;
    case T_Q5_1: h_launch<T_Q5_1, T_Q5_1>(s, grid, S, k, xh, rows); break;
    case T_Q2_K: h_launch<T_Q2_K, T_Q2_K>(s, grid, S, k, xh, rows); break;
    case T_Q3_K: h_launch<T_Q3_K, T_Q3_K>(s, grid, S, k, xh, rows); break;
    case T_IQ4_NL: h_launch<T_IQ4_NL, T_IQ4_NL>(s, grid, S, k, xh, rows); break;
    default: h_launch<T_IQ4_XS, T_IQ4_XS>(s, grid, S, k, xh, rows); break;
    }
    for (int i = 0; i < nseg; i++)
        if (S.split[i] > 1) {
            const size_t tot = (size_t)rows * seg[i].n;
            launch_k(hb_reduce_k, (unsigned)((tot + 255) / 256), 256, 0, s, seg[i], (const float *)S.part + S.off[i],
                     S.split[i], rows, (const float *)xh->s);
        }
    return true;
}
