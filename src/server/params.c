/* params.c - the sampling and stopping fields of /v1/chat/completions and
 * /v1/completions, checked one by one: a wrong type or a value out of range
 * is a 400 that names the field. Unknown fields are ignored, as OpenAI's
 * clients send fields of their own. */
#include "params.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Absent or null: *out untouched, true. */
bool srv_p_num(json_t *b, const char *k, double lo, double hi, double *out, srv_reply *r) {
    json_t *v = json_object_get(b, k);
    if (!v || json_is_null(v)) return true;
    if (!json_is_number(v)) {
        srv_error(r, 400, k, "%s: must be a number", k);
        return false;
    }
    double x = json_number_value(v);
    if (!(x >= lo && x <= hi)) {
        srv_error(r, 400, k, "%s: must be between %g and %g", k, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

bool srv_p_int(json_t *b, const char *k, long long lo, long long hi, long long *out, srv_reply *r) {
    json_t *v = json_object_get(b, k);
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v)) {
        srv_error(r, 400, k, "%s: must be an integer", k);
        return false;
    }
    long long x = json_integer_value(v);
    if (x < lo || x > hi) {
        srv_error(r, 400, k, "%s: must be between %lld and %lld", k, lo, hi);
        return false;
    }
    *out = x;
    return true;
}

bool srv_p_bool(json_t *b, const char *k, bool *out, srv_reply *r) {
    json_t *v = json_object_get(b, k);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) {
        srv_error(r, 400, k, "%s: must be a boolean", k);
        return false;
    }
    *out = json_is_true(v);
    return true;
}

static uint64_t random_seed(void) {
    uint64_t s = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &s, sizeof s) != (ssize_t)sizeof s) s = 0;
        close(fd);
    }
    if (!s) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        s = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec;
    }
    return s;
}

static bool add_stop(srv_gen *g, const char *s, size_t n, srv_reply *r) {
    if (g->n_stop >= SRV_MAX_STOP - 4) {
        srv_error(r, 400, "stop", "stop: at most %d strings", SRV_MAX_STOP - 4);
        return false;
    }
    if (n > 256) {
        srv_error(r, 400, "stop", "stop: a stop string is at most 256 bytes");
        return false;
    }
    if (!n) return true;
    char *c = malloc(n + 1);
    if (!c) {
        srv_error(r, 500, NULL, "out of memory");
        return false;
    }
    memcpy(c, s, n);
    c[n] = 0;
    g->stop[g->n_stop++] = c;
    return true;
}

/* Checks that GBNF text compiles; on failure a 400 naming `field`. */
bool srv_grammar_check(const char *text, const char *root, const char *field, srv_reply *r) {
    mf_grammar *gr = NULL;
    if (mf_grammar_parse(text, strlen(text), root, &gr)) {
        const char *m = mf_last_error();
        /* the library's message already says "grammar: line L, column C: ..." */
        if (!strcmp(field, "grammar") && !strncmp(m, "grammar: ", 9)) srv_error(r, 400, field, "%s", m);
        else srv_error(r, 400, field, "%s: %s", field, m);
        return false;
    }
    mf_grammar_free(gr);
    return true;
}

/* `grammar` (GBNF) or `response_format` (json_object, json_schema): the
 * grammar the reply must match. */
bool srv_parse_constraint(json_t *b, srv_gen *g, srv_reply *r) {
    json_t *gr = json_object_get(b, "grammar"), *rf = json_object_get(b, "response_format");
    char *text = NULL;
    const char *field = "grammar";
    if (gr && !json_is_null(gr)) {
        if (!json_is_string(gr)) {
            srv_error(r, 400, "grammar", "grammar: must be a string of GBNF");
            return false;
        }
        text = strdup(json_string_value(gr));
    }
    if (rf && !json_is_null(rf)) {
        json_t *type = json_object_get(rf, "type");
        const char *t = json_is_object(rf) && json_is_string(type) ? json_string_value(type) : NULL;
        field = "response_format";
        if (!t || (strcmp(t, "text") && strcmp(t, "json_object") && strcmp(t, "json_schema"))) {
            free(text);
            srv_error(r, 400, "response_format", "response_format.type: must be \"text\", \"json_object\" or \"json_schema\"");
            return false;
        }
        if (strcmp(t, "text") && text) {
            free(text);
            srv_error(r, 400, "response_format", "response_format: give either it or \"grammar\", not both");
            return false;
        }
        if (!strcmp(t, "json_object")) text = strdup(mf_grammar_json());
        if (!strcmp(t, "json_schema")) {
            json_t *js = json_object_get(rf, "json_schema");
            json_t *schema = json_is_object(js) ? json_object_get(js, "schema") : NULL;
            if (!json_is_object(schema) && !json_is_boolean(schema)) {
                srv_error(r, 400, "response_format", "response_format.json_schema.schema: must be a JSON Schema object");
                return false;
            }
            char *sj = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
            mf_status st = sj ? mf_json_schema_to_grammar(sj, &text) : MF_ERR_NOMEM;
            free(sj);
            if (st) {
                srv_error(r, 400, "response_format", "response_format.json_schema.schema: %s", mf_last_error());
                return false;
            }
        }
    }
    if (!text) return true;
    if (!srv_grammar_check(text, NULL, field, r)) {
        free(text);
        return false;
    }
    free(g->grammar);
    g->grammar = text;
    g->grammar_root = NULL;
    return true;
}

