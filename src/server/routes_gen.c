/* routes_gen.c - POST /v1/chat/completions, /v1/completions and
 * /apply-template: requests become jobs for the scheduler; the reply is
 * either one JSON object when every job is done, or a stream of
 * Server-Sent Events built from what the jobs have produced so far. */
#include "params.h"
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHOICES 16

/* ---- the chat prompt ---------------------------------------------------------------- */

/* Concatenates a multi-part content array's text parts. */
static json_t *content_text(json_t *c, size_t mi, srv_reply *r) {
    if (json_is_string(c) || json_is_null(c)) return json_incref(c);
    if (!json_is_array(c)) {
        srv_error(r, 400, "messages", "messages[%zu].content: must be a string, an array of parts or null", mi);
        return NULL;
    }
    size_t len = 0, i;
    json_t *p;
    json_array_foreach(c, i, p) {
        json_t *type = json_object_get(p, "type"), *text = json_object_get(p, "text");
        if (!json_is_string(type) || strcmp(json_string_value(type), "text")) {
            srv_error(r, 400, "messages", "messages[%zu].content[%zu]: only parts of type \"text\" are supported", mi, i);
            return NULL;
        }
        if (!json_is_string(text)) {
            srv_error(r, 400, "messages", "messages[%zu].content[%zu].text: must be a string", mi, i);
            return NULL;
        }
        len += json_string_length(text);
    }
    char *buf = malloc(len + 1);
    if (!buf) return NULL;
    size_t at = 0;
    json_array_foreach(c, i, p) {
        json_t *text = json_object_get(p, "text");
        memcpy(buf + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    json_t *s = json_stringn(buf, at);
    free(buf);
    return s;
}

/* Renders body.messages (and tools) through the chat template. */
static char *render_chat(srv_state *st, json_t *body, srv_reply *r) {
    json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs) || !json_array_size(msgs)) {
        srv_error(r, 400, "messages", "messages: must be a non-empty array");
        return NULL;
    }
    static const char *const ROLES[] = {"system", "user", "assistant", "tool", "developer", "function"};
    json_t *norm = json_array();
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) {
            srv_error(r, 400, "messages", "messages[%zu]: must be an object", i);
            json_decref(norm);
            return NULL;
        }
        json_t *role = json_object_get(m, "role");
        bool known = false;
        for (size_t k = 0; json_is_string(role) && k < sizeof ROLES / sizeof ROLES[0]; k++)
            known |= !strcmp(json_string_value(role), ROLES[k]);
        if (!known) {
            srv_error(r, 400, "messages", "messages[%zu].role: must be one of system, user, assistant, tool, developer", i);
            json_decref(norm);
            return NULL;
        }
        json_t *c = json_object_get(m, "content");
        if (!c && !json_object_get(m, "tool_calls")) {
            srv_error(r, 400, "messages", "messages[%zu].content: missing", i);
            json_decref(norm);
            return NULL;
        }
        json_t *copy = json_deep_copy(m);
        srv_tool_args_to_objects(copy);
        if (c) {
            json_t *t = content_text(c, i, r);
            if (!t) {
                json_decref(copy);
                json_decref(norm);
                if (!r->status) srv_error(r, 500, NULL, "out of memory");
                return NULL;
            }
            json_object_set_new(copy, "content", t);
        }
        json_array_append_new(norm, copy);
    }
    json_t *conv = json_pack("{s:o}", "messages", norm);
    json_t *tools = json_object_get(body, "tools");
    if (json_is_array(tools)) json_object_set(conv, "tools", tools);
    else if (tools && !json_is_null(tools)) {
        json_decref(conv);
        srv_error(r, 400, "tools", "tools: must be an array");
        return NULL;
    }
    json_t *kw = json_object_get(body, "chat_template_kwargs");
    if (kw && !json_is_null(kw) && !json_is_object(kw)) {
        json_decref(conv);
        srv_error(r, 400, "chat_template_kwargs", "chat_template_kwargs: must be an object");
        return NULL;
    }
    char *conv_s = json_dumps(conv, JSON_COMPACT);
    char *kw_s = json_is_object(kw) ? json_dumps(kw, JSON_COMPACT) : NULL;
    json_decref(conv);
    mf_chat_params p = mf_chat_default_params();
    p.bos_token = st->bos_text;
    p.eos_token = st->eos_text;
    p.kwargs_json = kw_s;
    char *out = NULL;
    mf_status s = conv_s ? mf_chat_render(st->tmpl, conv_s, &p, &out, NULL) : MF_ERR_NOMEM;
    free(conv_s);
    free(kw_s);
    if (s) {
        srv_error(r, s == MF_ERR_NOMEM ? 500 : 400, "messages", "%s", s == MF_ERR_NOMEM ? "out of memory" : mf_last_error());
        return NULL;
    }
    return out;
}

