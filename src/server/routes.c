/* routes.c - the route table (404 for an unknown path, 405 for a known path
 * with the wrong method), JSON body parsing, and the small endpoints:
 * health, props, slots, metrics, models, tokenize, detokenize. */
#include "http.h"

#include <stdlib.h>
#include <string.h>

typedef struct route {
    const char *path;
    const char *method;
    void (*get)(srv_state *, const srv_request *, srv_reply *);
    void (*post)(srv_state *, const srv_request *, json_t *, srv_reply *);
    bool before_ready; /* answers while the model loads */
} route;

static const route ROUTES[] = {
    {"/", "GET", srv_h_page, NULL, true},
    {"/index.html", "GET", srv_h_page, NULL, true},
    {"/health", "GET", srv_h_health, NULL, true},
    {"/v1/health", "GET", srv_h_health, NULL, true},
    {"/v1/models", "GET", srv_h_models, NULL, false},
    {"/models", "GET", srv_h_models, NULL, false},
    {"/props", "GET", srv_h_props, NULL, false},
    {"/slots", "GET", srv_h_slots, NULL, false},
    {"/metrics", "GET", srv_h_metrics, NULL, true},
    {"/v1/chat/completions", "POST", NULL, srv_h_chat, false},
    {"/chat/completions", "POST", NULL, srv_h_chat, false},
    {"/v1/completions", "POST", NULL, srv_h_completions, false},
    {"/completions", "POST", NULL, srv_h_completions, false},
    {"/v1/embeddings", "POST", NULL, srv_h_embeddings, false},
    {"/embeddings", "POST", NULL, srv_h_embeddings, false},
    {"/tokenize", "POST", NULL, srv_h_tokenize, false},
    {"/detokenize", "POST", NULL, srv_h_detokenize, false},
    {"/apply-template", "POST", NULL, srv_h_apply_template, false},
};
#define N_ROUTES (sizeof ROUTES / sizeof ROUTES[0])

void srv_route(srv_state *st, const srv_request *q, srv_reply *r) {
    const route *rt = NULL;
    for (size_t i = 0; i < N_ROUTES; i++)
        if (!strcmp(q->path, ROUTES[i].path)) {
            rt = &ROUTES[i];
            break;
        }
    /* GET /v1/models/<id> */
    if (!rt && !strncmp(q->path, "/v1/models/", 11)) rt = &ROUTES[4];
    if (!rt) {
        srv_error(r, 404, NULL, "no route %s %.200s", q->method, q->path);
        return;
    }
    const bool is_head = !strcmp(q->method, "HEAD");
    if (strcmp(q->method, rt->method) && !(is_head && rt->get)) {
        srv_error(r, 405, NULL, "%s is not allowed on %s (use %s)", q->method, rt->path, rt->method);
        r->allow = rt->get ? "GET, HEAD" : "POST";
        return;
    }
    if (!rt->before_ready && !atomic_load(&st->ready)) {
        srv_error(r, 503, NULL, "Loading model");
        r->retry_after = 1;
        return;
    }
    if (rt->get) {
        rt->get(st, q, r);
        return;
    }
    json_error_t err;
    json_t *body = json_loadb(q->body, q->body_len, JSON_REJECT_DUPLICATES, &err);
    if (!body) {
        if (!q->body_len) srv_error(r, 400, NULL, "the request needs a JSON body");
        else srv_error(r, 400, NULL, "invalid JSON at line %d, column %d: %s", err.line, err.column, err.text);
        return;
    }
    if (!json_is_object(body)) {
        srv_error(r, 400, NULL, "the request body must be a JSON object");
        json_decref(body);
        return;
    }
    rt->post(st, q, body, r);
    json_decref(body);
}

/* ---- small endpoints ------------------------------------------------------------ */