/* `speculative` ({type, n_max, n_min, p_min}, or llama-server's flat
 * "speculative.n_max" keys): the request's drafting, defaulting to the
 * server's flags. */
static bool parse_spec(const srv_state *st, json_t *b, srv_gen *g, srv_reply *r) {
    const srv_config *c = &st->cfg;
    g->spec = c->draft_model ? SRV_SPEC_DRAFT : c->lookup ? SRV_SPEC_LOOKUP : SRV_SPEC_NONE;
    long long n_max = c->draft_max, n_min = c->draft_min;
    double p_min = c->draft_p_min;
    json_t *o = json_object_get(b, "speculative");
    if (o && !json_is_null(o) && !json_is_object(o)) {
        srv_error(r, 400, "speculative", "speculative: must be an object {type, n_max, n_min, p_min}");
        return false;
    }
    if (!srv_p_int(b, "speculative.n_max", 0, SRV_MAX_DRAFT, &n_max, r) ||
        !srv_p_int(b, "speculative.n_min", 0, SRV_MAX_DRAFT, &n_min, r) || !srv_p_num(b, "speculative.p_min", 0, 1, &p_min, r))
        return false;
    if (json_is_object(o)) {
        json_t *t = json_object_get(o, "type");
        if (t && !json_is_null(t)) {
            const char *ts = json_is_string(t) ? json_string_value(t) : "";
            if (!strcmp(ts, "none")) g->spec = SRV_SPEC_NONE;
            else if (!strcmp(ts, "lookup")) g->spec = SRV_SPEC_LOOKUP;
            else if (!strcmp(ts, "draft")) g->spec = SRV_SPEC_DRAFT;
            else {
                srv_error(r, 400, "speculative.type", "speculative.type: must be \"none\", \"lookup\" or \"draft\"");
                return false;
            }
            if (g->spec == SRV_SPEC_DRAFT && !c->draft_model) {
                srv_error(r, 400, "speculative.type", "speculative.type: \"draft\" needs the server started with --draft-model");
                return false;
            }
        }
        /* the object's keys, reported with their full names */
        static const char *const K[] = {"n_max", "n_min", "p_min"};
        for (int i = 0; i < 3; i++) {
            json_t *v = json_object_get(o, K[i]);
            if (!v || json_is_null(v)) continue;
            json_t *flat = json_object();
            json_object_set(flat, i < 2 ? (i ? "speculative.n_min" : "speculative.n_max") : "speculative.p_min", v);
            bool ok = i < 2 ? srv_p_int(flat, i ? "speculative.n_min" : "speculative.n_max", 0, SRV_MAX_DRAFT, i ? &n_min : &n_max, r)
                            : srv_p_num(flat, "speculative.p_min", 0, 1, &p_min, r);
            json_decref(flat);
            if (!ok) return false;
        }
    }
    if (n_min > n_max) {
        srv_error(r, 400, "speculative.n_min", "speculative.n_min: %lld exceeds n_max %lld", n_min, n_max);
        return false;
    }
    if (!n_max) g->spec = SRV_SPEC_NONE;
    g->spec_max = (int32_t)n_max;
    g->spec_min = (int32_t)n_min;
    g->spec_p_min = (float)p_min;
    return true;
}

