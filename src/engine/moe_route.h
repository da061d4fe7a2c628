/* moe_route.h - one row's mixture-of-experts routing, written once for the
 * CPU (cpu/moe.c) and the GPU (cuda/k_moe.cu, where it is a device function),
 * so the two route by the same steps (the same bits but for the exp
 * function's last ulp on the device): softmax (max, exp, a sum in double,
 * each divided by it) or sigmoid over the router's X logits, the top K by
 * probability with ties to the lower expert id, optionally renormalised to
 * sum 1, then scaled. pr: scratch of X floats. */
#ifndef MF_ENGINE_MOE_ROUTE_H
#define MF_ENGINE_MOE_ROUTE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __CUDACC__
#define MF_HD __host__ __device__
#else
#define MF_HD
#endif

static inline MF_HD void mf_route_row(const float *l, int X, int K, bool sigmoid, bool norm_topk, float scale,
                                      float *pr, int32_t *sel, float *w) {
    if (sigmoid) {
        for (int e = 0; e < X; e++) pr[e] = 1.0f / (1.0f + expf(-l[e]));
    } else {
        float mx = l[0];
        for (int e = 1; e < X; e++) mx = l[e] > mx ? l[e] : mx;
        double sum = 0;
        for (int e = 0; e < X; e++) sum += pr[e] = expf(l[e] - mx);
        for (int e = 0; e < X; e++) pr[e] = (float)(pr[e] / sum);
    }
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < X; e++) {
            bool taken = false;
            for (int j = 0; j < k; j++) taken |= sel[j] == e;
            if (!taken && (best < 0 || pr[e] > pr[best])) best = e;
        }
        sel[k] = best;
        w[k] = pr[best];
    }
    if (norm_topk) {
        float sum = 0;
        for (int k = 0; k < K; k++) sum += w[k];
        for (int k = 0; k < K; k++) w[k] /= sum;
    }
    if (scale != 1.0f)
        for (int k = 0; k < K; k++) w[k] *= scale;
}

#endif
