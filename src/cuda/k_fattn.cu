/* k_fattn.cu - attention of a prompt's rows on the f16 tensor cores (flash
 * attention: key tiles in shared memory, an online softmax in registers).
 *
 * The general kernel (attn_k, k_attn.cu) gives each (row, head) a block of
 * f32 FMAs and reads every key once per query row: a 512-token prompt's
 * attention was a third of its prefill. Here a block takes 64 consecutive
 * rows of one query head (four warps of 16 rows) and walks their keys in
 * tiles of 64: the tile's K and V rows are copied once into shared memory
 * as f16 (a q8_0 cache's V as two f16 parts; its K keeps the int8
 * levels, exact in f16, beside the block scales) and serve all 64 rows through
 * mma.sync m16n8k16 (f16 in, f32 sums). Per tile a warp computes its 16 x 64
 * scores S = Q K^T, masks them, updates each row's running max and sum, and
 * adds P V with P rounded to f16 (K and V are f16 already).
 *
 * Rounding against attn_k: the query (times the softmax scale) goes in as
 * two f16 parts, its f16 rounding and the rest (rounded again), so a score
 * is off by about 2^-22 of |q||k| rather than 2^-11: random-weight models
 * have scores in the hundreds, where one f16 query moved the zoo's gemma2
 * logits by 4% of their range. For the same reason a q8_0 K is not widened
 * (d * q rounded to f16 moved the gemma2 logits by 6% against the CPU's
 * exact f32 d * q): its scores are taken per 32-element block on the levels
 * and scaled by the key's block scale in f32. Its V (d * q, exact in f32)
 * goes in as an f16 rounding plus the rest, each multiplied by P, so V is
 * exact as well (rounding V to f16 moves the CPU's gemma2 logits by 5.2e-2
 * of their range). The probabilities are rounded to f16 before P V (2^-11
 * of each weight, as with an f16 cache); sums stay f32.
 *
 * Rows of one sequence are consecutive in a step and in position order
 * (mf_step), so a block's rows fall into at most a few runs of one sequence
 * each; the block walks the keys of each run in turn, with the rows outside
 * it masked. Key t is visible to row r when first(r) <= t <= pos(r) (first
 * is 0, or the sliding window's start); a run's tiles cover
 * first(its first row) .. pos(its last row), every cell of which the
 * sequence holds. Keys past the run's last are loaded as zeros, so a masked
 * product never meets a stale NaN. */
#include <cuda_fp16.h>
#include <math.h>

#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/kvcache.cuh"
#include "cuda/mma16.cuh"

#define FA_ROWS 64 /* query rows per block: four warps of 16 */
#define FA_KEYS 64 /* keys per tile */

/* 8 elements of a cache row (element i, a multiple of 8) as f16 */
__device__ __forceinline__ uint4 fa_ld8(const void *c, size_t i, int kvt) {
    if (kvt == MFC_KV_F16) return *(const uint4 *)((const __half *)c + i);
    float f[8];
    ld_q8(c, i, 8, f);
    return make_uint4(h2_bits(f[0], f[1]), h2_bits(f[2], f[3]), h2_bits(f[4], f[5]), h2_bits(f[6], f[7]));
}