/* The rendered prompt ends inside a <think> block (the template opened it). */
static bool ends_in_think(const char *p) {
    const char *o = NULL, *c = NULL, *s;
    for (s = p; (s = strstr(s, "<think>")); s++) o = s;
    for (s = p; (s = strstr(s, "</think>")); s++) c = s;
    return o && (!c || c < o);
}

void srv_h_apply_template(srv_state *st, const srv_request *q, json_t *body, srv_reply *r) {
    (void)q;
    char *p = render_chat(st, body, r);
    if (!p) return;
    srv_json(r, 200, json_pack("{s:s}", "prompt", p));
    free(p);
}

/* ---- jobs of a request ---------------------------------------------------------------- */

typedef struct gen_req {
    srv_job *jobs[MAX_CHOICES];
    int n;
    bool chat, stream, include_usage;
} gen_req;

static void req_free(gen_req *g) {
    for (int i = 0; i < g->n; i++) srv_job_unref(g->jobs[i]);
    g->n = 0;
}

/* A job for `tokens` (taken) with a copy of the request's generation settings. */
static srv_job *make_job(srv_state *st, mf_token *tokens, int32_t n, const srv_gen *gen, int index, srv_reply *r,
                         const char *field) {
    const int32_t ctx = srv_sched_slot_ctx(st->sched);
    if (n <= 0) {
        free(tokens);
        srv_error(r, 400, field, "%s: the prompt is empty", field);
        return NULL;
    }
    if (n >= ctx) {
        free(tokens);
        srv_error(r, 400, field, "%s: the prompt has %d tokens, the context holds %d (prompt and reply together)", field,
                  n, ctx);
        return NULL;
    }
    srv_job *j = srv_job_new(SRV_JOB_GENERATE);
    if (!j) {
        free(tokens);
        srv_error(r, 500, NULL, "out of memory");
        return NULL;
    }
    j->prompt = tokens;
    j->n_prompt = n;
    j->index = index;
    j->gen = *gen;
    for (int i = 0; i < gen->n_stop; i++) j->gen.stop[i] = strdup(gen->stop[i]);
    j->gen.grammar = NULL;
    if (gen->grammar) {
        j->gen.grammar = strdup(gen->grammar);
        if (!j->gen.grammar || mf_grammar_parse(gen->grammar, strlen(gen->grammar), gen->grammar_root, &j->grammar)) {
            srv_error(r, 500, NULL, "cannot compile the grammar: %s", mf_last_error());
            srv_job_unref(j);
            return NULL;
        }
    }
    return j;
}

static bool submit_all(srv_state *st, gen_req *g, srv_reply *r) {
    for (int i = 0; i < g->n; i++)
        if (!srv_sched_submit(st->sched, g->jobs[i])) {
            for (int k = 0; k < i; k++) atomic_store(&g->jobs[k]->cancel, true);
            srv_error(r, 503, NULL, "the server is busy: all %d slots are running and the queue of %d is full; retry later",
                      srv_sched_n_slots(st->sched), st->cfg.max_queue);
            r->retry_after = 1;
            return false;
        }
    return true;
}

/* ---- response pieces ----------------------------------------------------------------- */

static const char *finish_name(srv_finish f) { return f == SRV_FIN_LENGTH ? "length" : "stop"; }

