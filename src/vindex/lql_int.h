/* lql_int.h - what lql_exec.c (queries, rendering) and lql_edit.c (INSERT,
 * UPDATE, patches, COMPILE, EXPLAIN) share: the session and its helpers. */
#ifndef MF_VINDEX_LQL_INT_H
#define MF_VINDEX_LQL_INT_H

#include <jansson.h>

#include "minfer.h"
#include "vindex/lql.h"

struct mf_lql {
    mf_vindex *v;
    mf_vindex_info vi;
    char *dir;
    int n_threads;
    mf_threadpool *pool; /* one set of threads for the vindex's scans and every context a statement makes */
    mf_model *vocab;   /* tokenizer.gguf: tokenizing and printing tokens */
    mf_model *model;   /* the model, loaded on the first WALK / INFER / edit */
};

json_t *lql_tok_json(const mf_lql *q, mf_token t);
json_t *lql_labels(const mf_lql *q, int layer, int f, int n);
json_t *lql_feature_json(const mf_lql *q, int f);
mf_status lql_need_model(mf_lql *q);
mf_status lql_new_ctx(mf_lql *q, mf_ffn_fn cb, void *ud, mf_context **c);
mf_status lql_prompt_tokens(mf_lql *q, const char *text, mf_token *t, int cap, int *n);

/* lql_edit.c: each fills rows (JSON objects) for one statement */
mf_status lql_do_insert(mf_lql *q, const lql_stmt *st, json_t *rows);
mf_status lql_do_update(mf_lql *q, const lql_stmt *st, json_t *rows);
mf_status lql_do_patch(mf_lql *q, const lql_stmt *st, json_t *rows); /* BEGIN / SAVE / APPLY / SHOW PATCHES */
mf_status lql_do_compile(mf_lql *q, const lql_stmt *st, json_t *rows);
mf_status lql_do_explain(mf_lql *q, const lql_stmt *st, json_t *rows);

#endif
