/* test_cuda_kernels.c - every cuda product kernel against its slow twin:
 * weights quantized by quant/'s reference quantizer, decoded by its
 * reference dequantizer, and a dot product in double on the host.
 *
 * Per type (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
 * Q5_K, Q6_K, IQ4_NL, IQ4_XS) and row count (1, 3 and 8: the warp-per-row
 * decode kernel; 20: the tiled prefill kernel), |gpu - ref| <= 1e-5 * sum
 * |w||x| per output, the f32 accumulation's bound (the sums run in another
 * order than the host's, and nvcc may fuse a decode's multiply and add into
 * one FMA).
 * The dp4a kernels (Q4_K, Q6_K, Q8_0, Q2_K, Q3_K, IQ4_NL, IQ4_XS, up to 8
 * rows; teams of 1, 2 and 4 warps per row; several types in one launch)
 * and the int8 tensor-core kernels (Q4_K, Q6_K, Q8_0; 20 to 150 rows:
 * k_mmq.cu's in chunks of 16, 32 and 64, and the shared-memory tiles of
 * k_mmq_tile.cu, partial chunks and weight tiles included; each row's
 * outputs bit for bit the same at every row count of one kernel) are held
 * to the same bound
 * against a reference over the activations rounded as they round them
 * (int8 blocks of 32, scale max|x| / 127; over 8 rows also with each
 * super-block's 8 blocks at its largest scale, mfc_q8.g8, which the
 * K-quant mmas sum as integers), so their integer arithmetic is checked
 * exactly up to float rounding. The embedding lookup
 * (get_rows) against to_float, 1e-6 relative. The 64-register variant of
 * the one-row K-quant products (grids of 1024 blocks or more) is compared
 * with the plain kernel bit for bit. The tensor-core prefill
 * kernel rounds weights and activations to f16 (2^-11 relative each):
 * 2e-3 of sum |w||x|; so do the f16 prompt tiles of k_gemm_h.cu (every
 * type they take, 65 to 150 rows, each row's outputs bit for bit the same
 * at every row count; Q4_K and Q6_K in one launch bitwise each alone, over
 * rows of magnitudes 2^-40..2^40 that f16 holds only after each row's
 * power-of-two scaling). Rows of 172 elements (F32,
 * F16) cover the one-element paths; IQ4_NL rows of 1056 (33 blocks, not a
 * multiple of 256) the types' generic paths only. Exits 77 (skipped)
 * without a device. */
#include "testutil.h"
#include "cuda/kernels.h"
#include "quant/types.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint32_t g_r = 12345;
static float frand(void) {
    g_r = g_r * 1103515245u + 12345u;
    return ((float)(g_r >> 8) / 16777216.0f - 0.5f) * 2.0f;
}

static void *dup_dev(const void *p, size_t n) {
    void *d = NULL;
    if (cudaMalloc(&d, n ? n : 4) != cudaSuccess) return NULL;
    cudaMemcpy(d, p, n, cudaMemcpyHostToDevice);
    return d;
}

/* n weight rows of k as the backend uploads them (weights.c): Q8_0 rows of
 * whole super-blocks regrouped (kernels.h, MFC_T_Q8_0R), Q6_K rows of an
 * even count of super-blocks with the odd ones reversed (MFC_T_Q6_KP),
 * others as they are; *dt: the type the kernels are given */
static void *up_w(int type, const uint8_t *wq, size_t rb, int n, int k, int *dt) {
    *dt = mfc_dev_type(type, k);
    if (*dt == type) return dup_dev(wq, rb * (size_t)n);
    uint8_t *p = malloc(rb * (size_t)n);
    if (!mfc_dev_pack(*dt, wq, p, (size_t)n, k)) {
        free(p);
        return NULL;
    }
    void *d = dup_dev(p, rb * (size_t)n);
    free(p);
    return d;
}

/* x rounded as mfc_quant_x rounds it: blocks of 32, each with its own
 * scale, or (g8) the 8 of each super-block of 256 with the largest one */
static void q8_round(const float *x, int n, float *y, bool g8) {
    for (int b = 0; b < n / 32; b++) {
        float a = 0;
        const int b0 = g8 ? b / 8 * 8 : b, nb = g8 ? 8 : 1;
        for (int i = 0; i < 32 * nb; i++) a = fmaxf(a, fabsf(x[b0 * 32 + i]));
        const float d = a / 127.0f;
        for (int i = 0; i < 32; i++) y[b * 32 + i] = d > 0 ? (float)(int)rintf(x[b * 32 + i] / d) * d : 0.0f;
    }
}

