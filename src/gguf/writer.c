/* writer.c - GGUF v3 writer (see gguf_write.h): values are serialized when
 * they are set, so writing is concatenation plus tensor data streamed in order.
 *
 * File layout written: "GGUF", u32 3, u64 n_tensors, u64 n_kv, the key/value
 * pairs, the tensor infos, zero padding to the alignment, then each tensor's
 * data followed by zero padding to the alignment (the last one too, as
 * llama.cpp and gguf-py do, so the file size is a multiple of the alignment). */
#include "gguf/gguf_write.h"
#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GGUF_WRITE_VERSION 3

/* A growable byte buffer; `oom` latches the first allocation failure so a
 * sequence of appends can be checked once at the end. */
typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bytes;

typedef struct wkv {
    char *key;
    gguf_vtype type;
    bytes val; /* the value as it appears in the file, after the type tag */
} wkv;

typedef struct wtensor {
    gguf_wtensor info; /* info.name points at `name` */
    char *name;
    const void *data;
    gguf_tensor_fn fn;
    void *ud;
} wtensor;

struct gguf_writer {
    wkv *kv;
    uint64_t n_kv, cap_kv;
    wtensor *t;
    uint64_t n_t, cap_t;
    uint64_t alignment;
};

struct gguf_sink {
    FILE *fp;          /* file output, or */
    bytes *mem;        /* memory output */
    const char *dest;  /* for messages */
    uint64_t written;
    const char *tensor;/* the tensor a callback is producing */
    size_t limit;      /* bytes that callback may still write */
};

/* ---- byte buffers ---- */

static void b_reserve(bytes *b, size_t more) {
    if (b->oom) return;
    if (more <= b->cap - b->n) return;
    if (more > SIZE_MAX - b->n) {
        b->oom = true;
        return;
    }
    size_t nc = b->cap ? b->cap : 64;
    while (nc < b->n + more) nc = nc > SIZE_MAX / 2 ? b->n + more : nc * 2;
    uint8_t *p = realloc(b->p, nc);
    if (!p) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = nc;
}

static void b_put(bytes *b, const void *src, size_t n) {
    if (!n) return;
    b_reserve(b, n);
    if (b->oom) return;
    memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void b_le(bytes *b, uint64_t v, size_t n) {
    uint8_t tmp[8];
    for (size_t i = 0; i < n; i++) tmp[i] = (uint8_t)(v >> (8 * i));
    b_put(b, tmp, n);
}

static void b_str(bytes *b, const char *s, uint64_t len) {
    b_le(b, len, 8);
    b_put(b, s, (size_t)len);
}

static uint64_t pad_to(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* ---- writer ---- */

mf_status gguf_writer_new(gguf_writer **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return mf_err(MF_ERR_NOMEM, "gguf writer: out of memory");
    (*out)->alignment = GGUF_DEFAULT_ALIGNMENT;
    return MF_OK;
}

void gguf_writer_free(gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) {
        free(w->kv[i].key);
        free(w->kv[i].val.p);
    }
    free(w->kv);
    for (uint64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->t);
    free(w);
}

uint64_t gguf_writer_n_kv(const gguf_writer *w) { return w->n_kv; }
uint64_t gguf_writer_n_tensors(const gguf_writer *w) { return w->n_t; }

static bool grow(void **arr, uint64_t *cap, uint64_t need, size_t elem) {
    if (need <= *cap) return true;
    uint64_t nc = *cap ? *cap * 2 : 16;
    if (nc < need) nc = need;
    if (nc > SIZE_MAX / elem) return false;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

static mf_status check_key(const char *key) {
    if (!key || !key[0]) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: empty metadata key");
    if (strlen(key) > GGUF_MAX_KEY_LEN)
        return mf_err(MF_ERR_INVALID_ARG, "gguf writer: metadata key of %zu bytes is longer than %d", strlen(key), GGUF_MAX_KEY_LEN);
    return MF_OK;
}

static int64_t find_kv(const gguf_writer *w, const char *key) {
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kv[i].key, key)) return (int64_t)i;
    return -1;
}

