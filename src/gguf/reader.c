/* reader.c - GGUF parser: every count, length, type, dimension and offset is
 * checked against the bytes that remain before it is used or allocated for.
 *
 * Layout (all little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv x (string key, u32 type, value), n_tensors x (string name, u32 n_dims,
 * u64 ne[n_dims], u32 type, u64 offset), padding to `general.alignment`, data.
 * A string is a u64 byte count and the bytes; an array value is a u32 element
 * type, a u64 count and the elements (an element that is itself an array has no
 * type tag of its own, only its element type and count).
 *
 * Every failure is one line: "<file>: <where>: <what was wrong>", where names
 * the key or tensor. Names taken from the file are printed escaped and cut
 * short, so a hostile name can neither span lines nor push the reason out of
 * the message buffer. */
#include "gguf/gguf.h"
#include "core/error.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_SHOWN 64 /* bytes of a key or tensor name quoted in a message */

typedef struct cursor {
    const uint8_t *p;
    size_t pos, size;
    const char *path;
    char where[NAME_SHOWN * 4 + 32]; /* "key 'general.name'", "tensor 'x'", "header" */
} cursor;

/* ---- messages ---- */

/* Printable rendering of a name from the file: bytes outside printable ASCII
 * become \xNN, and long names are cut with "...". */
static void show_name(char *out, size_t cap, const char *s, uint64_t len) {
    size_t o = 0;
    uint64_t i = 0;
    for (; i < len && i < NAME_SHOWN && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'')
            out[o++] = (char)ch;
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", ch);
    }
    if (i < len && o + 4 <= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o < cap ? o : cap - 1] = 0;
}

static void set_where(cursor *c, const char *kind, const char *s, uint64_t len) {
    char name[NAME_SHOWN * 4 + 8];
    show_name(name, sizeof name, s, len);
    snprintf(c->where, sizeof c->where, "%s '%s'", kind, name);
}

/* "<file>: <where>: <reason>" */
static mf_status fail(const cursor *c, mf_status code, const char *fmt, ...) MF_PRINTF(3, 4);
static mf_status fail(const cursor *c, mf_status code, const char *fmt, ...) {
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    if (c->where[0]) return mf_err(code, "%s: %s: %s", c->path, c->where, reason);
    return mf_err(code, "%s: %s", c->path, reason);
}

/* ---- primitive reads ---- */

static size_t remaining(const cursor *c) { return c->size - c->pos; }

static mf_status need(cursor *c, uint64_t n, const char *what) {
    if (n > remaining(c))
        return fail(c, MF_ERR_FORMAT, "file truncated: %s needs %" PRIu64 " bytes at offset 0x%zx but only %zu remain (file size %zu)",
                    what, n, c->pos, remaining(c), c->size);
    return MF_OK;
}

static uint64_t rd_le(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
    return v;
}

static mf_status rd_u32(cursor *c, uint32_t *v, const char *what) {
    mf_status s = need(c, 4, what);
    if (s) return s;
    *v = (uint32_t)rd_le(c->p + c->pos, 4);
    c->pos += 4;
    return MF_OK;
}

static mf_status rd_u64(cursor *c, uint64_t *v, const char *what) {
    mf_status s = need(c, 8, what);
    if (s) return s;
    *v = rd_le(c->p + c->pos, 8);
    c->pos += 8;
    return MF_OK;
}

static mf_status rd_str(cursor *c, gguf_str *out, const char *what) {
    uint64_t len;
    char lenwhat[48];
    snprintf(lenwhat, sizeof lenwhat, "%s length", what);
    mf_status s = rd_u64(c, &len, lenwhat);
    if (s) return s;
    if (len > remaining(c))
        return fail(c, MF_ERR_FORMAT, "%s length %" PRIu64 " at offset 0x%zx runs past the end of the file (%zu bytes left)",
                    what, len, c->pos - 8, remaining(c));
    out->ptr = (const char *)c->p + c->pos;
    out->len = len;
    c->pos += (size_t)len;
    return MF_OK;
}

/* Makes room for element `i` of an array whose final length is at most `n`.
 * The capacity doubles as elements are actually parsed instead of trusting a
 * declared count up front, so memory stays proportional to the bytes read. */
