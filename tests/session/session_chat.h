/* session_chat.h - a minimal greedy chat driver over the public API for the
 * session tests: ChatML renders, the KV cache reused up to the longest common
 * token prefix (as `minfer run --cnv` does), logits recorded per token. */
#ifndef MF_TEST_SESSION_CHAT_H
#define MF_TEST_SESSION_CHAT_H

#include <jansson.h>
#include <stdbool.h>

#include "minfer.h"

typedef struct tchat {
    mf_model *model;
    mf_context *ctx;
    json_t *msgs;          /* the conversation */
    mf_token *cache;       /* ids of the cached positions */
    uint32_t n_cache;
    uint32_t last_prefill; /* tokens decoded before the last reply */
    uint32_t last_reused;  /* tokens of the last prompt already in the cache */
} tchat;

/* a context on `model` (which the caller keeps and frees); 2 threads */
bool tchat_open(tchat *c, mf_model *model, mf_kv_type kv, uint32_t n_ctx);
void tchat_close(tchat *c);
/* Appends the user message and answers it with n_gen greedy tokens. rec, if
 * not NULL, receives the logits each token was chosen from (n_gen x n_vocab). */
bool tchat_turn(tchat *c, const char *user, int n_gen, float *rec);

#endif
