/* reader.c - GGUF parser: every count, length, type, dimension and offset is
 * checked against the bytes that remain before it is used or allocated for.
 *
 * Layout (all little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv,
 * n_kv x (string key, u32 type, value), n_tensors x (string name, u32 n_dims,
 * u64 ne[n_dims], u32 type, u64 offset), padding to `general.alignment`, data. */
#include "gguf/gguf.h"
#include "core/error.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAME_LEN 256      /* tensor names (llama.cpp allows 63) */
#define MAX_KEY_LEN 65535
#define MAX_ARRAY_DEPTH 8

typedef struct cursor {
    const uint8_t *p;
    size_t pos, size;
    const char *path;
} cursor;

static size_t remaining(const cursor *c) { return c->size - c->pos; }

static mf_status need(cursor *c, uint64_t n, const char *what) {
    if (n > remaining(c))
        return mf_err(MF_ERR_FORMAT, "%s: truncated file: %s needs %" PRIu64 " bytes at offset 0x%zx, only %zu left (file size %zu)",
                      c->path, what, n, c->pos, remaining(c), c->size);
    return MF_OK;
}

static uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
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
    mf_status s = rd_u64(c, &len, what);
    if (s) return s;
    if (len > remaining(c))
        return mf_err(MF_ERR_FORMAT, "%s: %s: string length %" PRIu64 " at offset 0x%zx exceeds the %zu bytes left in the file",
                      c->path, what, len, c->pos - 8, remaining(c));
    out->ptr = (const char *)c->p + c->pos;
    out->len = len;
    c->pos += len;
    return MF_OK;
}

