/* api.c - the public GGUF inspection API (mf_gguf_*, minfer.h) over the
 * validated reader, including one-line text rendering of metadata values. */
#include "gguf/gguf.h"
#include "core/error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mf_gguf {
    gguf_file *f;
};

mf_status mf_gguf_open(const char *path, mf_gguf **out) {
    if (!out) return mf_err(MF_ERR_INVALID_ARG, "mf_gguf_open: NULL output");
    *out = NULL;
    if (!path) return mf_err(MF_ERR_INVALID_ARG, "mf_gguf_open: NULL path");
    mf_gguf *g = calloc(1, sizeof *g);
    if (!g) return mf_err(MF_ERR_NOMEM, "%s: out of memory", path);
    mf_status s = gguf_open(path, &g->f);
    if (s) {
        free(g);
        return s;
    }
    *out = g;
    return MF_OK;
}

void mf_gguf_close(mf_gguf *g) {
    if (!g) return;
    gguf_close(g->f);
    free(g);
}

uint32_t mf_gguf_version(const mf_gguf *g) { return g->f->version; }
uint64_t mf_gguf_file_size(const mf_gguf *g) { return g->f->size; }
uint64_t mf_gguf_alignment(const mf_gguf *g) { return g->f->alignment; }
uint64_t mf_gguf_data_offset(const mf_gguf *g) { return g->f->data_offset; }
int64_t mf_gguf_n_kv(const mf_gguf *g) { return (int64_t)g->f->n_kv; }
int64_t mf_gguf_n_tensors(const mf_gguf *g) { return (int64_t)g->f->n_tensors; }

static const gguf_kv *kv_at(const mf_gguf *g, int64_t i) {
    return g && i >= 0 && (uint64_t)i < g->f->n_kv ? &g->f->kv[i] : NULL;
}

const char *mf_gguf_key(const mf_gguf *g, int64_t i) {
    const gguf_kv *kv = kv_at(g, i);
    return kv ? kv->key : NULL;
}

int64_t mf_gguf_find_key(const mf_gguf *g, const char *key) { return key ? gguf_find_key(g->f, key) : -1; }

const char *mf_gguf_value_type(const mf_gguf *g, int64_t i) {
    static const char *arr[GGUF_VTYPE_COUNT] = {
        "array[u8]", "array[i8]", "array[u16]", "array[i16]", "array[u32]", "array[i32]", "array[f32]",
        "array[bool]", "array[string]", "array[array]", "array[u64]", "array[i64]", "array[f64]"};
    const gguf_kv *kv = kv_at(g, i);
    if (!kv) return NULL;
    if (kv->v.type == GGUF_ARR) return arr[kv->v.arr.elem];
    return gguf_vtype_name(kv->v.type);
}

/* ---- text rendering: an snprintf-style writer that keeps counting after
 * the buffer is full, so callers learn the full length ---- */

typedef struct text {
    char *buf;
    size_t cap, len;
} text;

static void t_putn(text *t, const char *s, size_t n) {
    if (t->len < t->cap) {
        size_t room = t->cap - 1 - t->len;
        memcpy(t->buf + t->len, s, n < room ? n : room);
    }
    t->len += n;
}

static void t_puts(text *t, const char *s) { t_putn(t, s, strlen(s)); }

static void t_printf(text *t, const char *fmt, ...) MF_PRINTF(2, 3);
static void t_printf(text *t, const char *fmt, ...) {
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) t_putn(t, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* Shortest decimal that reads back as the same float (or double). */
static void t_float(text *t, double v, bool single) {
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        double back = strtod(tmp, NULL);
        if (single ? (float)back == (float)v : back == v) break;
        if (v != v) break; /* NaN never compares equal */
    }
    t_puts(t, tmp);
}

