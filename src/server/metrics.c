/* metrics.c - process-wide counters and histograms for GET /metrics, in the
 * Prometheus text format (names prefixed minfer_). One lock: every update is
 * a few additions, far below the cost of a decode step. */
#include "server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double TTFT_B[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
static const double ITL_B[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1};
#define N_TTFT (sizeof TTFT_B / sizeof TTFT_B[0])
#define N_ITL (sizeof ITL_B / sizeof ITL_B[0])

typedef struct hist {
    uint64_t count[16];
    uint64_t n;
    double sum;
} hist;

static struct {
    pthread_mutex_t mu;
    uint64_t by_status[600];
    uint64_t prompt, cached, generated;
    uint64_t drafted, accepted;
    hist ttft, itl;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

void srv_metrics_request(int status) {
    if (status < 100 || status >= 600) return;
    pthread_mutex_lock(&g.mu);
    g.by_status[status]++;
    pthread_mutex_unlock(&g.mu);
}

void srv_metrics_tokens(int64_t prompt, int64_t cached, int64_t generated) {
    pthread_mutex_lock(&g.mu);
    g.prompt += (uint64_t)prompt;
    g.cached += (uint64_t)cached;
    g.generated += (uint64_t)generated;
    pthread_mutex_unlock(&g.mu);
}

void srv_metrics_spec(int64_t drafted, int64_t accepted) {
    pthread_mutex_lock(&g.mu);
    g.drafted += (uint64_t)drafted;
    g.accepted += (uint64_t)accepted;
    pthread_mutex_unlock(&g.mu);
}

static void observe(hist *h, const double *b, size_t nb, double v) {
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < nb; i++)
        if (v <= b[i]) h->count[i]++;
    h->n++;
    h->sum += v;
    pthread_mutex_unlock(&g.mu);
}

void srv_metrics_ttft(double s) { observe(&g.ttft, TTFT_B, N_TTFT, s); }
void srv_metrics_itl(double s) { observe(&g.itl, ITL_B, N_ITL, s); }

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0) return;
        if (b->p && b->n + (size_t)w < b->cap) {
            b->n += (size_t)w;
            return;
        }
        size_t c = b->cap ? b->cap * 2 : 4096;
        while (c < b->n + (size_t)w + 1) c *= 2;
        char *np = realloc(b->p, c);
        if (!np) return;
        b->p = np;
        b->cap = c;
    }
}

static void put_hist(sbuf *b, const char *name, const char *help, const hist *h, const double *bk, size_t nb) {
    put(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    for (size_t i = 0; i < nb; i++) put(b, "%s_bucket{le=\"%g\"} %llu\n", name, bk[i], (unsigned long long)h->count[i]);
    put(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.6f\n%s_count %llu\n", name, (unsigned long long)h->n, name, h->sum,
        name, (unsigned long long)h->n);
}

char *srv_metrics_render(int queue_depth, int busy, int n_slots, uint32_t pages_used, uint32_t pages_total, int parked,
                         int64_t evicted) {
    sbuf b = {0};
    pthread_mutex_lock(&g.mu);
    put(&b, "# HELP minfer_requests_total HTTP requests answered, by status.\n# TYPE minfer_requests_total counter\n");
    for (int s = 100; s < 600; s++)
        if (g.by_status[s]) put(&b, "minfer_requests_total{status=\"%d\"} %llu\n", s, (unsigned long long)g.by_status[s]);
    put(&b, "# HELP minfer_prompt_tokens_total Prompt tokens of finished requests.\n# TYPE minfer_prompt_tokens_total counter\n"
            "minfer_prompt_tokens_total %llu\n", (unsigned long long)g.prompt);
    put(&b, "# HELP minfer_prefix_cache_hit_tokens_total Prompt tokens found in the KV cache instead of computed.\n"
            "# TYPE minfer_prefix_cache_hit_tokens_total counter\nminfer_prefix_cache_hit_tokens_total %llu\n",
        (unsigned long long)g.cached);
    put(&b, "# HELP minfer_generated_tokens_total Tokens generated.\n# TYPE minfer_generated_tokens_total counter\n"
            "minfer_generated_tokens_total %llu\n", (unsigned long long)g.generated);
    put(&b, "# HELP minfer_draft_tokens_total Tokens speculative decoding drafted.\n# TYPE minfer_draft_tokens_total counter\n"
            "minfer_draft_tokens_total %llu\n", (unsigned long long)g.drafted);
    put(&b, "# HELP minfer_draft_accepted_tokens_total Drafted tokens the model accepted.\n"
            "# TYPE minfer_draft_accepted_tokens_total counter\nminfer_draft_accepted_tokens_total %llu\n",
        (unsigned long long)g.accepted);
    put_hist(&b, "minfer_time_to_first_token_seconds", "From request arrival to its first generated token.", &g.ttft,
             TTFT_B, N_TTFT);
    put_hist(&b, "minfer_inter_token_latency_seconds", "Between two tokens of one request.", &g.itl, ITL_B, N_ITL);
    pthread_mutex_unlock(&g.mu);
    put(&b, "# HELP minfer_queue_depth Requests waiting for a slot.\n# TYPE minfer_queue_depth gauge\nminfer_queue_depth %d\n",
        queue_depth);
    put(&b, "# HELP minfer_slots_busy Slots running a request.\n# TYPE minfer_slots_busy gauge\nminfer_slots_busy %d\n", busy);
    put(&b, "# HELP minfer_slots_total Slots.\n# TYPE minfer_slots_total gauge\nminfer_slots_total %d\n", n_slots);
    put(&b, "# HELP minfer_kv_pages_used KV cache pages in use.\n# TYPE minfer_kv_pages_used gauge\nminfer_kv_pages_used %u\n",
        pages_used);
    put(&b, "# HELP minfer_kv_pages_total KV cache pages in all.\n# TYPE minfer_kv_pages_total gauge\nminfer_kv_pages_total %u\n",
        pages_total);
    put(&b, "# HELP minfer_prefix_cache_sequences Finished requests' sequences kept for prefix reuse.\n"
            "# TYPE minfer_prefix_cache_sequences gauge\nminfer_prefix_cache_sequences %d\n", parked);
    put(&b, "# HELP minfer_prefix_cache_evictions_total Kept sequences dropped to free KV pages.\n"
            "# TYPE minfer_prefix_cache_evictions_total counter\nminfer_prefix_cache_evictions_total %lld\n",
        (long long)evicted);
    return b.p;
}