static bool grow(void **arr, uint64_t *cap, uint64_t i, uint64_t n, size_t elem) {
    if (i < *cap) return true;
    uint64_t nc = *cap ? *cap * 2 : 16;
    if (nc > n) nc = n;
    if (nc <= i) nc = i + 1;
    if (nc > SIZE_MAX / elem) return false;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return false;
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *arr = p;
    *cap = nc;
    return true;
}

/* ---- values ---- */

size_t gguf_vtype_size(gguf_vtype t) {
    switch (t) {
    case GGUF_U8: case GGUF_I8: case GGUF_BOOL: return 1;
    case GGUF_U16: case GGUF_I16: return 2;
    case GGUF_U32: case GGUF_I32: case GGUF_F32: return 4;
    case GGUF_U64: case GGUF_I64: case GGUF_F64: return 8;
    default: return 0;
    }
}

const char *gguf_vtype_name(gguf_vtype t) {
    static const char *names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < GGUF_VTYPE_COUNT ? names[t] : "?";
}

bool gguf_vtype_is_int(gguf_vtype t) {
    return t == GGUF_U8 || t == GGUF_I8 || t == GGUF_U16 || t == GGUF_I16 || t == GGUF_U32 || t == GGUF_I32 ||
           t == GGUF_U64 || t == GGUF_I64;
}

static void scalar_from_raw(gguf_vtype t, const uint8_t *p, gguf_value *v) {
    v->type = t;
    uint64_t u = rd_le(p, gguf_vtype_size(t));
    switch (t) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: v->u = u; break;
    case GGUF_I8: v->i = (int8_t)u; break;
    case GGUF_I16: v->i = (int16_t)u; break;
    case GGUF_I32: v->i = (int32_t)u; break;
    case GGUF_I64: v->i = (int64_t)u; break;
    case GGUF_F32: { uint32_t b = (uint32_t)u; float f; memcpy(&f, &b, 4); v->f = f; break; }
    case GGUF_F64: { double d; memcpy(&d, &u, 8); v->f = d; break; }
    case GGUF_BOOL: v->b = u != 0; break;
    default: break;
    }
}

static void value_free(gguf_value *v) {
    if (v->type != GGUF_ARR) return;
    free(v->arr.strs);
    if (v->arr.items) {
        for (uint64_t i = 0; i < v->arr.n; i++) value_free(&v->arr.items[i]);
        free(v->arr.items);
    }
}

static mf_status rd_value(cursor *c, gguf_vtype t, gguf_value *v, int depth);

/* The array header (element type, count) and elements, into v. On failure
 * v->arr.n counts the elements that need freeing. */
static mf_status rd_array(cursor *c, gguf_value *v, int depth) {
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return fail(c, MF_ERR_FORMAT, "arrays nested more than %d deep", GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    mf_status s = rd_u32(c, &et, "array element type");
    if (!s) s = rd_u64(c, &n, "array length");
    if (s) return s;
    if (et >= GGUF_VTYPE_COUNT)
        return fail(c, MF_ERR_FORMAT, "unknown array element type %" PRIu32 " at offset 0x%zx", et, c->pos - 12);
    v->arr.elem = (gguf_vtype)et;
    size_t sz = gguf_vtype_size((gguf_vtype)et);
    if (sz) {
        if (n > remaining(c) / sz)
            return fail(c, MF_ERR_FORMAT, "array of %" PRIu64 " %s elements (%zu bytes each) runs past the end of the file (%zu bytes left)",
                        n, gguf_vtype_name((gguf_vtype)et), sz, remaining(c));
        v->arr.raw = c->p + c->pos;
        v->arr.n = n;
        c->pos += (size_t)n * sz;
        return MF_OK;
    }
    /* a string element takes at least its 8-byte length, an array element at
     * least its 12-byte header: a count that cannot fit is refused before any
     * element is read */
    size_t min_each = et == GGUF_STR ? 8 : 12;
    if (n > remaining(c) / min_each)
        return fail(c, MF_ERR_FORMAT, "array of %" PRIu64 " %s elements cannot fit in the %zu bytes left in the file",
                    n, et == GGUF_STR ? "string" : "array", remaining(c));
    uint64_t cap = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (et == GGUF_STR) {
            if (!grow((void **)&v->arr.strs, &cap, i, n, sizeof *v->arr.strs))
                return fail(c, MF_ERR_NOMEM, "out of memory for an array of %" PRIu64 " strings", n);
            if ((s = rd_str(c, &v->arr.strs[i], "string"))) return s;
            v->arr.n = i + 1;
        } else {
            if (!grow((void **)&v->arr.items, &cap, i, n, sizeof *v->arr.items))
                return fail(c, MF_ERR_NOMEM, "out of memory for an array of %" PRIu64 " arrays", n);
            v->arr.n = i + 1; /* counted before reading: a half-read element may own memory */
            if ((s = rd_value(c, GGUF_ARR, &v->arr.items[i], depth + 1))) return s;
        }
    }
    return MF_OK;
}