static int vtype_size(gguf_vtype t) {
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
    uint64_t u = rd_le(p, vtype_size(t));
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

static mf_status rd_value(cursor *c, gguf_vtype t, gguf_value *v, const char *key, int depth) {
    memset(v, 0, sizeof *v);
    v->type = t;
    if (t == GGUF_STR) return rd_str(c, &v->s, key);
    if (t != GGUF_ARR) {
        int sz = vtype_size(t);
        if (!sz) return mf_err(MF_ERR_FORMAT, "%s: key '%s': unknown value type %u", c->path, key, (unsigned)t);
        mf_status s = need(c, (uint64_t)sz, key);
        if (s) return s;
        scalar_from_raw(t, c->p + c->pos, v);
        c->pos += (size_t)sz;
        return MF_OK;
    }
    if (depth >= MAX_ARRAY_DEPTH)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d", c->path, key, MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    mf_status s = rd_u32(c, &et, key);
    if (!s) s = rd_u64(c, &n, key);
    if (s) return s;
    if (et >= GGUF_VTYPE_COUNT)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s': unknown array element type %u", c->path, key, et);
    v->arr.elem = (gguf_vtype)et;
    v->arr.n = 0;
    if (et == GGUF_STR || et == GGUF_ARR) {
        /* each element takes at least 8 bytes (a length or an array header) */
        uint64_t min_each = et == GGUF_STR ? 8 : 12;
        if (n > remaining(c) / min_each)
            return mf_err(MF_ERR_FORMAT, "%s: key '%s': array of %" PRIu64 " %s elements cannot fit in the %zu bytes left",
                          c->path, key, n, gguf_vtype_name((gguf_vtype)et), remaining(c));
        if (et == GGUF_STR) {
            v->arr.strs = calloc(n ? n : 1, sizeof *v->arr.strs);
            if (!v->arr.strs) return mf_err(MF_ERR_NOMEM, "%s: key '%s': out of memory", c->path, key);
            for (uint64_t i = 0; i < n; i++) {
                s = rd_str(c, &v->arr.strs[i], key);
                if (s) return s;
                v->arr.n = i + 1;
            }
        } else {
            v->arr.items = calloc(n ? n : 1, sizeof *v->arr.items);
            if (!v->arr.items) return mf_err(MF_ERR_NOMEM, "%s: key '%s': out of memory", c->path, key);
            for (uint64_t i = 0; i < n; i++) {
                /* an element of an array-of-arrays is an array header (elem type,
                 * count) and its elements, with no type tag of its own */
                s = rd_value(c, GGUF_ARR, &v->arr.items[i], key, depth + 1);
                v->arr.n = i + 1;
                if (s) return s;
            }
        }
        v->arr.n = n;
        return MF_OK;
    }
    int sz = vtype_size((gguf_vtype)et);
    if (n > remaining(c) / (uint64_t)sz)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s': array of %" PRIu64 " %s elements (%d bytes each) exceeds the %zu bytes left",
                      c->path, key, n, gguf_vtype_name((gguf_vtype)et), sz, remaining(c));
    v->arr.raw = c->p + c->pos;
    v->arr.n = n;
    c->pos += (size_t)(n * (uint64_t)sz);
    return MF_OK;
}

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
    char *r = malloc(s.len + 1);
    if (!r) return NULL;
    memcpy(r, s.ptr, s.len);
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
    mf_status s = need(c, 4, "magic");
    if (s) return mf_err(MF_ERR_FORMAT, "%s: not a GGUF file (%zu bytes, too short for the magic)", c->path, c->size);
    if (memcmp(c->p, "GGUF", 4) != 0) {
        if (memcmp(c->p, "FUGG", 4) == 0)
            return mf_err(MF_ERR_UNSUPPORTED, "%s: big-endian GGUF files are not supported", c->path);
        return mf_err(MF_ERR_FORMAT, "%s: not a GGUF file (bad magic %02x %02x %02x %02x, expected \"GGUF\")", c->path,
                      c->p[0], c->p[1], c->p[2], c->p[3]);
    }
    c->pos = 4;
    if ((s = rd_u32(c, &f->version, "version"))) return s;
    if (f->version == 1)
        return mf_err(MF_ERR_UNSUPPORTED, "%s: GGUF version 1 is not supported (obsolete since 2023); re-convert the model to GGUF v3", c->path);
    if (f->version == 0 || f->version > 3) {
        if ((f->version & 0xffff) == 0 && (f->version >> 16) != 0)
            return mf_err(MF_ERR_UNSUPPORTED, "%s: GGUF version 0x%08x looks byte-swapped: big-endian GGUF files are not supported", c->path, f->version);
        return mf_err(MF_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (expected 2 or 3)", c->path, f->version);
    }
    if ((s = rd_u64(c, &f->n_tensors, "tensor count"))) return s;
    if ((s = rd_u64(c, &f->n_kv, "metadata count"))) return s;
    /* every kv takes >= 8 (key len) + 4 (type) + 1 bytes; every tensor info >= 8+4+8+4+8 */
    if (f->n_kv > remaining(c) / 13)
        return mf_err(MF_ERR_FORMAT, "%s: metadata count %" PRIu64 " cannot fit in a file of %zu bytes", c->path, f->n_kv, c->size);
    if (f->n_tensors > remaining(c) / 32)
        return mf_err(MF_ERR_FORMAT, "%s: tensor count %" PRIu64 " cannot fit in a file of %zu bytes", c->path, f->n_tensors, c->size);
    return MF_OK;
}

