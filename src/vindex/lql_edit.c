/* lql_edit.c - the LQL statements that change the overlay or write files:
 * INSERT, UPDATE, BEGIN / SAVE / APPLY PATCH, SHOW PATCHES, COMPILE, and
 * EXPLAIN INFER (which reads the overlay too: inserted features explain). */
#include "vindex/lql_int.h"
#include "vindex/vindex.h"
#include "core/error.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The prompt INSERT runs: the relation with "{}" replaced by the entity, or
 * "entity relation". malloc'd. */
static char *insert_prompt(const char *entity, const char *rel) {
    const char *at = strstr(rel, "{}");
    const size_t n = strlen(entity) + strlen(rel) + 2;
    char *p = malloc(n);
    if (!p) return NULL;
    if (at) snprintf(p, n, "%.*s%s%s", (int)(at - rel), rel, entity, at + 2);
    else snprintf(p, n, "%s %s", entity, rel);
    return p;
}

/* The one token `text` is (no BOS); an error names the pieces otherwise. */
static mf_status one_token(mf_lql *q, const char *what, const char *text, mf_token *out) {
    mf_token t[16];
    const int32_t n = mf_tokenize(q->model, text, strlen(text), t, 16, false, false);
    if (n == INT32_MIN) return MF_ERR_FORMAT;
    if (n == 1) {
        *out = t[0];
        return MF_OK;
    }
    char pieces[256] = "";
    size_t o = 0;
    for (int i = 0; i < n && i < 16 && o + 40 < sizeof pieces; i++) {
        char b[32];
        int32_t k = mf_token_to_piece(q->model, t[i], b, sizeof b - 1, true);
        b[k > 0 ? k : 0] = '\0';
        o += (size_t)snprintf(pieces + o, sizeof pieces - o, "%s\"%s\"", i ? ", " : "", b);
    }
    return mf_err(MF_ERR_INVALID_ARG, "the %s \"%s\" is %d tokens (%s); it must be one token", what, text, n < 0 ? -n : n,
                  pieces);
}

mf_status lql_do_insert(mf_lql *q, const lql_stmt *st, json_t *rows) {
    mf_status s = lql_need_model(q);
    if (s) return s;
    if (st->layer0 >= q->vi.n_layer)
        return mf_err(MF_ERR_INVALID_ARG, "layer %d is out of range (the vindex has %d layers)", st->layer0, q->vi.n_layer);
    char *prompt = insert_prompt(st->text, st->rel);
    if (!prompt) return mf_err(MF_ERR_NOMEM, "out of memory");
    mf_token t[512];
    int n = 0;
    mf_vindex_insert_params p = {.layer = st->layer0, .alpha = (float)st->alpha, .entity = st->text,
                                 .relation = st->rel, .target_text = st->target, .n_threads = q->n_threads};
    s = lql_prompt_tokens(q, prompt, t, 512, &n);
    if (!s) s = one_token(q, "target", st->target, &p.target);
    p.prompt = t, p.n_prompt = n;
    mf_vindex_insert_result r;
    if (!s) s = mf_vindex_insert(q->v, q->model, &p, &r);
    if (!s)
        json_array_append_new(rows, json_pack("{s:i,s:i,s:s,s:o,s:o,s:f,s:i}", "layer", r.layer, "feature", r.feature,
                                              "prompt", prompt, "target", lql_tok_json(q, p.target), "was",
                                              lql_tok_json(q, r.top_before), "strength", (double)r.strength, "trials",
                                              r.trials));
    free(prompt);
    return s;
}

mf_status lql_do_update(mf_lql *q, const lql_stmt *st, json_t *rows) {
    mf_status s = lql_need_model(q);
    if (s) return s;
    s = vx_overlay_check(q->v, st->layer0, st->feature);
    if (s) return s;
    const int E = q->vi.n_embd, F = q->vi.n_features;
    mf_token tok;
    s = one_token(q, "token", st->target, &tok);
    if (s) return s;
    float *old = malloc((size_t)E * sizeof *old), *dir = malloc((size_t)E * sizeof *dir);
    s = !old || !dir ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    /* the new vector keeps the old one's length (times ALPHA) */
    const float *cur = NULL;
    if (!s) {
        if (st->feature >= F) cur = q->v->ov.ins[st->layer0][st->feature - F].down;
        else if (!(cur = vx_overlay_down(q->v, st->layer0, st->feature))) {
            s = mf_vindex_feature_row(q->v, 2, st->layer0, st->feature, old);
            cur = old;
        }
    }
    if (!s) s = vx_target_dir(q->v, q->model, tok, dir);
    double nn = 0;
    for (int e = 0; !s && e < E; e++) nn += (double)cur[e] * cur[e];
    const double scale = sqrt(nn) * (st->alpha > 0 ? st->alpha : 1.0);
    for (int e = 0; !s && e < E; e++) dir[e] = (float)(dir[e] * scale);
    if (!s) s = mf_vindex_update_feature(q->v, st->layer0, st->feature, dir);
    if (!s)
        json_array_append_new(rows, json_pack("{s:i,s:o,s:o,s:f}", "layer", st->layer0, "feature",
                                              lql_feature_json(q, st->feature), "down", lql_tok_json(q, tok), "norm",
                                              scale));
    free(old), free(dir);
    return s;
}