/* 8 int8 levels of a q8_0 row (element i, a multiple of 8) as f16, exactly */
__device__ __forceinline__ uint4 fa_ld8_levels(const void *c, size_t i) {
    const int8_t *q = (const int8_t *)(q8_block(c, i) + 2 + (i & 31));
    const uint16_t *h = (const uint16_t *)q; /* 2-byte aligned, see ld_q8 */
    uint32_t w[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const uint16_t u = h[j];
        w[j] = h2_bits((float)(int8_t)(u & 0xff), (float)(int8_t)(u >> 8));
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* 8 elements of a q8_0 row (element i, a multiple of 8): d * q, exact in
 * f32, as f16 roundings (hi) and the f16 roundings of the rest (lo) */
__device__ __forceinline__ void fa_ld8_split(const void *c, size_t i, uint4 &hi, uint4 &lo) {
    float f[8];
    ld_q8(c, i, 8, f);
    uint32_t h[4], l[4];
#pragma unroll
    for (int j = 0; j < 4; j++) h2_split(f[2 * j], f[2 * j + 1], h[j], l[j]);
    hi = make_uint4(h[0], h[1], h[2], h[3]);
    lo = make_uint4(l[0], l[1], l[2], l[3]);
}

/* shared memory of fattn_k<D, KQ8>: K and V tiles (and V's low parts and
 * K's block scales for q8_0), past the 48 KiB of static shared memory at
 * D = 128 */
static constexpr size_t fa_smem(int D, bool q8) {
    return (size_t)FA_KEYS * (D + 8) * 2 * (q8 ? 3 : 2) + (q8 ? (size_t)FA_KEYS * (D / 32) * 4 : 0);
}

template <int D, bool KQ8>
__global__ void __launch_bounds__(128) fattn_k(mfc_step_dev st, int n_rows, const float *__restrict__ q,
                                               const void *kc, const void *vc, mfc_attn p, float *out) {
    constexpr int LD = D + 8; /* shared row stride in halves: conflict-free fragment loads */
    constexpr int NK = D / 16, NO = D / 8;
    extern __shared__ __align__(16) unsigned char fa_sm[];
    __half *ks = (__half *)fa_sm;
    __half *vs = ks + FA_KEYS * LD;
    __half *vl = vs + FA_KEYS * LD;   /* q8_0: V's low parts */
    constexpr int NB = KQ8 ? D / 32 : 1; /* q8_0 K: block scales per key */
    float *kd = (float *)(vs + (KQ8 ? 2 : 1) * FA_KEYS * LD);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t4 = lane & 3;
    const int h = blockIdx.y, hk = h / (p.n_head / p.n_head_kv);
    const int r0 = blockIdx.x * FA_ROWS, rend = min(r0 + FA_ROWS, n_rows);
    const int wr = r0 + 16 * warp;
    pdl_enter();

    /* this lane's rows (g and g + 8 of the warp's 16) and their key ranges */
    int row[2], seq[2], lo[2], hi[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        row[i] = wr + g + 8 * i;
        const bool ok = row[i] < n_rows;
        seq[i] = ok ? st.rowseq[row[i]] : -1;
        hi[i] = ok ? st.pos[row[i]] : -1;
        lo[i] = ok ? mfc_att_first(p.window, hi[i]) : 0;
    }
    /* Q fragments, times the scale, as f16 high and low parts (zeros past
     * the step's rows) */
    uint32_t qf[NK][4], ql[NK][4];
#pragma unroll
    for (int kk = 0; kk < NK; kk++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int i = j & 1, d = 16 * kk + 2 * t4 + 8 * (j >> 1);
            float2 v = make_float2(0.0f, 0.0f);
            if (row[i] < n_rows) v = *(const float2 *)(q + ((size_t)row[i] * p.n_head + h) * D + d);
            h2_split(v.x * p.scale, v.y * p.scale, qf[kk][j], ql[kk][j]);
        }
    float o[NO][4];
#pragma unroll
    for (int n = 0; n < NO; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

    for (int ra = r0; ra < rend;) {
        const int s = st.rowseq[ra];
        int rb = ra + 1;
        while (rb < rend && st.rowseq[rb] == s) rb++;
        const int kmin = mfc_att_first(p.window, st.pos[ra]), kmax = st.pos[rb - 1];
        const int32_t *pages = st.pages + st.seq_pg[s];
        const bool mine = wr < rb && wr + 16 > ra; /* the warp has rows in this run */
        for (int k0 = kmin; k0 <= kmax; k0 += FA_KEYS) {
            __syncthreads(); /* the previous tile is consumed */
            for (int c = tid; c < FA_KEYS * (D / 8); c += 128) {
                const int kr = c / (D / 8), d8 = (c % (D / 8)) * 8, t = k0 + kr;
                uint4 kv = make_uint4(0, 0, 0, 0), vv = kv, vlo = kv;
                float sd = 0.0f;
                if (t <= kmax) {
                    const size_t cell = (size_t)pages[t / p.page_size] * p.page_size + t % p.page_size;
                    const size_t ki = cell * p.k_width + (size_t)hk * D + d8;
                    const size_t vi = cell * p.v_width + (size_t)hk * D + d8;
                    if (KQ8) {
                        kv = fa_ld8_levels(kc, ki);
                        sd = q8_scale(q8_block(kc, ki));
                        fa_ld8_split(vc, vi, vv, vlo);
                    } else {
                        kv = fa_ld8(kc, ki, p.kvt);
                        vv = fa_ld8(vc, vi, p.kvt);
                    }
                }
                if (KQ8 && d8 % 32 == 0) kd[kr * NB + d8 / 32] = sd;
                *(uint4 *)&ks[kr * LD + d8] = kv;
                *(uint4 *)&vs[kr * LD + d8] = vv;
                if (KQ8) *(uint4 *)&vl[kr * LD + d8] = vlo;
            }
            __syncthreads();
            if (!mine) continue;
            /* S = Q K^T over the tile: 8 n-tiles of 8 keys */
            float sc[FA_KEYS / 8][4];
#pragma unroll
            for (int n = 0; n < FA_KEYS / 8; n++) {
                sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
                const __half *kr = &ks[(8 * n + g) * LD + 2 * t4];
                if (KQ8) {
                    /* per block: the levels' dot, then times each key's scale
                     * (this lane's keys: 2 t4 and 2 t4 + 1 of the n-tile) */
                    const float *d0 = &kd[(8 * n + 2 * t4) * NB];
#pragma unroll
                    for (int b = 0; b < NB; b++) {
                        float tb[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                        for (int kk = 2 * b; kk < 2 * b + 2; kk++) {
                            const uint32_t b0 = *(const uint32_t *)(kr + 16 * kk),
                                           b1 = *(const uint32_t *)(kr + 16 * kk + 8);
                            mma_f16(tb, ql[kk], b0, b1);
                            mma_f16(tb, qf[kk], b0, b1);
                        }
                        const float s0 = d0[b], s1 = d0[NB + b];
                        sc[n][0] = fmaf(tb[0], s0, sc[n][0]);
                        sc[n][1] = fmaf(tb[1], s1, sc[n][1]);
                        sc[n][2] = fmaf(tb[2], s0, sc[n][2]);
                        sc[n][3] = fmaf(tb[3], s1, sc[n][3]);
                    }
                } else {
#pragma unroll
                    for (int kk = 0; kk < NK; kk++) {
                        const uint32_t b0 = *(const uint32_t *)(kr + 16 * kk),
                                       b1 = *(const uint32_t *)(kr + 16 * kk + 8);
                        mma_f16(sc[n], ql[kk], b0, b1);
                        mma_f16(sc[n], qf[kk], b0, b1);
                    }
                }
            }
            /* mask, soft-cap, and the online softmax per row */
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int n = 0; n < FA_KEYS / 8; n++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int i = j >> 1, t = k0 + 8 * n + 2 * t4 + (j & 1);
                    float v = sc[n][j];
                    if (p.softcap > 0.0f) v = p.softcap * tanhf(v / p.softcap);
                    v = seq[i] == s && t >= lo[i] && t <= hi[i] ? v : -INFINITY;
                    sc[n][j] = v;
                    mx[i] = fmaxf(mx[i], v);
                }
            float cf[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                const float mn = fmaxf(m[i], mx[i]);
                const float base = mn == -INFINITY ? 0.0f : mn; /* a row with no key yet stays at zero */
                cf[i] = expf(m[i] - base);
                m[i] = mn;
                mx[i] = base;
            }
            softmax_tile(sc, mx, cf, l, o, true);
            /* O += P V: P's C fragments are the A fragments of 16-key steps */
#pragma unroll
            for (int kc = 0; kc < FA_KEYS / 16; kc++) {
                const uint32_t a[4] = {h2_bits(sc[2 * kc][0], sc[2 * kc][1]), h2_bits(sc[2 * kc][2], sc[2 * kc][3]),
                                       h2_bits(sc[2 * kc + 1][0], sc[2 * kc + 1][1]),
                                       h2_bits(sc[2 * kc + 1][2], sc[2 * kc + 1][3])};
                const __half *vr = &vs[(16 * kc + (lane & 7) + 8 * ((lane >> 3) & 1)) * LD + 8 * (lane >> 4)];
#pragma unroll
                for (int dn = 0; dn < D / 16; dn++) {
                    uint32_t b0, b1, b2, b3;
                    if (KQ8) { /* the low parts first: the smaller terms */
                        ldsm_x4_t(vr + (vl - vs) + 16 * dn, b0, b1, b2, b3);
                        mma_f16(o[2 * dn], a, b0, b1);
                        mma_f16(o[2 * dn + 1], a, b2, b3);
                    }
                    ldsm_x4_t(vr + 16 * dn, b0, b1, b2, b3);
                    mma_f16(o[2 * dn], a, b0, b1);
                    mma_f16(o[2 * dn + 1], a, b2, b3);
                }
            }
        }
        ra = rb;
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (row[i] >= n_rows) continue;
        const float inv = 1.0f / l[i];
        float *orow = out + ((size_t)row[i] * p.n_head + h) * D + 2 * t4;
#pragma unroll
        for (int n = 0; n < NO; n++) *(float2 *)(orow + 8 * n) = make_float2(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
    }
}

/* MINFER_CUDA_FA=0 keeps prompts on attn_k (for A/B) */
bool mfc_fattn_on = true;

extern "C" bool mfc_fattn(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc,
                          const void *vc, const mfc_attn *p, float *out) {
    const int D = p->head_dim_k;
    if (!mfc_fattn_on || p->head_dim_v != D || (D != 16 && D != 32 && D != 64 && D != 128) ||
        p->n_head % p->n_head_kv != 0)
        return false;
    if (p->kvt == MFC_KV_F16 ? p->k_width % 8 || p->v_width % 8
                             : p->kvt != MFC_KV_Q8 || p->k_width % 32 || p->v_width % 32 || D % 32)
        return false;
    static bool attr;
    if (!attr) { /* shared memory for as many blocks as the registers allow; over 48 KiB at D = 128, q8_0 */
#define FA_ATTR(d, q8)                                                                                        \
    cudaFuncSetAttribute(fattn_k<d, q8>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);              \
    cudaFuncSetAttribute(fattn_k<d, q8>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)fa_smem(d, q8))
        FA_ATTR(16, false);
        FA_ATTR(32, false);
        FA_ATTR(64, false);
        FA_ATTR(128, false);
        FA_ATTR(32, true);
        FA_ATTR(64, true);
        FA_ATTR(128, true);
#undef FA_ATTR
        attr = true;
    }
    const dim3 grid((unsigned)((rows + FA_ROWS - 1) / FA_ROWS), (unsigned)p->n_head);
#define FA_LAUNCH(d, q8) launch_k(fattn_k<d, q8>, grid, 128, fa_smem(d, q8), s, *st, rows, q, kc, vc, *p, out)
    if (p->kvt == MFC_KV_Q8) { /* D is a multiple of 32 (checked above) */
        if (D == 32) FA_LAUNCH(32, true);
        else if (D == 64) FA_LAUNCH(64, true);
        else FA_LAUNCH(128, true);
    } else if (D == 16) FA_LAUNCH(16, false);
    else if (D == 32) FA_LAUNCH(32, false);
    else if (D == 64) FA_LAUNCH(64, false);
    else FA_LAUNCH(128, false);
#undef FA_LAUNCH
    return true;
}