bool srv_parse_gen(const srv_state *st, json_t *b, bool chat, srv_gen *g, srv_reply *r) {
    json_t *model = json_object_get(b, "model");
    if (model && !json_is_null(model) && !json_is_string(model)) {
        srv_error(r, 400, "model", "model: must be a string");
        return false;
    }
    if (!srv_parse_constraint(b, g, r) || !parse_spec(st, b, g, r)) return false;
    double temp = g->sp.temp, top_p = g->sp.top_p, min_p = g->sp.min_p, pres = 0, freq = 0, rep = g->sp.repeat_penalty;
    long long top_k = g->sp.top_k, last_n = g->sp.penalty_last_n, seed = -1, n = 1, max_tokens = -1;
    if (!srv_p_num(b, "temperature", 0, 100, &temp, r) || !srv_p_num(b, "top_p", 0, 1, &top_p, r) ||
        !srv_p_num(b, "min_p", 0, 1, &min_p, r) || !srv_p_num(b, "presence_penalty", -2, 2, &pres, r) ||
        !srv_p_num(b, "frequency_penalty", -2, 2, &freq, r) || !srv_p_num(b, "repeat_penalty", 0, 10, &rep, r) ||
        !srv_p_int(b, "top_k", -1, 1 << 30, &top_k, r) || !srv_p_int(b, "repeat_last_n", -1, 1 << 30, &last_n, r) ||
        !srv_p_int(b, "seed", -1, INT64_MAX, &seed, r) || !srv_p_int(b, "n", 1, 1 << 30, &n, r) ||
        !srv_p_int(b, "max_tokens", -1, 1 << 30, &max_tokens, r) ||
        !srv_p_int(b, "max_completion_tokens", -1, 1 << 30, &max_tokens, r) ||
        !srv_p_int(b, "n_predict", -1, 1 << 30, &max_tokens, r) || !srv_p_bool(b, "ignore_eos", &g->ignore_eos, r))
        return false;
    if (n != 1) {
        srv_error(r, 400, "n", "n: only 1 choice per request is supported");
        return false;
    }
    if (max_tokens == 0) {
        srv_error(r, 400, "max_tokens", "max_tokens: must be at least 1 (or -1 for no limit)");
        return false;
    }
    g->sp.temp = (float)temp;
    g->sp.top_p = (float)top_p;
    g->sp.min_p = (float)min_p;
    g->sp.presence_penalty = (float)pres;
    g->sp.freq_penalty = (float)freq;
    g->sp.repeat_penalty = (float)rep;
    g->sp.top_k = (int32_t)top_k;
    g->sp.penalty_last_n = (int32_t)last_n;
    g->sp.seed = seed < 0 ? random_seed() : (uint64_t)seed;
    g->max_tokens = (int32_t)max_tokens;

    json_t *stop = json_object_get(b, "stop");
    if (json_is_string(stop)) {
        if (!add_stop(g, json_string_value(stop), json_string_length(stop), r)) return false;
    } else if (json_is_array(stop)) {
        size_t i;
        json_t *v;
        json_array_foreach(stop, i, v) {
            if (!json_is_string(v)) {
                srv_error(r, 400, "stop", "stop[%zu]: must be a string", i);
                return false;
            }
            if (!add_stop(g, json_string_value(v), json_string_length(v), r)) return false;
        }
    } else if (stop && !json_is_null(stop)) {
        srv_error(r, 400, "stop", "stop: must be a string or an array of strings");
        return false;
    }

    json_t *bias = json_object_get(b, "logit_bias");
    if (json_is_object(bias)) {
        const char *key;
        json_t *v;
        const int32_t nv = mf_model_n_vocab(st->model);
        json_object_foreach(bias, key, v) {
            char *end;
            long id = strtol(key, &end, 10);
            if (!*key || *end || id < 0 || id >= nv) {
                srv_error(r, 400, "logit_bias", "logit_bias: key '%.40s' is not a token id between 0 and %d", key, nv - 1);
                return false;
            }
            if (!json_is_number(v) || !(json_number_value(v) >= -100 && json_number_value(v) <= 100)) {
                srv_error(r, 400, "logit_bias", "logit_bias[%s]: must be a number between -100 and 100", key);
                return false;
            }
            if (g->n_bias == SRV_MAX_BIAS) {
                srv_error(r, 400, "logit_bias", "logit_bias: at most %d entries", SRV_MAX_BIAS);
                return false;
            }
            g->bias_tok[g->n_bias] = (int32_t)id;
            /* OpenAI: -100 bans a token, +100 forces it */
            double x = json_number_value(v);
            g->bias_val[g->n_bias++] = x <= -100 ? -INFINITY : (float)x;
        }
    } else if (bias && !json_is_null(bias)) {
        srv_error(r, 400, "logit_bias", "logit_bias: must be an object of token id to bias");
        return false;
    }

    if (chat) {
        bool lp = false;
        long long top = 0;
        if (!srv_p_bool(b, "logprobs", &lp, r) || !srv_p_int(b, "top_logprobs", 0, 20, &top, r)) return false;
        if (top && !lp) {
            srv_error(r, 400, "top_logprobs", "top_logprobs: needs \"logprobs\": true");
            return false;
        }
        g->top_logprobs = lp ? (int)top : -1;
    } else {
        long long top = -1;
        if (!srv_p_int(b, "logprobs", 0, 20, &top, r)) return false;
        g->top_logprobs = (int)top;
    }
    return true;
}
