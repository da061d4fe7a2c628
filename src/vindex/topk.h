/* topk.h - a bounded min-heap keeping the k best (score, id) pairs seen, so
 * a top-K over any number of candidates needs k slots and no more. Order is
 * total: a higher score wins, an equal score goes to the lower id, so the
 * result never depends on the order candidates arrive in (threads merge in
 * any split and get the same answer). */
#ifndef MF_VINDEX_TOPK_H
#define MF_VINDEX_TOPK_H

#include <stdint.h>

typedef struct mf_topk {
    int k, n;
    float *score;
    int32_t *id;
} mf_topk;

/* a ranks before b */
static inline int mf_topk_better(float sa, int32_t ia, float sb, int32_t ib) {
    return sa > sb || (sa == sb && ia < ib);
}

static inline void mf_topk_reset(mf_topk *h, int k, float *score, int32_t *id) {
    h->k = k, h->n = 0, h->score = score, h->id = id;
}

static inline void mf_topk_sift_down(mf_topk *h, int i) {
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        /* the root holds the worst kept pair */
        if (l < h->n && mf_topk_better(h->score[w], h->id[w], h->score[l], h->id[l])) w = l;
        if (r < h->n && mf_topk_better(h->score[w], h->id[w], h->score[r], h->id[r])) w = r;
        if (w == i) return;
        float ts = h->score[i]; h->score[i] = h->score[w]; h->score[w] = ts;
        int32_t ti = h->id[i]; h->id[i] = h->id[w]; h->id[w] = ti;
        i = w;
    }
}

static inline void mf_topk_push(mf_topk *h, float s, int32_t id) {
    if (h->k <= 0) return;
    if (h->n < h->k) {
        int i = h->n++;
        h->score[i] = s, h->id[i] = id;
        while (i > 0) {
            int p = (i - 1) / 2;
            if (!mf_topk_better(h->score[p], h->id[p], h->score[i], h->id[i])) break;
            float ts = h->score[i]; h->score[i] = h->score[p]; h->score[p] = ts;
            int32_t ti = h->id[i]; h->id[i] = h->id[p]; h->id[p] = ti;
            i = p;
        }
        return;
    }
    if (!mf_topk_better(s, id, h->score[0], h->id[0])) return;
    h->score[0] = s, h->id[0] = id;
    mf_topk_sift_down(h, 0);
}

/* Sorts the kept pairs best first, in place (the heap is consumed). */
static inline void mf_topk_sort(mf_topk *h) {
    int n = h->n;
    while (h->n > 1) {
        int last = --h->n;
        float ts = h->score[0]; h->score[0] = h->score[last]; h->score[last] = ts;
        int32_t ti = h->id[0]; h->id[0] = h->id[last]; h->id[last] = ti;
        mf_topk_sift_down(h, 0);
    }
    h->n = n;
}

#endif
