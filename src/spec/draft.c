/* draft.c - a small model drafting for a bigger one. The drafter mirrors each
 * sequence's accepted history in its own KV cache: every call keeps the
 * longest common prefix, drops the rest (the rejected drafts of the last
 * step) and decodes only the new tokens, then proposes greedily. Greedy
 * drafts keep the target's verification exact (see mf_sampler_verify). */
#include "minfer.h"
#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp tolerates padded vocabularies of slightly different sizes (a
 * Qwen2.5 0.5B drafts for the 7B: 151,936 against 152,064 logit rows) as
 * long as the shared ids name the same tokens; so do we. */
#define VOCAB_MAX_DIFF 128

/* Per request while drafting: the draft's next candidate. */
typedef struct cand {
    mf_token tok;
    float p;
    bool live;
} cand;

struct mf_drafter {
    mf_model *model;
    mf_context *ctx;
    int32_t n_seq, n_vocab, n_batch;
    mf_token **kv;   /* per sequence: the tokens its cache holds */
    int32_t *n_kv, *cap;
    mf_batch b;
    cand *cand;      /* per request (at most n_seq), reused: drafting allocates nothing */
    int32_t *req_of; /* batch entry -> request */
};

mf_status mf_vocab_check_same(const mf_model *draft, const mf_model *target) {
    const int32_t nd = mf_model_n_vocab(draft), nt = mf_model_n_vocab(target);
    if (abs(nd - nt) > VOCAB_MAX_DIFF)
        return mf_err(MF_ERR_INVALID_ARG,
                      "draft model: its vocabulary has %d tokens, the target's %d (more than %d apart): the draft must "
                      "share the target's tokenizer",
                      nd, nt, VOCAB_MAX_DIFF);
    if (mf_token_bos(draft) != mf_token_bos(target) || mf_token_eos(draft) != mf_token_eos(target))
        return mf_err(MF_ERR_INVALID_ARG, "draft model: its BOS/EOS ids (%d/%d) differ from the target's (%d/%d)",
                      mf_token_bos(draft), mf_token_eos(draft), mf_token_bos(target), mf_token_eos(target));
    const int32_t n = nd < nt ? nd : nt;
    for (int32_t i = 0; i < n; i++) {
        const char *a = mf_token_text(draft, i), *b = mf_token_text(target, i);
        if (!a != !b || (a && strcmp(a, b)))
            return mf_err(MF_ERR_INVALID_ARG, "draft model: token %d is '%s' in the draft and '%s' in the target", i,
                          a ? a : "(none)", b ? b : "(none)");
    }
    return MF_OK;
}

mf_status mf_drafter_new(mf_model *draft, const mf_model *target, const mf_context_params *cp, mf_drafter **out) {
    *out = NULL;
    mf_status st = mf_vocab_check_same(draft, target);
    if (st) return st;
    mf_drafter *d = calloc(1, sizeof *d);
    if (!d) return mf_err(MF_ERR_NOMEM, "out of memory");
    mf_context_params p = cp ? *cp : mf_context_default_params();
    d->model = draft;
    d->n_seq = p.n_seq_max ? (int32_t)p.n_seq_max : 1;
    d->n_vocab = mf_model_n_vocab(draft);
    d->n_batch = p.n_batch ? (int32_t)p.n_batch : 512;
    d->kv = calloc((size_t)d->n_seq, sizeof *d->kv);
    d->n_kv = calloc((size_t)d->n_seq, sizeof *d->n_kv);
    d->cap = calloc((size_t)d->n_seq, sizeof *d->cap);
    d->cand = calloc((size_t)d->n_seq, sizeof *d->cand);
    d->req_of = malloc(sizeof *d->req_of * (size_t)d->n_batch);
    if (!d->kv || !d->n_kv || !d->cap || !d->cand || !d->req_of) {
        mf_drafter_free(d);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    if ((st = mf_batch_init(&d->b, d->n_batch)) || (st = mf_context_new(draft, &p, &d->ctx))) {
        mf_drafter_free(d);
        return st;
    }
    *out = d;
    return MF_OK;
}

void mf_drafter_free(mf_drafter *d) {
    if (!d) return;
    mf_context_free(d->ctx);
    for (int32_t s = 0; d->kv && s < d->n_seq; s++) free(d->kv[s]);
    free(d->kv);
    free(d->n_kv);
    free(d->cap);
    free(d->cand);
    free(d->req_of);
    mf_batch_free(&d->b);
    free(d);
}

static mf_status remember(mf_drafter *d, int32_t seq, mf_token t) {
    if (d->n_kv[seq] == d->cap[seq]) {
        int32_t nc = d->cap[seq] ? 2 * d->cap[seq] : 256;
        mf_token *nk = realloc(d->kv[seq], sizeof *nk * (size_t)nc);
        if (!nk) return mf_err(MF_ERR_NOMEM, "out of memory");
        d->kv[seq] = nk;
        d->cap[seq] = nc;
    }
    d->kv[seq][d->n_kv[seq]++] = t;
    return MF_OK;
}

/* The top token of a row and, when a threshold needs it, its softmax
 * probability (a pass of expf over the vocabulary: a tenth of a millisecond
 * at 128k tokens, which a fast GPU step would notice). */
static mf_token top1(const float *l, int32_t n, bool want_p, float *p) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    *p = 1.0f;
    if (!want_p) return best;
    const float mx = l[best];
    float sum = 0;
    for (int32_t i = 0; i < n; i++) sum += expf(l[i] - mx);
    *p = 1.0f / sum;
    return best;
}

