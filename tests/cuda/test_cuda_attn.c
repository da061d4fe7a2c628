/* test_cuda_attn.c - the decode attention kernels (k_attn.cu, k_attn_mma.cu) against a
 * double-precision softmax on the host, over a paged cache whose pages are
 * shuffled between the sequences.
 *
 * Shapes: qwen3's (32 query heads over 8 KV heads of 128; the tile kernel
 * takes one head a warp), 32 over 4 of 128 (tile: two heads a warp), 16
 * over 2 of 64 (tile: two heads a warp), 4 over 4 of 64 (one query head a KV head), 12 over 4
 * of 128 with a sliding window and a soft cap, 8 over 2 of 256 (the grouped
 * kernel's shape only), an f32 cache (the grouped kernel), and 8 over 2 of
 * 80 (neither: the per-head kernel, and a merge whose last warp is part
 * past the head), and 32 over 2 of 128 and 24 over 2 of 64 (16 and 12 query
 * heads a KV head: the tensor-core kernel's fragment rows g + 8). Each with
 * the tensor-core kernel (mfc_att_kernel = 2, the default) and the f32 tile
 * one (0), each where it takes the shape, and the grouped one (1).
 *
 * Rows at depths 1, 32, 33, 129, 2048 (64 shares of 32), 2049 (33 shares of
 * 64) and 4224 (44 shares of 96: mfc_att_share) in one step: |gpu - ref| <=
 * 2e-5 per output (values in [-1, 1]; the f32 sums' rounding). Each row's
 * own key and value are NaN in the cache until a KV store launched right
 * before the attention writes them, as in a decode step, and every share
 * state starts as NaN. Each row's outputs are also the same bit for bit when
 * it is the step's only row, with blocks along the shares for the deepest
 * row or for the capacity (a captured step's), with one block walking all
 * of a row's shares (the tile and mma kernels), and without their copies
 * before the wait (mfc_attn.early): a row's result depends on nothing else
 * in the step. 64 rows at random depths likewise. Exits 77 (skipped)
 * without a device. */
#include "testutil.h"
#include "cuda/kernels.h"
#include "quant/fp16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

enum { PAGE = 64 };

static cudaStream_t g_s; /* launches with programmatic dependent launch, as a step's */

static uint32_t g_r = 777;
static float frand(void) {
    g_r = g_r * 1103515245u + 12345u;
    return ((float)(g_r >> 8) / 16777216.0f - 0.5f) * 2.0f;
}
static uint32_t urand(uint32_t n) {
    g_r = g_r * 1103515245u + 12345u;
    return (g_r >> 8) % n;
}

typedef struct {
    const char *name;
    int nh, nkv, d, window;
    float softcap;
    int kvt;
} shape;

/* one test case: rows, each its own sequence with np pages (shuffled over
 * the whole cache), at the given depth */
typedef struct {
    shape sh;
    int rows, np, cap, nsplit;
    int *depth, *pages;  /* [rows], [rows x np] */
    float *q, *kf, *vf;  /* host: queries, the cache's values as floats */
    void *dk, *dv;       /* device cache */
    float *dq, *dout, *dpart;
} tcase;

static size_t cells_of(const tcase *c) { return (size_t)c->rows * c->np * PAGE; }
static size_t width(const tcase *c) { return (size_t)c->sh.nkv * c->sh.d; }

static void setup(tcase *c, const shape *sh, int rows, const int *depth, int cap) {
    memset(c, 0, sizeof *c);
    c->sh = *sh, c->rows = rows, c->cap = cap;
    c->np = cap / PAGE + 1;
    c->nsplit = (cap + 31) / 32 < MFC_ATT_MAX_SHARES ? (cap + 31) / 32 : MFC_ATT_MAX_SHARES;
    c->depth = malloc(sizeof(int) * rows);
    memcpy(c->depth, depth, sizeof(int) * rows);
    const int tp = rows * c->np;
    c->pages = malloc(sizeof(int) * tp);
    for (int i = 0; i < tp; i++) c->pages[i] = i;
    for (int i = tp - 1; i > 0; i--) {
        const int j = (int)urand((uint32_t)i + 1), t = c->pages[i];
        c->pages[i] = c->pages[j], c->pages[j] = t;
    }
    const size_t n = cells_of(c) * width(c), nq = (size_t)rows * sh->nh * sh->d;
    c->kf = malloc(sizeof(float) * n), c->vf = malloc(sizeof(float) * n), c->q = malloc(sizeof(float) * nq);
    const size_t es = sh->kvt == MFC_KV_F16 ? 2 : 4;
    void *hk = malloc(es * n), *hv = malloc(es * n);
    for (size_t i = 0; i < n; i++) {
        float k = frand(), v = frand();
        if (sh->kvt == MFC_KV_F16) {
            ((mf_fp16 *)hk)[i] = mf_fp32_to_fp16(k), ((mf_fp16 *)hv)[i] = mf_fp32_to_fp16(v);
            k = mf_fp16_to_fp32(((mf_fp16 *)hk)[i]), v = mf_fp16_to_fp32(((mf_fp16 *)hv)[i]);
        } else {
            ((float *)hk)[i] = k, ((float *)hv)[i] = v;
        }
        c->kf[i] = k, c->vf[i] = v;
    }
    for (size_t i = 0; i < nq; i++) c->q[i] = frand();
    CHECK(cudaMalloc(&c->dk, es * n) == cudaSuccess && cudaMalloc(&c->dv, es * n) == cudaSuccess, "cudaMalloc");
    cudaMemcpy(c->dk, hk, es * n, cudaMemcpyHostToDevice);
    cudaMemcpy(c->dv, hv, es * n, cudaMemcpyHostToDevice);
    free(hk), free(hv);
    cudaMalloc((void **)&c->dq, sizeof(float) * nq);
    cudaMemcpy(c->dq, c->q, sizeof(float) * nq, cudaMemcpyHostToDevice);
    cudaMalloc((void **)&c->dout, sizeof(float) * nq);
    cudaMalloc((void **)&c->dpart, sizeof(float) * (size_t)rows * sh->nh * c->nsplit * (sh->d + 2));
}

