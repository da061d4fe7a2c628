/* server.h - `minfer serve`: what the HTTP side (http.c, routes*.c), the
 * scheduler (sched.c) and the metrics (metrics.c) share.
 *
 * Threads: libmicrohttpd runs one thread per connection; those threads parse
 * requests, turn them into jobs and wait on the job's events. One scheduler
 * thread owns the model's contexts: every step it runs one batch over the
 * decode tokens of all running jobs plus a bounded chunk of prefill, and
 * pushes the resulting text to each job. Jobs are the only shared objects;
 * each has its own lock. */
#ifndef MF_SERVER_H
#define MF_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "minfer.h"

/* ---- configuration (the command line) ----------------------------------- */

typedef struct srv_config {
    const char *model_path;
    const char *host;
    int port;
    int parallel;          /* slots: sequences decoded together */
    int n_ctx;             /* positions per slot (0: the model's training context, at most 4096) */
    int n_batch;           /* tokens per forward pass */
    int n_threads;
    const char *api_key;   /* NULL: no authentication */
    const char *alias;     /* model name reported; NULL: the file's base name */
    int timeout_s;         /* idle connection timeout */
    int max_queue;         /* jobs waiting for a slot before 503 */
    int max_connections;
    size_t max_body;       /* bytes of a request body */
    mf_kv_type kv_type;
    mf_pooling pooling;    /* for /v1/embeddings */
    bool reasoning_inline; /* keep <think> text in content */
    bool verbose;
    int shutdown_grace_s;  /* how long running requests may finish on SIGTERM */
    /* speculative decoding: the default drafter of every request */
    mf_model *draft_model; /* --draft-model, loaded by the caller; NULL: none */
    bool lookup;           /* --lookup: prompt-lookup drafts */
    int draft_max, draft_min;
    float draft_p_min;
} srv_config;

/* ---- sampling and stopping of one request --------------------------------- */

#define SRV_MAX_STOP 16
#define SRV_MAX_DRAFT 64

typedef enum srv_spec { SRV_SPEC_NONE, SRV_SPEC_LOOKUP, SRV_SPEC_DRAFT } srv_spec;
#define SRV_MAX_BIAS 1024

typedef struct srv_gen {
    mf_sampler_params sp;
    int32_t max_tokens;    /* -1: until EOG or the context ends */
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int32_t bias_tok[SRV_MAX_BIAS];
    float bias_val[SRV_MAX_BIAS];
    int n_bias;
    int top_logprobs;      /* -1: no logprobs; else 0..20 alternatives per token */
    bool ignore_eos;
    char *grammar;         /* GBNF the output must match (malloc'd), or NULL */
    const char *grammar_root; /* its start rule (static), NULL: "root" */
    srv_spec spec;         /* how the request drafts */
    int32_t spec_max, spec_min; /* tokens per draft (0: none), drafts shorter than min not tried */
    float spec_p_min;      /* the draft model stops below this top probability */
} srv_gen;

void srv_gen_init(srv_gen *g);
void srv_gen_free(srv_gen *g);

/* ---- jobs ------------------------------------------------------------------
 * One generation (or one embedding input). The HTTP thread creates it, the
 * scheduler fills it; both hold a reference. Text arrives as pieces in
 * `out` and is consumed by the HTTP thread from `out_read`. */

typedef enum srv_job_kind { SRV_JOB_GENERATE, SRV_JOB_EMBED } srv_job_kind;
typedef enum srv_finish { SRV_FIN_NONE, SRV_FIN_STOP, SRV_FIN_LENGTH, SRV_FIN_ERROR, SRV_FIN_CANCEL } srv_finish;

/* A token's log-probability and the top alternatives, as OpenAI reports them. */
typedef struct srv_logprob {
    mf_token tok;
    float lp;
    int n_top;
    mf_token top_tok[20];
    float top_lp[20];
} srv_logprob;

