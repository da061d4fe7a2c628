/* moe.c - mixture-of-experts ops on the CPU: routing (softmax or sigmoid over
 * the router's logits, top k, renormalise, scale) and the expert-indexed
 * product. The routing arithmetic is the one the forward pass did on the host
 * before it became an op, so the bits are unchanged; each expert runs once on
 * the rows routed to it, through the ordinary matmul (row-local, so a row's
 * result does not depend on which other rows share its expert). */
#include "cpu/cpu.h"
#include "engine/moe_route.h"

#include <math.h>
#include <string.h>

void mf_cpu_moe_route(mf_backend *be, const float *logits, int n, const mf_moe_route *p, int32_t *sel, float *w) {
    (void)be;
    const int X = p->n_expert, K = p->k;
    float pr[MF_MAX_EXPERTS];
    for (int t = 0; t < n; t++)
        mf_route_row(logits + (size_t)t * X, X, K, p->sigmoid, p->norm_topk, p->scale, pr, sel + (size_t)t * K,
                     w + (size_t)t * K);
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
