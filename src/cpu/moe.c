/* moe.c - mixture-of-experts ops on the CPU: routing (softmax or sigmoid over
 * the router's logits, top k, renormalise, scale) and the expert-indexed
 * product. The routing arithmetic is the one the forward pass did on the host
 * before it became an op, so the bits are unchanged; each expert runs once on
 * the rows routed to it, through the ordinary matmul (row-local, so a row's
 * result does not depend on which other rows share its expert). */
#include "cpu/cpu.h"

#include <math.h>
#include <string.h>

void mf_cpu_moe_route(mf_backend *be, const float *logits, int n, const mf_moe_route *p, int32_t *sel, float *w) {
    (void)be;
    const int X = p->n_expert, K = p->k;
    float pr[MF_MAX_EXPERTS];
    for (int t = 0; t < n; t++) {
        memcpy(pr, logits + (size_t)t * X, sizeof(float) * (size_t)X);
        if (p->sigmoid) {
            for (int e = 0; e < X; e++) pr[e] = 1.0f / (1.0f + expf(-pr[e]));
        } else {
            float mx = pr[0];
            for (int e = 1; e < X; e++) mx = pr[e] > mx ? pr[e] : mx;
            double sum = 0;
            for (int e = 0; e < X; e++) sum += pr[e] = expf(pr[e] - mx);
            for (int e = 0; e < X; e++) pr[e] = (float)(pr[e] / sum);
        }
        /* top k by probability, ties to the lower expert id */
        int32_t *s = sel + (size_t)t * K;
        float *wt = w + (size_t)t * K;
        for (int k = 0; k < K; k++) {
            int best = -1;
            for (int e = 0; e < X; e++) {
                bool taken = false;
                for (int j = 0; j < k; j++) taken |= s[j] == e;
                if (!taken && (best < 0 || pr[e] > pr[best])) best = e;
            }
            s[k] = best;
            wt[k] = pr[best];
        }
        if (p->norm_topk) {
            float sum = 0;
            for (int k = 0; k < K; k++) sum += wt[k];
            for (int k = 0; k < K; k++) wt[k] /= sum;
        }
        if (p->scale != 1.0f)
            for (int k = 0; k < K; k++) wt[k] *= p->scale;
    }
}

void mf_cpu_matmul_id(mf_backend *be, mf_weight experts, int n_expert, const float *x, bool x_per_slot, int rows, int k,
                      const int32_t *sel, float *out, float *tmp_in, float *tmp_out) {
    const size_t n_in = (size_t)experts[0].ne[0], n_out = (size_t)experts[0].ne[1];
    int32_t *slot = (int32_t *)((mf_cpu *)be)->moe_slots;
    for (int e = 0; e < n_expert; e++) {
        int cnt = 0;
        for (int t = 0; t < rows; t++)
            for (int j = 0; j < k; j++)
                if (sel[(size_t)t * k + j] == e) {
                    const size_t src = x_per_slot ? (size_t)t * k + j : (size_t)t;
                    memcpy(tmp_in + (size_t)cnt * n_in, x + src * n_in, sizeof(float) * n_in);
                    slot[cnt++] = t * k + j;
                }
        if (!cnt) continue;
        mf_cpu_matmul(be, &experts[e], tmp_in, cnt, tmp_out);
        for (int i = 0; i < cnt; i++)
            memcpy(out + (size_t)slot[i] * n_out, tmp_out + (size_t)i * n_out, sizeof(float) * n_out);
    }
}

void mf_cpu_scale_rows(mf_backend *be, float *x, const float *s, bool sigmoid, int rows, int n) {
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float c = sigmoid ? 1.0f / (1.0f + expf(-s[r])) : s[r];
        float *y = x + (size_t)r * n;
        for (int j = 0; j < n; j++) y[j] = y[j] * c;
    }
}
