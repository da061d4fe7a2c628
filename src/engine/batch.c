/* batch.c - mf_decode_batch: a batch of tokens of many sequences becomes one
 * or more steps (forward passes of at most n_batch rows).
 *
 * The batch's entries are ordered by sequence (a stable counting sort), so a
 * sequence's rows are consecutive and in position order inside every step:
 * attention then runs per sequence, and every other op is row-local. Since no
 * op mixes rows, and attention's order of reduction depends only on a query's
 * own position, a sequence's results do not depend on what else is in the
 * batch (ARCHITECTURE.md principle 11).
 *
 * Every cell the batch will write is reserved before the first step, so a
 * full cache fails before anything is computed; the page bookkeeping is
 * snapshotted first and restored on any failure, so a failed decode leaves
 * the cache as it was. */
#include "engine/context.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

mf_status mf_batch_init(mf_batch *b, int32_t cap) {
    memset(b, 0, sizeof *b);
    if (cap <= 0) return mf_err(MF_ERR_INVALID_ARG, "batch capacity %d must be positive", cap);
    b->token = malloc((size_t)cap * sizeof *b->token);
    b->pos = malloc((size_t)cap * sizeof *b->pos);
    b->seq_id = malloc((size_t)cap * sizeof *b->seq_id);
    b->output = malloc((size_t)cap * sizeof *b->output);
    if (!b->token || !b->pos || !b->seq_id || !b->output) {
        mf_batch_free(b);
        return mf_err(MF_ERR_NOMEM, "out of memory for a batch of %d tokens", cap);
    }
    b->cap = cap;
    return MF_OK;
}

void mf_batch_free(mf_batch *b) {
    free(b->token);
    free(b->pos);
    free(b->seq_id);
    free(b->output);
    memset(b, 0, sizeof *b);
}

void mf_batch_clear(mf_batch *b) { b->n_tokens = 0; }

mf_status mf_batch_add(mf_batch *b, mf_token tok, int32_t pos, int32_t seq, bool output) {
    if (b->n_tokens >= b->cap) return mf_err(MF_ERR_INVALID_ARG, "batch full (%d tokens)", b->cap);
    const int32_t i = b->n_tokens++;
    b->token[i] = tok;
    b->pos[i] = pos;
    b->seq_id[i] = seq;
    b->output[i] = output;
    return MF_OK;
}

/* Per-entry arrays for a batch of n entries. */
static mf_status reserve_entries(mf_context *ctx, size_t n) {
    if (n <= ctx->entry_cap) return MF_OK;
    int32_t *a = realloc(ctx->entry_row, n * sizeof *a);
    if (a) ctx->entry_row = a;
    int32_t *b = realloc(ctx->out_entry, n * sizeof *b);
    if (b) ctx->out_entry = b;
    int32_t *c = realloc(ctx->order, n * 2 * sizeof *c); /* order, then each entry's cell */
    if (c) ctx->order = c;
    if (!a || !b || !c) return mf_err(MF_ERR_NOMEM, "out of memory for a batch of %zu tokens", n);
    ctx->entry_cap = n;
    return MF_OK;
}

static mf_status reserve_outputs(mf_context *ctx, size_t rows) {
    if (rows <= ctx->out_cap) return MF_OK;
    const size_t w = ctx->embeddings ? ctx->model->hp.n_embd : ctx->model->hp.n_vocab;
    float **buf = ctx->embeddings ? &ctx->embd : &ctx->logits;
    const mf_backend_ops *op = ctx->be->ops;
    float *nb;
    if (op->host_alloc) {
        /* the backend's (pinned) host memory: downloads at full speed; grown
         * geometrically, for a device's allocation and free are slow (the
         * free waits for the device) */
        if (rows < 2 * ctx->out_cap) rows = 2 * ctx->out_cap;
        nb = op->host_alloc(ctx->be, rows * w * sizeof(float));
        if (nb && *buf) memcpy(nb, *buf, ctx->out_cap * w * sizeof(float));
        if (nb) op->host_free(ctx->be, *buf);
    } else {
        nb = realloc(*buf, rows * w * sizeof(float));
    }
    if (!nb) return mf_err(MF_ERR_NOMEM, "out of memory for %zu output rows", rows);
    *buf = nb;
    ctx->out_cap = rows;
    return MF_OK;
}

