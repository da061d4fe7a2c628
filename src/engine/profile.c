/* profile.c - MINFER_OP_PROFILE=1: a backend decorator that times every op
 * (matrix products also by weight kind: attn_q, ffn_down, output, ...) and
 * prints a table (count, total ms, % of op time) when the context is freed.
 * Ops inside a step are named by its kind: "(decode)" when every sequence
 * has one row in it, "(prompt)" otherwise. A device backend with marks
 * (backend.h) is timed on the device, between timestamps queued around each
 * op; other backends by the host clock around the op with the queue
 * drained on both sides. The forward pass is unchanged: the context just
 * talks to the wrapper. */
#include "engine/profile.h"
#include "core/log.h"
#include "core/timer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ROWS 128

typedef struct prof_row {
    char name[48];
    long count;
    int64_t ns;
} prof_row;

/* an op of the running step timed on the device: its row, its two marks */
typedef struct prof_pend {
    int row, a, b;
} prof_pend;

typedef struct prof_backend {
    mf_backend base;
    mf_backend *inner;
    mf_backend_ops ops;
    prof_row rows[MAX_ROWS];
    int n_rows;
    const char *kind; /* the running step's kind, NULL between steps */
    prof_pend *pend;
    int n_pend, cap_pend;
    bool device; /* some op was timed on the device */
} prof_backend;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* the row of name, made if new; -1 when the table is full */
static int row_of(prof_backend *p, const char *name) {
    for (int i = 0; i < p->n_rows; i++)
        if (!strcmp(p->rows[i].name, name)) return i;
    if (p->n_rows == MAX_ROWS) return -1;
    prof_row *r = &p->rows[p->n_rows];
    snprintf(r->name, sizeof r->name, "%s", name);
    r->count = 0;
    r->ns = 0;
    return p->n_rows++;
}

static void account(prof_backend *p, const char *name, int64_t ns) {
    const int i = row_of(p, name);
    if (i < 0) return;
    p->rows[i].count++;
    p->rows[i].ns += ns;
}

/* name, with the running step's kind */
static void label(const prof_backend *p, const char *name, char *buf, size_t cap) {
    if (p->kind) snprintf(buf, cap, "%s (%s)", name, p->kind);
    else snprintf(buf, cap, "%s", name);
}

/* an op between marks a and b, timed when the step ends */
static void defer(prof_backend *p, const char *name, int a, int b) {
    const int i = row_of(p, name);
    if (i < 0 || a < 0 || b < 0) return;
    if (p->n_pend == p->cap_pend) {
        const int cap = p->cap_pend ? 2 * p->cap_pend : 256;
        prof_pend *np = realloc(p->pend, (size_t)cap * sizeof *np);
        if (!np) return;
        p->pend = np;
        p->cap_pend = cap;
    }
    p->pend[p->n_pend++] = (prof_pend){i, a, b};
}

/* "blk.12.attn_q.weight" -> "matmul attn_q" */
static void weight_kind(const char *op, mf_weight w, char *buf, size_t cap) {
    const char *n = w && w->name ? w->name : "?";
    if (!strncmp(n, "blk.", 4)) {
        const char *dot = strchr(n + 4, '.');
        if (dot) n = dot + 1;
    }
    size_t len = strlen(n);
    if (len > 7 && !strcmp(n + len - 7, ".weight")) len -= 7;
    snprintf(buf, cap, "%s %.*s", op, (int)len, n);
}

#define INNER(be) (((prof_backend *)(be))->inner)
/* A device backend queues its ops: each one is waited for on both sides of
 * its timing, so the time is the op's own (and fusions across ops do not
 * form while profiling: the device runs them one by one) */
static void settle(mf_backend *be) {
    mf_backend *in = ((prof_backend *)be)->inner;
    if (!in->ops->host_memory) in->ops->synchronize(in);
}

#define TIMED(be, name, call)                                                  \
    do {                                                                       \
        prof_backend *p_ = (prof_backend *)(be);                               \
        mf_backend *in_ = p_->inner;                                           \
        char nm_[96];                                                          \
        label(p_, name, nm_, sizeof nm_);                                      \
        if (p_->kind && in_->ops->mark) {                                      \
            const int a_ = in_->ops->mark(in_);                                \
            call;                                                              \
            defer(p_, nm_, a_, in_->ops->mark(in_));                           \
        } else {                                                               \
            settle(be);                                                        \
            int64_t t0_ = now_ns();                                            \
            call;                                                              \
            settle(be);                                                        \
            account(p_, nm_, now_ns() - t0_);                                  \
        }                                                                      \
    } while (0)

