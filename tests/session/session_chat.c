/* session_chat.c - see session_chat.h. */
#include "session_chat.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

bool tchat_open(tchat *c, mf_model *model, mf_kv_type kv, uint32_t n_ctx) {
    memset(c, 0, sizeof *c);
    c->model = model;
    mf_context_params cp = mf_context_default_params();
    cp.kv_type = kv;
    cp.n_ctx = n_ctx;
    cp.n_threads = 2;
    if (mf_context_new(model, &cp, &c->ctx)) {
        fprintf(stderr, "context: %s\n", mf_last_error());
        return false;
    }
    c->msgs = json_array();
    c->cache = malloc(sizeof *c->cache * (mf_context_n_ctx(c->ctx) + 1));
    return c->msgs && c->cache;
}

void tchat_close(tchat *c) {
    mf_context_free(c->ctx);
    json_decref(c->msgs);
    free(c->cache);
    memset(c, 0, sizeof *c);
}

static bool add(tchat *c, const char *role, const char *content) {
    return !json_array_append_new(c->msgs, json_pack("{s:s,s:s}", "role", role, "content", content));
}

bool tchat_turn(tchat *c, const char *user, int n_gen, float *rec) {
    if (!add(c, "user", user)) return false;
    json_t *root = json_pack("{s:O}", "messages", c->msgs);
    char *conv = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    char *text = NULL;
    size_t len = 0;
    mf_status st = mf_chat_render(mf_chat_template_chatml(), conv, NULL, &text, &len);
    free(conv);
    if (st) {
        fprintf(stderr, "render: %s\n", mf_last_error());
        return false;
    }
    mf_token toks[4096];
    toks[0] = mf_token_bos(c->model);
    int32_t n = mf_tokenize(c->model, text, len, toks + 1, 4095, false, true);
    free(text);
    if (n <= 0) return false;
    n++;
    uint32_t keep = 0;
    while (keep < c->n_cache && keep < (uint32_t)n && c->cache[keep] == toks[keep]) keep++;
    if (keep == (uint32_t)n) keep--;
    mf_kv_truncate(c->ctx, keep);
    if (mf_decode(c->ctx, toks + keep, n - (int32_t)keep, false)) {
        fprintf(stderr, "decode: %s\n", mf_last_error());
        return false;
    }
    memcpy(c->cache, toks, sizeof *toks * (size_t)n);
    c->n_cache = (uint32_t)n;
    c->last_reused = keep;
    c->last_prefill = (uint32_t)n - keep;

    const int32_t nv = mf_model_n_vocab(c->model);
    char reply[4096];
    size_t rlen = 0;
    for (int g = 0; g < n_gen; g++) {
        const float *lg = mf_get_logits(c->ctx, -1);
        if (!lg) return false;
        if (rec) memcpy(rec + (size_t)g * nv, lg, sizeof *lg * (size_t)nv);
        mf_token best = 0;
        for (int32_t i = 1; i < nv; i++)
            if (lg[i] > lg[best]) best = i;
        char piece[64];
        int32_t pl = mf_token_to_piece(c->model, best, piece, sizeof piece, false);
        if (pl > 0 && rlen + (size_t)pl < sizeof reply) {
            memcpy(reply + rlen, piece, (size_t)pl);
            rlen += (size_t)pl;
        }
        if (mf_decode(c->ctx, &best, 1, false)) return false;
        c->cache[c->n_cache++] = best;
    }
    /* the reply text as the conversation keeps it; bytes that are not UTF-8 are dropped for JSON */
    reply[rlen] = 0;
    json_t *s = json_string(reply);
    if (!s) s = json_string("?");
    json_t *m = json_pack("{s:s,s:o}", "role", "assistant", "content", s);
    return !json_array_append_new(c->msgs, m);
}
