/* mmvq_lowbit.cuh - the dp4a decode products' lanes (k_mmvq.cu) for Q2_K,
 * Q3_K, IQ4_NL and IQ4_XS: what one lane loads of a super-block of 256
 * weights into slot u of a round (w_*<NB>), and its dot products with up to
 * R activation rows (int8 blocks of 32, row-major: kernels.h), added to acc.
 * 8 lanes share a super-block (t = 0..7), as for the other types there.
 *
 * Q2_K, Q3_K: lane t takes half h = t / 4 and level bytes l0 = 8 (t % 4)
 * .. l0 + 7 of that half's 32, which hold elements 128h + 32s + l0 + i at
 * bits 2s (s = 0..3): 8 elements of each of the activation blocks 4h + s,
 * inside sub-block 8h + 2s + (t % 4) / 2 (one scale each). The weight is
 * d sc q - dmin m (Q2_K) or d (sc - 32) (q - 4) (Q3_K) per sub-block of 16,
 * so a lane's share of an activation block is d_x (d sc is - dmin m sx)
 * with is the dp4a of levels and activations and sx the sum of the same 8
 * activations (a dp4a with ones: the block's own sum spans two mins), or
 * d_x d (sc - 32) is over levels q - 4. 84-byte blocks are 4-byte aligned
 * (word loads); 110-byte ones only 2-byte (halfword pairs, as Q6_K's).
 *
 * IQ4_NL, IQ4_XS: 4-bit indices into a table of 16 int8 levels, turned
 * into levels in registers (iq4_levels4) before the dp4a. IQ4_NL: a
 * "super-block" is 8 blocks of 32 (144 bytes, so rows of k % 256 == 0
 * start 16-byte aligned); lane t takes block t, the five aligned words that
 * span its 18 bytes (as Q8_0's nine there). IQ4_XS: lane t takes sub-block
 * t, its 16 bytes of indices in two 8-byte loads (136-byte blocks are
 * 8-byte aligned, not 16) and the block's 8-byte header (d, scales).
 *
 * Each term is a float product of a weight scale, an activation scale and
 * an exact int32 sum, as the reference's per-block terms (quant/ref_*.c);
 * the reference's activations are q8_K per 256 (q8_0 for IQ4_NL), these
 * the GPU's int8 blocks of 32 (rows.cuh, quant_block32). */
#ifndef MF_CUDA_MMVQ_LOWBIT_CUH
#define MF_CUDA_MMVQ_LOWBIT_CUH

#include "cuda/dequant.cuh"

/* ---- Q2_K ---- */

template <int NB> struct w_q2k {
    uint32_t q[NB][2];  /* level bytes l0 .. l0 + 7 of half h */
    uint32_t sc[NB][2]; /* scale bytes 8h .. 8h + 7 */
    uint32_t dm[NB];    /* d, dmin */
};

template <int NB>
__device__ __forceinline__ void q2k_load(w_q2k<NB> &w, int u, const uint8_t *__restrict__ blk, int t) {
    const int h = t >> 2, l0 = (t & 3) * 8;
    const uint32_t *q = (const uint32_t *)(blk + 16 + 32 * h + l0), *sc = (const uint32_t *)(blk + 8 * h);
    w.q[u][0] = q[0], w.q[u][1] = q[1];
    w.sc[u][0] = sc[0], w.sc[u][1] = sc[1];
    w.dm[u] = *(const uint32_t *)(blk + 80);
}

template <int R, int NB>
__device__ __forceinline__ void q2k_dot(const w_q2k<NB> &w, int u, int sb, int t, int k, const int8_t *__restrict__ xq,
                                        const float *__restrict__ xd, int rows, float *acc) {
    const int h = t >> 2, l0 = (t & 3) * 8, kb = k / 32;
    /* the scale bytes of sub-blocks 8h + 2s + (t % 4) / 2, s = 0..3 */
    const uint32_t scb = __byte_perm(w.sc[u][0], w.sc[u][1], (t & 2) ? 0x7531u : 0x6420u);
    const __half2 dm = *(const __half2 *)&w.dm[u];
    const float d = __low2float(dm), dmin = __high2float(dm);
    int lv[4][2], sc[4], mn[4];
#pragma unroll
    for (int s = 0; s < 4; s++) {
        lv[s][0] = (int)((w.q[u][0] >> (2 * s)) & 0x03030303u);
        lv[s][1] = (int)((w.q[u][1] >> (2 * s)) & 0x03030303u);
        sc[s] = (int)((scb >> (8 * s)) & 15);
        mn[s] = (int)((scb >> (8 * s + 4)) & 15);
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (r >= rows) break;
        const int8_t *xr = xq + (size_t)r * k + sb * 256 + 128 * h + l0;
        const float4 d4 = *(const float4 *)(xd + (size_t)r * kb + sb * 8 + 4 * h);
        const float dq[4] = {d4.x, d4.y, d4.z, d4.w};
        float sum = 0.0f;
#pragma unroll
        for (int s = 0; s < 4; s++) {
            const int2 xv = *(const int2 *)(xr + 32 * s);
            const int is = __dp4a(lv[s][1], xv.y, __dp4a(lv[s][0], xv.x, 0));
            const int sx = __dp4a(0x01010101, xv.y, __dp4a(0x01010101, xv.x, 0));
            sum += dq[s] * (d * (float)(sc[s] * is) - dmin * (float)(mn[s] * sx));
        }
        acc[r] += sum;
    }
}