/* Checks ids, sequences and positions before anything changes. seq_next is
 * scratch of n_seq_max entries. */
static mf_status validate(const mf_context *ctx, const mf_batch *b, uint32_t *seq_next) {
    const uint32_t n_vocab = ctx->model->hp.n_vocab;
    if (!b || b->n_tokens <= 0) return mf_err(MF_ERR_INVALID_ARG, "mf_decode: empty batch");
    if (!b->token || !b->pos || !b->seq_id || !b->output) return mf_err(MF_ERR_INVALID_ARG, "mf_decode: batch has NULL arrays");
    for (uint32_t s = 0; s < ctx->n_seq_max; s++) seq_next[s] = ctx->kv.seq[s].n_pos;
    for (int32_t i = 0; i < b->n_tokens; i++) {
        const mf_token t = b->token[i];
        const int32_t s = b->seq_id[i];
        if (t < 0 || (uint32_t)t >= n_vocab)
            return mf_err(MF_ERR_INVALID_ARG, "token id %d at batch index %d is out of range (vocabulary of %u)", t, i,
                          n_vocab);
        if (s < 0 || (uint32_t)s >= ctx->n_seq_max)
            return mf_err(MF_ERR_INVALID_ARG, "batch index %d: sequence id %d is out of range (n_seq_max %u)", i, s,
                          ctx->n_seq_max);
        if (b->pos[i] < 0 || (uint32_t)b->pos[i] != seq_next[s])
            return mf_err(MF_ERR_INVALID_ARG,
                          "batch index %d: position %d, but sequence %d continues at position %u (a sequence's tokens "
                          "take consecutive positions)",
                          i, b->pos[i], s, seq_next[s]);
        if (++seq_next[s] > ctx->n_ctx)
            return mf_err(MF_ERR_CONTEXT_FULL, "context full: sequence %d would hold %u positions, more than n_ctx %u", s,
                          seq_next[s], ctx->n_ctx);
    }
    return MF_OK;
}

/* Rows [c0, c1) of the sorted order as one step. */
static void build_step(mf_context *ctx, const mf_batch *b, const int32_t *order, const int32_t *cell, int32_t c0,
                       int32_t c1, mf_step *st, int32_t *out_base) {
    mf_step_buf *sb = &ctx->sb;
    const size_t maxp = ctx->kv.max_pages;
    int32_t n_seq = 0, n_out = 0;
    *out_base = -1;
    for (int32_t r = 0; r < c1 - c0; r++) {
        const int32_t e = order[c0 + r], s = b->seq_id[e];
        sb->tokens[r] = b->token[e];
        sb->pos[r] = b->pos[e];
        sb->cell[r] = cell[e];
        sb->seq[r] = s;
        if (b->output[e]) {
            if (*out_base < 0) *out_base = ctx->entry_row[e];
            sb->out_rows[n_out++] = r;
        }
        if (!n_seq || sb->seq[r - 1] != s) {
            mf_step_seq *q = &sb->seqs[n_seq];
            q->row0 = r;
            q->n_rows = 0;
            q->pos0 = b->pos[e];
            q->pages = sb->pages + (size_t)n_seq * maxp;
            n_seq++;
        }
        sb->seqs[n_seq - 1].n_rows++;
    }
    /* each sequence's block table, as far as this step reaches */
    for (int32_t i = 0; i < n_seq; i++) {
        mf_step_seq *q = &sb->seqs[i];
        const uint32_t np = ((uint32_t)(q->pos0 + q->n_rows) + MF_KV_PAGE - 1) / MF_KV_PAGE;
        memcpy((int32_t *)q->pages, ctx->kv.seq[sb->seq[q->row0]].pages, np * sizeof(int32_t));
    }
    *st = (mf_step){c1 - c0, sb->tokens, sb->pos, sb->cell, n_seq, sb->seqs, n_out, sb->out_rows};
}

