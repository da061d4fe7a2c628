/* k_mmq_tile.cu - products of a prompt's rows (more than 64) for Q4_K and
 * Q6_K on the int8 tensor cores, with both operands staged in shared
 * memory (a Q8_0 version measured slower than k_mmq.cu's kernel at 512
 * rows, and was dropped).
 *
 * k_mmq.cu gives each warp 8 weight rows and every activation row of a
 * chunk of 64, reading the activation fragments from L2 for every 8 weight
 * rows: at 512 rows its traffic is rows x k per 8 weights, and gate+up of a
 * 4B model ran at about 70 int8 TOP/s. Here a block of four warps takes 64
 * activation rows x 128 weight rows. Per super-block of k (256) it copies
 * the activations' fragments (already in the tiled lane order, kernels.h)
 * and unpacks the weights' levels into the same lane order, with each
 * 32-wide block's float factors beside them; then each warp multiplies its
 * 32 weight rows with all 64 activation rows from shared memory (16 mmas
 * per block of 32, each fragment loaded once for four of them).
 *
 * The integer products are the same mma.sync m16n8k32 as k_mmq.cu's; each
 * 32-wide product is scaled and added in block order along k by one thread
 * per output: an output depends only on its activation row, the weights and
 * k, so a row has the same bits in any step of more than 64 rows. (k_mmq.cu
 * splits the blocks of long rows between warps and adds their sums, and
 * sums Q4_K's minimum terms apart, so the bits differ from steps of 9 to 64
 * rows, as those differ from the dp4a kernel's for 8 rows or fewer.) */
#include "cuda/dequant.cuh"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "cuda/mmq.cuh"

#define TM 64 /* activation rows per block: four m16 tiles */

/* shared memory of one super-block, for WN n8 tiles per warp (a block of
 * TN = 32 WN weight rows) */
template <int WN> struct mt_smem {
    uint4 aq[TM / 16][8][32];  /* activation fragments: [m tile][block][lane] */
    float2 ad[TM / 16][8][16]; /* their (d, d * sum) per row of the tile */
    uint2 bq[4 * WN][8][32];   /* weight levels: [n tile][block][lane = 4 row + t] */
    float2 bs[4 * WN][8][8];   /* per weight row and block: Q4_K (d*sc, dmin*m); Q6_K (its two 16-wide scales) */
};

/* One super-block of weight rows, in two halves: mt_load_w reads
 * a thread's tasks into registers, mt_store_w unpacks them into shared
 * memory. Task (row, t) writes lane (row % 8) * 4 + t of its n tile, 8
 * levels per block (positions 8t..8t+7, as k_mmq.cu's lanes hold them), and
 * the float factors of its blocks 2t, 2t+1 (Q6_K: of its 16-wide groups
 * 4t..4t+3). Rows at or past n are zeros. A block of 32 WN rows has WN tasks
 * per thread: id = threadIdx.x + 128 i. */
template <int T> struct mt_raw;
template <> struct mt_raw<T_Q4_K> {
    uint2 q[4]; /* bytes 8t..8t+7 of each 32 of the levels */
    uint4 hd;   /* d, dmin, 12 scale bytes */
};
template <> struct mt_raw<T_Q6_K> {
    uint2 l[2][2], qh[2]; /* per half: low bits of the two 32-byte groups, high bits */
    uint32_t sc;          /* scale bytes 4t..4t+3 */
    float d;
};
template <> struct mt_raw<T_Q6_KP> : mt_raw<T_Q6_K> {};