/* rows x n outputs against a double-precision dot of wd (n rows of k) with
 * x (rows of k): how many are off by more than tol of sum |w||x|, and the
 * worst such fraction in *worst (NaN counts as off) */
static int ref_off(const float *wd, const float *x, const float *out, int rows, int n, int k, double tol,
                   double *worst) {
    int bad = 0;
    *worst = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int i = 0; i < k; i++) {
                ref += (double)wd[(size_t)j * k + i] * x[(size_t)r * k + i];
                mag += fabs((double)wd[(size_t)j * k + i] * x[(size_t)r * k + i]);
            }
            const double d = fabs(out[(size_t)r * n + j] - ref) / (mag > 0 ? mag : 1);
            if (!(d <= tol)) bad++;
            if (d > *worst || d != d) *worst = d;
        }
    return bad;
}

/* A kernel's rows bit for bit the same at every row count: the first call
 * keeps its rows x n outputs, later calls compare their first rows with them */
static void same_rows(float *first, int *first_rows, const float *out, int rows, int n, const char *what, int type,
                      int k) {
    if (!*first_rows) {
        memcpy(first, out, sizeof(float) * (size_t)rows * n);
        *first_rows = rows;
        return;
    }
    CHECK(memcmp(first, out, sizeof(float) * (size_t)*first_rows * n) == 0,
          "%s k %d: %s rows 0..%d differ between steps of %d and %d rows", mf_type_name(type), k, what,
          *first_rows - 1, *first_rows, rows);
}

