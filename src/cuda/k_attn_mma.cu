/* k_attn_mma.cu - decode attention on the f16 tensor cores.
 *
 * The tile kernel (k_attn.cu) scores a tile's keys with f32 FMAs, a warp per
 * query head, and sums V key by key: at 4224 keys `ncu` found it a chain of
 * dependent steps (6 cycles between a warp's instructions) that the bytes
 * it reads do not explain. Here a block takes a share of one row's keys for
 * all the query heads of a KV head at once, as the rows of mma.sync
 * (head g in fragment rows g and g + 8, groups of up to 16: MGT; rows past
 * the group are zero queries whose results are dropped), as the prompt
 * kernel (k_fattn.cu) does for rows of one head. The block's two warps
 * split each 32-key tile: warp w takes keys 16 w .. 16 w + 15 (scores as
 * two n-tiles of eight keys, P V as one k-step of 16), each with its own
 * online softmax and its next tile's K and V on their way into shared
 * memory by cp.async (two buffers a warp); at the share's end warp 1's
 * state is merged into warp 0's in that order. Blocks walk shares
 * blockIdx.z, + gridDim.z, ... of their row. The second warp halves the
 * chain each warp runs (a one-row step at 128 keys has only 32 blocks: 4
 * shares of 8 KV heads). Forms with one warp (the first version) and four
 * (8 keys a warp by m16n8k8, the query from shared memory) were measured
 * and dropped (docs/PERFORMANCE.md; the four-warp code is commit def1c46).
 *
 * Rounding: the query (times the softmax scale) goes in as two f16 parts
 * (its f16 rounding and the rounding of the rest), and so do the
 * probabilities before P V, so each product carries about 22 bits of its
 * f32 factor (values below about 2^-3 leave a subnormal low part: an error
 * near 2^-25 absolute; K and V are f16 in the cache): the results stay within the
 * f32 kernels' 2e-5 of a double-precision softmax (test_cuda_attn). The
 * sums are f32 in the tensor cores' order, which is fixed: a share's result
 * depends only on its row's keys, never on the step's other rows or on
 * which block takes it. The share states go to attn_combine_k as the other
 * decode kernels write them. */
#include <cuda_fp16.h>
#include <math.h>

#include "cuda/kernels.h"
#include "cuda/kvcache.cuh"
#include "cuda/launch.cuh"
#include "cuda/mma16.cuh"

#define MK 32    /* keys a tile */
#define MGT 16 /* query heads a KV head: the fragments' rows */
/* warps a block: one ran slower at tg128 and at depth 4096, four lost at
 * 64 rows (fewer blocks fit) and gained nothing elsewhere; the merge and
 * the fragments below are written for 16 keys a warp or more */
#define MW 2

int mfc_att_mma_runs = 0;

/* the kernel's shared memory, dynamic (43 KiB for heads of 128, near the
 * 48 KiB a static allocation may have): K and V [NW][2][SK][D + 8] halves
 * each, the warps' states [NW / 2][32][5 + D / 2] floats */
template <int D, int NW>
struct mma_smem {
    static constexpr int SK = MK / NW, LD = D + 8, XS = 5 + 4 * (D / 8);
    static constexpr size_t kv = (size_t)NW * 2 * SK * LD * 2;
    static constexpr size_t x = NW > 1 ? (size_t)(NW / 2) * 32 * XS * 4 : 0;
    static constexpr size_t bytes = 2 * kv + x;
};