typedef struct srv_job {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    srv_job_kind kind;
    int index;             /* choice / input index within its request */
    atomic_bool cancel;    /* set by the HTTP side: client gone or shutdown */

    /* input */
    mf_token *prompt;
    int32_t n_prompt;
    srv_gen gen;
    bool think_open;       /* the prompt ends inside a <think> block */
    bool split_reasoning;  /* route <think> text to reasoning */
    int tool_fmt;          /* srv_tool_fmt the reply's calls are read with, -1: no tools */
    mf_grammar *grammar;   /* compiled gen.grammar, or NULL */

    /* output (under mu) */
    char *content; size_t content_len, content_cap;       /* visible text */
    char *reasoning; size_t reasoning_len, reasoning_cap; /* <think> text */
    srv_logprob *lps; int n_lps, cap_lps;
    /* after each token: how far content, reasoning and logprobs had got, so a
     * stream sends one event per token however late its reader wakes up */
    struct srv_mark { size_t content, reasoning; int lps; } *marks;
    int n_marks, cap_marks;
    float *embedding; int n_embd;
    int32_t n_gen;         /* tokens generated */
    int32_t n_cached;      /* prompt tokens found in the cache */
    int32_t n_drafted, n_accepted; /* speculative decoding's draft tokens, and those kept */
    srv_finish finish;     /* != NONE: done */
    char error[256];
    int error_status;      /* HTTP status for an error */
    double t_queued, t_start, t_first, t_end; /* seconds (srv_now) */
    int slot;
} srv_job;

srv_job *srv_job_new(srv_job_kind kind);
void srv_job_ref(srv_job *j);
void srv_job_unref(srv_job *j);
/* Scheduler side: append text (already UTF-8 complete), a logprob, or finish. */
void srv_job_emit(srv_job *j, const char *content, size_t n, const char *reasoning, size_t nr);
void srv_job_finish(srv_job *j, srv_finish f, int status, const char *err);
void srv_job_logprob(srv_job *j, const srv_logprob *lp);
/* Ends one token's output (a stream event boundary). */
void srv_job_mark(srv_job *j);

double srv_now(void);

/* ---- the scheduler ------------------------------------------------------ */

typedef struct srv_sched srv_sched;

typedef struct srv_slot_info {
    int id;
    bool busy;
    int32_t n_cached;      /* tokens the slot's sequence holds */
    int32_t n_prompt, n_gen;
    double last_used;
} srv_slot_info;

/* Loads nothing: the model and contexts come from the caller. */
mf_status srv_sched_new(mf_model *model, const srv_config *cfg, srv_sched **out);
void srv_sched_free(srv_sched *s);
mf_status srv_sched_start(srv_sched *s);
/* Queues a job; false when the queue is full (the caller answers 503). */
bool srv_sched_submit(srv_sched *s, srv_job *j);
/* Stop admitting; running jobs get `grace_s` seconds, then are cancelled;
 * returns when the scheduler thread has exited. */
void srv_sched_stop(srv_sched *s, double grace_s);
int srv_sched_n_slots(const srv_sched *s);
int32_t srv_sched_slot_ctx(const srv_sched *s);
void srv_sched_slots(srv_sched *s, srv_slot_info *out);
int srv_sched_queue_depth(srv_sched *s);
void srv_sched_pages(srv_sched *s, uint32_t *used, uint32_t *total);
/* Parked sequences held now, and evicted so far. */
void srv_sched_cache(srv_sched *s, int *parked, int64_t *evicted);

/* ---- metrics (Prometheus text) ------------------------------------------ */

void srv_metrics_request(int status);
void srv_metrics_tokens(int64_t prompt, int64_t cached, int64_t generated);
void srv_metrics_ttft(double seconds);
void srv_metrics_itl(double seconds);
void srv_metrics_spec(int64_t drafted, int64_t accepted);
/* Renders every metric; the caller passes the gauges it reads now. */
char *srv_metrics_render(int queue_depth, int busy_slots, int n_slots, uint32_t pages_used, uint32_t pages_total,
                         int parked, int64_t evicted);

/* ---- text ------------------------------------------------------------------ */

/* How much of `s[0..n)` can be shown: not past a complete stop string
 * (*stop_at = its offset, else -1) and not into a tail that may still become
 * one. */
size_t srv_stop_scan(const char *s, size_t n, char *const *stops, int n_stop, long *stop_at);

/* Splits generated text into content and reasoning at <think> ... </think>
 * markers, holding back a tail that may be the start of a marker. */
typedef struct srv_think {
    bool enabled;   /* false: everything is content */
    bool inside;
    char hold[16];
    size_t n_hold;
} srv_think;
/* Feeds n bytes; calls emit(content, reasoning) with what is settled.
 * flush: the text has ended, release the held tail. */
void srv_think_feed(srv_think *t, const char *s, size_t n, bool flush,
                    void (*emit)(void *ud, const char *c, size_t nc, const char *r, size_t nr), void *ud);

/* A JSON string value with the bytes (invalid UTF-8 replaced by U+FFFD). */
json_t *srv_json_bytes(const char *s, size_t n);

#endif