static json_t *usage_json(gen_req *g) {
    json_int_t p = 0, c = 0, cached = 0;
    for (int i = 0; i < g->n; i++) {
        p += g->jobs[i]->n_prompt;
        c += g->jobs[i]->n_gen;
        cached += g->jobs[i]->n_cached;
    }
    return json_pack("{s:I,s:I,s:I,s:{s:I}}", "prompt_tokens", p, "completion_tokens", c, "total_tokens", p + c,
                     "prompt_tokens_details", "cached_tokens", cached);
}

static json_t *timings_json(const srv_job *j) {
    double pms = j->t_first > 0 ? (j->t_first - j->t_start) * 1e3 : 0;
    double gms = j->t_first > 0 ? (j->t_end - j->t_first) * 1e3 : 0;
    int32_t pn = j->n_prompt - j->n_cached, gn = j->n_gen > 1 ? j->n_gen - 1 : 0;
    json_t *t = json_pack("{s:i,s:i,s:f,s:f,s:f,s:i,s:f,s:f,s:f}", "cache_n", j->n_cached, "prompt_n", pn, "prompt_ms", pms,
                          "prompt_per_token_ms", pn ? pms / pn : 0.0, "prompt_per_second", pms > 0 ? pn * 1e3 / pms : 0.0,
                          "predicted_n", j->n_gen, "predicted_ms", gms, "predicted_per_token_ms", gn ? gms / gn : 0.0,
                          "predicted_per_second", gms > 0 ? gn * 1e3 / gms : 0.0);
    /* llama-server's names for what speculative decoding did */
    if (t && j->gen.spec != SRV_SPEC_NONE) {
        json_object_set_new(t, "draft_n", json_integer(j->n_drafted));
        json_object_set_new(t, "draft_n_accepted", json_integer(j->n_accepted));
    }
    return t;
}

static json_t *piece_json(const srv_state *st, mf_token t, json_t **bytes) {
    char buf[256];
    int32_t n = mf_token_to_piece(st->model, t, buf, sizeof buf, false);
    if (n < 0) n = 0;
    if (bytes) {
        *bytes = json_array();
        for (int32_t i = 0; i < n; i++) json_array_append_new(*bytes, json_integer((unsigned char)buf[i]));
    }
    return srv_json_bytes(buf, (size_t)n);
}

/* Chat logprobs of entries [from, to): {"content": [{token, logprob, bytes, top_logprobs}]}. */
static json_t *chat_logprobs(const srv_state *st, const srv_logprob *lps, int from, int to) {
    json_t *a = json_array();
    for (int i = from; i < to; i++) {
        json_t *bytes, *tok = piece_json(st, lps[i].tok, &bytes);
        json_t *top = json_array();
        for (int k = 0; k < lps[i].n_top; k++) {
            json_t *tb, *tt = piece_json(st, lps[i].top_tok[k], &tb);
            json_array_append_new(top, json_pack("{s:o,s:f,s:o}", "token", tt, "logprob", (double)lps[i].top_lp[k],
                                                 "bytes", tb));
        }
        json_array_append_new(a, json_pack("{s:o,s:f,s:o,s:o}", "token", tok, "logprob", (double)lps[i].lp, "bytes",
                                           bytes, "top_logprobs", top));
    }
    return json_pack("{s:o}", "content", a);
}

/* Legacy completions logprobs: tokens, token_logprobs, top_logprobs, text_offset. */
static json_t *text_logprobs(const srv_state *st, const srv_logprob *lps, int from, int to, size_t *offset) {
    json_t *toks = json_array(), *lp = json_array(), *top = json_array(), *off = json_array();
    for (int i = from; i < to; i++) {
        json_t *t = piece_json(st, lps[i].tok, NULL);
        json_array_append_new(off, json_integer((json_int_t)*offset));
        *offset += json_string_length(t);
        json_array_append_new(toks, t);
        json_array_append_new(lp, json_real(lps[i].lp));
        json_t *o = json_object();
        for (int k = 0; k < lps[i].n_top; k++) {
            json_t *tt = piece_json(st, lps[i].top_tok[k], NULL);
            json_object_set_new(o, json_string_value(tt), json_real(lps[i].top_lp[k]));
            json_decref(tt);
        }
        json_array_append_new(top, o);
    }
    return json_pack("{s:o,s:o,s:o,s:o}", "tokens", toks, "token_logprobs", lp, "top_logprobs", top, "text_offset", off);
}