static void p_get_rows(mf_backend *be, mf_weight w, mf_step_ids which, float *out) {
    TIMED(be, "get_rows", INNER(be)->ops->get_rows(INNER(be), w, which, out));
}
static void p_norm(mf_backend *be, mf_norm_type t, const float *x, mf_weight w, mf_weight b, int rows, int n, float eps,
                   float *out) {
    TIMED(be, "norm", INNER(be)->ops->norm(INNER(be), t, x, w, b, rows, n, eps, out));
}
static void p_matmul(mf_backend *be, mf_weight w, const float *x, int rows, float *out) {
    char name[48];
    weight_kind("matmul", w, name, sizeof name);
    TIMED(be, name, INNER(be)->ops->matmul(INNER(be), w, x, rows, out));
}
static void p_matmul_n(mf_backend *be, const mf_weight *w, const mf_weight *b, int nw, const float *x, int rows,
                       float *const *out, float *res) {
    char name[48];
    weight_kind(nw > 1 ? "matmul_n" : "matmul", w[0], name, sizeof name);
    TIMED(be, name, INNER(be)->ops->matmul_n(INNER(be), w, b, nw, x, rows, out, res));
}
static void p_add(mf_backend *be, float *a, const float *b, size_t n) { TIMED(be, "add", INNER(be)->ops->add(INNER(be), a, b, n)); }
static void p_copy_cols(mf_backend *be, const float *src, int w, int c0, int n, int rows, float *dst) {
    TIMED(be, "copy_cols", INNER(be)->ops->copy_cols(INNER(be), src, w, c0, n, rows, dst));
}
static void p_gather(mf_backend *be, const float *src, int first, int count, int n, float *dst) {
    TIMED(be, "gather_out", INNER(be)->ops->gather_out(INNER(be), src, first, count, n, dst));
}
static void p_sum_slots(mf_backend *be, const float *src, int rows, int k, int n, float *out) {
    TIMED(be, "sum_slots", INNER(be)->ops->sum_slots(INNER(be), src, rows, k, n, out));
}
static void p_softcap(mf_backend *be, float *x, float cap, size_t n) {
    TIMED(be, "softcap", INNER(be)->ops->softcap(INNER(be), x, cap, n));
}
static void p_scale(mf_backend *be, float *x, float s, size_t n) { TIMED(be, "scale", INNER(be)->ops->scale(INNER(be), x, s, n)); }
static void p_rope(mf_backend *be, float *x, int n_head, int hd, const mf_rope_params *rp) {
    TIMED(be, "rope", INNER(be)->ops->rope(INNER(be), x, n_head, hd, rp));
}
static void p_glu(mf_backend *be, mf_ffn_type act, const float *g, const float *u, size_t n, float *out) {
    TIMED(be, "glu", INNER(be)->ops->glu(INNER(be), act, g, u, n, out));
}
static void p_kv_store(mf_backend *be, int layer, const float *k, const float *v) {
    TIMED(be, "kv_store", INNER(be)->ops->kv_store(INNER(be), layer, k, v));
}
static size_t p_kv_read(mf_backend *be, int layer, const int32_t *cells, uint32_t n, void *dst) {
    size_t r;
    TIMED(be, "kv_read", r = INNER(be)->ops->kv_read(INNER(be), layer, cells, n, dst));
    return r;
}
static void p_kv_write(mf_backend *be, int layer, const int32_t *cells, uint32_t n, const void *src) {
    TIMED(be, "kv_write", INNER(be)->ops->kv_write(INNER(be), layer, cells, n, src));
}
static void p_kv_copy_page(mf_backend *be, int32_t src, int32_t dst) {
    TIMED(be, "kv_copy_page", INNER(be)->ops->kv_copy_page(INNER(be), src, dst));
}
static void p_attention(mf_backend *be, int layer, const float *q, const mf_attn_params *ap, float *out) {
    TIMED(be, "attention", INNER(be)->ops->attention(INNER(be), layer, q, ap, out));
}
static void p_moe_route(mf_backend *be, const float *lg, int n, const mf_moe_route *rp, int32_t *sel, float *w) {
    TIMED(be, "moe_route", INNER(be)->ops->moe_route(INNER(be), lg, n, rp, sel, w));
}
static void p_matmul_id(mf_backend *be, mf_weight ex, int ne, const float *x, bool per_slot, int rows, int k,
                        const int32_t *sel, float *out, float *ti, float *to) {
    char kind[64];
    weight_kind("matmul_id", ex, kind, sizeof kind);
    TIMED(be, kind, INNER(be)->ops->matmul_id(INNER(be), ex, ne, x, per_slot, rows, k, sel, out, ti, to));
}
static void p_scale_rows(mf_backend *be, float *x, const float *sc, bool sig, int rows, int n) {
    TIMED(be, "scale_rows", INNER(be)->ops->scale_rows(INNER(be), x, sc, sig, rows, n));
}
static mf_status p_begin_step(mf_backend *be, const mf_step *st) {
    prof_backend *p = (prof_backend *)be;
    const mf_status s = p->inner->ops->begin_step(p->inner, st);
    p->n_pend = 0;
    p->kind = s == MF_OK ? (st->n_tok == st->n_seq ? "decode" : "prompt") : NULL;
    return s;
}
/* the step's device times, once end_step has waited for them */
static mf_status p_end_step(mf_backend *be) {
    prof_backend *p = (prof_backend *)be;
    const mf_status s = p->inner->ops->end_step(p->inner);
    for (int i = 0; i < p->n_pend; i++) {
        const double ms = p->inner->ops->mark_ms(p->inner, p->pend[i].a, p->pend[i].b);
        if (ms < 0) continue;
        p->rows[p->pend[i].row].count++;
        p->rows[p->pend[i].row].ns += (int64_t)(ms * 1e6);
        p->device = true;
    }
    p->n_pend = 0;
    p->kind = NULL;
    return s;
}
static void p_synchronize(mf_backend *be) { INNER(be)->ops->synchronize(INNER(be)); }
static int p_n_threads(mf_backend *be) { return INNER(be)->ops->n_threads(INNER(be)); }
static mf_status p_set_threads(mf_backend *be, int n) { return INNER(be)->ops->set_threads(INNER(be), n); }
static bool p_supports_type(mf_backend *be, mf_type t) { return INNER(be)->ops->supports_type(INNER(be), t); }
static void p_download(mf_backend *be, const float *src, size_t n, float *dst) {
    TIMED(be, "download", INNER(be)->ops->download(INNER(be), src, n, dst));
}
static float *p_alloc(mf_backend *be, size_t n) { return INNER(be)->ops->alloc(INNER(be), n); }
static mf_status p_kv_init(mf_backend *be, const mf_kv_desc *d) { return INNER(be)->ops->kv_init(INNER(be), d); }

