/* params.h - request field parsing shared by the generation routes. */
#ifndef MF_SERVER_PARAMS_H
#define MF_SERVER_PARAMS_H

#include <math.h>

#include "http.h"

/* Each reads body[k] when present and not null, else leaves *out as it is;
 * false (r holds the 400 naming the field) on a wrong type or range. */
bool srv_p_num(json_t *b, const char *k, double lo, double hi, double *out, srv_reply *r);
bool srv_p_int(json_t *b, const char *k, long long lo, long long hi, long long *out, srv_reply *r);
bool srv_p_bool(json_t *b, const char *k, bool *out, srv_reply *r);

/* Sampling, length, stop strings, logit bias, logprobs. chat: OpenAI's chat
 * shape of logprobs (bool + top_logprobs), else the legacy integer. */
bool srv_parse_gen(const srv_state *st, json_t *body, bool chat, srv_gen *g, srv_reply *r);
/* `grammar` / `response_format` into g->grammar (checked to compile). */
bool srv_parse_constraint(json_t *body, srv_gen *g, srv_reply *r);
/* GBNF text compiles (with start rule root, NULL: "root"), else a 400 naming field. */
bool srv_grammar_check(const char *text, const char *root, const char *field, srv_reply *r);

#endif