static json_t *patch_row(const mf_lql *q, int i) {
    const vx_op *o = &q->v->ov.op[i];
    static const char *kinds[] = {"delete", "insert", "update"};
    const vx_patchrec *p = &q->v->ov.patch[o->patch];
    json_t *r = json_pack("{s:s,s:s,s:i,s:o}", "patch", p->name[0] ? p->name : p->file ? p->file : "(unnamed)", "op",
                          kinds[o->kind], "layer", o->layer, "feature", lql_feature_json(q, o->feature));
    json_t *note = o->note ? json_loads(o->note, 0, NULL) : NULL;
    char d[512] = "";
    if (note)
        snprintf(d, sizeof d, "(%s, %s) -> %s, strength %.4g", json_string_value(json_object_get(note, "entity")),
                 json_string_value(json_object_get(note, "relation")), json_string_value(json_object_get(note, "target")),
                 json_number_value(json_object_get(note, "strength")));
    json_decref(note);
    json_object_set_new(r, "detail", json_string(d));
    return r;
}

/* SAVE PATCH with no file: BEGIN PATCH's name, with .vlp added */
static char *save_path(const mf_lql *q, const lql_stmt *st) {
    if (st->text) return strdup(st->text);
    const vx_overlay *ov = &q->v->ov;
    if (ov->open < 0 || !ov->patch[ov->open].name[0]) return NULL;
    const char *nm = ov->patch[ov->open].name;
    const size_t n = strlen(nm);
    char *p = malloc(n + 5);
    if (p) snprintf(p, n + 5, "%s%s", nm, n > 4 && !strcmp(nm + n - 4, ".vlp") ? "" : ".vlp");
    return p;
}

static int open_ops(const mf_lql *q) {
    int n = 0;
    for (int i = 0; i < q->v->ov.n_op; i++) n += q->v->ov.op[i].patch == q->v->ov.open;
    return q->v->ov.open < 0 ? 0 : n;
}

mf_status lql_do_patch(mf_lql *q, const lql_stmt *st, json_t *rows) {
    mf_status s = MF_OK;
    if (st->kind == LQL_BEGIN_PATCH) {
        s = mf_vindex_begin_patch(q->v, st->text);
        if (!s) json_array_append_new(rows, json_pack("{s:s}", "begun", st->text));
    } else if (st->kind == LQL_SAVE_PATCH) {
        char *path = save_path(q, st);
        if (!path) return mf_err(MF_ERR_INVALID_ARG, "SAVE PATCH needs a file name (or a BEGIN PATCH \"name\" first)");
        s = mf_vindex_save_patch(q->v, path, NULL);
        if (!s) json_array_append_new(rows, json_pack("{s:s,s:i}", "saved", path, "ops", open_ops(q)));
        free(path);
    } else if (st->kind == LQL_APPLY_PATCH) {
        const int n0 = mf_vindex_n_edits(q->v);
        s = mf_vindex_apply_patch(q->v, st->text);
        if (!s)
            json_array_append_new(rows, json_pack("{s:s,s:i,s:i}", "applied", st->text, "ops", mf_vindex_n_edits(q->v) - n0,
                                                  "deleted", mf_vindex_n_deleted(q->v)));
    } else {
        for (int i = 0; i < q->v->ov.n_op; i++) json_array_append_new(rows, patch_row(q, i));
    }
    return s;
}

mf_status lql_do_compile(mf_lql *q, const lql_stmt *st, json_t *rows) {
    mf_vindex_compile_result r;
    mf_status s = st->kind == LQL_COMPILE_MODEL ? mf_vindex_compile_model(q->v, st->text, &r)
                                                : mf_vindex_compile_vindex(q->v, st->text, &r);
    if (!s)
        json_array_append_new(rows, json_pack("{s:s,s:i,s:i,s:i,s:s}", "written", st->text, "n_ff", r.n_ff_old,
                                              "n_ff_compiled", r.n_ff_new, "features_added", r.n_added, "reencoded",
                                              r.reencoded));
    return s;
}

/* ---- EXPLAIN INFER ---- */

typedef struct xcap {
    mf_walk *ov;
    int n_layer, n_embd;
    float *xn;    /* [n_layer][n_embd] the FFN input, last row */
    float *last;  /* [n_embd] the residual after the last layer, last row */
} xcap;

