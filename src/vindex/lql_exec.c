/* lql_exec.c - runs parsed LQL statements against a vindex (and, for WALK
 * and INFER, the model it holds) and renders each result as an aligned
 * table or one JSON object per statement. Results are built as JSON rows
 * (column order kept), so both renderings come from one place. */
#include "vindex/lql.h"
#include "vindex/lql_int.h"
#include "vindex/vindex.h"
#include "core/error.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *np = realloc(b->p, c);
        if (!np) return;
        b->p = np, b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

mf_vindex *mf_lql_vindex(mf_lql *q) { return q->v; }

mf_status mf_lql_open(const char *dir, int32_t n_threads, mf_lql **out) {
    *out = NULL;
    mf_lql *q = calloc(1, sizeof *q);
    if (!q || !(q->dir = strdup(dir))) {
        free(q);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    q->n_threads = n_threads;
    mf_status s = mf_vindex_open(dir, &q->v);
    if (!s) s = mf_threadpool_new(n_threads, &q->pool);
    if (!s) s = mf_vindex_set_threadpool(q->v, q->pool);
    if (!s) {
        mf_vindex_get_info(q->v, &q->vi);
        char *tp = vx_path(dir, vx_file_names[VX_TOKENIZER]);
        mf_model_params mp = mf_model_default_params();
        mp.vocab_only = true;
        s = tp ? mf_model_load(tp, &mp, &q->vocab) : mf_err(MF_ERR_NOMEM, "out of memory");
        free(tp);
    }
    if (s) {
        mf_lql_free(q);
        return s;
    }
    *out = q;
    return MF_OK;
}

void mf_lql_free(mf_lql *q) {
    if (!q) return;
    mf_model_free(q->model);
    mf_model_free(q->vocab);
    mf_vindex_free(q->v); /* before the pool it uses */
    mf_threadpool_free(q->pool);
    free(q->dir);
    free(q);
}

/* ---- helpers ---- */

/* Length of the valid UTF-8 character at s[0..n), 0 if there is none. */
static int utf8_char(const unsigned char *s, int n) {
    const int len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (!len || len > n) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (len == 2 && s[0] < 0xc2) return 0;                          /* overlong */
    if (len == 3 && s[0] == 0xe0 && s[1] < 0xa0) return 0;          /* overlong */
    if (len == 3 && s[0] == 0xed && s[1] >= 0xa0) return 0;         /* surrogate */
    if (len == 4 && (s[0] > 0xf4 || (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return len;
}

/* A token's piece as a JSON string: byte-fallback pieces that are not whole
 * UTF-8 characters are written as the text \xNN, so the JSON stays valid. */
json_t *lql_tok_json(const mf_lql *q, mf_token t) {
    char buf[256], out[1100];
    int32_t n = mf_token_to_piece(q->vocab, t, buf, sizeof buf - 1, true);
    if (n < 0) n = 0;
    size_t o = 0;
    for (int32_t i = 0; i < n;) {
        const int len = utf8_char((const unsigned char *)buf + i, n - i);
        if (len) {
            memcpy(out + o, buf + i, (size_t)len);
            o += (size_t)len, i += len;
        } else {
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", (unsigned char)buf[i]);
            i++;
        }
    }
    json_t *j = json_stringn(out, o);
    return j ? j : json_string("?");
}

json_t *lql_labels(const mf_lql *q, int layer, int f, int n) {
    mf_token t[16];
    float sc[16];
    int k = mf_vindex_feature_tokens(q->v, layer, f, t, sc, n < 16 ? n : 16);
    json_t *a = json_array();
    for (int i = 0; i < k; i++) json_array_append_new(a, lql_tok_json(q, t[i]));
    return a;
}

json_t *lql_feature_json(const mf_lql *q, int f) {
    if (!q->vi.n_expert) return json_integer(f);
    char b[48];
    snprintf(b, sizeof b, "%d/%d", f / q->vi.n_ff_expert, f % q->vi.n_ff_expert);
    return json_string(b);
}

/* trimmed piece of token t equals s */
static bool piece_is(const mf_lql *q, mf_token t, const char *s) {
    char buf[256];
    int32_t n = mf_token_to_piece(q->vocab, t, buf, sizeof buf - 1, true);
    if (n < 0) return false;
    buf[n] = '\0';
    char *p = buf;
    while (*p == ' ') p++;
    size_t l = strlen(p);
    while (l && p[l - 1] == ' ') p[--l] = '\0';
    return !strcmp(p, s);
}

/* The query vector of a text: its tokens' embeddings averaged and scaled
 * to unit RMS (the scale the FFN's input has after its norm). */
static mf_status text_query(const mf_lql *q, const char *text, float *x) {
    mf_token t[256];
    int32_t n = mf_tokenize(q->vocab, text, strlen(text), t, 256, false, false);
    if (n == INT32_MIN) return MF_ERR_FORMAT;
    if (n <= 0) return mf_err(MF_ERR_INVALID_ARG, "\"%s\" has no tokens (or more than 256)", text);
    const int E = q->vi.n_embd;
    float *row = malloc((size_t)E * sizeof *row);
    if (!row) return mf_err(MF_ERR_NOMEM, "out of memory");
    memset(x, 0, (size_t)E * sizeof *x);
    for (int i = 0; i < n; i++) {
        mf_status s = mf_vindex_embedding(q->v, t[i], row);
        if (s) {
            free(row);
            return s;
        }
        for (int e = 0; e < E; e++) x[e] += row[e] / (float)n;
    }
    free(row);
    double ss = 0;
    for (int e = 0; e < E; e++) ss += (double)x[e] * x[e];
    const float inv = ss > 0 ? (float)(1.0 / sqrt(ss / E)) : 0.0f;
    for (int e = 0; e < E; e++) x[e] *= inv;
    return MF_OK;
}

mf_status lql_need_model(mf_lql *q) {
    if (q->model) return MF_OK;
    mf_model_params mp = mf_model_default_params();
    mf_status s = mf_model_load(q->dir, &mp, &q->model);
    if (s) return mf_err_prefix(s, "this statement runs the model");
    return MF_OK;
}

mf_status lql_new_ctx(mf_lql *q, mf_ffn_fn cb, void *ud, mf_context **c) {
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 512, cp.n_threads = q->n_threads, cp.threadpool = q->pool, cp.ffn_cb = cb, cp.ffn_ud = ud;
    return mf_context_new(q->model, &cp, c);
}

mf_status lql_prompt_tokens(mf_lql *q, const char *text, mf_token *t, int cap, int *n) {
    *n = mf_tokenize(q->model, text, strlen(text), t, cap, true, false);
    if (*n == INT32_MIN) return MF_ERR_FORMAT;
    if (*n <= 0) return mf_err(MF_ERR_INVALID_ARG, "the prompt has no tokens (or more than %d)", cap);
    return MF_OK;
}

static void range(const mf_lql *q, const lql_stmt *st, int *l0, int *l1) {
    *l0 = st->layer0 < 0 ? 0 : st->layer0;
    *l1 = st->layer1 < 0 ? q->vi.n_layer - 1 : st->layer1;
}

static mf_status check_range(const mf_lql *q, const lql_stmt *st) {
    if (st->layer1 >= q->vi.n_layer)
        return mf_err(MF_ERR_INVALID_ARG, "layer %d is out of range (the vindex has %d layers)", st->layer1, q->vi.n_layer);
    return MF_OK;
}

/* rows of top features for query x at layers [l0, l1] */
static mf_status knn_rows(mf_lql *q, const float *x, int l0, int l1, int k, json_t *rows) {
    if (k > q->vi.n_features) k = q->vi.n_features;
    if (k > VX_MAX_K) k = VX_MAX_K; /* the KNN's bound: a filtered NEAREST looks at the best 4096 */
    int32_t *f = malloc((size_t)k * sizeof *f);
    float *s = malloc((size_t)k * sizeof *s);
    mf_status st = !f || !s ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    for (int l = l0; !st && l <= l1; l++) {
        st = mf_vindex_knn(q->v, l, x + (size_t)(l - l0) * 0, 1, k, f, s);
        for (int i = 0; !st && i < k && f[i] >= 0; i++)
            json_array_append_new(rows, json_pack("{s:i,s:o,s:f,s:o}", "layer", l, "feature", lql_feature_json(q, f[i]),
                                                  "score", (double)s[i], "labels", lql_labels(q, l, f[i], 5)));
    }
    free(f), free(s);
    return st;
}

/* ---- statements ---- */

static mf_status do_describe(mf_lql *q, const lql_stmt *st, json_t *rows) {
    mf_status s = check_range(q, st);
    if (s) return s;
    float *x = malloc((size_t)q->vi.n_embd * sizeof *x);
    if (!x) return mf_err(MF_ERR_NOMEM, "out of memory");
    int l0, l1;
    range(q, st, &l0, &l1);
    s = text_query(q, st->text, x);
    if (!s) s = knn_rows(q, x, l0, l1, st->top > 0 ? st->top : 5, rows);
    free(x);
    return s;
}

typedef struct capture {
    int n_layer, n_embd;
    float *last; /* [n_layer][n_embd]: the FFN input of the last row */
    mf_walk *ov; /* the edit overlay, when there are edits */
} capture;

static int capture_ffn(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                       const int32_t *pos, void *ud) {
    capture *c = ud;
    if (layer < c->n_layer) memcpy(c->last + (size_t)layer * n_embd, xn + (size_t)(n_rows - 1) * n_embd, (size_t)n_embd * sizeof(float));
    return c->ov ? mf_walk_ffn(layer, xn, out, n_rows, n_embd, seq, pos, c->ov) : 0;
}

static mf_status do_walk(mf_lql *q, const lql_stmt *st, json_t *rows) {
    mf_status s = check_range(q, st);
    if (!s) s = lql_need_model(q);
    if (s) return s;
    capture c = {q->vi.n_layer, q->vi.n_embd, malloc((size_t)q->vi.n_layer * q->vi.n_embd * sizeof(float)), NULL};
    mf_context *ctx = NULL;
    mf_token t[512];
    int n;
    if (!c.last) return mf_err(MF_ERR_NOMEM, "out of memory");
    s = lql_prompt_tokens(q, st->text, t, 512, &n);
    if (!s && mf_vindex_n_edits(q->v)) s = mf_walk_new_overlay(q->v, q->model, &c.ov);
    if (!s) s = lql_new_ctx(q, capture_ffn, &c, &ctx);
    if (!s) s = mf_decode(ctx, t, n, false);
    int l0, l1;
    range(q, st, &l0, &l1);
    for (int l = l0; !s && l <= l1; l++) s = knn_rows(q, c.last + (size_t)l * q->vi.n_embd, l, l, st->top > 0 ? st->top : 5, rows);
    mf_context_free(ctx);
    mf_walk_free(c.ov);
    free(c.last);
    return s;
}

static mf_status do_select(mf_lql *q, const lql_stmt *st, json_t *rows, bool show) {
    mf_status s = check_range(q, st);
    if (s) return s;
    if (st->feature >= q->vi.n_features)
        return mf_err(MF_ERR_INVALID_ARG, "feature %d is out of range (%d per layer)", st->feature, q->vi.n_features);
    const int limit = st->top > 0 ? st->top : show ? 20 : 20;
    int l0, l1;
    range(q, st, &l0, &l1);
    if (st->nearest) {
        json_t *cand = json_array();
        float *x = malloc((size_t)q->vi.n_embd * sizeof *x);
        s = x ? text_query(q, st->nearest, x) : mf_err(MF_ERR_NOMEM, "out of memory");
        if (!s) s = knn_rows(q, x, l0, l0, st->token || st->feature >= 0 ? q->vi.n_features : limit, cand);
        size_t i;
        json_t *r;
        json_array_foreach(cand, i, r) {
            if ((int)json_array_size(rows) >= limit) break;
            const int f = (int)i; /* rank; the feature id is in the row */
            (void)f;
            json_t *fj = json_object_get(r, "feature");
            if (st->feature >= 0 && json_is_integer(fj) && json_integer_value(fj) != st->feature) continue;
            if (st->token) {
                bool hit = false;
                size_t j;
                json_t *lb;
                json_array_foreach(json_object_get(r, "labels"), j, lb) {
                    const char *p = json_string_value(lb);
                    while (*p == ' ') p++;
                    if (!strcmp(p, st->token)) hit = true;
                }
                if (!hit) continue;
            }
            json_array_append(rows, r);
        }
        json_decref(cand);
        free(x);
        return s;
    }
    mf_token t[64];
    float sc[64];
    for (int l = l0; l <= l1 && (int)json_array_size(rows) < limit; l++)
        for (int f = st->feature >= 0 ? st->feature : 0; f < q->vi.n_features && (int)json_array_size(rows) < limit; f++) {
            if (st->feature >= 0 && f != st->feature) break;
            int n = mf_vindex_feature_tokens(q->v, l, f, t, sc, 64);
            if (st->token) {
                bool hit = false;
                for (int i = 0; i < n && !hit; i++) hit = piece_is(q, t[i], st->token);
                if (!hit) continue;
            }
            json_array_append_new(rows, json_pack("{s:i,s:o,s:o,s:f,s:o}", "layer", l, "feature", lql_feature_json(q, f),
                                                  "top_token", n > 0 ? lql_tok_json(q, t[0]) : json_null(), "score",
                                                  n > 0 ? (double)sc[0] : 0.0, "labels",
                                                  lql_labels(q, l, f, st->token ? 16 : 5)));
        }
    return MF_OK;
}

static void top_probs(const float *lg, int V, int k, int *id, float *p) {
    float mx = lg[0];
    for (int v = 1; v < V; v++) mx = lg[v] > mx ? lg[v] : mx;
    double z = 0;
    for (int v = 0; v < V; v++) z += exp((double)lg[v] - mx);
    for (int i = 0; i < k; i++) id[i] = -1;
    for (int v = 0; v < V; v++)
        for (int i = 0; i < k; i++)
            if (id[i] < 0 || lg[v] > lg[id[i]]) {
                memmove(id + i + 1, id + i, (size_t)(k - 1 - i) * sizeof *id);
                id[i] = v;
                break;
            }
    for (int i = 0; i < k; i++) p[i] = id[i] >= 0 ? (float)(exp((double)lg[id[i]] - mx) / z) : 0;
}

static mf_status run_logits(mf_lql *q, const char *text, mf_walk *w, float *out) {
    mf_context *ctx;
    mf_token t[512];
    int n;
    mf_status s = lql_prompt_tokens(q, text, t, 512, &n);
    if (!s) s = lql_new_ctx(q, w ? mf_walk_ffn : NULL, w, &ctx);
    if (s) return s;
    s = mf_decode(ctx, t, n, false);
    if (!s) memcpy(out, mf_get_logits(ctx, -1), (size_t)mf_model_n_vocab(q->model) * sizeof(float));
    mf_context_free(ctx);
    return s;
}

static mf_status do_infer(mf_lql *q, const lql_stmt *st, json_t *rows) {
    mf_status s = lql_need_model(q);
    if (s) return s;
    const int V = mf_model_n_vocab(q->model), k = st->top > 0 ? (st->top < V ? st->top : V) : 5;
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b), pa[1000], pb[1000];
    int ia[1000], ib[1000];
    mf_walk *w = NULL;
    s = !a || !b ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    if (!s && st->mode != LQL_DENSE) {
        int wk = st->walk_k ? st->walk_k : (q->vi.n_features + 9) / 10;
        s = mf_walk_new(q->v, q->model, wk, &w);
    }
    mf_walk *ov = NULL; /* the dense FFN with the edits, when there are any */
    if (!s && st->mode != LQL_WALKK && mf_vindex_n_edits(q->v)) s = mf_walk_new_overlay(q->v, q->model, &ov);
    if (!s && st->mode != LQL_WALKK) s = run_logits(q, st->text, ov, a);
    mf_walk_free(ov);
    if (!s && st->mode != LQL_DENSE) s = run_logits(q, st->text, w, b);
    if (!s) {
        if (st->mode != LQL_WALKK) top_probs(a, V, k, ia, pa);
        if (st->mode != LQL_DENSE) top_probs(b, V, k, ib, pb);
        for (int i = 0; i < k; i++) {
            json_t *r = json_pack("{s:i}", "rank", i + 1);
            if (st->mode != LQL_WALKK) {
                json_object_set_new(r, "dense", lql_tok_json(q, ia[i]));
                json_object_set_new(r, "dense_p", json_real(pa[i]));
            }
            if (st->mode != LQL_DENSE) {
                json_object_set_new(r, "walk", lql_tok_json(q, ib[i]));
                json_object_set_new(r, "walk_p", json_real(pb[i]));
            }
            json_array_append_new(rows, r);
        }
    }
    mf_walk_free(w);
    free(a), free(b);
    return s;
}

static void do_show(mf_lql *q, const lql_stmt *st, json_t *rows) {
    const mf_vindex_info *vi = &q->vi;
    if (st->kind == LQL_SHOW_LAYERS) {
        for (int l = 0; l < vi->n_layer; l++)
            json_array_append_new(rows, json_pack("{s:i,s:i,s:s,s:i}", "layer", l, "features", vi->n_features, "type",
                                                  vi->feature_type, "labels_per_feature", vi->down_top_k));
        return;
    }
    static const char *levels[] = {"browse", "inference", "all"};
    char n[64];
#define KV(k, v) json_array_append_new(rows, json_pack("{s:s,s:s}", "key", k, "value", v))
    KV("source", vi->source_file);
    KV("sha256", vi->source_sha256);
    KV("architecture", vi->arch);
    KV("level", levels[vi->level]);
    snprintf(n, sizeof n, "%d", vi->n_layer), KV("layers", n);
    snprintf(n, sizeof n, "%d", vi->n_embd), KV("n_embd", n);
    snprintf(n, sizeof n, "%d", vi->n_vocab), KV("n_vocab", n);
    snprintf(n, sizeof n, "%d", vi->n_features), KV("features_per_layer", n);
    if (vi->n_expert) snprintf(n, sizeof n, "%d", vi->n_expert), KV("experts", n);
    KV("feature_type", vi->feature_type);
    KV("ffn", vi->gated ? "gated" : "non-gated");
    snprintf(n, sizeof n, "%.2f MiB", (double)vi->bytes / (1 << 20)), KV("size", n);
    int ins = 0;
    for (int l = 0; l < vi->n_layer; l++) ins += mf_vindex_n_inserted(q->v, l);
    snprintf(n, sizeof n, "%d (%d inserted, %d deleted features)", mf_vindex_n_edits(q->v), ins, mf_vindex_n_deleted(q->v));
    KV("edits", n);
    /* the graph caches --hnsw would map, and whether each fits these gates */
    mf_vindex_hnsw_cache *c;
    int32_t nc;
    if (!mf_vindex_hnsw_caches(q->v, &c, &nc)) {
        for (int32_t i = 0; i < nc; i++) {
            char line[512];
            mf_vindex_hnsw_cache_text(&c[i], line, sizeof line);
            KV("hnsw_cache", line);
        }
        free(c);
    } else KV("hnsw_cache", mf_last_error());
#undef KV
}

/* ---- rendering ---- */

static char *cell(json_t *v) {
    char b[64];
    if (json_is_string(v)) {
        /* control bytes shown escaped, so a row stays one line */
        const char *s = json_string_value(v);
        sbuf o = {0};
        sb_str(&o, "");
        for (; *s; s++) {
            if (*s == '\n') sb_str(&o, "\\n");
            else if ((unsigned char)*s < 0x20) {
                snprintf(b, sizeof b, "\\x%02x", (unsigned char)*s);
                sb_str(&o, b);
            } else sb_add(&o, s, 1);
        }
        return o.p;
    }
    if (json_is_integer(v)) snprintf(b, sizeof b, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(b, sizeof b, "%.4f", json_real_value(v));
    else if (json_is_array(v)) {
        sbuf o = {0};
        sb_str(&o, "");
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            char *c = cell(e);
            if (i) sb_str(&o, ", ");
            sb_str(&o, c ? c : "");
            free(c);
        }
        return o.p;
    } else snprintf(b, sizeof b, "%s", json_is_null(v) ? "" : "?");
    return strdup(b);
}

/* display width: code points, not bytes (labels are often multi-byte) */
static int width(const char *s) {
    int w = 0;
    for (; *s; s++) w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

static void pad(sbuf *out, const char *s, int w, bool right, bool last) {
    const int n = w - width(s);
    if (right)
        for (int i = 0; i < n; i++) sb_str(out, " ");
    sb_str(out, s);
    if (!right && !last)
        for (int i = 0; i < n; i++) sb_str(out, " ");
}

static void render_table(json_t *rows, sbuf *out) {
    size_t nr = json_array_size(rows);
    if (!nr) {
        sb_str(out, "(no rows)\n\n");
        return;
    }
    json_t *first = json_array_get(rows, 0);
    const size_t nc = json_object_size(first);
    const char **keys = calloc(nc, sizeof *keys);
    int *w = calloc(nc, sizeof *w);
    char **cells = calloc(nr * nc, sizeof *cells);
    if (!keys || !w || !cells) goto done;
    size_t c = 0;
    const char *k;
    json_t *v;
    json_object_foreach(first, k, v) {
        keys[c] = k;
        w[c] = (int)strlen(k);
        c++;
    }
    for (size_t r = 0; r < nr; r++)
        for (c = 0; c < nc; c++) {
            cells[r * nc + c] = cell(json_object_get(json_array_get(rows, r), keys[c]));
            int l = cells[r * nc + c] ? width(cells[r * nc + c]) : 0;
            if (l > w[c]) w[c] = l;
        }
    for (c = 0; c < nc; c++) {
        sb_str(out, c ? "  " : "");
        pad(out, keys[c], w[c], false, c + 1 == nc);
    }
    sb_str(out, "\n");
    for (c = 0; c < nc; c++) {
        sb_str(out, c ? "  " : "");
        for (int i = 0; i < w[c]; i++) sb_str(out, "-");
    }
    sb_str(out, "\n");
    for (size_t r = 0; r < nr; r++) {
        for (c = 0; c < nc; c++) {
            const char *s = cells[r * nc + c] ? cells[r * nc + c] : "";
            json_t *cv = json_object_get(json_array_get(rows, r), keys[c]);
            sb_str(out, c ? "  " : "");
            pad(out, s, w[c], json_is_number(cv), c + 1 == nc);
        }
        sb_str(out, "\n");
    }
    sb_str(out, "\n");
done:
    for (size_t i = 0; cells && i < nr * nc; i++) free(cells[i]);
    free(cells), free(keys), free(w);
}

static const char *kind_name(lql_kind k) {
    static const char *n[] = {"DESCRIBE",     "WALK",        "SELECT",     "INFER",         "SHOW LAYERS",
                              "SHOW FEATURES", "SHOW STATS", "DELETE",     "SAVE PATCH",    "APPLY PATCH",
                              "SHOW PATCHES",  "INSERT",     "UPDATE",     "BEGIN PATCH",   "COMPILE INTO VINDEX",
                              "COMPILE INTO MODEL", "EXPLAIN INFER"};
    return n[k];
}

mf_status mf_lql_run(mf_lql *q, const char *text, size_t len, bool json, char **out) {
    *out = NULL;
    lql_prog prog;
    mf_status s = lql_parse(text, len, &prog);
    if (s) return s;
    sbuf o = {0};
    sb_str(&o, "");
    for (int i = 0; i < prog.n && !s; i++) {
        const lql_stmt *st = &prog.s[i];
        json_t *rows = json_array();
        switch (st->kind) {
        case LQL_DESCRIBE: s = do_describe(q, st, rows); break;
        case LQL_WALK: s = do_walk(q, st, rows); break;
        case LQL_SELECT: s = do_select(q, st, rows, false); break;
        case LQL_SHOW_FEATURES: s = do_select(q, st, rows, true); break;
        case LQL_INFER: s = do_infer(q, st, rows); break;
        case LQL_SHOW_LAYERS:
        case LQL_SHOW_STATS: do_show(q, st, rows); break;
        case LQL_DELETE:
            s = check_range(q, st);
            if (!s) s = mf_vindex_delete_feature(q->v, st->layer0, st->feature);
            if (!s) json_array_append_new(rows, json_pack("{s:i,s:o,s:s}", "layer", st->layer0, "feature",
                                                          lql_feature_json(q, st->feature), "status", "deleted"));
            break;
        case LQL_SAVE_PATCH:
        case LQL_APPLY_PATCH:
        case LQL_BEGIN_PATCH:
        case LQL_SHOW_PATCHES: s = lql_do_patch(q, st, rows); break;
        case LQL_INSERT: s = lql_do_insert(q, st, rows); break;
        case LQL_UPDATE: s = lql_do_update(q, st, rows); break;
        case LQL_COMPILE_VINDEX:
        case LQL_COMPILE_MODEL: s = lql_do_compile(q, st, rows); break;
        case LQL_EXPLAIN: s = lql_do_explain(q, st, rows); break;
        }
        if (s) {
            s = mf_err_prefix(s, "line %d, column %d: %s", st->line, st->col, kind_name(st->kind));
        } else if (json) {
            json_t *r = json_pack("{s:s,s:i,s:O}", "statement", kind_name(st->kind), "line", st->line, "rows", rows);
            char *d = json_dumps(r, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
            if (d) sb_str(&o, d), sb_str(&o, "\n");
            free(d);
            json_decref(r);
        } else {
            render_table(rows, &o);
        }
        json_decref(rows);
    }
    lql_prog_free(&prog);
    *out = o.p;
    return s;
}