/* Stores a serialized value under `key` (taking ownership of val->p on
 * success and on failure). */
static mf_status set_bytes(gguf_writer *w, const char *key, gguf_vtype type, bytes *val) {
    mf_status s = check_key(key);
    if (!s && val->oom) s = mf_err(MF_ERR_NOMEM, "gguf writer: key '%s': out of memory", key);
    if (!s && !strcmp(key, "general.alignment")) {
        /* the reader refuses anything else, so refuse it here too */
        uint64_t a = val->n == 4 ? (uint64_t)val->p[0] | (uint64_t)val->p[1] << 8 | (uint64_t)val->p[2] << 16 | (uint64_t)val->p[3] << 24 : 0;
        if (type != GGUF_U32)
            s = mf_err(MF_ERR_INVALID_ARG, "gguf writer: general.alignment must be a u32, not %s", gguf_vtype_name(type));
        else if (a == 0 || (a & (a - 1)))
            s = mf_err(MF_ERR_INVALID_ARG, "gguf writer: general.alignment %" PRIu64 " is not a power of two", a);
        else
            w->alignment = a;
    }
    if (s) {
        free(val->p);
        return s;
    }
    int64_t i = find_kv(w, key);
    if (i >= 0) {
        free(w->kv[i].val.p);
        w->kv[i].type = type;
        w->kv[i].val = *val;
        return MF_OK;
    }
    char *k = strdup(key);
    if (!k || !grow((void **)&w->kv, &w->cap_kv, w->n_kv + 1, sizeof *w->kv)) {
        free(k);
        free(val->p);
        return mf_err(MF_ERR_NOMEM, "gguf writer: key '%s': out of memory", key);
    }
    w->kv[w->n_kv++] = (wkv){k, type, *val};
    return MF_OK;
}

bool gguf_writer_remove(gguf_writer *w, const char *key) {
    int64_t i = find_kv(w, key);
    if (i < 0) return false;
    free(w->kv[i].key);
    free(w->kv[i].val.p);
    memmove(&w->kv[i], &w->kv[i + 1], (size_t)(w->n_kv - (uint64_t)i - 1) * sizeof *w->kv);
    w->n_kv--;
    if (!strcmp(key, "general.alignment")) w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return true;
}

static mf_status set_scalar(gguf_writer *w, const char *key, gguf_vtype type, uint64_t bits) {
    bytes b = {0};
    b_le(&b, bits, gguf_vtype_size(type));
    return set_bytes(w, key, type, &b);
}

mf_status gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v) { return set_scalar(w, key, GGUF_U8, v); }
mf_status gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v) { return set_scalar(w, key, GGUF_I8, (uint8_t)v); }
mf_status gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v) { return set_scalar(w, key, GGUF_U16, v); }
mf_status gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v) { return set_scalar(w, key, GGUF_I16, (uint16_t)v); }
mf_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v) { return set_scalar(w, key, GGUF_U32, v); }
mf_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v) { return set_scalar(w, key, GGUF_I32, (uint32_t)v); }
mf_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v) { return set_scalar(w, key, GGUF_U64, v); }
mf_status gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v) { return set_scalar(w, key, GGUF_I64, (uint64_t)v); }
mf_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v) { return set_scalar(w, key, GGUF_BOOL, v ? 1 : 0); }

mf_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v) {
    uint32_t u;
    memcpy(&u, &v, 4);
    return set_scalar(w, key, GGUF_F32, u);
}

mf_status gguf_writer_set_f64(gguf_writer *w, const char *key, double v) {
    uint64_t u;
    memcpy(&u, &v, 8);
    return set_scalar(w, key, GGUF_F64, u);
}