static void job_error_reply(srv_job *j, srv_reply *r) {
    srv_error(r, j->error_status >= 400 ? j->error_status : 500, NULL, "%s", j->error[0] ? j->error : "generation failed");
}

/* ---- whole replies --------------------------------------------------------------------- */

static void reply_whole(srv_state *st, gen_req *g, const char *id, json_int_t created, srv_reply *r) {
    for (int i = 0; i < g->n; i++)
        if (g->jobs[i]->finish == SRV_FIN_ERROR || g->jobs[i]->finish == SRV_FIN_CANCEL) {
            job_error_reply(g->jobs[i], r);
            return;
        }
    json_t *choices = json_array();
    for (int i = 0; i < g->n; i++) {
        srv_job *j = g->jobs[i];
        json_t *c;
        json_t *lp = json_null();
        if (g->chat) {
            if (j->gen.top_logprobs >= 0) {
                json_decref(lp);
                lp = chat_logprobs(st, j->lps, 0, j->n_lps);
            }
            json_t *calls = NULL;
            size_t clen = j->content_len;
            if (j->tool_fmt >= 0 && !srv_tool_parse((srv_tool_fmt)j->tool_fmt, j->content ? j->content : "",
                                                    j->content_len, &calls, &clen))
                clen = j->content_len;
            json_t *msg = json_pack("{s:s,s:o}", "role", "assistant", "content",
                                    calls && !clen ? json_null() : srv_json_bytes(j->content ? j->content : "", clen));
            if (calls) json_object_set_new(msg, "tool_calls", calls);
            if (j->reasoning_len) json_object_set_new(msg, "reasoning_content", srv_json_bytes(j->reasoning, j->reasoning_len));
            c = json_pack("{s:i,s:o,s:o,s:s}", "index", j->index, "message", msg, "logprobs", lp, "finish_reason",
                          calls ? "tool_calls" : finish_name(j->finish));
        } else {
            if (j->gen.top_logprobs >= 0) {
                size_t off = 0;
                json_decref(lp);
                lp = text_logprobs(st, j->lps, 0, j->n_lps, &off);
            }
            c = json_pack("{s:o,s:i,s:o,s:s}", "text", srv_json_bytes(j->content ? j->content : "", j->content_len),
                          "index", j->index, "logprobs", lp, "finish_reason", finish_name(j->finish));
        }
        json_array_append_new(choices, c);
    }
    json_t *o = json_pack("{s:s,s:s,s:I,s:s,s:s,s:o,s:o,s:o}", "id", id, "object",
                          g->chat ? "chat.completion" : "text_completion", "created", created, "model", st->model_id,
                          "system_fingerprint", "minfer", "choices", choices, "usage", usage_json(g), "timings",
                          timings_json(g->jobs[0]));
    srv_json(r, 200, o);
}

/* ---- streams ------------------------------------------------------------------------------ */

struct srv_stream {
    srv_state *st;
    gen_req g;
    char id[64];
    json_int_t created;
    size_t sent_c[MAX_CHOICES], sent_r[MAX_CHOICES], text_off[MAX_CHOICES];
    int sent_lp[MAX_CHOICES], sent_mark[MAX_CHOICES];
    bool started[MAX_CHOICES], done[MAX_CHOICES];
    bool ended;
    char *buf;
    size_t len, cap;
};

static void sse(srv_stream *s, json_t *v) {
    char *t = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (!t) return;
    size_t n = strlen(t), need = s->len + n + 9;
    if (need > s->cap) {
        size_t c = s->cap ? s->cap : 4096;
        while (c < need) c *= 2;
        char *nb = realloc(s->buf, c);
        if (!nb) {
            free(t);
            return;
        }
        s->buf = nb;
        s->cap = c;
    }
    memcpy(s->buf + s->len, "data: ", 6);
    memcpy(s->buf + s->len + 6, t, n);
    memcpy(s->buf + s->len + 6 + n, "\n\n", 2);
    s->len += n + 8;
    free(t);
}