static void finish_pooling(mf_context *ctx) {
    const size_t E = ctx->model->hp.n_embd;
    for (uint32_t s = 0; s < ctx->n_seq_max; s++) {
        if (!ctx->pool_n[s]) continue;
        const double *sum = ctx->pool_sum + s * E;
        float *o = ctx->pooled + s * E;
        const double div = ctx->pooling == MF_POOLING_MEAN ? (double)ctx->pool_n[s] : 1.0;
        for (size_t i = 0; i < E; i++) o[i] = (float)(sum[i] / div);
    }
}

static mf_status decode_batch(mf_context *ctx, const mf_batch *b);

mf_status mf_decode_batch(mf_context *ctx, const mf_batch *b) {
    if (!ctx) return mf_err(MF_ERR_INVALID_ARG, "mf_decode: NULL context");
    /* a shared pool serves one decode at a time */
    if (ctx->tp) pthread_mutex_lock(&ctx->tp->lock);
    mf_status st = decode_batch(ctx, b);
    if (ctx->tp) pthread_mutex_unlock(&ctx->tp->lock);
    return st;
}

static mf_status decode_batch(mf_context *ctx, const mf_batch *b) {
    mf_status st = validate(ctx, b, ctx->seq_scratch);
    if (st) return st;
    const int32_t n = b->n_tokens;
    if ((st = reserve_entries(ctx, (size_t)n))) return st;
    int32_t n_out = 0;
    for (int32_t i = 0; i < n; i++) n_out += b->output[i];
    if ((st = reserve_outputs(ctx, (size_t)n_out))) return st;

    /* stable counting sort by sequence */
    int32_t *order = ctx->order, *cell = ctx->order + n;
    {
        uint32_t *start = ctx->seq_scratch;
        memset(start, 0, (ctx->n_seq_max + 1) * sizeof *start);
        for (int32_t i = 0; i < n; i++) start[b->seq_id[i] + 1]++;
        for (uint32_t s = 0; s < ctx->n_seq_max; s++) start[s + 1] += start[s];
        for (int32_t i = 0; i < n; i++) order[start[b->seq_id[i]]++] = i;
    }
    for (int32_t r = 0, k = 0; r < n; r++) {
        const int32_t e = order[r];
        ctx->entry_row[e] = b->output[e] ? k++ : -1;
    }
    for (int32_t i = 0, j = 0; i < n; i++)
        if (b->output[i]) ctx->out_entry[j++] = i;
    /* each sequence's last token (the last of its run in sorted order) */
    for (uint32_t s = 0; s < ctx->n_seq_max; s++) ctx->seq_last_row[s] = -1;
    for (int32_t r = 0; r < n; r++) {
        const int32_t e = order[r];
        if (r + 1 == n || b->seq_id[order[r + 1]] != b->seq_id[e]) ctx->seq_last_row[b->seq_id[e]] = ctx->entry_row[e];
    }

    /* reserve every cell before computing anything */
    ctx->n_logits = 0;
    ctx->n_entries = 0;
    ctx->n_entries = 0;
    mf_kv_save(&ctx->kv);
    for (int32_t r = 0; r < n; r++) {
        const int32_t e = order[r];
        int32_t copy;
        if ((st = mf_kv_append(&ctx->kv, b->seq_id[e], &cell[e], &copy))) {
            mf_kv_restore(&ctx->kv);
            return st;
        }
        if (copy >= 0) {
            ctx->be->ops->kv_copy_page(ctx->be, copy, cell[e] / MF_KV_PAGE);
            if (ctx->lo.be) ctx->lo.be->ops->kv_copy_page(ctx->lo.be, copy, cell[e] / MF_KV_PAGE);
        }
    }
    if (ctx->embeddings && ctx->pooling != MF_POOLING_NONE) {
        memset(ctx->pool_sum, 0, (size_t)ctx->n_seq_max * ctx->model->hp.n_embd * sizeof(double));
        memset(ctx->pool_n, 0, ctx->n_seq_max * sizeof(int32_t));
    }

    for (int32_t c0 = 0; c0 < n; c0 += (int32_t)ctx->n_batch) {
        const int32_t c1 = n - c0 < (int32_t)ctx->n_batch ? n : c0 + (int32_t)ctx->n_batch;
        mf_step step;
        int32_t out_base;
        build_step(ctx, b, order, cell, c0, c1, &step, &out_base);
        if ((st = mf_forward(ctx, &step, out_base))) {
            mf_kv_restore(&ctx->kv);
            return st;
        }
    }
    if (ctx->embeddings && ctx->pooling != MF_POOLING_NONE) finish_pooling(ctx);
    ctx->n_logits = n_out;
    ctx->n_entries = n;
    return MF_OK;
}

