/* step_util.h - drive a backend's KV and attention ops for one sequence at
 * positions pos0.. without a context: a linear step (page i holds positions
 * [64 i, 64 i + 64)), begun and ended around each op. */
#ifndef TEST_STEP_UTIL_H
#define TEST_STEP_UTIL_H

#include <stdlib.h>

#include "engine/backend.h"

#define TEST_PAGE 64

static inline mf_kv_desc test_kv_desc(mf_kv_type t, uint32_t n_ctx, uint32_t n_layer, uint32_t kw, uint32_t vw,
                                      uint32_t dk, uint32_t dv) {
    mf_kv_desc d = {t, (n_ctx + TEST_PAGE - 1) / TEST_PAGE, TEST_PAGE, n_layer, kw, vw, dk, dv};
    return d;
}

typedef struct test_step {
    mf_step st;
    mf_step_seq seq;
    int32_t *pos, *cell, *pages;
} test_step;

static inline void test_step_begin(mf_backend *be, test_step *t, int n, uint32_t pos0) {
    t->pos = malloc(sizeof(int32_t) * (size_t)n);
    t->cell = malloc(sizeof(int32_t) * (size_t)n);
    t->pages = malloc(sizeof(int32_t) * ((pos0 + (uint32_t)n) / TEST_PAGE + 1));
    mf_step_linear(&t->st, &t->seq, t->pos, t->cell, t->pages, NULL, n, pos0, TEST_PAGE);
    be->ops->begin_step(be, &t->st);
}

static inline void test_step_end(mf_backend *be, test_step *t) {
    be->ops->end_step(be);
    free(t->pos);
    free(t->cell);
    free(t->pages);
}

static inline void kv_store_at(mf_backend *be, int layer, const float *k, const float *v, int n, uint32_t pos0) {
    test_step t;
    test_step_begin(be, &t, n, pos0);
    be->ops->kv_store(be, layer, k, v);
    test_step_end(be, &t);
}

static inline void attention_at(mf_backend *be, int layer, const float *q, int n, uint32_t pos0, const mf_attn_params *p,
                                float *out) {
    test_step t;
    test_step_begin(be, &t, n, pos0);
    be->ops->attention(be, layer, q, p, out);
    test_step_end(be, &t);
}

/* kv_read / kv_write of positions [pos0, pos0 + n) */
static inline size_t kv_read_at(mf_backend *be, int layer, uint32_t pos0, uint32_t n, void *dst) {
    int32_t *c = malloc(sizeof(int32_t) * (n ? n : 1));
    for (uint32_t i = 0; i < n; i++) c[i] = (int32_t)(pos0 + i);
    size_t r = be->ops->kv_read(be, layer, c, n, dst);
    free(c);
    return r;
}

static inline void kv_write_at(mf_backend *be, int layer, uint32_t pos0, uint32_t n, const void *src) {
    int32_t *c = malloc(sizeof(int32_t) * (n ? n : 1));
    for (uint32_t i = 0; i < n; i++) c[i] = (int32_t)(pos0 + i);
    be->ops->kv_write(be, layer, c, n, src);
    free(c);
}

#endif