mf_status gguf_writer_set_strn(gguf_writer *w, const char *key, const char *v, size_t len) {
    if (!v && len) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL string", key ? key : "");
    bytes b = {0};
    b_str(&b, v, len);
    return set_bytes(w, key, GGUF_STR, &b);
}

mf_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v) {
    if (!v) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL string", key ? key : "");
    return gguf_writer_set_strn(w, key, v, strlen(v));
}

/* Host-order element i of a C array of `t` -> its bits. */
static uint64_t host_elem(gguf_vtype t, const void *data, uint64_t i) {
    const uint8_t *p = (const uint8_t *)data;
    switch (t) {
    case GGUF_U8: case GGUF_I8: return p[i];
    case GGUF_BOOL: return ((const bool *)data)[i] ? 1 : 0;
    case GGUF_U16: case GGUF_I16: { uint16_t x; memcpy(&x, p + i * 2, 2); return x; }
    case GGUF_U32: case GGUF_I32: case GGUF_F32: { uint32_t x; memcpy(&x, p + i * 4, 4); return x; }
    default: { uint64_t x; memcpy(&x, p + i * 8, 8); return x; }
    }
}

mf_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_vtype elem, const void *data, uint64_t n) {
    size_t sz = gguf_vtype_size(elem);
    if (!sz)
        return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': gguf_writer_set_arr takes numeric or bool elements, not %s",
                      key ? key : "", gguf_vtype_name(elem));
    if (n && !data) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL array data", key ? key : "");
    if (n > SIZE_MAX / sz) return mf_err(MF_ERR_NOMEM, "gguf writer: key '%s': array too large", key ? key : "");
    bytes b = {0};
    b_reserve(&b, 12 + (size_t)n * sz);
    b_le(&b, elem, 4);
    b_le(&b, n, 8);
    for (uint64_t i = 0; i < n && !b.oom; i++) b_le(&b, host_elem(elem, data, i), sz);
    return set_bytes(w, key, GGUF_ARR, &b);
}

mf_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n) {
    if (n && !strs) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL string array", key ? key : "");
    bytes b = {0};
    b_le(&b, GGUF_STR, 4);
    b_le(&b, n, 8);
    for (uint64_t i = 0; i < n && !b.oom; i++) {
        if (!strs[i]) {
            free(b.p);
            return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': string %" PRIu64 " is NULL", key ? key : "", i);
        }
        b_str(&b, strs[i], strlen(strs[i]));
    }
    return set_bytes(w, key, GGUF_ARR, &b);
}

/* Serializes a value body (no type tag); an array element of an array is
 * written as its own element type, count and elements. */
static mf_status put_value(bytes *b, const gguf_value *v, int depth, const char *key) {
    size_t sz = gguf_vtype_size(v->type);
    if (sz) {
        uint64_t bits;
        switch (v->type) {
        case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: bits = v->u; break;
        case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: bits = (uint64_t)v->i; break;
        case GGUF_BOOL: bits = v->b ? 1 : 0; break;
        case GGUF_F32: { float f = (float)v->f; uint32_t u; memcpy(&u, &f, 4); bits = u; break; }
        default: memcpy(&bits, &v->f, 8); break; /* F64 */
        }
        b_le(b, bits, sz);
        return MF_OK;
    }
    if (v->type == GGUF_STR) {
        if (!v->s.ptr && v->s.len) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL string", key);
        b_str(b, v->s.ptr, v->s.len);
        return MF_OK;
    }
    if (v->type != GGUF_ARR) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': unknown value type %d", key, (int)v->type);
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': arrays nested more than %d deep", key, GGUF_MAX_ARRAY_DEPTH);
    gguf_vtype et = v->arr.elem;
    if ((unsigned)et >= GGUF_VTYPE_COUNT)
        return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': unknown array element type %d", key, (int)et);
    uint64_t n = v->arr.n;
    b_le(b, et, 4);
    b_le(b, n, 8);
    size_t esz = gguf_vtype_size(et);
    if (esz) {
        if (n && !v->arr.raw) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL array data", key);
        if (n > SIZE_MAX / esz) return mf_err(MF_ERR_NOMEM, "gguf writer: key '%s': array too large", key);
        b_put(b, v->arr.raw, (size_t)n * esz); /* already little-endian */
        return MF_OK;
    }
    if (et == GGUF_STR) {
        if (n && !v->arr.strs) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL string array", key);
        for (uint64_t i = 0; i < n && !b->oom; i++) {
            if (!v->arr.strs[i].ptr && v->arr.strs[i].len)
                return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': string %" PRIu64 " is NULL", key, i);
            b_str(b, v->arr.strs[i].ptr, v->arr.strs[i].len);
        }
        return MF_OK;
    }
    if (n && !v->arr.items) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL nested array", key);
    for (uint64_t i = 0; i < n && !b->oom; i++) {
        if (v->arr.items[i].type != GGUF_ARR)
            return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': element %" PRIu64 " of an array of arrays has type %s",
                          key, i, gguf_vtype_name(v->arr.items[i].type));
        mf_status s = put_value(b, &v->arr.items[i], depth + 1, key);
        if (s) return s;
    }
    return MF_OK;
}