static json_t *chunk(srv_stream *s, json_t *choices) {
    return json_pack("{s:s,s:s,s:I,s:s,s:s,s:o}", "id", s->id, "object",
                     s->g.chat ? "chat.completion.chunk" : "text_completion", "created", s->created, "model",
                     s->st->model_id, "system_fingerprint", "minfer", "choices", choices);
}

/* One event of job i: its output from the sent offsets up to mark m. */
static void event(srv_stream *s, int i, const struct srv_mark *m) {
    srv_job *j = s->g.jobs[i];
    size_t upto = m->content;
    /* with tools, text that may be the start of a call waits for the end */
    if (j->tool_fmt >= 0) {
        size_t safe = srv_tool_safe((srv_tool_fmt)j->tool_fmt, j->content ? j->content : "", m->content);
        upto = safe > s->sent_c[i] ? safe : s->sent_c[i];
    }
    json_t *content = upto > s->sent_c[i] ? srv_json_bytes(j->content + s->sent_c[i], upto - s->sent_c[i]) : NULL;
    json_t *reasoning = m->reasoning > s->sent_r[i] ? srv_json_bytes(j->reasoning + s->sent_r[i], m->reasoning - s->sent_r[i]) : NULL;
    json_t *lp = NULL;
    if (j->gen.top_logprobs >= 0 && m->lps > s->sent_lp[i])
        lp = s->g.chat ? chat_logprobs(s->st, j->lps, s->sent_lp[i], m->lps)
                       : text_logprobs(s->st, j->lps, s->sent_lp[i], m->lps, &s->text_off[i]);
    s->sent_c[i] = upto;
    s->sent_r[i] = m->reasoning;
    s->sent_lp[i] = m->lps;
    if (!content && !reasoning && !lp) return;
    json_t *c;
    if (s->g.chat) {
        json_t *delta = json_object();
        if (content) json_object_set_new(delta, "content", content);
        if (reasoning) json_object_set_new(delta, "reasoning_content", reasoning);
        c = json_pack("{s:i,s:o,s:o,s:n}", "index", j->index, "delta", delta, "logprobs", lp ? lp : json_null(),
                      "finish_reason");
    } else {
        c = json_pack("{s:o,s:i,s:o,s:n}", "text", content ? content : json_string(""), "index", j->index, "logprobs",
                      lp ? lp : json_null(), "finish_reason");
        json_decref(reasoning);
    }
    sse(s, chunk(s, json_pack("[o]", c)));
}

/* Appends the events for what job i produced since the last pull: one per
 * token mark, then its end. The job's lock is held while its buffers are read. */
static void pull_job(srv_stream *s, int i) {
    srv_job *j = s->g.jobs[i];
    if (s->g.chat && !s->started[i]) {
        s->started[i] = true;
        sse(s, chunk(s, json_pack("[{s:i,s:{s:s,s:s},s:n,s:n}]", "index", j->index, "delta", "role", "assistant",
                                  "content", "", "logprobs", "finish_reason")));
    }
    pthread_mutex_lock(&j->mu);
    srv_finish fin = j->finish;
    for (; s->sent_mark[i] < j->n_marks; s->sent_mark[i]++) event(s, i, &j->marks[s->sent_mark[i]]);
    pthread_mutex_unlock(&j->mu);
    if (fin != SRV_FIN_NONE && !s->done[i]) {
        s->done[i] = true;
        if (fin == SRV_FIN_ERROR || fin == SRV_FIN_CANCEL) {
            srv_reply er = {0};
            job_error_reply(j, &er);
            json_t *e = json_loadb(er.body, er.len, 0, NULL);
            free(er.body);
            sse(s, e);
            return;
        }
        const char *why = finish_name(fin);
        if (j->tool_fmt >= 0) {
            /* the held text: calls as one delta each, the rest as content */
            pthread_mutex_lock(&j->mu);
            json_t *calls = NULL;
            size_t clen = j->content_len;
            if (!srv_tool_parse((srv_tool_fmt)j->tool_fmt, j->content ? j->content : "", j->content_len, &calls, &clen))
                clen = j->content_len;
            if (clen > s->sent_c[i])
                sse(s, chunk(s, json_pack("[{s:i,s:{s:o},s:n,s:n}]", "index", j->index, "delta", "content",
                                          srv_json_bytes(j->content + s->sent_c[i], clen - s->sent_c[i]), "logprobs",
                                          "finish_reason")));
            s->sent_c[i] = j->content_len;
            pthread_mutex_unlock(&j->mu);
            for (size_t k = 0; calls && k < json_array_size(calls); k++) {
                json_t *tc = json_deep_copy(json_array_get(calls, k));
                json_object_set_new(tc, "index", json_integer((json_int_t)k));
                sse(s, chunk(s, json_pack("[{s:i,s:{s:[o]},s:n,s:n}]", "index", j->index, "delta", "tool_calls", tc,
                                          "logprobs", "finish_reason")));
            }
            if (calls) why = "tool_calls";
            json_decref(calls);
        }
        json_t *c = s->g.chat ? json_pack("{s:i,s:{},s:n,s:s}", "index", j->index, "delta", "logprobs", "finish_reason",
                                          why)
                              : json_pack("{s:s,s:i,s:n,s:s}", "text", "", "index", j->index, "logprobs",
                                          "finish_reason", finish_name(fin));
        json_t *ch = chunk(s, json_pack("[o]", c));
        if (s->g.n == 1) json_object_set_new(ch, "timings", timings_json(j));
        sse(s, ch);
    }
}