static void check_type(int type, int k, int n) {
    const mf_type_traits *tr = mf_type_traits_ref(type);
    const size_t rb = mf_row_size(type, k);
    float *wf = malloc(sizeof(float) * (size_t)k * n), *wd = malloc(sizeof(float) * (size_t)k * n);
    uint8_t *wq = malloc(rb * (size_t)n);
    for (size_t i = 0; i < (size_t)k * n; i++) wf[i] = frand();
    for (int j = 0; j < n; j++) {
        tr->from_float_ref(wf + (size_t)j * k, wq + (size_t)j * rb, k);
        tr->to_float(wq + (size_t)j * rb, wd + (size_t)j * k, k);
    }
    const int R = 150;
    float *x = malloc(sizeof(float) * (size_t)R * k), *xr = malloc(sizeof(float) * (size_t)R * k);
    for (size_t i = 0; i < (size_t)R * k; i++) x[i] = frand() * 3.0f;
    /* outputs: the products' rows x n, or get_rows' 3 x k */
    const size_t n_out = (size_t)R * n > (size_t)3 * k ? (size_t)R * n : (size_t)3 * k;
    float *out = malloc(sizeof(float) * n_out);
    int dt;
    void *dw = up_w(type, wq, rb, n, k, &dt);
    float *dx = dup_dev(x, sizeof(float) * (size_t)R * k), *dout = NULL;
    cudaMalloc((void **)&dout, sizeof(float) * n_out);
    mfc_q8 q8 = {0};
    /* whole tiles of 16 rows, (d, s) pairs (the tiled layout, kernels.h) */
    const size_t RT = (R + 15) / 16 * 16;
    cudaMalloc((void **)&q8.q, RT * k);
    cudaMalloc((void **)&q8.d, RT * k / 4);
    cudaMalloc((void **)&q8.s, RT * k / 8);
    static const int rows_list[] = {1, 3, 8, 20, 33, 64, 65, 100, 150};
    /* the int8 tensor-core rows (over 8): each row's outputs bit for bit
     * the same at every row count (in chunks of 64 past 64 rows) */
    float *first_mq[2], *first_tl[2];
    for (int i = 0; i < 2; i++)
        first_mq[i] = malloc(sizeof(float) * (size_t)R * n), first_tl[i] = malloc(sizeof(float) * (size_t)R * n);
    float *first_h = malloc(sizeof(float) * (size_t)R * n);
    int first_rows[2] = {0, 0}, first_tile[2] = {0, 0}, first_hr = 0;
    mfc_xh xh = {0};
    cudaMalloc(&xh.h, (size_t)R * k * 2);
    cudaMalloc((void **)&xh.s, sizeof(float) * R);
    cudaMalloc((void **)&xh.part, sizeof(float) * R * MFC_H_PART_PER_ROW);
    const int chunk0 = mfc_mmq_chunk;
    for (int mode = 0; mode < 4; mode++) {
        for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
            const int rows = rows_list[ri];
            const bool q = mode == 1, tc = mode == 2, hg = mode == 3;
            if (q && !mfc_mmvq_takes(dt, k, rows)) continue;
            if (hg) {
                if (!mfc_gemm_h_takes(dt, k, rows)) continue; /* prompts: 65 rows and more */
            } else if (!q && rows > 20) continue; /* the f32 and f16 tiles: 20 rows cover their paths */
            if (tc && !mfc_gemm_tc_takes(dt, k, rows)) continue;
            /* the dp4a products with each team size (warps per row), not
             * just the one k picks */
            static const int teams[] = {0, 1, 2, 4, 0};
            /* over 8 rows, activations with a scale per 32 and (g8) one per
             * super-block of 256 */
            for (int tg = 0; tg < (q ? (rows > 8 ? 10 : 5) : 1); tg++) {
            const int ti = tg % 5, g8 = tg / 5;
            if (ti == 4 && rows <= 8) continue;
            mfc_mmvq_w = teams[ti];
            /* the int8 mma kernel's chunks of 16, 32, 64 rows (chunks of up
             * to 32 stage K-quant activations in shared memory), then 16
             * without the staging */
            mfc_mmq_chunk = ti == 1 || ti == 4 ? 16 : ti == 2 ? 32 : 64;
            mfc_mmq_stage = ti != 4;
            /* over 8 rows: k_mmq.cu's kernel at each chunk size, then the shared-memory tiles */
            const bool tile = q && rows > 8 && ti == 3;
            mfc_mmq_tile_on = tile;
            mfc_mmq_tile_rows = 9; /* every row count over 8, not only prompts' */
            cudaMemset(dout, 0, sizeof(float) * (size_t)R * n);
            if (q) {
                q8.g8 = g8;
                mfc_quant_x(0, dx, k, rows, &q8);
                mfc_mmvq(0, dt, dw, rb, k, n, &q8, rows, dout, NULL, NULL);
                for (int r = 0; r < rows; r++) q8_round(x + (size_t)r * k, k, xr + (size_t)r * k, g8);
            } else if (tc) {
                CHECK(mfc_gemm_tc(0, dt, dw, rb, k, n, dx, rows, dout, NULL, NULL), "%s: tensor-core gemm refused",
                      mf_type_name(type));
                memcpy(xr, x, sizeof(float) * (size_t)rows * k);
            } else if (hg) {
                const mfc_mm_seg sg = {dw, rb, dt, n, dout, NULL, NULL};
                CHECK(mfc_gemm_h(0, &sg, 1, k, dx, rows, &xh), "%s: f16 prompt gemm refused", mf_type_name(type));
                memcpy(xr, x, sizeof(float) * (size_t)rows * k);
            } else {
                CHECK(mfc_matmul(0, dt, dw, rb, k, n, dx, rows, dout, NULL, NULL), "%s: matmul refused",
                      mf_type_name(type));
                memcpy(xr, x, sizeof(float) * (size_t)rows * k);
            }
            cudaError_t e = cudaDeviceSynchronize();
            CHECK(e == cudaSuccess, "%s rows %d: %s", mf_type_name(type), rows, cudaGetErrorString(e));
            cudaMemcpy(out, dout, sizeof(float) * (size_t)rows * n, cudaMemcpyDeviceToHost);
            double worst;
            const int bad = ref_off(wd, xr, out, rows, n, k, tc || hg ? 2e-3 : 1e-5, &worst);
            CHECK(bad == 0, "%s k %d rows %d%s%s team %d: %d of %d outputs off (worst %.2e of sum |w||x|)",
                  mf_type_name(type), k, rows, g8 ? " g8" : "",
                  q ? (rows > 8 ? (tile ? " int8 tiles" : " int8 mma") : " dp4a") : tc ? " tensor cores" : hg ? " f16 prompt tiles" : "",
                  rows > 8 && q ? mfc_mmq_team(k) : mfc_mmvq_team(k), bad, rows * n, worst);
            if (hg) same_rows(first_h, &first_hr, out, rows, n, "f16 prompt tiles", type, k); /* k_gemm_h.cu */
            else if (tile) same_rows(first_tl[g8], &first_tile[g8], out, rows, n, "tiled int8 mma", type, k); /* k_mmq_tile.cu */
            else if (q && rows > 8) same_rows(first_mq[g8], &first_rows[g8], out, rows, n, "int8 mma", type, k);
            }
            mfc_mmvq_w = 0;
            mfc_mmq_chunk = chunk0;
            mfc_mmq_stage = 1;
            mfc_mmq_tile_on = true;
            mfc_mmq_tile_rows = 65;
        }
    }
    for (int i = 0; i < 2; i++) free(first_mq[i]), free(first_tl[i]);
    free(first_h);
    cudaFree(xh.h), cudaFree(xh.s), cudaFree(xh.part);
    /* embedding rows */
    int32_t ids[3] = {n - 1, 0, n / 2};
    int32_t *did = dup_dev(ids, sizeof ids);
    CHECK(mfc_get_rows(0, dt, dw, rb, k, did, 3, dout), "%s: get_rows refused", mf_type_name(type));
    cudaMemcpy(out, dout, sizeof(float) * 3 * (size_t)k, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < k; i++) {
            const float ref = wd[(size_t)ids[r] * k + i];
            if (fabsf(out[(size_t)r * k + i] - ref) > 1e-6f * fmaxf(1.0f, fabsf(ref))) bad++;
        }
    CHECK(bad == 0, "%s: get_rows: %d of %d elements off", mf_type_name(type), bad, 3 * k);
    cudaFree(did);
    cudaFree(dw), cudaFree(dx), cudaFree(dout), cudaFree(q8.q), cudaFree(q8.d), cudaFree(q8.s);
    free(wf), free(wd), free(wq), free(x), free(xr), free(out);
}