void srv_h_health(srv_state *st, const srv_request *q, srv_reply *r) {
    (void)q;
    if (!atomic_load(&st->ready)) {
        srv_error(r, 503, NULL, "Loading model");
        r->retry_after = 1;
        return;
    }
    srv_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

void srv_h_models(srv_state *st, const srv_request *q, srv_reply *r) {
    json_t *m = json_pack("{s:s,s:s,s:I,s:s,s:{s:s,s:I,s:I,s:I,s:I,s:I}}", "id", st->model_id, "object", "model",
                          "created", (json_int_t)st->created, "owned_by", "minfer", "meta", "arch",
                          mf_model_arch(st->model), "n_vocab", (json_int_t)mf_model_n_vocab(st->model), "n_ctx_train",
                          (json_int_t)mf_model_n_ctx_train(st->model), "n_embd", (json_int_t)mf_model_n_embd(st->model),
                          "n_params", (json_int_t)mf_model_n_params(st->model), "size",
                          (json_int_t)mf_model_size(st->model));
    if (!strncmp(q->path, "/v1/models/", 11)) {
        if (strcmp(q->path + 11, st->model_id)) {
            json_decref(m);
            srv_error(r, 404, "model", "the model '%.200s' does not exist (this server has '%s')", q->path + 11,
                      st->model_id);
            return;
        }
        srv_json(r, 200, m);
        return;
    }
    srv_json(r, 200, json_pack("{s:s,s:[o]}", "object", "list", "data", m));
}

void srv_h_props(srv_state *st, const srv_request *q, srv_reply *r) {
    (void)q;
    mf_sampler_params d = mf_sampler_default_params();
    const srv_config *c = &st->cfg;
    json_t *spec = json_pack("{s:s,s:i,s:i,s:f}", "type", c->draft_model ? "draft" : c->lookup ? "lookup" : "none", "n_max",
                             c->draft_max, "n_min", c->draft_min, "p_min", (double)c->draft_p_min);
    json_t *o =
             json_pack("{s:{s:f,s:i,s:f,s:f,s:f,s:i},s:I,s:i,s:s,s:s,s:s,s:s,s:b}", "default_generation_settings",
                       "temperature", (double)d.temp, "top_k", d.top_k, "top_p", (double)d.top_p, "min_p",
                       (double)d.min_p, "repeat_penalty", (double)d.repeat_penalty, "repeat_last_n", d.penalty_last_n,
                       "n_ctx", (json_int_t)srv_sched_slot_ctx(st->sched), "total_slots", srv_sched_n_slots(st->sched),
                       "model_path", st->cfg.model_path, "model_alias", st->model_id, "chat_template", st->tmpl,
                       "build_info", "minfer", "reasoning_split",
                       st->tmpl_thinks && !st->cfg.reasoning_inline);
    if (o) json_object_set_new(o, "speculative", spec);
    else json_decref(spec);
    srv_json(r, 200, o);
}

void srv_h_slots(srv_state *st, const srv_request *q, srv_reply *r) {
    (void)q;
    int n = srv_sched_n_slots(st->sched);
    srv_slot_info *in = calloc((size_t)n, sizeof *in);
    if (!in) {
        srv_error(r, 500, NULL, "out of memory");
        return;
    }
    srv_sched_slots(st->sched, in);
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:i,s:I,s:b,s:I,s:I,s:I}", "id", in[i].id, "n_ctx",
                                           (json_int_t)srv_sched_slot_ctx(st->sched), "is_processing", in[i].busy,
                                           "n_cached", (json_int_t)in[i].n_cached, "n_prompt_tokens",
                                           (json_int_t)in[i].n_prompt, "n_generated", (json_int_t)in[i].n_gen));
    free(in);
    srv_json(r, 200, a);
}

void srv_h_metrics(srv_state *st, const srv_request *q, srv_reply *r) {
    (void)q;
    int busy = 0, n = st->sched ? srv_sched_n_slots(st->sched) : 0;
    uint32_t used = 0, total = 0;
    int depth = 0, parked = 0;
    int64_t evicted = 0;
    if (st->sched && atomic_load(&st->ready)) {
        srv_slot_info *in = calloc((size_t)n, sizeof *in);
        if (in) {
            srv_sched_slots(st->sched, in);
            for (int i = 0; i < n; i++) busy += in[i].busy;
            free(in);
        }
        srv_sched_pages(st->sched, &used, &total);
        depth = srv_sched_queue_depth(st->sched);
        srv_sched_cache(st->sched, &parked, &evicted);
    }
    r->status = 200;
    r->body = srv_metrics_render(depth, busy, n, used, total, parked, evicted);
    r->len = r->body ? strlen(r->body) : 0;
    r->ctype = "text/plain; version=0.0.4";
}

/* ---- tokenizer endpoints ---------------------------------------------------------- */

mf_token *srv_tokenize(const srv_state *st, const char *text, size_t len, bool add_special, bool parse_special,
                       int32_t *n_out) {
    int32_t n = mf_tokenize(st->model, text, len, NULL, 0, add_special, parse_special);
    if (n == INT32_MIN) return NULL;
    int32_t need = n < 0 ? -n : n;
    mf_token *t = malloc(sizeof *t * (size_t)(need + 1));
    if (!t) return NULL;
    n = mf_tokenize(st->model, text, len, t, need + 1, add_special, parse_special);
    if (n < 0) {
        free(t);
        return NULL;
    }
    *n_out = n;
    return t;
}