static int xcap_ffn(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                    const int32_t *pos, void *ud) {
    xcap *c = ud;
    memcpy(c->xn + (size_t)layer * n_embd, xn + (size_t)(n_rows - 1) * n_embd, (size_t)n_embd * sizeof(float));
    return mf_walk_ffn(layer, xn, out, n_rows, n_embd, seq, pos, c->ov);
}

static bool xcap_layer(int layer, float *x, int n_rows, int n_embd, const int32_t *seq, const int32_t *pos, void *ud) {
    xcap *c = ud;
    if (layer == c->n_layer - 1) memcpy(c->last, x + (size_t)(n_rows - 1) * n_embd, (size_t)n_embd * sizeof(float));
    return true;
}

typedef struct contrib_t {
    float c, a;
    int32_t layer, feature;
} contrib_t;

static int by_contrib(const void *a, const void *b) {
    const contrib_t *x = a, *y = b;
    if (x->c != y->c) return x->c < y->c ? 1 : -1;
    return x->layer != y->layer ? x->layer - y->layer : x->feature - y->feature;
}

/* Direct logit attribution at the last position: per feature, its
 * activation times (down . the top token's output row through the output
 * norm's weight) / the final residual's RMS: the logit it adds through the
 * residual stream alone (later layers and post-FFN norms not followed). The
 * model runs dense with the overlay. */
mf_status lql_do_explain(mf_lql *q, const lql_stmt *st, json_t *rows) {
    mf_status s = lql_need_model(q);
    if (s) return s;
    const int E = q->vi.n_embd, L = q->vi.n_layer, V = mf_model_n_vocab(q->model), F = q->vi.n_features;
    int maxf = F;
    for (int l = 0; l < L; l++) maxf = F + (q->v->ov.n_ins ? q->v->ov.n_ins[l] : 0) > maxf ? F + q->v->ov.n_ins[l] : maxf;
    xcap c = {NULL, L, E, malloc((size_t)L * E * sizeof(float)), malloc((size_t)E * sizeof(float))};
    float *dir = malloc((size_t)E * sizeof *dir), *act = malloc((size_t)maxf * sizeof *act),
          *con = malloc((size_t)maxf * sizeof *con);
    contrib_t *all = malloc((size_t)L * maxf * sizeof *all);
    mf_token t[512];
    int n = 0, top = 0;
    mf_context *ctx = NULL;
    s = !c.xn || !c.last || !dir || !act || !con || !all ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    if (!s) s = lql_prompt_tokens(q, st->text, t, 512, &n);
    if (!s) s = mf_walk_new_overlay(q->v, q->model, &c.ov);
    if (!s) {
        mf_context_params cp = mf_context_default_params();
        cp.n_ctx = 512, cp.n_threads = q->n_threads, cp.threadpool = q->pool, cp.ffn_cb = xcap_ffn, cp.ffn_ud = &c;
        cp.layer_cb = xcap_layer, cp.layer_ud = &c;
        s = mf_context_new(q->model, &cp, &ctx);
    }
    if (!s) s = mf_decode(ctx, t, n, false);
    if (!s) {
        const float *lg = mf_get_logits(ctx, -1);
        for (int v = 1; v < V; v++) top = lg[v] > lg[top] ? v : top;
        s = vx_logit_dir(q->v, q->model, top, dir);
    }
    size_t na = 0;
    if (!s) {
        double ss = 0;
        for (int e = 0; e < E; e++) ss += (double)c.last[e] * c.last[e];
        const float inv = (float)(1.0 / sqrt(ss / E + q->model->hp.norm_eps));
        for (int e = 0; e < E; e++) dir[e] *= inv;
        for (int l = 0; l < L; l++) {
            const int nf = vx_layer_contrib(c.ov, l, c.xn + (size_t)l * E, dir, act, con);
            for (int f = 0; f < nf; f++) all[na++] = (contrib_t){con[f], act[f], l, f};
        }
        qsort(all, na, sizeof *all, by_contrib);
        const int k = st->top > 0 ? st->top : 10;
        for (int i = 0; i < k && i < (int)na; i++)
            json_array_append_new(
                rows, json_pack("{s:o,s:i,s:o,s:s,s:f,s:f,s:o}", "token", lql_tok_json(q, top), "layer", all[i].layer,
                                "feature", lql_feature_json(q, all[i].feature), "kind",
                                all[i].feature >= F ? "inserted" : "base", "activation", (double)all[i].a, "logit",
                                (double)all[i].c, "labels",
                                all[i].feature < F ? lql_labels(q, all[i].layer, all[i].feature, 3) : json_array()));
    }
    mf_context_free(ctx);
    mf_walk_free(c.ov);
    free(c.xn), free(c.last), free(dir), free(act), free(con), free(all);
    return s;
}