/* Runs the batch; each flagged entry's request gets its row's top token. */
static mf_status run(mf_drafter *d, const mf_draft_req *r, const int32_t *req_of, cand *c) {
    mf_status st = mf_decode_batch(d->ctx, &d->b);
    if (st) return st;
    for (int32_t e = 0; e < d->b.n_tokens; e++) {
        if (!d->b.output[e]) continue;
        const float *l = mf_get_logits_ith(d->ctx, e);
        if (!l) return mf_err(MF_ERR_INTERNAL, "drafter: no logits for batch entry %d", e);
        const int32_t q = req_of[e];
        c[q].tok = top1(l, d->n_vocab, r[q].p_min > 0, &c[q].p);
    }
    return MF_OK;
}

mf_status mf_drafter_propose_batch(mf_drafter *d, mf_draft_req *r, int32_t n) {
    if (n < 0 || n > d->n_seq)
        return mf_err(MF_ERR_INVALID_ARG, "drafter: %d requests, at most one per sequence (%d)", n, d->n_seq);
    mf_status st = MF_OK;
    cand *c = d->cand;
    int32_t *req_of = d->req_of;
    memset(c, 0, sizeof *c * (size_t)n);
    /* catch each sequence's cache up with its history, all in shared batches;
     * the common prefix stays, at least one token runs (for logits) */
    mf_batch_clear(&d->b);
    for (int32_t q = 0; q < n; q++) {
        r[q].n_out = 0;
        const int32_t seq = r[q].seq;
        if (seq < 0 || seq >= d->n_seq) {
            st = mf_err(MF_ERR_INVALID_ARG, "drafter: sequence %d out of range", seq);
            goto out;
        }
        /* the draft's context may be shorter than the target's */
        const int32_t room = (int32_t)mf_context_n_ctx(d->ctx) - r[q].n_hist;
        if (r[q].max > room) r[q].max = room;
        if (r[q].n_hist <= 0 || r[q].max < 0) continue;
        int32_t keep = 0;
        while (keep < d->n_kv[seq] && keep < r[q].n_hist - 1 && d->kv[seq][keep] == r[q].hist[keep]) keep++;
        if (keep < d->n_kv[seq]) {
            if ((st = mf_kv_seq_rm(d->ctx, seq, keep, -1))) goto out;
            d->n_kv[seq] = keep;
        }
        for (int32_t i = keep; i < r[q].n_hist; i++) {
            if (d->b.n_tokens == d->n_batch) {
                if ((st = run(d, r, req_of, c))) goto out;
                mf_batch_clear(&d->b);
            }
            req_of[d->b.n_tokens] = q;
            mf_batch_add(&d->b, r[q].hist[i], d->n_kv[seq], seq, i == r[q].n_hist - 1);
            if ((st = remember(d, seq, r[q].hist[i]))) goto out;
        }
        c[q].live = true;
    }
    if (d->b.n_tokens && (st = run(d, r, req_of, c))) goto out;
    /* then one token per live request per forward */
    for (;;) {
        mf_batch_clear(&d->b);
        for (int32_t q = 0; q < n; q++) {
            if (!c[q].live) continue;
            if (r[q].n_out >= r[q].max || c[q].p < r[q].p_min || mf_token_is_eog(d->model, c[q].tok)) {
                c[q].live = false;
                continue;
            }
            r[q].out[r[q].n_out++] = c[q].tok;
            if (r[q].n_out == r[q].max) { /* its logits would go unused */
                c[q].live = false;
                continue;
            }
            const int32_t seq = r[q].seq;
            req_of[d->b.n_tokens] = q;
            mf_batch_add(&d->b, c[q].tok, d->n_kv[seq], seq, true);
            if ((st = remember(d, seq, c[q].tok))) goto out;
        }
        if (!d->b.n_tokens) break;
        if ((st = run(d, r, req_of, c))) goto out;
    }
out:
    if (st) /* what the cache holds is unknown now: start the sequences afresh */
        for (int32_t q = 0; q < n; q++)
            if (r[q].seq >= 0 && r[q].seq < d->n_seq) {
                mf_kv_seq_rm(d->ctx, r[q].seq, 0, -1);
                d->n_kv[r[q].seq] = 0;
            }
    return st;
}

mf_status mf_drafter_propose(mf_drafter *d, int32_t seq, const mf_token *hist, int32_t n_hist, int32_t max,
                             float p_min, mf_token *out, int32_t *n_out) {
    mf_draft_req r = {.seq = seq, .hist = hist, .n_hist = n_hist, .max = max, .p_min = p_min, .out = out};
    mf_status st = mf_drafter_propose_batch(d, &r, 1);
    *n_out = st ? 0 : r.n_out;
    return st;
}