/* Several types in one dp4a launch (mfc_mmvq_n: the kernel with every
 * type's path, or Q4_K/Q6_K/Q8_0's): each segment's outputs against the
 * reference as above, and bit for bit what a launch of that segment alone
 * gives (kernels.h: a row's value does not depend on the launch). */
static void check_mixed(int k, int n) {
    /* the kernel of every path, Q4_K/Q6_K/Q8_0's, Q4_K/Q6_K's (Q6_K in the
     * device's layout at an even count of super-blocks, else the file's) */
    enum { NSET = 4 };
    static const int sets[NSET][4] = {{MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS},
                                      {MF_TYPE_Q4_K, MF_TYPE_Q6_K, MF_TYPE_Q8_0, MF_TYPE_IQ4_XS},
                                      {MF_TYPE_Q4_K, MF_TYPE_Q8_0, MF_TYPE_Q6_K, MF_TYPE_Q8_0},
                                      {MF_TYPE_Q6_K, MF_TYPE_Q4_K, MF_TYPE_Q6_K, MF_TYPE_Q4_K}};
    enum { NS = 4, R = 8 };
    float *x = malloc(sizeof(float) * R * k), *xr = malloc(sizeof(float) * R * k);
    for (size_t i = 0; i < (size_t)R * k; i++) x[i] = frand() * 3.0f;
    for (int r = 0; r < R; r++) q8_round(x + (size_t)r * k, k, xr + (size_t)r * k, false);
    float *dx = dup_dev(x, sizeof(float) * R * k);
    mfc_q8 q8 = {0};
    cudaMalloc((void **)&q8.q, (size_t)R * k);
    cudaMalloc((void **)&q8.d, (size_t)R * k / 8);
    cudaMalloc((void **)&q8.s, (size_t)R * k / 8);
    float *out = malloc(sizeof(float) * R * n), *one = malloc(sizeof(float) * R * n);
    float *dout = NULL, *done = NULL;
    cudaMalloc((void **)&dout, sizeof(float) * NS * R * n);
    cudaMalloc((void **)&done, sizeof(float) * R * n);
    for (int si = 0; si < NSET; si++) {
        mfc_mm_seg seg[NS];
        float *wd[NS];
        for (int i = 0; i < NS; i++) {
            const int type = sets[si][i];
            const mf_type_traits *tr = mf_type_traits_ref(type);
            const size_t rb = mf_row_size(type, k);
            float *wf = malloc(sizeof(float) * (size_t)k);
            uint8_t *wq = malloc(rb * (size_t)n);
            wd[i] = malloc(sizeof(float) * (size_t)k * n);
            for (int j = 0; j < n; j++) {
                for (int e = 0; e < k; e++) wf[e] = frand();
                tr->from_float_ref(wf, wq + (size_t)j * rb, k);
                tr->to_float(wq + (size_t)j * rb, wd[i] + (size_t)j * k, k);
            }
            int dt;
            void *dw = up_w(type, wq, rb, n, k, &dt);
            seg[i] = (mfc_mm_seg){dw, rb, dt, n, dout + (size_t)i * R * n, NULL, NULL};
            free(wf), free(wq);
        }
        static const int rows_list[] = {1, 5, 8};
        for (int ri = 0; ri < 3; ri++) {
            const int rows = rows_list[ri];
            mfc_quant_x(0, dx, k, rows, &q8);
            mfc_mmvq_n(0, seg, NS, k, &q8, rows);
            for (int i = 0; i < NS; i++) {
                mfc_mmvq(0, seg[i].type, seg[i].w, seg[i].row_bytes, k, n, &q8, rows, done, NULL, NULL);
                const cudaError_t e = cudaDeviceSynchronize();
                CHECK(e == cudaSuccess, "mixed launch k %d rows %d: %s", k, rows, cudaGetErrorString(e));
                cudaMemcpy(out, seg[i].out, sizeof(float) * (size_t)rows * n, cudaMemcpyDeviceToHost);
                cudaMemcpy(one, done, sizeof(float) * (size_t)rows * n, cudaMemcpyDeviceToHost);
                int bad = 0;
                for (int r = 0; r < rows; r++)
                    for (int j = 0; j < n; j++) {
                        double ref = 0, mag = 0;
                        for (int e = 0; e < k; e++) {
                            ref += (double)wd[i][(size_t)j * k + e] * xr[(size_t)r * k + e];
                            mag += fabs((double)wd[i][(size_t)j * k + e] * xr[(size_t)r * k + e]);
                        }
                        if (!(fabs(out[(size_t)r * n + j] - ref) <= 1e-5 * (mag > 0 ? mag : 1))) bad++;
                    }
                CHECK(bad == 0, "%s in a mixed dp4a launch, k %d rows %d: %d of %d outputs off",
                      mf_type_name(sets[si][i]), k, rows, bad, rows * n);
                CHECK(!memcmp(out, one, sizeof(float) * (size_t)rows * n),
                      "%s k %d rows %d: a mixed dp4a launch differs from the type's own launch",
                      mf_type_name(sets[si][i]), k, rows);
            }
        }
        for (int i = 0; i < NS; i++) cudaFree((void *)seg[i].w), free(wd[i]);
    }
    cudaFree(dx), cudaFree(dout), cudaFree(done), cudaFree(q8.q), cudaFree(q8.d), cudaFree(q8.s);
    free(x), free(xr), free(out), free(one);
}