template <int T, int WN>
__device__ __forceinline__ void mt_load_w(mt_raw<T> (&raw)[WN], const uint8_t *__restrict__ w, size_t row_bytes,
                                          int n, int n0, int sb) {
#pragma unroll
    for (int i = 0; i < WN; i++) {
        const int id = threadIdx.x + 128 * i, r = id >> 2, t = id & 3;
        const bool ok = n0 + r < n;
        const uint8_t *b = w + (size_t)(n0 + r) * row_bytes;
        if constexpr (T == T_Q4_K) {
            const uint8_t *sbp = b + (size_t)sb * 144;
#pragma unroll
            for (int j = 0; j < 4; j++) raw[i].q[j] = ok ? *(const uint2 *)(sbp + 16 + 32 * j + 8 * t) : make_uint2(0, 0);
            raw[i].hd = ok ? *(const uint4 *)sbp : make_uint4(0, 0, 0, 0);
        } else {
            const q6_at p = q6_parts<T>(b + (size_t)sb * 210, sb);
#pragma unroll
            for (int h = 0; h < 2; h++) {
                raw[i].l[h][0] = ok ? ld64_q6<T>(p.ql + 64 * h + 8 * t) : make_uint2(0, 0);
                raw[i].l[h][1] = ok ? ld64_q6<T>(p.ql + 64 * h + 32 + 8 * t) : make_uint2(0, 0);
                raw[i].qh[h] = ok ? ld64_q6<T>(p.qh + 32 * h + 8 * t) : make_uint2(0, 0);
            }
            raw[i].d = ok ? ld_h(p.d) : 0.0f;
            raw[i].sc = ok ? ld32_q6<T>(p.sc + 4 * t) : 0u;
        }
    }
}

template <int T, int WN>
__device__ __forceinline__ void mt_store_w(mt_smem<WN> &sm, const mt_raw<T> (&raw)[WN]) {
#pragma unroll
    for (int i = 0; i < WN; i++) {
        const int id = threadIdx.x + 128 * i, r = id >> 2, t = id & 3, nt = r >> 3, ln = id & 31;
        if constexpr (T == T_Q4_K) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const uint2 q = raw[i].q[j];
                sm.bq[nt][2 * j][ln] = make_uint2(q.x & 0x0F0F0F0Fu, q.y & 0x0F0F0F0Fu);
                sm.bq[nt][2 * j + 1][ln] = make_uint2((q.x >> 4) & 0x0F0F0F0Fu, (q.y >> 4) & 0x0F0F0F0Fu);
            }
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float dw, mw;
                k4_sm(raw[i].hd, 2 * t + e, dw, mw);
                sm.bs[nt][2 * t + e][r & 7] = make_float2(dw, mw);
            }
        } else {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint2 qh = raw[i].qh[h];
#pragma unroll
                for (int qq = 0; qq < 4; qq++) {
                    const uint2 l = raw[i].l[h][qq & 1];
                    const int ns = 4 * (qq >> 1), hs = 2 * qq;
                    const uint32_t bx = bsub4<32>(((l.x >> ns) & 0x0F0F0F0Fu) | (((qh.x >> hs) & 0x03030303u) << 4));
                    const uint32_t by = bsub4<32>(((l.y >> ns) & 0x0F0F0F0Fu) | (((qh.y >> hs) & 0x03030303u) << 4));
                    sm.bq[nt][4 * h + qq][ln] = make_uint2(bx, by); /* a missing row's are never written out */
                }
            }
            /* groups 4t..4t+3 are blocks 2t, 2t+1 (two 16-wide groups each) */
#pragma unroll
            for (int e = 0; e < 2; e++)
                sm.bs[nt][2 * t + e][r & 7] = make_float2(raw[i].d * (float)(int8_t)(raw[i].sc >> (16 * e)),
                                                          raw[i].d * (float)(int8_t)(raw[i].sc >> (16 * e + 8)));
        }
    }
}

/* the activations' fragments of super-block sb for the block's m tiles
 * (the tiled layout: unit = tile * kb + block, 512 bytes and 16 pairs) */
template <int WN>
__device__ __forceinline__ void mt_fill_a(mt_smem<WN> &sm, const mfc_q8 &q, int kb, int mt0, int nmt, int sb) {
    const int tid = threadIdx.x;
    for (int i = tid; i < nmt * 8 * 32; i += 128) {
        const int m = i >> 8, j = (i >> 5) & 7, ln = i & 31;
        const size_t unit = (size_t)(mt0 + m) * kb + sb * 8 + j;
        sm.aq[m][j][ln] = *(const uint4 *)((const int8_t *)q.q + unit * 512 + (size_t)ln * 16);
    }
    for (int i = tid; i < nmt * 8 * 16; i += 128) {
        const int m = i >> 7, j = (i >> 4) & 7, e = i & 15;
        const size_t unit = (size_t)(mt0 + m) * kb + sb * 8 + j;
        sm.ad[m][j][e] = ((const float2 *)q.d)[unit * 16 + e];
    }
}