/* ---- Q3_K ---- */

template <int NB> struct w_q3k {
    uint32_t q[NB][2];  /* level bytes l0 .. l0 + 7 of half h (low two bits) */
    uint32_t hm[NB][2]; /* hmask bytes l0 .. l0 + 7 (third bit of elements l0 + i + 32 b at bit b) */
    uint32_t sc[NB][3]; /* the 12 scale bytes */
    float d[NB];
};

template <int NB>
__device__ __forceinline__ void q3k_load(w_q3k<NB> &w, int u, const uint8_t *__restrict__ blk, int t) {
    const int h = t >> 2, l0 = (t & 3) * 8;
    const uint8_t *q = blk + 32 + 32 * h + l0, *hm = blk + l0;
    w.q[u][0] = ld_u32_2(q), w.q[u][1] = ld_u32_2(q + 4);
    w.hm[u][0] = ld_u32_2(hm), w.hm[u][1] = ld_u32_2(hm + 4);
#pragma unroll
    for (int i = 0; i < 3; i++) w.sc[u][i] = ld_u32_2(blk + 96 + 4 * i);
    w.d[u] = ld_h(blk + 108);
}

template <int R, int NB>
__device__ __forceinline__ void q3k_dot(const w_q3k<NB> &w, int u, int sb, int t, int k, const int8_t *__restrict__ xq,
                                        const float *__restrict__ xd, int rows, float *acc) {
    const int h = t >> 2, l0 = (t & 3) * 8, kb = k / 32;
    /* scale j = 8h + 2s + o (o = (t % 4) / 2): its low 4 bits are nibble h
     * of byte 2s + o, its top 2 bits at 2 (j / 4) = 4h + 2 (s / 2) of
     * byte 8 + j % 4 = 8 + 2 (s % 2) + o (q3k_scale) */
    const bool o = (t & 2) != 0;
    const uint32_t lo4 = __byte_perm(w.sc[u][0], w.sc[u][1], o ? 0x7531u : 0x6420u);
    const uint32_t hi4 = __byte_perm(w.sc[u][2], 0u, o ? 0x3131u : 0x2020u);
    float dl[4];
    int lv[4][2];
#pragma unroll
    for (int s = 0; s < 4; s++) {
        const int sc = (int)((lo4 >> (8 * s + 4 * h)) & 15) | (int)((hi4 >> (8 * s + 4 * h + 2 * (s >> 1))) & 3) << 4;
        dl[s] = w.d[u] * (float)(sc - 32);
#pragma unroll
        for (int i = 0; i < 2; i++) /* level q - 4 in -4..3: q = two low bits + 4 x the hmask bit */
            lv[s][i] = (int)bsub4<4>(((w.q[u][i] >> (2 * s)) & 0x03030303u) |
                                     (((w.hm[u][i] >> (4 * h + s)) & 0x01010101u) << 2));
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (r >= rows) break;
        const int8_t *xr = xq + (size_t)r * k + sb * 256 + 128 * h + l0;
        const float4 d4 = *(const float4 *)(xd + (size_t)r * kb + sb * 8 + 4 * h);
        const float dq[4] = {d4.x, d4.y, d4.z, d4.w};
        float sum = 0.0f;
#pragma unroll
        for (int s = 0; s < 4; s++) {
            const int2 xv = *(const int2 *)(xr + 32 * s);
            const int is = __dp4a(lv[s][1], xv.y, __dp4a(lv[s][0], xv.x, 0));
            sum += dl[s] * dq[s] * (float)is;
        }
        acc[r] += sum;
    }
}

/* ---- IQ4_NL and IQ4_XS ---- */