bool srv_stream_pull(srv_stream *s, const char **out, size_t *n) {
    s->len = 0;
    *out = s->buf;
    *n = 0;
    if (s->ended) return false;
    bool all = true;
    for (int i = 0; i < s->g.n; i++) {
        pull_job(s, i);
        all &= s->done[i];
    }
    if (all) {
        if (s->g.include_usage) {
            json_t *ch = chunk(s, json_array());
            json_object_set_new(ch, "usage", usage_json(&s->g));
            sse(s, ch);
        }
        size_t need = s->len + 15;
        if (need > s->cap) {
            char *nb = realloc(s->buf, need);
            if (nb) {
                s->buf = nb;
                s->cap = need;
            }
        }
        if (need <= s->cap) {
            memcpy(s->buf + s->len, "data: [DONE]\n\n", 14);
            s->len += 14;
        }
        s->ended = true;
    }
    if (s->len) {
        *out = s->buf;
        *n = s->len;
        return true;
    }
    /* nothing new: wait for the first unfinished job to change */
    for (int i = 0; i < s->g.n; i++) {
        if (s->done[i]) continue;
        srv_job *j = s->g.jobs[i];
        pthread_mutex_lock(&j->mu);
        if (j->finish == SRV_FIN_NONE && j->n_marks == s->sent_mark[i]) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            long wait_ns = s->g.n > 1 ? 10 * 1000 * 1000 : 100 * 1000 * 1000;
            ts.tv_nsec += wait_ns;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&j->cv, &j->mu, &ts);
        }
        pthread_mutex_unlock(&j->mu);
        break;
    }
    return true;
}

void srv_stream_cancel(srv_stream *s) {
    for (int i = 0; i < s->g.n; i++) atomic_store(&s->g.jobs[i]->cancel, true);
}

void srv_stream_free(srv_stream *s) {
    if (!s) return;
    req_free(&s->g);
    free(s->buf);
    free(s);
}

/* ---- the handlers ----------------------------------------------------------------------- */

static void run_request(srv_state *st, const srv_request *q, gen_req *g, srv_reply *r) {
    char id[64];
    snprintf(id, sizeof id, "%s-%ld", g->chat ? "chatcmpl" : "cmpl", atomic_fetch_add(&st->next_id, 1));
    json_int_t created = (json_int_t)time(NULL);
    if (!submit_all(st, g, r)) {
        req_free(g);
        return;
    }
    if (g->stream) {
        srv_stream *s = calloc(1, sizeof *s);
        if (!s) {
            for (int i = 0; i < g->n; i++) atomic_store(&g->jobs[i]->cancel, true);
            req_free(g);
            srv_error(r, 500, NULL, "out of memory");
            return;
        }
        s->st = st;
        s->g = *g;
        g->n = 0;
        snprintf(s->id, sizeof s->id, "%s", id);
        s->created = created;
        r->status = 200;
        r->stream = s;
        return;
    }
    if (!srv_wait_jobs(g->jobs, g->n, q->fd)) {
        req_free(g);
        srv_error(r, 499, NULL, "the client closed the connection");
        return;
    }
    reply_whole(st, g, id, created, r);
    req_free(g);
}