mf_status mf_decode(mf_context *ctx, const mf_token *tokens, int32_t n, bool all_logits) {
    if (n <= 0) return mf_err(MF_ERR_INVALID_ARG, "mf_decode: empty batch");
    if (!tokens) return mf_err(MF_ERR_INVALID_ARG, "mf_decode: NULL tokens");
    const uint32_t n_past = ctx->kv.seq[0].n_pos;
    if ((uint64_t)n_past + (uint64_t)n > ctx->n_ctx)
        return mf_err(MF_ERR_CONTEXT_FULL, "context full: %u cached + %d new tokens exceed n_ctx %u", n_past, n,
                      ctx->n_ctx);
    mf_batch *b = &ctx->one;
    if (n > b->cap) {
        mf_batch nb;
        mf_status st = mf_batch_init(&nb, n);
        if (st) return st;
        mf_batch_free(b);
        *b = nb;
    }
    mf_batch_clear(b);
    for (int32_t i = 0; i < n; i++) mf_batch_add(b, tokens[i], (int32_t)(n_past + (uint32_t)i), 0, all_logits || i == n - 1);
    return mf_decode_batch(ctx, b);
}

const float *mf_get_logits(const mf_context *ctx, int32_t i) {
    if (ctx->n_logits == 0 || !ctx->logits || ctx->embeddings) return NULL;
    if (i < 0) i += ctx->n_logits;
    if (i < 0 || i >= ctx->n_logits) return NULL;
    return ctx->logits + (size_t)ctx->entry_row[ctx->out_entry[i]] * ctx->model->hp.n_vocab;
}

const float *mf_get_logits_ith(const mf_context *ctx, int32_t i) {
    if (ctx->embeddings || i < 0 || i >= ctx->n_entries || ctx->entry_row[i] < 0) return NULL;
    return ctx->logits + (size_t)ctx->entry_row[i] * ctx->model->hp.n_vocab;
}

const float *mf_get_embeddings_ith(const mf_context *ctx, int32_t i) {
    if (!ctx->embeddings || i < 0 || i >= ctx->n_entries || ctx->entry_row[i] < 0) return NULL;
    return ctx->embd + (size_t)ctx->entry_row[i] * ctx->model->hp.n_embd;
}

const float *mf_get_embeddings_seq(const mf_context *ctx, int32_t seq) {
    if (!ctx->embeddings || ctx->pooling == MF_POOLING_NONE || seq < 0 || (uint32_t)seq >= ctx->n_seq_max ||
        !ctx->n_entries || !ctx->pool_n[seq])
        return NULL;
    return ctx->pooled + (size_t)seq * ctx->model->hp.n_embd;
}

float *mf_context_one_logit_row(mf_context *ctx, int32_t seq) {
    if (ctx->embeddings || reserve_entries(ctx, 1) || reserve_outputs(ctx, 1)) return NULL;
    ctx->entry_row[0] = 0;
    ctx->out_entry[0] = 0;
    ctx->n_entries = 1;
    ctx->n_logits = 1;
    for (uint32_t s = 0; s < ctx->n_seq_max; s++) ctx->seq_last_row[s] = -1;
    ctx->seq_last_row[seq] = 0;
    return ctx->logits;
}

const float *mf_context_seq_logits(const mf_context *ctx, int32_t seq) {
    if (ctx->embeddings || seq < 0 || (uint32_t)seq >= ctx->n_seq_max || !ctx->n_logits || ctx->seq_last_row[seq] < 0)
        return NULL;
    return ctx->logits + (size_t)ctx->seq_last_row[seq] * ctx->model->hp.n_vocab;
}

const float *mf_get_logits_seq(const mf_context *ctx, int32_t seq) { return mf_context_seq_logits(ctx, seq); }