static mf_status rd_value(cursor *c, gguf_vtype t, gguf_value *v, int depth) {
    memset(v, 0, sizeof *v);
    v->type = t;
    if (t == GGUF_STR) return rd_str(c, &v->s, "string");
    if (t == GGUF_ARR) return rd_array(c, v, depth);
    size_t sz = gguf_vtype_size(t);
    if (!sz) return fail(c, MF_ERR_FORMAT, "unknown value type %u", (unsigned)t);
    mf_status s = need(c, sz, gguf_vtype_name(t));
    if (s) return s;
    scalar_from_raw(t, c->p + c->pos, v);
    c->pos += sz;
    return MF_OK;
}

/* ---- the file ---- */

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->kv) {
        for (uint64_t i = 0; i < f->n_kv; i++) {
            free(f->kv[i].key);
            value_free(&f->kv[i].v);
        }
        free(f->kv);
    }
    if (f->tensors) {
        for (uint64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
        free(f->tensors);
    }
    mf_mapfile_close(&f->map);
    free((void *)f->path);
    free(f);
}

static char *dup_str(gguf_str s) {
    char *r = malloc((size_t)s.len + 1);
    if (!r) return NULL;
    memcpy(r, s.ptr, (size_t)s.len);
    r[s.len] = 0;
    return r;
}

static int cmp_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

static int cmp_key(const void *a, const void *b) {
    return strcmp((*(const gguf_kv *const *)a)->key, (*(const gguf_kv *const *)b)->key);
}

static mf_status parse_header(cursor *c, gguf_file *f) {
    snprintf(c->where, sizeof c->where, "header");
    if (c->size < 4)
        return mf_err(MF_ERR_FORMAT, "%s: not a GGUF file (%zu bytes, too short for the magic)", c->path, c->size);
    const uint8_t *m = c->p;
    if (memcmp(m, "GGUF", 4) != 0) {
        if (!memcmp(m, "FUGG", 4))
            return mf_err(MF_ERR_UNSUPPORTED, "%s: byte-swapped magic \"FUGG\": big-endian GGUF files are not supported", c->path);
        if (!memcmp(m, "lmgg", 4) || !memcmp(m, "fmgg", 4) || !memcmp(m, "tjgg", 4))
            return mf_err(MF_ERR_UNSUPPORTED, "%s: legacy GGML/GGJT file (bad magic for GGUF): convert it to GGUF first", c->path);
        return mf_err(MF_ERR_FORMAT, "%s: not a GGUF file (bad magic %02x %02x %02x %02x, expected \"GGUF\")", c->path,
                      m[0], m[1], m[2], m[3]);
    }
    c->pos = 4;
    mf_status s = rd_u32(c, &f->version, "version");
    if (s) return s;
    if (f->version == 1)
        return mf_err(MF_ERR_UNSUPPORTED, "%s: GGUF version 1 is not supported (obsolete since 2023); re-convert the model to GGUF v3", c->path);
    if (f->version != 2 && f->version != 3) {
        /* gguf-py writes big-endian files with a little-endian magic, so the
         * version is where byte order shows */
        if ((f->version & 0xffff) == 0 && (f->version >> 16) != 0)
            return mf_err(MF_ERR_UNSUPPORTED, "%s: GGUF version 0x%08" PRIx32 " looks byte-swapped: big-endian GGUF files are not supported",
                          c->path, f->version);
        return mf_err(MF_ERR_UNSUPPORTED, "%s: GGUF version %" PRIu32 " is not supported (expected 2 or 3)", c->path, f->version);
    }
    if ((s = rd_u64(c, &f->n_tensors, "tensor count"))) return s;
    if ((s = rd_u64(c, &f->n_kv, "metadata count"))) return s;
    /* smallest possible entries: a kv is key length + 1 key byte + type + a u8
     * (14 bytes); a tensor info is name length + 1 byte + n_dims + one dim +
     * type + offset (33 bytes) */
    if (f->n_kv > remaining(c) / 14)
        return mf_err(MF_ERR_FORMAT, "%s: metadata count %" PRIu64 " cannot fit in a file of %zu bytes", c->path, f->n_kv, c->size);
    if (f->n_tensors > remaining(c) / 33)
        return mf_err(MF_ERR_FORMAT, "%s: tensor count %" PRIu64 " cannot fit in a file of %zu bytes", c->path, f->n_tensors, c->size);
    return MF_OK;
}