static void t_quoted(text *t, const char *s, uint64_t len, int32_t max_str) {
    uint64_t shown = max_str >= 0 && len > (uint64_t)max_str ? (uint64_t)max_str : len;
    t_putn(t, "\"", 1);
    for (uint64_t i = 0; i < shown; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': t_puts(t, "\\\""); break;
        case '\\': t_puts(t, "\\\\"); break;
        case '\n': t_puts(t, "\\n"); break;
        case '\t': t_puts(t, "\\t"); break;
        case '\r': t_puts(t, "\\r"); break;
        default:
            if (c < 0x20 || c == 0x7f) t_printf(t, "\\x%02x", c);
            else t_putn(t, (const char *)&c, 1);
        }
    }
    t_putn(t, "\"", 1);
    if (shown < len) t_printf(t, "... (%" PRIu64 " bytes)", len);
}

static void t_scalar(text *t, const gguf_value *v, int32_t max_str) {
    switch (v->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: t_printf(t, "%" PRIu64, v->u); break;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: t_printf(t, "%" PRId64, v->i); break;
    case GGUF_F32: t_float(t, v->f, true); break;
    case GGUF_F64: t_float(t, v->f, false); break;
    case GGUF_BOOL: t_puts(t, v->b ? "true" : "false"); break;
    case GGUF_STR: t_quoted(t, v->s.ptr, v->s.len, max_str); break;
    default: t_puts(t, "?"); break;
    }
}

static void t_value(text *t, const gguf_value *v, int32_t max_items, int32_t max_str) {
    if (v->type != GGUF_ARR) {
        t_scalar(t, v, max_str);
        return;
    }
    gguf_vtype et = v->arr.elem;
    uint64_t n = v->arr.n;
    t_printf(t, "[%" PRIu64 " %s", n, et == GGUF_STR ? "strings" : et == GGUF_ARR ? "arrays" : gguf_vtype_name(et));
    uint64_t shown = max_items >= 0 && n > (uint64_t)max_items ? (uint64_t)max_items : n;
    for (uint64_t i = 0; i < shown; i++) {
        t_puts(t, i ? ", " : ": ");
        if (et == GGUF_STR) {
            t_quoted(t, v->arr.strs[i].ptr, v->arr.strs[i].len, max_str);
        } else if (et == GGUF_ARR) {
            t_value(t, &v->arr.items[i], max_items, max_str);
        } else {
            gguf_value e = {.type = et};
            if (et == GGUF_F32 || et == GGUF_F64) e.f = gguf_arr_float(v, i);
            else if (et == GGUF_BOOL) e.b = gguf_arr_int(v, i) != 0;
            /* a u64 above INT64_MAX comes back through int64_t bit-exact */
            else if (et == GGUF_U8 || et == GGUF_U16 || et == GGUF_U32 || et == GGUF_U64) e.u = (uint64_t)gguf_arr_int(v, i);
            else e.i = gguf_arr_int(v, i);
            t_scalar(t, &e, max_str);
        }
    }
    if (shown < n) t_puts(t, shown ? ", ...]" : ": ...]");
    else t_puts(t, "]");
}

int64_t mf_gguf_value_text(const mf_gguf *g, int64_t i, int32_t max_items, int32_t max_str, char *buf, size_t cap) {
    const gguf_kv *kv = kv_at(g, i);
    if (!kv) return -1;
    text t = {buf, buf ? cap : 0, 0};
    t_value(&t, &kv->v, max_items, max_str);
    if (t.cap) t.buf[t.len < t.cap ? t.len : t.cap - 1] = 0;
    return (int64_t)t.len;
}

mf_status mf_gguf_tensor(const mf_gguf *g, int64_t i, mf_gguf_tensor_info *out) {
    if (!g || !out || i < 0 || (uint64_t)i >= g->f->n_tensors)
        return mf_err(MF_ERR_INVALID_ARG, "mf_gguf_tensor: index %" PRId64 " out of range", i);
    const gguf_tensor *t = &g->f->tensors[i];
    memset(out, 0, sizeof *out);
    out->name = t->name;
    out->type = mf_type_name(t->type);
    out->type_id = (int32_t)t->type;
    out->n_dims = t->n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) out->ne[d] = t->ne[d];
    out->n_elements = t->n_elements;
    out->offset = g->f->data_offset + t->offset;
    out->nbytes = t->nbytes;
    return MF_OK;
}