/* The 64-register variant of the one-row products (k_mmvq.cu, grids of
 * 1024 blocks or more) against the plain kernel, bit for bit, and both
 * against the reference: n rows of k, one activation row. */
static void check_occ(int type, int k, int n) {
    const mf_type_traits *tr = mf_type_traits_ref(type);
    const size_t rb = mf_row_size(type, k);
    float *wf = malloc(sizeof(float) * (size_t)k), *wd = malloc(sizeof(float) * (size_t)k * n);
    uint8_t *wq = malloc(rb * (size_t)n);
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < k; i++) wf[i] = frand();
        tr->from_float_ref(wf, wq + (size_t)j * rb, k);
        tr->to_float(wq + (size_t)j * rb, wd + (size_t)j * k, k);
    }
    float *x = malloc(sizeof(float) * (size_t)k), *xr = malloc(sizeof(float) * (size_t)k);
    for (int i = 0; i < k; i++) x[i] = frand() * 3.0f;
    q8_round(x, k, xr, false);
    int dt;
    void *dw = up_w(type, wq, rb, n, k, &dt);
    float *dx = dup_dev(x, sizeof(float) * (size_t)k), *dout = NULL;
    cudaMalloc((void **)&dout, sizeof(float) * (size_t)n);
    mfc_q8 q8 = {0};
    cudaMalloc((void **)&q8.q, (size_t)k);
    cudaMalloc((void **)&q8.d, (size_t)k / 8);
    cudaMalloc((void **)&q8.s, (size_t)k / 8);
    mfc_quant_x(0, dx, k, 1, &q8);
    float *got[2] = {malloc(sizeof(float) * (size_t)n), malloc(sizeof(float) * (size_t)n)};
    const int occ0 = mfc_mmvq_occ;
    for (int v = 0; v < 2; v++) {
        mfc_mmvq_occ = v;
        cudaMemset(dout, 0, sizeof(float) * (size_t)n);
        mfc_mmvq(0, dt, dw, rb, k, n, &q8, 1, dout, NULL, NULL);
        CHECK(cudaDeviceSynchronize() == cudaSuccess, "%s occ %d: %s", mf_type_name(type), v,
              cudaGetErrorString(cudaGetLastError()));
        cudaMemcpy(got[v], dout, sizeof(float) * (size_t)n, cudaMemcpyDeviceToHost);
    }
    mfc_mmvq_occ = occ0;
    CHECK(memcmp(got[0], got[1], sizeof(float) * (size_t)n) == 0,
          "%s k %d n %d: the 64-register one-row variant differs from the plain kernel", mf_type_name(type), k, n);
    double worst;
    const int bad = ref_off(wd, xr, got[1], 1, n, k, 1e-5, &worst);
    CHECK(bad == 0, "%s k %d n %d one row, 64-register variant: %d of %d outputs off (worst %.2e of sum |w||x|)",
          mf_type_name(type), k, n, bad, n, worst);
    printf("test_cuda_kernels: %s k %d n %d, one row: the 64-register variant %s the plain kernel, worst %.2e\n",
           mf_type_name(type), k, n, memcmp(got[0], got[1], sizeof(float) * (size_t)n) ? "differs from" : "bitwise",
           worst);
    fflush(stdout);
    free(wf), free(wd), free(wq), free(x), free(xr), free(got[0]), free(got[1]);
    cudaFree(dw), cudaFree(dx), cudaFree(dout), cudaFree(q8.q), cudaFree(q8.d), cudaFree(q8.s);
}