static mf_status parse_kv(cursor *c, gguf_file *f) {
    uint64_t n = f->n_kv;
    f->kv = calloc(n ? n : 1, sizeof *f->kv);
    if (!f->kv) return mf_err(MF_ERR_NOMEM, "%s: out of memory for %" PRIu64 " metadata entries", c->path, n);
    f->n_kv = 0; /* counts entries that need freeing */
    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < n; i++) {
        gguf_kv *kv = &f->kv[i];
        gguf_str key;
        uint32_t t;
        mf_status s = rd_str(c, &key, "metadata key");
        if (s) return s;
        if (key.len == 0 || key.len > MAX_KEY_LEN)
            return mf_err(MF_ERR_FORMAT, "%s: metadata entry %" PRIu64 ": key length %" PRIu64 " out of range", c->path, i, key.len);
        if (memchr(key.ptr, 0, key.len))
            return mf_err(MF_ERR_FORMAT, "%s: metadata entry %" PRIu64 ": key contains a NUL byte", c->path, i);
        kv->key = dup_str(key);
        f->n_kv = i + 1;
        if (!kv->key) return mf_err(MF_ERR_NOMEM, "%s: out of memory", c->path);
        if ((s = rd_u32(c, &t, kv->key))) return s;
        if (t >= GGUF_VTYPE_COUNT)
            return mf_err(MF_ERR_FORMAT, "%s: key '%s': unknown value type %u", c->path, kv->key, t);
        if ((s = rd_value(c, (gguf_vtype)t, &kv->v, kv->key, 0))) return s;
    }
    /* duplicate keys make lookups ambiguous: refuse */
    if (n > 1) {
        const gguf_kv **sorted = malloc(n * sizeof *sorted);
        if (!sorted) return mf_err(MF_ERR_NOMEM, "%s: out of memory", c->path);
        for (uint64_t i = 0; i < n; i++) sorted[i] = &f->kv[i];
        qsort(sorted, n, sizeof *sorted, cmp_key);
        for (uint64_t i = 1; i < n; i++)
            if (strcmp(sorted[i - 1]->key, sorted[i]->key) == 0) {
                mf_status s = mf_err(MF_ERR_FORMAT, "%s: duplicate metadata key '%s'", c->path, sorted[i]->key);
                free(sorted);
                return s;
            }
        free(sorted);
    }
    const gguf_value *al = gguf_get(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_U32)
            return mf_err(MF_ERR_FORMAT, "%s: general.alignment has type %s, expected u32", c->path, gguf_vtype_name(al->type));
        if (al->u == 0 || (al->u & (al->u - 1)) != 0)
            return mf_err(MF_ERR_FORMAT, "%s: general.alignment = %" PRIu64 " is not a power of two", c->path, al->u);
        f->alignment = al->u;
    }
    return MF_OK;
}

static mf_status parse_tensors(cursor *c, gguf_file *f) {
    uint64_t n = f->n_tensors;
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) return mf_err(MF_ERR_NOMEM, "%s: out of memory for %" PRIu64 " tensors", c->path, n);
    f->n_tensors = 0;
    for (uint64_t i = 0; i < n; i++) {
        gguf_tensor *t = &f->tensors[i];
        gguf_str name;
        mf_status s = rd_str(c, &name, "tensor name");
        if (s) return s;
        if (name.len == 0 || name.len > MAX_NAME_LEN || memchr(name.ptr, 0, name.len))
            return mf_err(MF_ERR_FORMAT, "%s: tensor %" PRIu64 ": invalid name (length %" PRIu64 ")", c->path, i, name.len);
        t->name = dup_str(name);
        f->n_tensors = i + 1;
        if (!t->name) return mf_err(MF_ERR_NOMEM, "%s: out of memory", c->path);
        if ((s = rd_u32(c, &t->n_dims, t->name))) return s;
        if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
            return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': %u dimensions (1..%d allowed)", c->path, t->name, t->n_dims, GGUF_MAX_DIMS);
        for (int d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne;
            if ((s = rd_u64(c, &ne, t->name))) return s;
            if (ne > (uint64_t)INT64_MAX)
                return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': dimension %u = %" PRIu64 " is out of range", c->path, t->name, d, ne);
            t->ne[d] = (int64_t)ne;
        }
        uint32_t type;
        if ((s = rd_u32(c, &type, t->name))) return s;
        const mf_type_geom *g = mf_type_geom_get((int)type);
        if (!g)
            return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': unknown tensor type %u", c->path, t->name, type);
        t->type = (mf_type)type;
        if ((s = rd_u64(c, &t->offset, t->name))) return s;

        /* element count and bytes, overflow-checked */
        int64_t nel = 1;
        for (int d = 0; d < GGUF_MAX_DIMS; d++)
            if (__builtin_mul_overflow(nel, t->ne[d], &nel))
                return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': element count overflows (%" PRId64 " x %" PRId64 " x %" PRId64 " x %" PRId64 ")",
                              c->path, t->name, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
        if (t->ne[0] % g->blck != 0)
            return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': row length %" PRId64 " is not a multiple of the %s block size %d",
                          c->path, t->name, t->ne[0], g->name, g->blck);
        uint64_t nb;
        if (__builtin_mul_overflow((uint64_t)(nel / g->blck), (uint64_t)g->size, &nb) || nb > SIZE_MAX)
            return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': byte size overflows", c->path, t->name);
        t->nbytes = (size_t)nb;
    }
    return MF_OK;
}