template <int D, int NW>
__global__ void __launch_bounds__(32 * NW) attn_mma_k(mfc_step_dev st, const float *__restrict__ q, const __half *kc,
                                                      const __half *vc, mfc_attn p, int nsplit, float *part) {
    constexpr int SK = MK / NW;      /* keys of each tile warp w takes: SK w .. SK w + SK - 1 */
    static_assert(NW == 1 || NW == 2, "P V takes k-steps of 16 keys a warp; the merge one pair of warps");
    constexpr int LD = D + 8;        /* row stride in halves: conflict-free fragment loads (as k_fattn.cu) */
    constexpr int NK = D / 16;       /* k-steps of the scores */
    constexpr int NO = D / 8;        /* n-tiles of the output */
    constexpr int CPR = D / 8;       /* 16-byte pieces a row */
    constexpr int KPP = 32 / CPR;    /* keys one pass of the warp's copies covers */
    using SM = mma_smem<D, NW>;
    extern __shared__ __align__(16) unsigned char smem[];
    __half(*ks_all)[2][SK][LD] = (__half(*)[2][SK][LD])smem;
    __half(*vs_all)[2][SK][LD] = (__half(*)[2][SK][LD])(smem + SM::kv);
    /* the share states of warps NW/2 .. NW-1 by lane, merged pairwise (odd stride: no bank conflicts) */
    float(*xs)[32][5 + 4 * NO] = (float(*)[32][5 + 4 * NO])(smem + 2 * SM::kv);
    /* the step's arrays are written before the step, never by its kernels: read before the wait */
    const int r = blockIdx.x, hk = blockIdx.y, lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2,
              t4 = lane & 3;
    __half(*ks)[SK][LD] = ks_all[w];
    __half(*vs)[SK][LD] = vs_all[w];
    const int G = p.n_head / p.n_head_kv;
    const int pos = st.pos[r];
    const int first0 = mfc_att_first(p.window, pos);
    const int n = pos - first0 + 1, sk = mfc_att_share(n), ns = (n + sk - 1) / sk;
    if ((int)blockIdx.z >= ns) return;
    const int32_t *pages = st.pages + st.seq_pg[st.rowseq[r]];
    const __half *kh = kc + (size_t)hk * D, *vh = vc + (size_t)hk * D;
    const int piece = lane % CPR, key0 = lane / CPR;

    /* the next tile to copy (share, tile), one tile ahead along the block's
     * run of shares; sel 0: the whole tile; 1: the keys below pos only,
     * before the wait (with p.early); 2: the rest, closing the tile. Keys past
     * the share's end are zeros (their probabilities are zero, and a stale
     * NaN times zero would not be). */
    int pz = blockIdx.z, pit = 0;
    auto issue = [&](int b, int sel) {
        if (pz < ns) {
            const int f = first0 + pz * sk, last = min(pos, f + sk - 1), tt = f + pit * MK, t0 = tt + SK * w;
            const int nt = min(SK, last - t0 + 1); /* the warp's keys of the tile: may be none */
            copy_key_rows<SK, KPP, LD, true>(ks[b], vs[b], kh, vh, pages, p, t0, nt, pos, sel, lane, key0, piece);
            if (sel != 1) {
                if (tt + MK > last) pz += gridDim.z, pit = 0;
                else pit++;
            }
        }
        if (sel != 1) cp_commit(); /* an empty group past the last tile keeps the waits uniform */
    };

    if (p.early) issue(0, 1);
    pdl_enter();
    /* the group's queries as A fragments, times the scale, high and low f16 parts */
    uint32_t qf[NK][4], ql[NK][4];
#pragma unroll
    for (int kk = 0; kk < NK; kk++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int hq = g + 8 * (j & 1), d = 16 * kk + 2 * t4 + 8 * (j >> 1);
            float2 v = make_float2(0.0f, 0.0f);
            if (hq < G) v = *(const float2 *)(q + ((size_t)r * p.n_head + (size_t)hk * G + hq) * D + d);
            h2_split(v.x * p.scale, v.y * p.scale, qf[kk][j], ql[kk][j]);
        }
    int b = 0;
    issue(0, p.early ? 2 : 0);
    for (int z = blockIdx.z; z < ns; z += gridDim.z) {
        const int f = first0 + z * sk, last = min(pos, f + sk - 1), ntile = (last - f + MK) / MK;
        float o[NO][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < NO; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
        for (int it = 0; it < ntile; it++, b ^= 1) {
            const int nt = min(SK, last - (f + it * MK + SK * w) + 1);
            issue(b ^ 1, 0); /* the buffer the previous tile used: the warp is past it */
            cp_wait_1();
            __syncwarp();
            if (nt <= 0) continue; /* warp w > 0: its part of the share's last tile is empty */
            /* S = Q K^T: SK / 8 n-tiles of eight keys, the low and high parts
             * in chains of their own (half as long), added at the end */
            float sc[SK / 8][4];
#pragma unroll
            for (int nn = 0; nn < SK / 8; nn++) {
                float sl[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                sc[nn][0] = sc[nn][1] = sc[nn][2] = sc[nn][3] = 0.0f;
                const __half *kr = &ks[b][8 * nn + g][2 * t4];
#pragma unroll
                for (int kk = 0; kk < NK; kk++) {
                    const uint32_t b0 = *(const uint32_t *)(kr + 16 * kk), b1 = *(const uint32_t *)(kr + 16 * kk + 8);
                    mma_f16(sl, ql[kk], b0, b1);
                    mma_f16(sc[nn], qf[kk], b0, b1);
                }
#pragma unroll
                for (int j = 0; j < 4; j++) sc[nn][j] += sl[j];
            }
            /* soft cap, keys past the tile's last, the online softmax per head */
            float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
            for (int nn = 0; nn < SK / 8; nn++)
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float v = sc[nn][j];
                    if (p.softcap > 0.0f) v = p.softcap * tanhf(v / p.softcap);
                    v = 8 * nn + 2 * t4 + (j & 1) < nt ? v : -INFINITY;
                    sc[nn][j] = v;
                    mx[j >> 1] = fmaxf(mx[j >> 1], v);
                }
            float cf[2];
#pragma unroll
            for (int i = 0; i < 2; i++) {
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
                mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
                const float mn = fmaxf(m[i], mx[i]); /* finite: the tile has a key */
                cf[i] = expf(m[i] - mn);
                m[i] = mn;
            }
            softmax_tile(sc, m, cf, l, o, it != 0); /* the first tile's o is zero: no rescale */
            /* O += P V: P's C fragments are the A fragments of 16-key steps */
#pragma unroll
            for (int kc2 = 0; kc2 < SK / 16; kc2++) {
                uint32_t ah[4], al[4];
                h2_split(sc[2 * kc2][0], sc[2 * kc2][1], ah[0], al[0]);
                h2_split(sc[2 * kc2][2], sc[2 * kc2][3], ah[1], al[1]);
                h2_split(sc[2 * kc2 + 1][0], sc[2 * kc2 + 1][1], ah[2], al[2]);
                h2_split(sc[2 * kc2 + 1][2], sc[2 * kc2 + 1][3], ah[3], al[3]);
                const __half *vr = &vs[b][16 * kc2 + (lane & 7) + 8 * ((lane >> 3) & 1)][8 * (lane >> 4)];
#pragma unroll
                for (int dn = 0; dn < D / 16; dn++) {
                    uint32_t b0, b1, b2, b3;
                    ldsm_x4_t(vr + 16 * dn, b0, b1, b2, b3);
                    mma_f16(o[2 * dn], al, b0, b1);
                    mma_f16(o[2 * dn + 1], al, b2, b3);
                    mma_f16(o[2 * dn], ah, b0, b1);
                    mma_f16(o[2 * dn + 1], ah, b2, b3);
                }
            }
            __syncwarp(); /* the next tile's copies refill buffer b */
        }
        /* the warps' states pairwise: warp w + h into warp w for h = NW/2,
         * ..., 1, in that order (a warp's part of a short share may have no
         * keys: m = -inf, l = 0, o = 0, weighing nothing) */
#pragma unroll
        for (int h = NW / 2; h >= 1; h /= 2) {
            if (w >= h && w < 2 * h) {
                float *x = xs[w - h][lane];
                x[0] = m[0], x[1] = m[1], x[2] = l[0], x[3] = l[1];
#pragma unroll
                for (int nn = 0; nn < NO; nn++)
#pragma unroll
                    for (int j = 0; j < 4; j++) x[4 + 4 * nn + j] = o[nn][j];
            }
            __syncthreads();
            if (w < h) {
                const float *x = xs[w][lane];
                float c0[2], c1[2];
#pragma unroll
                for (int i = 0; i < 2; i++) {
                    const float m1 = x[i], mn = fmaxf(m[i], m1);
                    c0[i] = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
                    c1[i] = m1 == -INFINITY ? 0.0f : expf(m1 - mn);
                    l[i] = l[i] * c0[i] + x[2 + i] * c1[i];
                    m[i] = mn;
                }
#pragma unroll
                for (int nn = 0; nn < NO; nn++)
#pragma unroll
                    for (int j = 0; j < 4; j++) o[nn][j] = o[nn][j] * c0[j >> 1] + x[4 + 4 * nn + j] * c1[j >> 1];
            }
            __syncthreads(); /* xs is rewritten next (or by the next share) */
        }
        if (w) continue;
        /* the share's state per head, as attn_combine_k reads it */
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const int hq = g + 8 * i;
            if (hq >= G) continue;
            float *pp = part + (((size_t)r * p.n_head + (size_t)hk * G + hq) * nsplit + z) * (D + 2);
            if (t4 == 0) pp[0] = m[i], pp[1] = l[i];
#pragma unroll
            for (int nn = 0; nn < NO; nn++) /* (D + 2) is even: 8-byte stores */
                *(float2 *)(pp + 2 + 8 * nn + 2 * t4) = make_float2(o[nn][2 * i], o[nn][2 * i + 1]);
        }
    }
}

