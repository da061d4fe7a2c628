/* job.c - one request's unit of work, shared by an HTTP thread and the
 * scheduler: reference counted, its output appended under its own lock. */
#include "server.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

double srv_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void srv_gen_init(srv_gen *g) {
    memset(g, 0, sizeof *g);
    g->sp = mf_sampler_default_params();
    g->max_tokens = -1;
    g->top_logprobs = -1;
}

void srv_gen_free(srv_gen *g) {
    for (int i = 0; i < g->n_stop; i++) free(g->stop[i]);
    g->n_stop = 0;
    free(g->grammar);
    g->grammar = NULL;
}

srv_job *srv_job_new(srv_job_kind kind) {
    srv_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->kind = kind;
    j->slot = -1;
    j->tool_fmt = -1;
    srv_gen_init(&j->gen);
    atomic_init(&j->cancel, false);
    j->t_queued = srv_now();
    return j;
}

void srv_job_ref(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void srv_job_unref(srv_job *j) {
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left) return;
    free(j->prompt);
    mf_grammar_free(j->grammar);
    srv_gen_free(&j->gen);
    free(j->content);
    free(j->reasoning);
    free(j->lps);
    free(j->marks);
    free(j->embedding);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

/* Appends n bytes to a growable buffer; false when memory runs out. */
static bool append(char **buf, size_t *len, size_t *cap, const char *s, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1) c *= 2;
        char *nb = realloc(*buf, c);
        if (!nb) return false;
        *buf = nb;
        *cap = c;
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = 0;
    return true;
}

void srv_job_emit(srv_job *j, const char *content, size_t n, const char *reasoning, size_t nr) {
    if (!n && !nr) return;
    pthread_mutex_lock(&j->mu);
    bool ok = (!n || append(&j->content, &j->content_len, &j->content_cap, content, n)) &&
              (!nr || append(&j->reasoning, &j->reasoning_len, &j->reasoning_cap, reasoning, nr));
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (!ok) srv_job_finish(j, SRV_FIN_ERROR, 500, "out of memory while collecting the reply");
}

void srv_job_finish(srv_job *j, srv_finish f, int status, const char *err) {
    pthread_mutex_lock(&j->mu);
    if (j->finish == SRV_FIN_NONE) {
        j->finish = f;
        j->error_status = status;
        if (err) {
            strncpy(j->error, err, sizeof j->error - 1);
            j->error[sizeof j->error - 1] = 0;
        }
        j->t_end = srv_now();
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void srv_job_logprob(srv_job *j, const srv_logprob *lp) {
    pthread_mutex_lock(&j->mu);
    if (j->n_lps == j->cap_lps) {
        int c = j->cap_lps ? j->cap_lps * 2 : 64;
        srv_logprob *n = realloc(j->lps, sizeof *n * (size_t)c);
        if (!n) {
            pthread_mutex_unlock(&j->mu);
            return;
        }
        j->lps = n;
        j->cap_lps = c;
    }
    j->lps[j->n_lps++] = *lp;
    pthread_mutex_unlock(&j->mu);
}

void srv_job_mark(srv_job *j) {
    pthread_mutex_lock(&j->mu);
    const struct srv_mark *last = j->n_marks ? &j->marks[j->n_marks - 1] : NULL;
    if (last && last->content == j->content_len && last->reasoning == j->reasoning_len && last->lps == j->n_lps) {
        pthread_mutex_unlock(&j->mu);
        return; /* nothing new since the last mark */
    }
    if (j->n_marks == j->cap_marks) {
        int c = j->cap_marks ? j->cap_marks * 2 : 64;
        struct srv_mark *n = realloc(j->marks, sizeof *n * (size_t)c);
        if (!n) {
            pthread_mutex_unlock(&j->mu);
            return; /* the next mark covers this token too */
        }
        j->marks = n;
        j->cap_marks = c;
    }
    j->marks[j->n_marks++] = (struct srv_mark){j->content_len, j->reasoning_len, j->n_lps};
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}