static bool stream_fields(json_t *body, gen_req *g, srv_reply *r) {
    if (!srv_p_bool(body, "stream", &g->stream, r)) return false;
    json_t *so = json_object_get(body, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so)) {
            srv_error(r, 400, "stream_options", "stream_options: must be an object");
            return false;
        }
        json_t *iu = json_object_get(so, "include_usage");
        if (iu && !json_is_boolean(iu)) {
            srv_error(r, 400, "stream_options", "stream_options.include_usage: must be a boolean");
            return false;
        }
        g->include_usage = json_is_true(iu);
    }
    return true;
}

/* tool_choice "required" or a named function: a grammar that admits only
 * calls (of that function), written the way the template's format writes
 * them. The calls' shape comes from each tool's parameters schema. */
static bool tool_grammar(json_t *tools, json_t *tc, srv_tool_fmt fmt, srv_gen *gen, srv_reply *r) {
    const char *only = NULL;
    if (json_is_object(tc)) {
        json_t *fn = json_object_get(tc, "function");
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(name)) {
            srv_error(r, 400, "tool_choice", "tool_choice: must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
            return false;
        }
        only = json_string_value(name);
    } else if (!json_is_string(tc) || strcmp(json_string_value(tc), "required")) {
        srv_error(r, 400, "tool_choice", "tool_choice: must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
        return false;
    }
    if (!json_is_array(tools) || !json_array_size(tools)) {
        srv_error(r, 400, "tool_choice", "tool_choice: needs \"tools\"");
        return false;
    }
    json_t *any = json_array();
    size_t i;
    json_t *t;
    json_array_foreach(tools, i, t) {
        json_t *fn = json_object_get(t, "function");
        json_t *name = json_is_object(fn) ? json_object_get(fn, "name") : NULL;
        if (!json_is_string(name)) {
            json_decref(any);
            srv_error(r, 400, "tools", "tools[%zu].function.name: must be a string", i);
            return false;
        }
        if (only && strcmp(only, json_string_value(name))) continue;
        json_t *params = json_object_get(fn, "parameters");
        json_array_append_new(any, json_pack("{s:s,s:{s:{s:O},s:O},s:[s,s],s:b}", "type", "object", "properties", "name",
                                             "const", name, "arguments", json_is_object(params) ? params : json_object(),
                                             "required", "name", "arguments", "additionalProperties", 0));
    }
    if (!json_array_size(any)) {
        json_decref(any);
        srv_error(r, 400, "tool_choice", "tool_choice: no tool is named '%s'", only ? only : "");
        return false;
    }
    json_t *schema = json_array_size(any) == 1 ? json_incref(json_array_get(any, 0)) : json_pack("{s:O}", "anyOf", any);
    json_decref(any);
    char *sj = json_dumps(schema, JSON_COMPACT);
    json_decref(schema);
    char *g = NULL;
    mf_status st = sj ? mf_json_schema_to_grammar(sj, &g) : MF_ERR_NOMEM;
    free(sj);
    if (st) {
        srv_error(r, 400, "tools", "tools: a parameters schema cannot be enforced: %s", mf_last_error());
        return false;
    }
    /* the schema's rules plus a start rule around one call */
    const char *wrap = fmt == SRV_TOOLS_HERMES    ? "\ntool-call-root ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n"
                       : fmt == SRV_TOOLS_MISTRAL ? "\ntool-call-root ::= \"[TOOL_CALLS][\" root \"]\"\n"
                                                  : "\ntool-call-root ::= root\n";
    size_t n = strlen(g), m = strlen(wrap);
    char *text = malloc(n + m + 1);
    if (!text) {
        free(g);
        srv_error(r, 500, NULL, "out of memory");
        return false;
    }
    memcpy(text, g, n);
    memcpy(text + n, wrap, m + 1);
    free(g);
    if (!srv_grammar_check(text, "tool-call-root", "tools", r)) {
        free(text);
        return false;
    }
    free(gen->grammar);
    gen->grammar = text;
    gen->grammar_root = "tool-call-root";
    return true;
}

void srv_h_chat(srv_state *st, const srv_request *q, json_t *body, srv_reply *r) {
    gen_req g = {.chat = true};
    srv_gen gen;
    srv_gen_init(&gen);
    if (!stream_fields(body, &g, r) || !srv_parse_gen(st, body, true, &gen, r)) {
        srv_gen_free(&gen);
        return;
    }
    for (int i = 0; i < st->n_tmpl_stops && gen.n_stop < SRV_MAX_STOP; i++) gen.stop[gen.n_stop++] = strdup(st->tmpl_stops[i]);
    json_t *tools = json_object_get(body, "tools"), *tc = json_object_get(body, "tool_choice");
    const bool use_tools = json_is_array(tools) && json_array_size(tools) &&
                           !(json_is_string(tc) && !strcmp(json_string_value(tc), "none"));
    if (tc && !json_is_null(tc) && !(json_is_string(tc) && (!strcmp(json_string_value(tc), "auto") ||
                                                           !strcmp(json_string_value(tc), "none")))) {
        if (gen.grammar) {
            srv_gen_free(&gen);
            srv_error(r, 400, "tool_choice", "tool_choice: a forced tool call cannot be combined with a grammar or response_format");
            return;
        }
        if (!tool_grammar(tools, tc, srv_tool_format(st->tmpl), &gen, r)) {
            srv_gen_free(&gen);
            return;
        }
    }
    char *prompt = render_chat(st, body, r);
    if (!prompt) {
        srv_gen_free(&gen);
        return;
    }
    const bool bos = mf_model_add_bos(st->model) && mf_token_bos(st->model) >= 0 &&
                     !(st->bos_text && *st->bos_text && !strncmp(prompt, st->bos_text, strlen(st->bos_text)));
    int32_t n = 0;
    mf_token *t = srv_tokenize(st, prompt, strlen(prompt), false, true, &n);
    if (t && bos) {
        mf_token *t2 = realloc(t, sizeof *t * (size_t)(n + 1));
        if (t2) {
            memmove(t2 + 1, t2, sizeof *t2 * (size_t)n);
            t2[0] = mf_token_bos(st->model);
            t = t2;
            n++;
        }
    }
    const bool think_open = ends_in_think(prompt);
    free(prompt);
    if (!t) {
        srv_gen_free(&gen);
        srv_error(r, 400, "messages", "messages: %s", mf_last_error());
        return;
    }
    srv_job *j = make_job(st, t, n, &gen, 0, r, "messages");
    srv_gen_free(&gen);
    if (!j) return;
    j->split_reasoning = st->tmpl_thinks && !st->cfg.reasoning_inline;
    if (use_tools) j->tool_fmt = (int)srv_tool_format(st->tmpl);
    j->think_open = think_open;
    g.jobs[g.n++] = j;
    run_request(st, q, &g, r);
}

void srv_h_completions(srv_state *st, const srv_request *q, json_t *body, srv_reply *r) {
    gen_req g = {.chat = false};
    srv_gen gen;
    srv_gen_init(&gen);
    if (!stream_fields(body, &g, r) || !srv_parse_gen(st, body, false, &gen, r)) {
        srv_gen_free(&gen);
        return;
    }
    json_t *list[MAX_CHOICES];
    const int n_list = srv_prompt_list(json_object_get(body, "prompt"), "prompt", true, list, MAX_CHOICES,
                                       "must be a string, an array of token ids, or an array of those", r);
    if (n_list < 0) {
        srv_gen_free(&gen);
        return;
    }
    for (int i = 0; i < n_list; i++) {
        int32_t n = 0;
        mf_token *t = srv_prompt_tokens(st, list[i], "prompt", i, &n, r);
        srv_job *j = t ? make_job(st, t, n, &gen, i, r, "prompt") : NULL;
        if (!j) {
            srv_gen_free(&gen);
            req_free(&g);
            return;
        }
        g.jobs[g.n++] = j;
    }
    srv_gen_free(&gen);
    run_request(st, q, &g, r);
}