/* the 32 levels of one block of indices (16 bytes as four words: nibble
 * pairs as Q4_0's, low nibble element j, high j + 16) dotted with activation
 * block b of each row, scaled by dw and the block's d: the two formats
 * differ only in where dw comes from */
template <int R>
__device__ __forceinline__ void iq4_rows(const uint32_t (&qw)[4], float dw, int b, int k, const int8_t *__restrict__ xq,
                                         const float *__restrict__ xd, int rows, float *acc) {
    int lo[4], hi[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        lo[i] = (int)iq4_levels4(qw[i] & 0x0F0F0F0Fu);
        hi[i] = (int)iq4_levels4((qw[i] >> 4) & 0x0F0F0F0Fu);
    }
    const int kb = k / 32;
#pragma unroll
    for (int r = 0; r < R; r++) {
        if (r >= rows) break;
        const int8_t *xr = xq + (size_t)r * k + (size_t)b * 32;
        const int4 a4 = *(const int4 *)xr, b4 = *(const int4 *)(xr + 16);
        const int xa[4] = {a4.x, a4.y, a4.z, a4.w}, xb[4] = {b4.x, b4.y, b4.z, b4.w};
        int is = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) is = __dp4a(hi[i], xb[i], __dp4a(lo[i], xa[i], is));
        acc[r] += dw * xd[(size_t)r * kb + b] * (float)is;
    }
}

template <int NB> struct w_iq4nl {
    uint32_t q[NB][5]; /* the aligned words spanning block t's 18 bytes */
};

template <int NB>
__device__ __forceinline__ void iq4nl_load(w_iq4nl<NB> &w, int u, const uint8_t *__restrict__ sblk, int t) {
    /* block t starts 18t bytes in: word-aligned for even t (its words run 2
     * bytes into block t + 1), 2 bytes past a word for odd t (its words
     * start 2 bytes into block t - 1); both inside the super-block */
    const uint32_t *p = (const uint32_t *)((uintptr_t)(sblk + 18 * t) & ~(uintptr_t)3);
#pragma unroll
    for (int i = 0; i < 5; i++) w.q[u][i] = p[i];
}

template <int R, int NB>
__device__ __forceinline__ void iq4nl_dot(const w_iq4nl<NB> &w, int u, int sb, int t, int k,
                                          const int8_t *__restrict__ xq, const float *__restrict__ xd, int rows,
                                          float *acc) {
    const bool odd = t & 1;
    const float d = __half2float(__ushort_as_half((unsigned short)(odd ? w.q[u][0] >> 16 : w.q[u][0] & 0xFFFFu)));
    uint32_t qw[4];
#pragma unroll
    for (int i = 0; i < 4; i++) qw[i] = odd ? w.q[u][i + 1] : __funnelshift_r(w.q[u][i], w.q[u][i + 1], 16);
    iq4_rows<R>(qw, d, sb * 8 + t, k, xq, xd, rows, acc);
}

template <int NB> struct w_iq4xs {
    uint2 hd[NB];   /* d, scales_h, scales_l[4] */
    uint2 q[NB][2]; /* sub-block t's 16 bytes of indices */
};

template <int NB>
__device__ __forceinline__ void iq4xs_load(w_iq4xs<NB> &w, int u, const uint8_t *__restrict__ blk, int t) {
    w.hd[u] = *(const uint2 *)blk;
    const uint2 *q = (const uint2 *)(blk + 8 + 16 * t);
    w.q[u][0] = q[0], w.q[u][1] = q[1];
}

template <int R, int NB>
__device__ __forceinline__ void iq4xs_dot(const w_iq4xs<NB> &w, int u, int sb, int t, int k,
                                          const int8_t *__restrict__ xq, const float *__restrict__ xd, int rows,
                                          float *acc) {
    /* 6-bit scale of sub-block t: low 4 bits at bit 4t of scales_l, top 2
     * at bit 2t of scales_h (the header's bits 16..31) */
    const uint2 hd = w.hd[u];
    const int ls = (int)((hd.y >> (4 * t)) & 15) | (int)((hd.x >> (16 + 2 * t)) & 3) << 4;
    const float dl = __half2float(__ushort_as_half((unsigned short)(hd.x & 0xFFFFu))) * (float)(ls - 32);
    const uint32_t qw[4] = {w.q[u][0].x, w.q[u][0].y, w.q[u][1].x, w.q[u][1].y};
    iq4_rows<R>(qw, dl, sb * 8 + t, k, xq, xd, rows, acc);
}

#endif