static mf_status check_duplicate_keys(cursor *c, gguf_file *f) {
    if (f->n_kv < 2) return MF_OK;
    const gguf_kv **sorted = malloc((size_t)f->n_kv * sizeof *sorted);
    if (!sorted) return mf_err(MF_ERR_NOMEM, "%s: out of memory", c->path);
    for (uint64_t i = 0; i < f->n_kv; i++) sorted[i] = &f->kv[i];
    qsort(sorted, (size_t)f->n_kv, sizeof *sorted, cmp_key);
    mf_status s = MF_OK;
    for (uint64_t i = 1; i < f->n_kv && !s; i++)
        if (strcmp(sorted[i - 1]->key, sorted[i]->key) == 0) {
            set_where(c, "key", sorted[i]->key, strlen(sorted[i]->key));
            s = fail(c, MF_ERR_FORMAT, "duplicate metadata key");
        }
    free(sorted);
    return s;
}

static mf_status parse_kv(cursor *c, gguf_file *f) {
    uint64_t n = f->n_kv, cap = 0;
    f->n_kv = 0; /* counts the entries that need freeing */
    for (uint64_t i = 0; i < n; i++) {
        snprintf(c->where, sizeof c->where, "metadata entry %" PRIu64, i);
        if (!grow((void **)&f->kv, &cap, i, n, sizeof *f->kv))
            return fail(c, MF_ERR_NOMEM, "out of memory for %" PRIu64 " metadata entries", n);
        gguf_kv *kv = &f->kv[i];
        gguf_str key;
        uint32_t t;
        mf_status s = rd_str(c, &key, "key");
        if (s) return s;
        if (key.len == 0) return fail(c, MF_ERR_FORMAT, "empty key");
        set_where(c, "key", key.ptr, key.len);
        if (key.len > GGUF_MAX_KEY_LEN)
            return fail(c, MF_ERR_FORMAT, "key of %" PRIu64 " bytes is longer than %d", key.len, GGUF_MAX_KEY_LEN);
        if (memchr(key.ptr, 0, (size_t)key.len)) return fail(c, MF_ERR_FORMAT, "key contains a NUL byte");
        kv->key = dup_str(key);
        f->n_kv = i + 1;
        if (!kv->key) return fail(c, MF_ERR_NOMEM, "out of memory");
        if ((s = rd_u32(c, &t, "value type"))) return s;
        if (t >= GGUF_VTYPE_COUNT)
            return fail(c, MF_ERR_FORMAT, "unknown value type %" PRIu32 " at offset 0x%zx", t, c->pos - 4);
        if ((s = rd_value(c, (gguf_vtype)t, &kv->v, 0))) return s;
    }
    mf_status s = check_duplicate_keys(c, f);
    if (s) return s;
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_value *al = gguf_get(f, "general.alignment");
    if (al) {
        snprintf(c->where, sizeof c->where, "key 'general.alignment'");
        if (al->type != GGUF_U32)
            return fail(c, MF_ERR_FORMAT, "alignment has type %s, expected u32", gguf_vtype_name(al->type));
        if (al->u == 0 || (al->u & (al->u - 1)) != 0)
            return fail(c, MF_ERR_FORMAT, "alignment %" PRIu64 " is not a power of two", al->u);
        f->alignment = al->u;
    }
    return MF_OK;
}