static void teardown(tcase *c) {
    free(c->depth), free(c->pages), free(c->q), free(c->kf), free(c->vf);
    cudaFree(c->dk), cudaFree(c->dv), cudaFree(c->dq), cudaFree(c->dout), cudaFree(c->dpart);
}

/* rows r0..r0+n-1 of the case as one step; nz 0: the most shares any of
 * them has (a replayed step's host choice), else nz blocks along them.
 * Their outputs into out (n x nh x d). */
static void run(tcase *c, int r0, int n, int nz, int early, float *out) {
    const shape *sh = &c->sh;
    const int np = c->np;
    const size_t nh = 6 * (size_t)n + (size_t)n * np;
    int32_t *h = malloc(nh * sizeof *h), *tok = h, *pos = h + n, *cell = h + 2 * n, *rs = h + 3 * n, *orow = h + 4 * n,
            *spg = h + 5 * n, *pg = h + 6 * n;
    int most = 1;
    for (int i = 0; i < n; i++) {
        const int r = r0 + i, p = c->depth[r] - 1;
        tok[i] = 0, pos[i] = p, rs[i] = i, orow[i] = i, spg[i] = i * np;
        memcpy(pg + i * np, c->pages + (size_t)r * np, sizeof(int) * np);
        cell[i] = c->pages[(size_t)r * np + p / PAGE] * PAGE + p % PAGE;
        const int first = mfc_att_first(sh->window, p);
        const int ns = mfc_att_n_shares(p - first + 1);
        if (ns > most) most = ns;
    }
    int32_t *d = NULL;
    cudaMalloc((void **)&d, nh * sizeof *h);
    cudaMemcpy(d, h, nh * sizeof *h, cudaMemcpyHostToDevice);
    free(h);
    const mfc_step_dev sd = {d, d + n, d + 2 * n, d + 3 * n, d + 4 * n, d + 5 * n, d + 6 * n};
    const mfc_attn p = {sh->nh, sh->nkv, sh->d, sh->d, 1.0f / sqrtf((float)sh->d), sh->softcap, sh->window,
                        PAGE, (int)width(c), (int)width(c), sh->kvt, early};
    const size_t rq = (size_t)sh->nh * sh->d, w = width(c), es = sh->kvt == MFC_KV_F16 ? 2 : 4;
    /* NaN where nothing is written, and in every share state: a state the
     * merge reads but no share kernel wrote shows */
    cudaMemsetAsync(c->dout, 0xff, sizeof(float) * n * rq, g_s);
    cudaMemsetAsync(c->dpart, 0xff, sizeof(float) * (size_t)c->rows * sh->nh * c->nsplit * (sh->d + 2), g_s);
    /* each row's own key and value as a decode step has them: NaN in the
     * cache until the KV store launched right before the attention writes
     * them (so copies of that cell before the attention's wait show) */
    float *kr = malloc(sizeof(float) * n * w * 2), *vr = kr + n * w;
    for (int i = 0; i < n; i++) {
        const int r = r0 + i, q = c->depth[r] - 1;
        const size_t ce = (size_t)c->pages[(size_t)r * np + q / PAGE] * PAGE + q % PAGE;
        memcpy(kr + i * w, c->kf + ce * w, sizeof(float) * w);
        memcpy(vr + i * w, c->vf + ce * w, sizeof(float) * w);
        cudaMemsetAsync((uint8_t *)c->dk + ce * w * es, 0xff, w * es, g_s);
        cudaMemsetAsync((uint8_t *)c->dv + ce * w * es, 0xff, w * es, g_s);
    }
    float *dkr = NULL;
    cudaMalloc((void **)&dkr, sizeof(float) * n * w * 2);
    cudaMemcpyAsync(dkr, kr, sizeof(float) * n * w * 2, cudaMemcpyHostToDevice, g_s);
    mfc_kv_store(g_s, &sd, n, dkr, dkr + n * w, c->dk, c->dv, (int)w, (int)w, sh->kvt);
    mfc_attention(g_s, &sd, n, c->dq + (size_t)r0 * rq, c->dk, c->dv, &p, c->dout, c->nsplit, nz ? nz : most,
                  c->dpart, NULL);
    const cudaError_t e = cudaStreamSynchronize(g_s);
    CHECK(e == cudaSuccess && cudaGetLastError() == cudaSuccess, "%s: attention failed: %s", sh->name,
          cudaGetErrorString(e));
    cudaMemcpy(out, c->dout, sizeof(float) * n * rq, cudaMemcpyDeviceToHost);
    cudaFree(d), cudaFree(dkr), free(kr);
}