/* one super-block: warp w multiplies n tiles WN w .. WN w + WN - 1 with
 * the nmt m tiles */
template <int T, int WN>
__device__ __forceinline__ void mt_mul(const mt_smem<WN> &sm, int nmt, int warp, int lane, float (&acc)[WN][4][4]) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        uint2 b[WN];
        float4 f[WN]; /* rows 2t, 2t+1: (x0, y0, x1, y1) */
#pragma unroll
        for (int u = 0; u < WN; u++) {
            b[u] = sm.bq[WN * warp + u][j][lane];
            f[u] = *(const float4 *)&sm.bs[WN * warp + u][j][2 * t];
        }
#pragma unroll
        for (int m = 0; m < 4; m++) {
            if (m >= nmt) break;
            const uint4 a = sm.aq[m][j][lane];
            const float2 da = sm.ad[m][j][g], db = sm.ad[m][j][g + 8];
#pragma unroll
            for (int u = 0; u < WN; u++) {
                if constexpr (T != T_Q4_K) {
                    const bool lo16 = t < 2; /* this lane's 8 positions are in the block's first 16 */
                    int c0[4] = {0, 0, 0, 0}, c1[4] = {0, 0, 0, 0};
                    mma_k32(c0, a.x, a.y, a.z, a.w, lo16 ? b[u].x : 0u, lo16 ? b[u].y : 0u);
                    mma_k32(c1, a.x, a.y, a.z, a.w, lo16 ? 0u : b[u].x, lo16 ? 0u : b[u].y);
                    acc[u][m][0] += da.x * (f[u].x * (float)c0[0] + f[u].y * (float)c1[0]);
                    acc[u][m][1] += da.x * (f[u].z * (float)c0[1] + f[u].w * (float)c1[1]);
                    acc[u][m][2] += db.x * (f[u].x * (float)c0[2] + f[u].y * (float)c1[2]);
                    acc[u][m][3] += db.x * (f[u].z * (float)c0[3] + f[u].w * (float)c1[3]);
                } else {
                    int c[4] = {0, 0, 0, 0};
                    mma_k32(c, a.x, a.y, a.z, a.w, b[u].x, b[u].y);
                    {
                        acc[u][m][0] += f[u].x * da.x * (float)c[0] - f[u].y * da.y;
                        acc[u][m][1] += f[u].z * da.x * (float)c[1] - f[u].w * da.y;
                        acc[u][m][2] += f[u].x * db.x * (float)c[2] - f[u].y * db.y;
                        acc[u][m][3] += f[u].z * db.x * (float)c[3] - f[u].w * db.y;
                    }
                }
            }
        }
    }
}

/* Each super-block's weights are loaded after the previous multiply: a
 * version that loaded them during it (WN tasks of raw bytes held across the
 * multiply, up to 254 registers) measured 9% slower at pp512 on the H200. */
template <int T, int WN>
__device__ __forceinline__ void mt_run(mt_smem<WN> &sm, const mfc_mm_seg &sg, int k, const mfc_q8 &q, int n0,
                                       int mt0, int nmt, int warp, int lane, float (&acc)[WN][4][4]) {
    const int nsb = k / 256;
    const uint8_t *w = (const uint8_t *)sg.w;
    mt_raw<T> raw[WN];
    for (int sb = 0; sb < nsb; sb++) {
        mt_load_w<T, WN>(raw, w, sg.row_bytes, sg.n, n0, sb);
        mt_store_w<T, WN>(sm, raw);
        mt_fill_a<WN>(sm, q, k / 32, mt0, nmt, sb);
        __syncthreads();
        mt_mul<T, WN>(sm, nmt, warp, lane, acc);
        __syncthreads(); /* the next super-block overwrites both */
    }
}

/* grid: x over the segments' weight tiles of 32 WN rows, y over 64-row
 * chunks. WN changes which block computes an output, never its sum. */