/* k_gemm_h.cu with Q4_K and Q6_K segments in one launch, over rows whose
 * magnitudes span 2^-span..2^span (f16 alone holds 2^-24..65504: the
 * per-row power of two must bring each into range): each segment against
 * the reference at the kernel's 2e-3, and bit for bit a launch of that
 * segment alone over the same f16 rows (mfc_gemm_h with x NULL reuses them). */
static void check_h_mixed(int k, int n, int rows, int span) {
    static const int ty[2] = {MF_TYPE_Q4_K, MF_TYPE_Q6_K};
    float *x = malloc(sizeof(float) * (size_t)rows * k);
    for (int r = 0; r < rows; r++) {
        const float f = ldexpf(1.0f, (r * 7) % (2 * span + 1) - span);
        for (int i = 0; i < k; i++) x[(size_t)r * k + i] = frand() * f;
    }
    float *dx = dup_dev(x, sizeof(float) * (size_t)rows * k), *dout[2], *dsolo;
    mfc_xh xh = {0};
    cudaMalloc(&xh.h, (size_t)rows * k * 2);
    cudaMalloc((void **)&xh.s, sizeof(float) * rows);
    cudaMalloc((void **)&xh.part, sizeof(float) * rows * MFC_H_PART_PER_ROW);
    cudaMalloc((void **)&dsolo, sizeof(float) * (size_t)rows * n);
    mfc_mm_seg sg[2];
    float *wd[2];
    void *dw[2];
    for (int t = 0; t < 2; t++) {
        const mf_type_traits *tr = mf_type_traits_ref(ty[t]);
        const size_t rb = mf_row_size(ty[t], k);
        float *wf = malloc(sizeof(float) * (size_t)k * n);
        uint8_t *wq = malloc(rb * (size_t)n);
        wd[t] = malloc(sizeof(float) * (size_t)k * n);
        for (size_t i = 0; i < (size_t)k * n; i++) wf[i] = frand();
        for (int j = 0; j < n; j++) {
            tr->from_float_ref(wf + (size_t)j * k, wq + (size_t)j * rb, k);
            tr->to_float(wq + (size_t)j * rb, wd[t] + (size_t)j * k, k);
        }
        int dt;
        dw[t] = up_w(ty[t], wq, rb, n, k, &dt);
        cudaMalloc((void **)&dout[t], sizeof(float) * (size_t)rows * n);
        sg[t] = (mfc_mm_seg){dw[t], rb, dt, n, dout[t], NULL, NULL};
        free(wf), free(wq);
    }
    CHECK(mfc_gemm_h(0, sg, 2, k, dx, rows, &xh), "f16 prompt gemm refused Q4_K + Q6_K");
    float *out = malloc(sizeof(float) * (size_t)rows * n), *solo = malloc(sizeof(float) * (size_t)rows * n);
    for (int t = 0; t < 2; t++) {
        mfc_mm_seg one = sg[t];
        one.out = dsolo;
        CHECK(mfc_gemm_h(0, &one, 1, k, NULL, rows, &xh), "f16 prompt gemm refused one segment");
        cudaError_t e = cudaDeviceSynchronize();
        CHECK(e == cudaSuccess, "f16 prompt gemm: %s", cudaGetErrorString(e));
        cudaMemcpy(out, dout[t], sizeof(float) * (size_t)rows * n, cudaMemcpyDeviceToHost);
        cudaMemcpy(solo, dsolo, sizeof(float) * (size_t)rows * n, cudaMemcpyDeviceToHost);
        double worst;
        const int bad = ref_off(wd[t], x, out, rows, n, k, 2e-3, &worst);
        CHECK(bad == 0, "%s k %d rows %d f16 prompt tiles, mixed launch, rows of 2^-%d..2^%d: %d of %d off (worst %.2e)",
              mf_type_name(ty[t]), k, rows, span, span, bad, rows * n, worst);
        CHECK(memcmp(out, solo, sizeof(float) * (size_t)rows * n) == 0,
              "%s k %d: f16 prompt tiles differ between the mixed launch and the segment alone", mf_type_name(ty[t]), k);
        cudaFree(dw[t]), cudaFree(dout[t]);
        free(wd[t]);
    }
    cudaFree(dx), cudaFree(dsolo), cudaFree(xh.h), cudaFree(xh.s), cudaFree(xh.part);
    free(x), free(out), free(solo);
}