/* the host's attention for row r: how many outputs are off by more than tol */
static int ref_off(const tcase *c, int r, const float *out, double tol, double *worst) {
    const shape *sh = &c->sh;
    const int G = sh->nh / sh->nkv, D = sh->d, p = c->depth[r] - 1;
    const int first = mfc_att_first(sh->window, p);
    double *s = malloc(sizeof(double) * (p + 1));
    int bad = 0;
    for (int h = 0; h < sh->nh; h++) {
        const float *qr = c->q + ((size_t)r * sh->nh + h) * D;
        const int hk = h / G;
        double mx = -INFINITY, sum = 0;
        for (int t = first; t <= p; t++) {
            const size_t cell = (size_t)c->pages[(size_t)r * c->np + t / PAGE] * PAGE + t % PAGE;
            const float *k = c->kf + cell * width(c) + (size_t)hk * D;
            double x = 0;
            for (int i = 0; i < D; i++) x += (double)qr[i] * k[i];
            x /= sqrt((double)D);
            if (sh->softcap > 0) x = sh->softcap * tanh(x / sh->softcap);
            s[t] = x;
            if (x > mx) mx = x;
        }
        for (int t = first; t <= p; t++) sum += s[t] = exp(s[t] - mx);
        for (int i = 0; i < D; i++) {
            double a = 0;
            for (int t = first; t <= p; t++) {
                const size_t cell = (size_t)c->pages[(size_t)r * c->np + t / PAGE] * PAGE + t % PAGE;
                a += s[t] * c->vf[cell * width(c) + (size_t)hk * D + i];
            }
            const double dd = fabs(out[(size_t)h * D + i] - a / sum);
            if (!(dd <= tol)) bad++;
            if (dd > *worst || dd != dd) *worst = dd;
        }
    }
    free(s);
    return bad;
}

static void check_case(const shape *sh, int rows, const int *depth, int cap, int kernel, bool all_alone) {
    tcase c;
    setup(&c, sh, rows, depth, cap);
    mfc_att_kernel = kernel;
    const size_t rq = (size_t)sh->nh * sh->d;
    float *all = malloc(sizeof(float) * rows * rq), *cap_nz = malloc(sizeof(float) * rows * rq),
          *one = malloc(sizeof(float) * rq);
    const int runs0 = mfc_att_mma_runs;
    run(&c, 0, rows, 0, 1, all);
    /* the tensor-core kernel takes f16 caches, heads of 64 or 128, up to 16 query heads a KV head */
    const bool mma_takes = sh->kvt == MFC_KV_F16 && (sh->d == 64 || sh->d == 128) && sh->nh / sh->nkv <= 16;
    CHECK(kernel != 2 || (mfc_att_mma_runs > runs0) == mma_takes, "%s: the tensor-core kernel %s the shape",
          sh->name, mma_takes ? "did not take" : "took");
    run(&c, 0, rows, c.nsplit, 1, cap_nz);
    const char *kn = kernel == 1 ? "grouped" : kernel == 2 ? "mma" : "tile";
    CHECK(memcmp(all, cap_nz, sizeof(float) * rows * rq) == 0,
          "%s (%s): outputs differ between %d blocks along the shares and the step's most", sh->name, kn, c.nsplit);
    run(&c, 0, rows, 0, 0, cap_nz);
    CHECK(memcmp(all, cap_nz, sizeof(float) * rows * rq) == 0,
          "%s (%s): outputs differ with and without the copies before the wait", sh->name, kn);
    mfc_att_tile_nz = 1; /* the tile and mma kernels: one block walks all of a row's shares */
    run(&c, 0, rows, 0, 1, cap_nz);
    mfc_att_tile_nz = 0;
    CHECK(memcmp(all, cap_nz, sizeof(float) * rows * rq) == 0,
          "%s (%s): outputs differ with one block along the shares", sh->name, kn);
    double worst = 0;
    int bad = 0;
    for (int r = 0; r < rows; r++) {
        bad += ref_off(&c, r, all + r * rq, 2e-5, &worst);
        if (all_alone || r % 13 == 0) {
            run(&c, r, 1, 0, 1, one);
            CHECK(memcmp(one, all + r * rq, sizeof(float) * rq) == 0,
                  "%s (%s): row %d at depth %d differs alone and in a step of %d rows", sh->name, kn, r, depth[r],
                  rows);
        }
    }
    CHECK(bad == 0, "%s (%s), %d rows: %d outputs off the host's by more than 2e-5 (worst %.3g)", sh->name, kn, rows,
          bad, worst);
    printf("test_cuda_attn: %s, %s kernel, %d rows: max|d| %.3g\n", sh->name, kn, rows, worst);
    mfc_att_kernel = 2; /* the default */
    free(all), free(cap_nz), free(one);
    teardown(&c);
}