template <int WN>
__global__ void __launch_bounds__(128) mmq_tile_k(mq_segs S, int k, mfc_q8 q, int rows) {
    constexpr int TN = 32 * WN;
    extern __shared__ __align__(16) unsigned char smraw[];
    mt_smem<WN> &sm = *(mt_smem<WN> *)smraw;
    const int wblk = (int)blockIdx.x;
    int si = 0;
    while (si + 1 < S.nseg && wblk >= S.blk0[si + 1]) si++;
    const mfc_mm_seg &sg = S.seg[si];
    const int n0 = (wblk - S.blk0[si]) * TN;
    const int r0 = (int)blockIdx.y * TM, nr = min(TM, rows - r0), nmt = (nr + 15) / 16;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    float acc[WN][4][4];
#pragma unroll
    for (int u = 0; u < WN; u++)
#pragma unroll
        for (int m = 0; m < 4; m++) acc[u][m][0] = acc[u][m][1] = acc[u][m][2] = acc[u][m][3] = 0.0f;
    pdl_enter();
    if (sg.type == T_Q4_K) mt_run<T_Q4_K, WN>(sm, sg, k, q, n0, r0 / 16, nmt, warp, lane, acc);
    else if (sg.type == T_Q6_KP) mt_run<T_Q6_KP, WN>(sm, sg, k, q, n0, r0 / 16, nmt, warp, lane, acc);
    else mt_run<T_Q6_K, WN>(sm, sg, k, q, n0, r0 / 16, nmt, warp, lane, acc);
#pragma unroll
    for (int u = 0; u < WN; u++)
#pragma unroll
        for (int m = 0; m < 4; m++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = 16 * m + g + 8 * (e >> 1), j = n0 + 8 * (WN * warp + u) + 2 * t + (e & 1);
                if (r >= nr || j >= sg.n) continue;
                const size_t o = (size_t)(r0 + r) * sg.n + j;
                const float y = acc[u][m][e] + (sg.b ? sg.b[j] : 0.0f);
                sg.out[o] = y;
                if (sg.res) sg.res[o] += y;
            }
}

/* MINFER_CUDA_MMQ_TILE=0 keeps every row count on k_mmq.cu's kernel (for
 * A/B); MINFER_CUDA_MMQ_TILE_ROWS=N: the tiles from N rows on */
bool mfc_mmq_tile_on = true;
int mfc_mmq_tile_rows = 65;

template <int WN>
static void mt_launch(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows) {
    constexpr int TN = 32 * WN;
    mq_segs S = {};
    S.nseg = nseg;
    int nb = 0;
    for (int i = 0; i < nseg; i++) {
        S.seg[i] = seg[i];
        S.blk0[i] = nb;
        nb += (seg[i].n + TN - 1) / TN;
    }
    S.blk0[nseg] = nb;
    if (!nb) return;
    static bool attr;
    if (!attr) { /* over the 48 KiB default, and room for three blocks a multiprocessor */
        cudaFuncSetAttribute(mmq_tile_k<WN>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sizeof(mt_smem<WN>));
        cudaFuncSetAttribute(mmq_tile_k<WN>, cudaFuncAttributePreferredSharedMemoryCarveout, 100);
        attr = true;
    }
    launch_k(mmq_tile_k<WN>, dim3((unsigned)nb, (unsigned)((rows + TM - 1) / TM)), 128, sizeof(mt_smem<WN>), s, S,
             k, *q, rows);
}

extern "C" bool mfc_mmq_tile(cudaStream_t s, const mfc_mm_seg *seg, int nseg, int k, const mfc_q8 *q, int rows) {
    if (!mfc_mmq_tile_on || rows < mfc_mmq_tile_rows || rows <= 8 || k % 256) return false;
    int n = 0;
    for (int i = 0; i < nseg; i++) {
        /* Q8_0 measured slower here than k_mmq.cu's kernel at 512 rows (its
         * weight bytes are 1.9x Q4_K's for the same products) */
        if (seg[i].type != T_Q4_K && seg[i].type != T_Q6_K && seg[i].type != T_Q6_KP) return false;
        n += seg[i].n;
    }
    /* the widest weight tile that still gives every multiprocessor about
     * two blocks (132 on an H200): narrow products of few rows need more,
     * smaller blocks */
    const long blocks128 = (long)(n / 128) * ((rows + TM - 1) / TM);
    if (blocks128 >= 264) mt_launch<4>(s, seg, nseg, k, q, rows);
    else if (blocks128 * 2 >= 264) mt_launch<2>(s, seg, nseg, k, q, rows);
    else mt_launch<1>(s, seg, nseg, k, q, rows);
    return true;
}