static mf_status parse_tensor(cursor *c, uint64_t i, gguf_tensor *t) {
    snprintf(c->where, sizeof c->where, "tensor %" PRIu64, i);
    gguf_str name;
    mf_status s = rd_str(c, &name, "name");
    if (s) return s;
    if (name.len == 0) return fail(c, MF_ERR_FORMAT, "empty tensor name");
    set_where(c, "tensor", name.ptr, name.len);
    if (name.len > GGUF_MAX_NAME_LEN)
        return fail(c, MF_ERR_FORMAT, "name of %" PRIu64 " bytes is longer than %d", name.len, GGUF_MAX_NAME_LEN);
    if (memchr(name.ptr, 0, (size_t)name.len)) return fail(c, MF_ERR_FORMAT, "name contains a NUL byte");
    if (!(t->name = dup_str(name))) return fail(c, MF_ERR_NOMEM, "out of memory");

    if ((s = rd_u32(c, &t->n_dims, "dimension count"))) return s;
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
        return fail(c, MF_ERR_FORMAT, "%" PRIu32 " dimensions (1 to %d allowed)", t->n_dims, GGUF_MAX_DIMS);
    for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if ((s = rd_u64(c, &ne, "dimension"))) return s;
        if (ne == 0) return fail(c, MF_ERR_FORMAT, "dimension %" PRIu32 " is 0 (empty tensors are not allowed)", d);
        if (ne > (uint64_t)INT64_MAX)
            return fail(c, MF_ERR_FORMAT, "dimension %" PRIu32 " = %" PRIu64 " is out of range (negative as a signed value)", d, ne);
        t->ne[d] = (int64_t)ne;
    }
    uint32_t type;
    if ((s = rd_u32(c, &type, "tensor type"))) return s;
    const mf_type_geom *g = mf_type_geom_get((int)type);
    if (type >= MF_TYPE_COUNT || !g) return fail(c, MF_ERR_FORMAT, "unknown tensor type id %" PRIu32, type);
    t->type = (mf_type)type;
    if ((s = rd_u64(c, &t->offset, "data offset"))) return s;

    int64_t nel = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++)
        if (__builtin_mul_overflow(nel, t->ne[d], &nel))
            return fail(c, MF_ERR_FORMAT, "element count overflows (shape %" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64 ")",
                        t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    t->n_elements = nel;
    if (t->ne[0] % g->blck != 0)
        return fail(c, MF_ERR_FORMAT, "row length %" PRId64 " is not a multiple of the %s block size %d",
                    t->ne[0], g->name, (int)g->blck);
    uint64_t nb;
    if (__builtin_mul_overflow((uint64_t)(nel / g->blck), (uint64_t)g->size, &nb) || nb > SIZE_MAX)
        return fail(c, MF_ERR_FORMAT, "byte size overflows (%" PRId64 " elements of %s)", nel, g->name);
    t->nbytes = (size_t)nb;
    return MF_OK;
}

static mf_status parse_tensors(cursor *c, gguf_file *f) {
    uint64_t n = f->n_tensors, cap = 0;
    f->n_tensors = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (!grow((void **)&f->tensors, &cap, i, n, sizeof *f->tensors))
            return mf_err(MF_ERR_NOMEM, "%s: out of memory for %" PRIu64 " tensors", c->path, n);
        f->n_tensors = i + 1;
        mf_status s = parse_tensor(c, i, &f->tensors[i]);
        if (s) return s;
    }
    return MF_OK;
}

/* Alignment the element type needs in memory so that kernels can read it
 * through typed pointers: the largest power of two dividing the block size,
 * at most 8 (f32 -> 4, f16 -> 2, q8_0's 34-byte blocks -> 2, q4_K -> 8). */
static uint64_t type_align(mf_type type) {
    uint64_t sz = (uint64_t)mf_type_geom_get((int)type)->size;
    uint64_t a = sz & (~sz + 1);
    return a > 8 ? 8 : a;
}