mf_status gguf_writer_set_value(gguf_writer *w, const char *key, const gguf_value *v) {
    mf_status s = check_key(key);
    if (s) return s;
    if (!v) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: key '%s': NULL value", key);
    bytes b = {0};
    if ((s = put_value(&b, v, 0, key))) {
        free(b.p);
        return s;
    }
    return set_bytes(w, key, v->type, &b);
}

mf_status gguf_writer_copy_kv(gguf_writer *w, const gguf_file *f, gguf_key_filter keep, void *ud) {
    for (uint64_t i = 0; i < f->n_kv; i++) {
        if (keep && !keep(f->kv[i].key, ud)) continue;
        mf_status s = gguf_writer_set_value(w, f->kv[i].key, &f->kv[i].v);
        if (s) return s;
    }
    return MF_OK;
}

/* ---- tensors ---- */

static mf_status add_tensor(gguf_writer *w, const char *name, mf_type type, uint32_t n_dims, const int64_t *ne,
                            const void *data, gguf_tensor_fn fn, void *ud) {
    if (!name || !name[0]) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: empty tensor name");
    size_t len = strlen(name);
    if (len > GGUF_MAX_NAME_LEN)
        return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor name of %zu bytes is longer than %d", len, GGUF_MAX_NAME_LEN);
    if (n_dims == 0 || n_dims > GGUF_MAX_DIMS || !ne)
        return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': %u dimensions (1 to %d allowed)", name, n_dims, GGUF_MAX_DIMS);
    const mf_type_geom *g = mf_type_geom_get((int)type);
    if (!g) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': unknown tensor type id %d", name, (int)type);
    gguf_wtensor info = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    int64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] <= 0)
            return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': dimension %u is %" PRId64 ", must be >= 1", name, d, ne[d]);
        if (__builtin_mul_overflow(nel, ne[d], &nel))
            return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': element count overflows", name);
        info.ne[d] = ne[d];
    }
    if (ne[0] % g->blck)
        return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %d",
                      name, ne[0], g->name, (int)g->blck);
    uint64_t nb;
    if (__builtin_mul_overflow((uint64_t)(nel / g->blck), (uint64_t)g->size, &nb) || nb > SIZE_MAX)
        return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': byte size overflows", name);
    info.nbytes = (size_t)nb;
    if (!fn && !data) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': no data", name);
    char *nm = strdup(name);
    if (!nm || !grow((void **)&w->t, &w->cap_t, w->n_t + 1, sizeof *w->t)) {
        free(nm);
        return mf_err(MF_ERR_NOMEM, "gguf writer: tensor '%s': out of memory", name);
    }
    info.index = w->n_t;
    w->t[w->n_t++] = (wtensor){info, nm, data, fn, ud};
    return MF_OK;
}