/* mfc_q8_0r_pack and mfc_q6_kp_pack put every byte where kernels.h says
 * (host only: runs without a device) */
static void check_pack(void) {
    enum { K = 512, N = 3 };
    const size_t rb = mf_row_size(MF_TYPE_Q8_0, K);
    uint8_t *a = malloc(rb * N), *b = malloc(rb * N);
    for (size_t i = 0; i < rb * N; i++) a[i] = (uint8_t)(frand() * 127.0f + 128.0f);
    mfc_q8_0r_pack(a, b, N, K);
    int bad = 0;
    for (int r = 0; r < N; r++)
        for (int e = 0; e < K; e++) {
            const int blk = e / 32, run = blk / 8;
            const uint8_t *src = a + r * rb + (size_t)blk * 34, *dst = b + r * rb + (size_t)run * 272;
            bad += dst[16 + 32 * (blk % 8) + e % 32] != src[2 + e % 32];
            if (e % 32 < 2) bad += dst[2 * (blk % 8) + e % 32] != src[e % 32];
        }
    CHECK(bad == 0, "mfc_q8_0r_pack: %d bytes misplaced", bad);
    CHECK(mfc_dev_type(MF_TYPE_Q8_0, K) == MFC_T_Q8_0R && mfc_dev_type(MF_TYPE_Q8_0, 288) == MF_TYPE_Q8_0 &&
              mfc_dev_type(MF_TYPE_Q4_K, K) == MF_TYPE_Q4_K,
          "mfc_dev_type: Q8_0 regrouped only for rows of whole super-blocks");
    free(a), free(b);
    /* Q6_K: even super-blocks as in the file, odd ones d, scales, high bits, low bits */
    const size_t rq = mf_row_size(MF_TYPE_Q6_K, K);
    a = malloc(rq * N), b = malloc(rq * N);
    for (size_t i = 0; i < rq * N; i++) a[i] = (uint8_t)(frand() * 127.0f + 128.0f);
    CHECK(mfc_dev_pack(MFC_T_Q6_KP, a, b, N, K) && !mfc_dev_pack(MF_TYPE_Q4_K, a, b, N, K),
          "mfc_dev_pack: a packer for the two device layouts alone");
    static const int off_file[4] = {0, 128, 192, 208}, off_odd[4] = {82, 18, 2, 0}, len[4] = {128, 64, 16, 2};
    bad = 0;
    for (size_t sb = 0; sb < rq * N / 210; sb++)
        for (int part = 0; part < 4; part++)
            for (int i = 0; i < len[part]; i++)
                bad += b[sb * 210 + (size_t)((sb & 1) ? off_odd[part] : off_file[part]) + i] !=
                       a[sb * 210 + (size_t)off_file[part] + i];
    CHECK(bad == 0, "mfc_q6_kp_pack: %d bytes misplaced", bad);
    CHECK(mfc_dev_type(MF_TYPE_Q6_K, K) == MFC_T_Q6_KP && mfc_dev_type(MF_TYPE_Q6_K, 2304) == MF_TYPE_Q6_K,
          "mfc_dev_type: Q6_K repacked only for rows of an even count of super-blocks");
    free(a), free(b);
}