static mf_status place_tensors(cursor *c, gguf_file *f) {
    /* data starts at the next multiple of the alignment after the tensor infos */
    uint64_t a = f->alignment;
    uint64_t off = ((uint64_t)c->pos + a - 1) / a * a;
    if (f->n_tensors > 0 && off > c->size) {
        c->where[0] = 0;
        return fail(c, MF_ERR_FORMAT, "file truncated: tensor data would start at offset 0x%" PRIx64 ", past the end of the file (size 0x%zx)",
                    off, c->size);
    }
    f->data_offset = off;
    uint64_t avail = off <= c->size ? c->size - off : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        set_where(c, "tensor", t->name, strlen(t->name));
        if (t->offset % a != 0)
            return fail(c, MF_ERR_FORMAT, "data offset 0x%" PRIx64 " is misaligned: not a multiple of the file's alignment %" PRIu64,
                        t->offset, a);
        uint64_t ta = type_align(t->type);
        if ((off + t->offset) % ta != 0) /* wraps only for offsets refused just below; the remainder is still right */
            return fail(c, MF_ERR_FORMAT, "data at file offset 0x%" PRIx64 " is misaligned for %s (needs a multiple of %" PRIu64 ")",
                        off + t->offset, mf_type_name(t->type), ta);
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return fail(c, MF_ERR_FORMAT, "data offset 0x%" PRIx64 " + %zu bytes runs past the end of the file (data section: 0x%" PRIx64 " bytes at 0x%" PRIx64 ", file size 0x%zx)",
                        t->offset, t->nbytes, avail, off, c->size);
        t->data = c->p + off + t->offset;
    }
    if (f->n_tensors < 2) return MF_OK;
    gguf_tensor **v = malloc((size_t)f->n_tensors * sizeof *v);
    if (!v) return mf_err(MF_ERR_NOMEM, "%s: out of memory", c->path);
    for (uint64_t i = 0; i < f->n_tensors; i++) v[i] = &f->tensors[i];
    mf_status s = MF_OK;
    qsort(v, (size_t)f->n_tensors, sizeof *v, cmp_name);
    for (uint64_t i = 1; i < f->n_tensors && !s; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0) {
            set_where(c, "tensor", v[i]->name, strlen(v[i]->name));
            s = fail(c, MF_ERR_FORMAT, "duplicate tensor name");
        }
    qsort(v, (size_t)f->n_tensors, sizeof *v, cmp_offset);
    for (uint64_t i = 1; i < f->n_tensors && !s; i++)
        if (v[i - 1]->offset + v[i - 1]->nbytes > v[i]->offset) {
            char other[NAME_SHOWN * 4 + 8];
            show_name(other, sizeof other, v[i - 1]->name, strlen(v[i - 1]->name));
            set_where(c, "tensor", v[i]->name, strlen(v[i]->name));
            s = fail(c, MF_ERR_FORMAT, "data at offset 0x%" PRIx64 " overlaps tensor '%s' (0x%" PRIx64 " + %zu bytes)",
                     off + v[i]->offset, other, off + v[i - 1]->offset, v[i - 1]->nbytes);
        }
    free(v);
    return s;
}

mf_status gguf_parse(const uint8_t *data, size_t size, const char *name, gguf_file **out) {
    *out = NULL;
    if (!data && size) return mf_err(MF_ERR_INVALID_ARG, "gguf_parse: NULL buffer");
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) return mf_err(MF_ERR_NOMEM, "out of memory");
    f->path = strdup(name ? name : "<buffer>");
    if (!f->path) {
        free(f);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    static const uint8_t empty[8];
    f->base = data ? data : empty;
    f->size = size;
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    cursor c = {f->base, 0, size, f->path, ""};
    mf_status s = parse_header(&c, f);
    if (!s) s = parse_kv(&c, f);
    if (!s) s = parse_tensors(&c, f);
    if (!s) s = place_tensors(&c, f);
    if (s) {
        gguf_close(f);
        return s;
    }
    *out = f;
    return MF_OK;
}

mf_status gguf_open(const char *path, gguf_file **out) { return gguf_open_ex(path, false, out); }

mf_status gguf_open_ex(const char *path, bool read_copy, gguf_file **out) {
    *out = NULL;
    mf_mapfile m;
    mf_status s = read_copy ? mf_mapfile_read(path, &m) : mf_mapfile_open(path, &m);
    if (s) return s;
    gguf_file *f;
    s = gguf_parse(m.data, m.size, path, &f);
    if (s) {
        mf_mapfile_close(&m);
        return s;
    }
    f->map = m;
    *out = f;
    return MF_OK;
}

mf_status gguf_open_map(mf_mapfile m, const char *name, gguf_file **out) {
    *out = NULL;
    gguf_file *f;
    mf_status s = gguf_parse(m.data, m.size, name, &f);
    if (s) {
        mf_mapfile_close(&m);
        return s;
    }
    f->map = m;
    *out = f;
    return MF_OK;
}

int64_t gguf_find_key(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key, key) == 0) return (int64_t)i;
    return -1;
}

