/* seq.c - sequence operations on the KV cache (the public mf_kv_seq_*
 * calls): bookkeeping only, no cached byte moves except the copy-on-write a
 * later decode does. */
#include "engine/context.h"
#include "core/error.h"

#include <string.h>

static mf_status check_seq(const mf_context *ctx, int32_t seq, bool any) {
    if ((any && seq == -1) || (seq >= 0 && (uint32_t)seq < ctx->n_seq_max)) return MF_OK;
    return mf_err(MF_ERR_INVALID_ARG, "sequence id %d is out of range (n_seq_max %u)", seq, ctx->n_seq_max);
}

void mf_kv_truncate(mf_context *ctx, uint32_t n_keep) { mf_kv_truncate_seq(&ctx->kv, 0, n_keep); }

mf_status mf_kv_seq_rm(mf_context *ctx, int32_t seq, int32_t p0, int32_t p1) {
    mf_status s = check_seq(ctx, seq, true);
    if (s) return s;
    if (p0 < 0) p0 = 0;
    for (uint32_t q = 0; q < ctx->n_seq_max; q++) {
        if (seq >= 0 && (uint32_t)seq != q) continue;
        const uint32_t n = ctx->kv.seq[q].n_pos;
        if (p1 >= 0 && (uint32_t)p1 < n && (uint32_t)p0 < (uint32_t)p1)
            return mf_err(MF_ERR_UNSUPPORTED,
                          "sequence %u: removing positions [%d, %d) of %u would leave a hole; only a removal to the end "
                          "is supported",
                          q, p0, p1, n);
    }
    for (uint32_t q = 0; q < ctx->n_seq_max; q++)
        if (seq < 0 || (uint32_t)seq == q) mf_kv_truncate_seq(&ctx->kv, (int)q, (uint32_t)p0);
    return MF_OK;
}

mf_status mf_kv_seq_cp(mf_context *ctx, int32_t src, int32_t dst, int32_t p1) {
    mf_status s = check_seq(ctx, src, false);
    if (!s) s = check_seq(ctx, dst, false);
    if (s) return s;
    const uint32_t n = ctx->kv.seq[src].n_pos;
    mf_kv_share(&ctx->kv, src, dst, p1 < 0 || (uint32_t)p1 > n ? n : (uint32_t)p1);
    return MF_OK;
}

mf_status mf_kv_seq_keep(mf_context *ctx, int32_t seq) {
    mf_status s = check_seq(ctx, seq, false);
    if (s) return s;
    for (uint32_t q = 0; q < ctx->n_seq_max; q++)
        if ((uint32_t)seq != q) mf_kv_truncate_seq(&ctx->kv, (int)q, 0);
    return MF_OK;
}

int32_t mf_kv_seq_pos_max(const mf_context *ctx, int32_t seq) {
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq_max) return -1;
    return (int32_t)ctx->kv.seq[seq].n_pos - 1;
}

uint32_t mf_kv_pages_used(const mf_context *ctx) { return mf_kv_n_used(&ctx->kv); }
uint32_t mf_kv_pages_total(const mf_context *ctx) { return ctx->kv.n_pages; }
uint32_t mf_kv_page_size(void) { return MF_KV_PAGE; }

int32_t mf_kv_seq_reuse_prefix(mf_context *ctx, int32_t seq, const mf_token *cached, int32_t n_cached,
                               const mf_token *tokens, int32_t n) {
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq_max || n <= 0 || !tokens) return 0;
    if (!cached) n_cached = 0;
    int32_t held = (int32_t)ctx->kv.seq[seq].n_pos;
    if (n_cached < held) held = n_cached < 0 ? 0 : n_cached;
    int32_t k = 0;
    while (k < held && k < n && cached[k] == tokens[k]) k++;
    /* at least one token runs, so the decode produces logits */
    if (k == n) k = n - 1;
    mf_kv_truncate_seq(&ctx->kv, seq, (uint32_t)k);
    return k;
}