mf_status gguf_writer_add_tensor(gguf_writer *w, const char *name, mf_type type, uint32_t n_dims, const int64_t *ne,
                                 const void *data) {
    return add_tensor(w, name, type, n_dims, ne, data, NULL, NULL);
}

mf_status gguf_writer_add_tensor_fn(gguf_writer *w, const char *name, mf_type type, uint32_t n_dims, const int64_t *ne,
                                    gguf_tensor_fn fn, void *ud) {
    if (!fn) return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': NULL callback", name ? name : "");
    return add_tensor(w, name, type, n_dims, ne, NULL, fn, ud);
}

mf_status gguf_writer_copy_tensor(gguf_writer *w, const gguf_tensor *t) {
    return add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, NULL, NULL);
}

/* ---- output ---- */

static uint64_t header_size(const gguf_writer *w) {
    uint64_t n = 4 + 4 + 8 + 8;
    for (uint64_t i = 0; i < w->n_kv; i++) n += 8 + strlen(w->kv[i].key) + 4 + w->kv[i].val.n;
    for (uint64_t i = 0; i < w->n_t; i++) n += 8 + strlen(w->t[i].name) + 4 + 8 * (uint64_t)w->t[i].info.n_dims + 4 + 8;
    return n;
}

uint64_t gguf_writer_size(const gguf_writer *w) {
    uint64_t n = pad_to(header_size(w), w->alignment);
    for (uint64_t i = 0; i < w->n_t; i++) n += pad_to(w->t[i].info.nbytes, w->alignment);
    return n;
}

static int cmp_tname(const void *a, const void *b) {
    return strcmp((*(const wtensor *const *)a)->name, (*(const wtensor *const *)b)->name);
}

/* Refuses duplicate tensor names (the reader would refuse the file) and sizes
 * that overflow a file offset. */
static mf_status check_tensors(const gguf_writer *w) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < w->n_t; i++) {
        uint64_t p = pad_to(w->t[i].info.nbytes, w->alignment);
        if (p < w->t[i].info.nbytes || __builtin_add_overflow(total, p, &total))
            return mf_err(MF_ERR_INVALID_ARG, "gguf writer: tensor '%s': data section size overflows", w->t[i].name);
    }
    if (w->n_t < 2) return MF_OK;
    const wtensor **v = malloc((size_t)w->n_t * sizeof *v);
    if (!v) return mf_err(MF_ERR_NOMEM, "gguf writer: out of memory");
    for (uint64_t i = 0; i < w->n_t; i++) v[i] = &w->t[i];
    qsort(v, (size_t)w->n_t, sizeof *v, cmp_tname);
    mf_status s = MF_OK;
    for (uint64_t i = 1; i < w->n_t && !s; i++)
        if (!strcmp(v[i - 1]->name, v[i]->name)) s = mf_err(MF_ERR_INVALID_ARG, "gguf writer: duplicate tensor name '%s'", v[i]->name);
    free(v);
    return s;
}

static mf_status out_write(gguf_sink *o, const void *p, size_t n) {
    if (!n) return MF_OK;
    if (o->mem) {
        b_put(o->mem, p, n);
        if (o->mem->oom) return mf_err(MF_ERR_NOMEM, "%s: out of memory", o->dest);
    } else if (fwrite(p, 1, n, o->fp) != n) {
        return mf_err(MF_ERR_IO, "%s: write failed: %s", o->dest, strerror(errno));
    }
    o->written += n;
    return MF_OK;
}

static mf_status out_pad(gguf_sink *o, uint64_t a) {
    static const uint8_t zeros[256];
    while (o->written % a) {
        uint64_t k = a - o->written % a;
        mf_status s = out_write(o, zeros, k < sizeof zeros ? (size_t)k : sizeof zeros);
        if (s) return s;
    }
    return MF_OK;
}

