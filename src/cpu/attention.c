/* attention.c - KV cache storage and causal multi-head attention on the CPU.
 *
 * Cache layout: per layer, one row per position holding all kv heads
 * (n_head_kv * head_dim elements) in the cache type. Attention is split
 * across threads by (token, head) pairs; each pair is computed by one thread
 * with a fixed order, so results do not depend on the thread count. */
#include "cpu/cpu.h"
#include "core/alloc.h"
#include "core/error.h"
#include "quant/fp16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

mf_status mf_cpu_kv_init(mf_backend *be, const mf_kv_desc *d) {
    mf_cpu *cpu = (mf_cpu *)be;
    mf_type t = d->type == MF_KV_F16 ? MF_TYPE_F16 : d->type == MF_KV_Q8_0 ? MF_TYPE_Q8_0 : MF_TYPE_F32;
    if (d->type != MF_KV_F32)
        return mf_err(MF_ERR_UNSUPPORTED, "KV cache type %s is not supported yet (use f32)", mf_type_name(t));
    cpu->kv = *d;
    cpu->k_row_bytes = mf_row_size(t, d->k_width);
    cpu->v_row_bytes = mf_row_size(t, d->v_width);
    cpu->k = calloc(d->n_layer, sizeof *cpu->k);
    cpu->v = calloc(d->n_layer, sizeof *cpu->v);
    if (!cpu->k || !cpu->v) return mf_err(MF_ERR_NOMEM, "out of memory for the KV cache");
    for (uint32_t l = 0; l < d->n_layer; l++) {
        cpu->k[l] = mf_alloc_aligned(mf_mul_size(d->n_ctx, cpu->k_row_bytes));
        cpu->v[l] = mf_alloc_aligned(mf_mul_size(d->n_ctx, cpu->v_row_bytes));
        if (!cpu->k[l] || !cpu->v[l])
            return mf_err(MF_ERR_NOMEM, "out of memory for the KV cache (%u positions x %u layers)", d->n_ctx, d->n_layer);
    }
    return MF_OK;
}

void mf_cpu_kv_store(mf_backend *be, int layer, const float *k, const float *v, int n_tok, uint32_t pos0) {
    mf_cpu *cpu = (mf_cpu *)be;
    memcpy(cpu->k[layer] + (size_t)pos0 * cpu->k_row_bytes, k, (size_t)n_tok * cpu->k_row_bytes);
    memcpy(cpu->v[layer] + (size_t)pos0 * cpu->v_row_bytes, v, (size_t)n_tok * cpu->v_row_bytes);
}

typedef struct attn_task {
    mf_cpu *cpu;
    int layer;
    const float *q;
    int n_tok;
    uint32_t pos0;
    const mf_attn_params *p;
    float *out;
} attn_task;

static void attn_fn(void *arg, int ith, int nth) {
    attn_task *t = arg;
    const mf_attn_params *p = t->p;
    const float *K = (const float *)t->cpu->k[t->layer];
    const float *V = (const float *)t->cpu->v[t->layer];
    const int kw = p->n_head_kv * p->head_dim_k, vw = p->n_head_kv * p->head_dim_v;
    const int group = p->n_head / p->n_head_kv;
    float *sc = t->cpu->att_scratch + (size_t)ith * t->cpu->max_ctx;
    long j0, j1;
    mf_split((long)t->n_tok * p->n_head, ith, nth, &j0, &j1);
    for (long j = j0; j < j1; j++) {
        const int ti = (int)(j / p->n_head), h = (int)(j % p->n_head), hk = h / group;
        const uint32_t qpos = t->pos0 + (uint32_t)ti;
        const float *q = t->q + ((size_t)ti * p->n_head + h) * p->head_dim_k;
        uint32_t first = 0;
        if (p->window > 0 && qpos >= (uint32_t)p->window) first = qpos - (uint32_t)p->window + 1;
        float mx = -INFINITY;
        for (uint32_t s = first; s <= qpos; s++) {
            const float *k = K + (size_t)s * kw + (size_t)hk * p->head_dim_k;
            float d = 0;
            for (int i = 0; i < p->head_dim_k; i++) d += q[i] * k[i];
            d *= p->scale;
            if (p->softcap > 0) d = p->softcap * tanhf(d / p->softcap);
            sc[s] = d;
            if (d > mx) mx = d;
        }
        double sum = 0;
        for (uint32_t s = first; s <= qpos; s++) {
            float e = expf(sc[s] - mx);
            sc[s] = e;
            sum += e;
        }
        const float inv = (float)(1.0 / sum);
        float *o = t->out + ((size_t)ti * p->n_head + h) * p->head_dim_v;
        for (int i = 0; i < p->head_dim_v; i++) o[i] = 0;
        for (uint32_t s = first; s <= qpos; s++) {
            const float w = sc[s] * inv;
            const float *v = V + (size_t)s * vw + (size_t)hk * p->head_dim_v;
            for (int i = 0; i < p->head_dim_v; i++) o[i] += w * v[i];
        }
    }
}

void mf_cpu_attention(mf_backend *be, int layer, const float *q, int n_tok, uint32_t pos0, const mf_attn_params *p,
                      float *out) {
    attn_task t = {(mf_cpu *)be, layer, q, n_tok, pos0, p, out};
    mf_pool_run(((mf_cpu *)be)->pool, attn_fn, &t);
}