static bool get_bool(json_t *body, const char *key, bool def, bool *out, srv_reply *r) {
    json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return true;
    }
    if (!json_is_boolean(v)) {
        srv_error(r, 400, key, "%s: must be a boolean", key);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

void srv_h_tokenize(srv_state *st, const srv_request *q, json_t *body, srv_reply *r) {
    (void)q;
    json_t *c = json_object_get(body, "content");
    if (!json_is_string(c)) {
        srv_error(r, 400, "content", "content: must be a string");
        return;
    }
    bool add_special, with_pieces;
    if (!get_bool(body, "add_special", false, &add_special, r) || !get_bool(body, "with_pieces", false, &with_pieces, r))
        return;
    int32_t n = 0;
    mf_token *t = srv_tokenize(st, json_string_value(c), json_string_length(c), add_special, true, &n);
    if (!t) {
        srv_error(r, 400, "content", "content: %s", mf_last_error());
        return;
    }
    json_t *a = json_array();
    for (int32_t i = 0; i < n; i++) {
        if (!with_pieces) {
            json_array_append_new(a, json_integer(t[i]));
            continue;
        }
        char piece[256];
        int32_t k = mf_token_to_piece(st->model, t[i], piece, sizeof piece, true);
        json_array_append_new(a, json_pack("{s:i,s:o}", "id", t[i], "piece", srv_json_bytes(piece, k > 0 ? (size_t)k : 0)));
    }
    free(t);
    srv_json(r, 200, json_pack("{s:o}", "tokens", a));
}

/* Token ids from a JSON array, each checked against the vocabulary. */
mf_token *srv_token_array(const srv_state *st, json_t *a, const char *field, int32_t *n_out, srv_reply *r) {
    size_t n = json_array_size(a);
    mf_token *t = malloc(sizeof *t * (n + 1));
    if (!t) {
        srv_error(r, 500, NULL, "out of memory");
        return NULL;
    }
    const int32_t nv = mf_model_n_vocab(st->model);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= nv) {
            srv_error(r, 400, field, "%s[%zu]: must be a token id between 0 and %d", field, i, nv - 1);
            free(t);
            return NULL;
        }
        t[i] = (mf_token)json_integer_value(v);
    }
    *n_out = (int32_t)n;
    return t;
}

void srv_h_detokenize(srv_state *st, const srv_request *q, json_t *body, srv_reply *r) {
    (void)q;
    json_t *a = json_object_get(body, "tokens");
    if (!json_is_array(a)) {
        srv_error(r, 400, "tokens", "tokens: must be an array of token ids");
        return;
    }
    int32_t n = 0;
    mf_token *t = srv_token_array(st, a, "tokens", &n, r);
    if (!t) return;
    int32_t len = mf_detokenize(st->model, t, n, NULL, 0, false, false);
    size_t cap = (size_t)(len < 0 ? -len : len) + 1;
    char *buf = malloc(cap);
    if (!buf) {
        free(t);
        srv_error(r, 500, NULL, "out of memory");
        return;
    }
    len = mf_detokenize(st->model, t, n, buf, (int32_t)cap, false, false);
    free(t);
    json_t *s = srv_json_bytes(buf, len > 0 ? (size_t)len : 0);
    free(buf);
    srv_json(r, 200, json_pack("{s:o}", "content", s));
}

/* ---- prompt / input lists ------------------------------------------------------ */

int srv_prompt_list(json_t *v, const char *field, bool empty_ok, json_t **list, int max, const char *what,
                    srv_reply *r) {
    /* one: a string or an array of ids; several: an array of those */
    const bool ids = json_is_array(v) && (json_array_size(v) ? json_is_integer(json_array_get(v, 0)) : empty_ok);
    if (json_is_string(v) || ids) {
        list[0] = v;
        return 1;
    }
    if (!json_is_array(v) || !json_array_size(v)) {
        srv_error(r, 400, field, "%s: %s", field, what);
        return -1;
    }
    if (json_array_size(v) > (size_t)max) {
        srv_error(r, 400, field, "%s: at most %d %ss in one request", field, max, field);
        return -1;
    }
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) list[i] = e;
    return (int)json_array_size(v);
}

mf_token *srv_prompt_tokens(const srv_state *st, json_t *item, const char *field, int index, int32_t *n,
                            srv_reply *r) {
    if (json_is_string(item)) {
        mf_token *t = srv_tokenize(st, json_string_value(item), json_string_length(item), true, true, n);
        if (!t) srv_error(r, 400, field, "%s: %s", field, mf_last_error());
        return t;
    }
    if (json_is_array(item)) return srv_token_array(st, item, field, n, r);
    srv_error(r, 400, field, "%s[%d]: must be a string or an array of token ids", field, index);
    return NULL;
}