mf_status gguf_sink_write(gguf_sink *s, const void *data, size_t n) {
    if (n > s->limit)
        return mf_err(MF_ERR_INVALID_ARG, "%s: tensor '%s': callback wrote more bytes than the tensor holds", s->dest, s->tensor);
    if (n && !data) return mf_err(MF_ERR_INVALID_ARG, "%s: tensor '%s': NULL data", s->dest, s->tensor);
    s->limit -= n;
    return out_write(s, data, n);
}

static mf_status emit(gguf_writer *w, gguf_sink *o) {
    mf_status s = check_tensors(w);
    if (s) return s;
    bytes h = {0};
    b_reserve(&h, (size_t)header_size(w));
    b_put(&h, "GGUF", 4);
    b_le(&h, GGUF_WRITE_VERSION, 4);
    b_le(&h, w->n_t, 8);
    b_le(&h, w->n_kv, 8);
    for (uint64_t i = 0; i < w->n_kv; i++) {
        b_str(&h, w->kv[i].key, strlen(w->kv[i].key));
        b_le(&h, w->kv[i].type, 4);
        b_put(&h, w->kv[i].val.p, w->kv[i].val.n);
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n_t; i++) {
        const gguf_wtensor *t = &w->t[i].info;
        b_str(&h, w->t[i].name, strlen(w->t[i].name));
        b_le(&h, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims; d++) b_le(&h, (uint64_t)t->ne[d], 8);
        b_le(&h, (uint64_t)t->type, 4);
        b_le(&h, off, 8);
        off += pad_to(t->nbytes, w->alignment);
    }
    if (h.oom) {
        free(h.p);
        return mf_err(MF_ERR_NOMEM, "%s: out of memory for the header", o->dest);
    }
    s = out_write(o, h.p, h.n);
    free(h.p);
    if (!s) s = out_pad(o, w->alignment);
    for (uint64_t i = 0; i < w->n_t && !s; i++) {
        wtensor *t = &w->t[i];
        t->info.name = t->name;
        if (!t->fn) {
            s = out_write(o, t->data, t->info.nbytes);
        } else {
            o->tensor = t->name;
            o->limit = t->info.nbytes;
            s = t->fn(t->ud, &t->info, o);
            if (!s && o->limit)
                s = mf_err(MF_ERR_INVALID_ARG, "%s: tensor '%s': callback wrote %zu of %zu bytes", o->dest, t->name,
                           t->info.nbytes - o->limit, t->info.nbytes);
            o->limit = 0;
        }
        if (!s) s = out_pad(o, w->alignment);
    }
    return s;
}

mf_status gguf_writer_write_mem(gguf_writer *w, uint8_t **out, size_t *size) {
    *out = NULL;
    *size = 0;
    bytes m = {0};
    uint64_t total = gguf_writer_size(w);
    if (total <= SIZE_MAX) b_reserve(&m, (size_t)total);
    gguf_sink o = {.mem = &m, .dest = "<memory>"};
    mf_status s = emit(w, &o);
    if (s) {
        free(m.p);
        return s;
    }
    *out = m.p;
    *size = m.n;
    return MF_OK;
}

mf_status gguf_writer_write_file(gguf_writer *w, const char *path) {
    static atomic_uint counter;
    size_t len = strlen(path) + 64;
    char *tmp = malloc(len);
    if (!tmp) return mf_err(MF_ERR_NOMEM, "%s: out of memory", path);
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        snprintf(tmp, len, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        mf_status s = mf_err(MF_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        free(tmp);
        return s;
    }
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        mf_status s = mf_err(MF_ERR_IO, "%s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        free(tmp);
        return s;
    }
    setvbuf(fp, NULL, _IOFBF, 1 << 20);
    gguf_sink o = {.fp = fp, .dest = path};
    mf_status s = emit(w, &o);
    if (fclose(fp) != 0 && !s) s = mf_err(MF_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (!s && rename(tmp, path) != 0) s = mf_err(MF_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp, strerror(errno));
    if (s) unlink(tmp);
    free(tmp);
    return s;
}