const gguf_value *gguf_get(const gguf_file *f, const char *key) {
    int64_t i = gguf_find_key(f, key);
    return i < 0 ? NULL : &f->kv[i].v;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

/* ---- typed getters ---- */

static mf_status get_int(const gguf_file *f, const char *key, bool required, int64_t lo, int64_t hi, int64_t *out, bool *found) {
    *found = false;
    const gguf_value *v = gguf_get(f, key);
    if (!v) return required ? mf_err(MF_ERR_FORMAT, "%s: required key '%s' is missing", f->path, key) : MF_OK;
    int64_t x;
    switch (v->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64:
        if (v->u > (uint64_t)INT64_MAX)
            return mf_err(MF_ERR_FORMAT, "%s: key '%s': value %" PRIu64 " is out of range", f->path, key, v->u);
        x = (int64_t)v->u;
        break;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: x = v->i; break;
    default:
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' has type %s, expected an integer", f->path, key, gguf_vtype_name(v->type));
    }
    if (x < lo || x > hi)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s': value %" PRId64 " is out of range [%" PRId64 ", %" PRId64 "]", f->path, key, x, lo, hi);
    *out = x;
    *found = true;
    return MF_OK;
}

mf_status gguf_get_u32(const gguf_file *f, const char *key, bool required, uint32_t *out) {
    int64_t x;
    bool found;
    mf_status s = get_int(f, key, required, 0, UINT32_MAX, &x, &found);
    if (!s && found) *out = (uint32_t)x;
    return s;
}

mf_status gguf_get_i32(const gguf_file *f, const char *key, bool required, int32_t *out) {
    int64_t x;
    bool found;
    mf_status s = get_int(f, key, required, INT32_MIN, INT32_MAX, &x, &found);
    if (!s && found) *out = (int32_t)x;
    return s;
}

mf_status gguf_get_f32(const gguf_file *f, const char *key, bool required, float *out) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return required ? mf_err(MF_ERR_FORMAT, "%s: required key '%s' is missing", f->path, key) : MF_OK;
    if (v->type == GGUF_F32 || v->type == GGUF_F64) *out = (float)v->f;
    else if (v->type == GGUF_U8 || v->type == GGUF_U16 || v->type == GGUF_U32 || v->type == GGUF_U64) *out = (float)v->u;
    else if (gguf_vtype_is_int(v->type)) *out = (float)v->i;
    else return mf_err(MF_ERR_FORMAT, "%s: key '%s' has type %s, expected a number", f->path, key, gguf_vtype_name(v->type));
    return MF_OK;
}

mf_status gguf_get_bool(const gguf_file *f, const char *key, bool required, bool *out) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return required ? mf_err(MF_ERR_FORMAT, "%s: required key '%s' is missing", f->path, key) : MF_OK;
    if (v->type != GGUF_BOOL)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' has type %s, expected bool", f->path, key, gguf_vtype_name(v->type));
    *out = v->b;
    return MF_OK;
}

mf_status gguf_get_str(const gguf_file *f, const char *key, bool required, char *buf, size_t cap) {
    const gguf_value *v = gguf_get(f, key);
    if (!v) return required ? mf_err(MF_ERR_FORMAT, "%s: required key '%s' is missing", f->path, key) : MF_OK;
    if (v->type != GGUF_STR)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' has type %s, expected string", f->path, key, gguf_vtype_name(v->type));
    if (cap == 0) return MF_OK;
    size_t n = v->s.len < cap - 1 ? (size_t)v->s.len : cap - 1;
    memcpy(buf, v->s.ptr, n);
    buf[n] = 0;
    return MF_OK;
}

static bool arr_elem(const gguf_value *v, uint64_t i, gguf_value *e) {
    size_t sz = gguf_vtype_size(v->arr.elem);
    if (v->type != GGUF_ARR || !sz || i >= v->arr.n) return false;
    scalar_from_raw(v->arr.elem, v->arr.raw + i * sz, e);
    return true;
}

int64_t gguf_arr_int(const gguf_value *v, uint64_t i) {
    gguf_value e;
    if (!arr_elem(v, i, &e)) return 0;
    switch (e.type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: return (int64_t)e.u;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: return e.i;
    case GGUF_F32: case GGUF_F64: return e.f >= -9.2e18 && e.f <= 9.2e18 ? (int64_t)e.f : 0;
    case GGUF_BOOL: return e.b;
    default: return 0;
    }
}

double gguf_arr_float(const gguf_value *v, uint64_t i) {
    gguf_value e;
    if (!arr_elem(v, i, &e)) return 0;
    switch (e.type) {
    case GGUF_F32: case GGUF_F64: return e.f;
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: return (double)e.u;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: return (double)e.i;
    case GGUF_BOOL: return e.b;
    default: return 0;
    }
}