/* The share rule on the host (runs without a device too): shares are whole
 * tiles of 32 keys, cover the row's keys exactly, and a row of n keys has at
 * most min(64, ceil(n / 32)) of them, which is what the backend's att_split
 * (sized from the context) and the merge's two shares a lane rely on,
 * though the count is not monotonic in n (2048 keys: 64 shares, 2049: 33). */
static void check_share_rule(void) {
    int bad = 0;
    for (int n = 1; n <= 1 << 20; n++) {
        const int sk = mfc_att_share(n), ns = mfc_att_n_shares(n), cap = (n + 31) / 32;
        if (sk % 32 || ns > MFC_ATT_MAX_SHARES || ns > cap || (long)ns * sk < n || (long)(ns - 1) * sk >= n) {
            if (!bad++) CHECK(0, "share rule at n %d: %d shares of %d keys", n, ns, sk);
        }
    }
    CHECK(bad == 0, "share rule broken at %d key counts", bad);
    CHECK(mfc_att_n_shares(2048) == 64 && mfc_att_n_shares(2049) == 33 && mfc_att_share(4224) == 96,
          "share rule: 2048 -> %d shares, 2049 -> %d, 4224 keys -> shares of %d", mfc_att_n_shares(2048),
          mfc_att_n_shares(2049), mfc_att_share(4224));
}

int main(void) {
    check_share_rule();
    int nd = 0;
    if (cudaGetDeviceCount(&nd) != cudaSuccess || nd == 0) {
        if (test_summary("test_cuda_attn")) return 1; /* the host part failed */
        fprintf(stderr, "test_cuda_attn: skipped: no CUDA device (the share rule's host checks passed)\n");
        return 77;
    }
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    mfc_pdl_on = major >= 9;
    cudaStreamCreateWithFlags(&g_s, cudaStreamNonBlocking);
    static const shape shapes[] = {
        {"32/8 heads of 128", 32, 8, 128, 0, 0.0f, MFC_KV_F16},
        {"32/4 heads of 128 (eight a KV head)", 32, 4, 128, 0, 0.0f, MFC_KV_F16},
        {"16/2 heads of 64", 16, 2, 64, 0, 0.0f, MFC_KV_F16},
        {"4/4 heads of 64", 4, 4, 64, 0, 0.0f, MFC_KV_F16},
        {"12/4 heads of 128, window 50, soft cap 30", 12, 4, 128, 50, 30.0f, MFC_KV_F16},
        {"8/2 heads of 256", 8, 2, 256, 0, 0.0f, MFC_KV_F16},
        {"8/2 heads of 128, f32 cache", 8, 2, 128, 0, 0.0f, MFC_KV_F32},
        {"8/2 heads of 80 (the per-head kernel)", 8, 2, 80, 0, 0.0f, MFC_KV_F16},
        {"32/2 heads of 128 (sixteen a KV head)", 32, 2, 128, 0, 0.0f, MFC_KV_F16},
        {"24/2 heads of 64 (twelve a KV head)", 24, 2, 64, 0, 0.0f, MFC_KV_F16},
    };
    static const int depths[] = {1, 32, 33, 129, 2048, 2049, 4224};
    int many[64];
    for (int i = 0; i < 64; i++) many[i] = 1 + (int)urand(300);
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (int k = 0; k < 3; k++) {
            check_case(&shapes[i], 7, depths, 4352, k, true);
            if (i < 3) check_case(&shapes[i], 64, many, 320, k, false);
        }
    return test_summary("test_cuda_attn");
}