int main(void) {
    check_pack();
    int nd = 0;
    if (cudaGetDeviceCount(&nd) != cudaSuccess || nd == 0) {
        fprintf(stderr, "test_cuda_kernels: skipped: no CUDA device (the host-only Q8_0 and Q6_K layout checks ran)\n");
        return g_test_failures ? 1 : 77;
    }
    /* 4100 rows: 1025 blocks of 4, the 64-register variant's grids, the last block partial */
    check_occ(MF_TYPE_Q4_K, 2560, 4100);
    check_occ(MF_TYPE_Q6_K, 2560, 4100);
    check_occ(MF_TYPE_Q6_K, 2304, 4100); /* the file's layout (9 super-blocks a row) */
    static const int types[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q4_0,   MF_TYPE_Q4_1,
                                MF_TYPE_Q5_0, MF_TYPE_Q5_1, MF_TYPE_Q8_0, MF_TYPE_Q2_K,   MF_TYPE_Q3_K,
                                MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_type(types[i], 1024, 37);
        check_type(types[i], 2560, 9);
    }
    /* rows long enough for teams of 2 and 4 warps (24 and 38 super-blocks),
     * row counts that leave a block's last team without a row */
    check_type(MF_TYPE_Q4_K, 6144, 7);
    check_type(MF_TYPE_Q6_K, 6144, 7);
    check_type(MF_TYPE_Q8_0, 6144, 7);
    check_type(MF_TYPE_Q4_K, 9728, 5);
    check_type(MF_TYPE_Q6_K, 9728, 5);
    /* several 128-row weight tiles of k_mmq_tile.cu, the last one partial */
    check_type(MF_TYPE_Q4_K, 512, 300);
    check_type(MF_TYPE_Q6_K, 512, 300);
    check_type(MF_TYPE_Q8_0, 512, 300);
    static const int lowbit[] = {MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
    for (size_t i = 0; i < sizeof lowbit / sizeof lowbit[0]; i++) {
        check_type(lowbit[i], 6144, 7);
        check_type(lowbit[i], 9728, 5);
    }
    check_type(MF_TYPE_IQ4_NL, 1056, 13);
    /* Q8_0 rows of 9 blocks stay in the file's layout (the generic paths),
     * and so do Q6_K rows of 9 super-blocks */
    check_type(MF_TYPE_Q8_0, 288, 13);
    check_type(MF_TYPE_Q6_K, 2304, 9);
    check_type(MF_TYPE_Q6_K, 2304, 300);
    check_mixed(2560, 11);
    check_h_mixed(2560, 300, 200, 40);
    /* rows up to 2^118 (a row scale's exponent past 2^114), k small enough that no sum overflows f32 */
    check_h_mixed(256, 300, 100, 118);
    check_mixed(9728, 6);
    check_mixed(2304, 11); /* Q6_K in the file's layout beside the others */
    check_type(MF_TYPE_F32, 172, 33);
    check_type(MF_TYPE_F16, 172, 33);
    return test_summary("test_cuda_kernels");
}
