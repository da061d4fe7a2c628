/* http.h - between the HTTP glue (http.c, libmicrohttpd) and the route
 * handlers (routes_*.c): a handler reads a request and fills a reply, either
 * a whole body or a stream it pulls Server-Sent Events from. */
#ifndef MF_SERVER_HTTP_H
#define MF_SERVER_HTTP_H

#include <time.h>

#include "server.h"

typedef struct srv_state {
    srv_config cfg;
    mf_model *model;
    srv_sched *sched;
    atomic_bool ready;      /* the model is loaded */
    char *tmpl;             /* chat template */
    const char *tmpl_source;
    const char *bos_text, *eos_text;
    char *tmpl_stops[4];    /* the template's end-of-turn text */
    int n_tmpl_stops;
    bool tmpl_thinks;       /* the template writes <think> blocks */
    char *model_id;
    time_t created;
    atomic_long next_id;
} srv_state;

/* A streaming body: http.c calls pull until it returns false (the end). */
typedef struct srv_stream srv_stream;
/* Blocks until there are bytes to send (at most ~100 ms at a time, then
 * returns true with *n = 0 so the caller can check the client); false at the
 * end of the stream. *out points into the stream's buffer. */
bool srv_stream_pull(srv_stream *s, const char **out, size_t *n);
void srv_stream_free(srv_stream *s);
void srv_stream_cancel(srv_stream *s);

typedef struct srv_request {
    const char *method;
    const char *path;       /* without the query string */
    const char *body;
    size_t body_len;
    int fd;                 /* the client's socket, to notice it leaving */
} srv_request;

typedef struct srv_reply {
    int status;
    char *body;             /* malloc'd */
    size_t len;
    const char *ctype;      /* default application/json */
    srv_stream *stream;     /* instead of body: text/event-stream */
    const char *allow;      /* 405: the Allow header */
    int retry_after;        /* 503: seconds */
} srv_reply;

/* Fills r with an OpenAI error object. type NULL: chosen by status. */
void srv_error(srv_reply *r, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fills r with a JSON body (steals v). */
void srv_json(srv_reply *r, int status, json_t *v);

/* True when the client closed its connection. */
bool srv_client_gone(int fd);
/* Waits until every job is finished (false: the client left first; the jobs
 * are then cancelled). */
bool srv_wait_jobs(srv_job **jobs, int n, int fd);

/* Tokens of a text (NULL with mf_last_error() on failure; free() it). */
mf_token *srv_tokenize(const srv_state *st, const char *text, size_t len, bool add_special, bool parse_special,
                       int32_t *n_out);
/* Token ids of a JSON array, checked against the vocabulary (NULL: r holds a 400). */
mf_token *srv_token_array(const srv_state *st, json_t *a, const char *field, int32_t *n_out, srv_reply *r);

/* A prompt field of /v1/completions or /v1/embeddings into its items (a
 * string or an array of ids, or an array of those): the count, or -1 with a
 * 400 in r (`what` says what the field must be). empty_ok: [] is one empty
 * id list (reported later as an empty prompt). */
int srv_prompt_list(json_t *v, const char *field, bool empty_ok, json_t **list, int max, const char *what,
                    srv_reply *r);
/* One such item's tokens (a string with BOS as the vocabulary asks, or ids
 * checked against it); NULL with a 400 in r. */
mf_token *srv_prompt_tokens(const srv_state *st, json_t *item, const char *field, int index, int32_t *n,
                            srv_reply *r);

/* Routes. */
void srv_route(srv_state *st, const srv_request *q, srv_reply *r);

/* Handlers (routes_gen.c, routes_misc.c). */
void srv_h_chat(srv_state *st, const srv_request *q, json_t *body, srv_reply *r);
void srv_h_completions(srv_state *st, const srv_request *q, json_t *body, srv_reply *r);
void srv_h_embeddings(srv_state *st, const srv_request *q, json_t *body, srv_reply *r);
void srv_h_models(srv_state *st, const srv_request *q, srv_reply *r);
void srv_h_tokenize(srv_state *st, const srv_request *q, json_t *body, srv_reply *r);
void srv_h_detokenize(srv_state *st, const srv_request *q, json_t *body, srv_reply *r);
void srv_h_apply_template(srv_state *st, const srv_request *q, json_t *body, srv_reply *r);
void srv_h_health(srv_state *st, const srv_request *q, srv_reply *r);
void srv_h_props(srv_state *st, const srv_request *q, srv_reply *r);
void srv_h_slots(srv_state *st, const srv_request *q, srv_reply *r);
void srv_h_metrics(srv_state *st, const srv_request *q, srv_reply *r);
void srv_h_page(srv_state *st, const srv_request *q, srv_reply *r);

/* The server: starts listening (model loading may follow; /health says 503
 * until st->ready). Prints the address it bound to on stdout. */
typedef struct srv_http srv_http;
srv_http *srv_http_start(srv_state *st);
/* Stop accepting new connections (running ones continue). */
void srv_http_quiesce(srv_http *h);
void srv_http_stop(srv_http *h);

#endif