static int cmp_rows(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

static void p_upload(mf_backend *be, const float *src, size_t n, float *dst) {
    TIMED(be, "upload", INNER(be)->ops->upload(INNER(be), src, n, dst));
}
static void *p_host_alloc(mf_backend *be, size_t bytes) { return INNER(be)->ops->host_alloc(INNER(be), bytes); }
static void p_host_free(mf_backend *be, void *p) { INNER(be)->ops->host_free(INNER(be), p); }

static void p_destroy(mf_backend *be) {
    prof_backend *p = (prof_backend *)be;
    int64_t total = 0;
    for (int i = 0; i < p->n_rows; i++) total += p->rows[i].ns;
    qsort(p->rows, (size_t)p->n_rows, sizeof p->rows[0], cmp_rows);
    mf_log(MF_LOG_INFO, "\nop profile (%s backend%s): %.3f ms in ops\n", p->inner->ops->name,
           p->device ? ", device time between timestamps" : "", total * 1e-6);
    mf_log(MF_LOG_INFO, "%-40s %10s %12s %8s\n", "op", "count", "total ms", "%");
    for (int i = 0; i < p->n_rows; i++)
        if (p->rows[i].count)
            mf_log(MF_LOG_INFO, "%-40s %10ld %12.3f %7.2f%%\n", p->rows[i].name, p->rows[i].count,
                   p->rows[i].ns * 1e-6, total ? 100.0 * (double)p->rows[i].ns / (double)total : 0.0);
    p->inner->ops->destroy(p->inner);
    free(p->pend);
    free(p);
}

mf_backend *mf_profile_wrap(mf_backend *inner) {
    prof_backend *p = calloc(1, sizeof *p);
    if (!p) return inner;
    p->inner = inner;
    p->ops = (mf_backend_ops){
        .name = "profile",
        .host_memory = inner->ops->host_memory,
        .destroy = p_destroy,
        .alloc = p_alloc,
        .kv_init = p_kv_init,
        .begin_step = p_begin_step,
        .end_step = p_end_step,
        .synchronize = p_synchronize,
        .n_threads = p_n_threads,
        .set_threads = p_set_threads,
        .supports_type = p_supports_type,
        .get_rows = p_get_rows,
        .norm = p_norm,
        .matmul = p_matmul,
        .matmul_n = p_matmul_n,
        .add = p_add,
        .copy_cols = p_copy_cols,
        .gather_out = p_gather,
        .sum_slots = p_sum_slots,
        .moe_route = p_moe_route,
        .matmul_id = p_matmul_id,
        .scale_rows = p_scale_rows,
        .softcap = p_softcap,
        .scale = p_scale,
        .rope = p_rope,
        .glu = p_glu,
        .kv_store = p_kv_store,
        .kv_read = p_kv_read,
        .kv_write = p_kv_write,
        .kv_copy_page = p_kv_copy_page,
        .attention = p_attention,
        .download = p_download,
        .upload = p_upload,
        .host_alloc = inner->ops->host_alloc ? p_host_alloc : NULL,
        .host_free = inner->ops->host_free ? p_host_free : NULL,
    };
    p->base.ops = &p->ops;
    return &p->base;
}