static mf_status place_tensors(cursor *c, gguf_file *f) {
    /* data starts at the next multiple of the alignment after the tensor infos */
    uint64_t a = f->alignment;
    uint64_t off = ((uint64_t)c->pos + a - 1) / a * a;
    if (f->n_tensors > 0 && off > c->size)
        return mf_err(MF_ERR_FORMAT, "%s: truncated file: tensor data would start at 0x%" PRIx64 " past the end (size 0x%zx)",
                      c->path, off, c->size);
    f->data_offset = off;
    uint64_t avail = off <= c->size ? c->size - off : 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % a != 0)
            return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': data offset 0x%" PRIx64 " is not aligned to %" PRIu64 " bytes",
                          c->path, t->name, t->offset, a);
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return mf_err(MF_ERR_FORMAT, "%s: tensor '%s': offset 0x%" PRIx64 " + %zu bytes runs past the end of file (data section 0x%" PRIx64 ", file size 0x%zx)",
                          c->path, t->name, f->data_offset + t->offset, t->nbytes, f->data_offset, c->size);
        t->data = c->p + off + t->offset;
    }
    if (f->n_tensors > 1) {
        gguf_tensor **v = malloc(f->n_tensors * sizeof *v);
        if (!v) return mf_err(MF_ERR_NOMEM, "%s: out of memory", c->path);
        for (uint64_t i = 0; i < f->n_tensors; i++) v[i] = &f->tensors[i];
        mf_status s = MF_OK;
        qsort(v, f->n_tensors, sizeof *v, cmp_name);
        for (uint64_t i = 1; i < f->n_tensors && !s; i++)
            if (strcmp(v[i - 1]->name, v[i]->name) == 0)
                s = mf_err(MF_ERR_FORMAT, "%s: duplicate tensor name '%s'", c->path, v[i]->name);
        qsort(v, f->n_tensors, sizeof *v, cmp_offset);
        for (uint64_t i = 1; i < f->n_tensors && !s; i++)
            if (v[i - 1]->offset + v[i - 1]->nbytes > v[i]->offset)
                s = mf_err(MF_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data section", c->path, v[i - 1]->name, v[i]->name);
        free(v);
        if (s) return s;
    }
    return MF_OK;
}

mf_status gguf_parse(const uint8_t *data, size_t size, const char *name, gguf_file **out) {
    *out = NULL;
    gguf_file *f = calloc(1, sizeof *f);
    if (!f) return mf_err(MF_ERR_NOMEM, "out of memory");
    f->path = strdup(name ? name : "<buffer>");
    if (!f->path) {
        free(f);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    f->base = data;
    f->size = size;
    cursor c = {data, 0, size, f->path};
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

mf_status gguf_open(const char *path, gguf_file **out) {
    *out = NULL;
    mf_mapfile m;
    mf_status s = mf_mapfile_open(path, &m);
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

const gguf_value *gguf_get(const gguf_file *f, const char *key) {
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key, key) == 0) return &f->kv[i].v;
    return NULL;
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
        if (v->u > (uint64_t)INT64_MAX) goto range;
        x = (int64_t)v->u;
        break;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: x = v->i; break;
    default:
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' has type %s, expected an integer", f->path, key, gguf_vtype_name(v->type));
    }
    if (x < lo || x > hi) goto range;
    *out = x;
    *found = true;
    return MF_OK;
range:
    return mf_err(MF_ERR_FORMAT, "%s: key '%s' value is out of range", f->path, key);
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

int64_t gguf_arr_int(const gguf_value *v, uint64_t i) {
    gguf_value e;
    scalar_from_raw(v->arr.elem, v->arr.raw + i * (uint64_t)vtype_size(v->arr.elem), &e);
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
    scalar_from_raw(v->arr.elem, v->arr.raw + i * (uint64_t)vtype_size(v->arr.elem), &e);
    switch (e.type) {
    case GGUF_F32: case GGUF_F64: return e.f;
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: return (double)e.u;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: return (double)e.i;
    case GGUF_BOOL: return e.b;
    default: return 0;
    }
}