/* resident blocks a multiprocessor, once per kernel */
template <int D, int NW>
static int mma_occupancy(void) {
    static int occ;
    if (!occ) {
        cudaFuncSetAttribute(attn_mma_k<D, NW>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        cudaFuncSetAttribute(attn_mma_k<D, NW>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)mma_smem<D, NW>::bytes);
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, attn_mma_k<D, NW>, 32 * NW, mma_smem<D, NW>::bytes) !=
                cudaSuccess ||
            occ < 1) {
            cudaGetLastError();
            occ = 1;
        }
    }
    return occ;
}

template <int D, int NW>
static void mma_launch(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const __half *k,
                       const __half *v, const mfc_attn *p, int nsplit, int nz, float *part) {
    /* blocks along the shares: one wave of resident blocks over the step's
     * rows and KV heads (at least one; tests pin it with mfc_att_tile_nz) */
    static int n_sm;
    if (!n_sm) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            n_sm = 132;
    }
    const int occ = mma_occupancy<D, NW>(); /* also allows the kernel its dynamic shared memory */
    int z = mfc_att_tile_nz > 0 ? mfc_att_tile_nz : occ * n_sm / (rows * p->n_head_kv);
    z = z < 1 ? 1 : z < nz ? z : nz;
    launch_k(attn_mma_k<D, NW>, dim3(rows, p->n_head_kv, z), 32 * NW, mma_smem<D, NW>::bytes, s, *st, q, k, v, *p,
             nsplit, part);
}

extern "C" bool mfc_att_mma(cudaStream_t s, const mfc_step_dev *st, int rows, const float *q, const void *kc,
                            const void *vc, const mfc_attn *p, int nsplit, int nz, float *part) {
    const int G = p->n_head_kv ? p->n_head / p->n_head_kv : 0, d = p->head_dim_k;
    if (!part || nsplit < 1 || nsplit > MFC_ATT_MAX_SHARES || p->kvt != MFC_KV_F16 || G < 1 || G > MGT ||
        p->n_head % p->n_head_kv || (d != 64 && d != 128) || p->head_dim_v != d || p->k_width % 8 ||
        p->v_width % 8 || ((uintptr_t)kc | (uintptr_t)vc) % 16)
        return false;
    const __half *k = (const __half *)kc, *v = (const __half *)vc;
    if (d == 128) mma_launch<128, MW>(s, st, rows, q, k, v, p, nsplit, nz, part);
    else mma_launch<64, MW>(s, st, rows, q, k, v, p, nsplit, nz, part);
    mfc_att_mma_runs++;
    return true;
}
