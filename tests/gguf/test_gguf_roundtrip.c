/* test_gguf_roundtrip.c - the GGUF writer: read a real file, write it back,
 * re-read and compare every key, value and tensor byte; the output must be
 * byte-identical to the input when keys and tensors are copied in order. Also
 * exercises every value type, nested arrays, key replacement and removal,
 * streamed tensors, a non-default alignment, and the writer's refusals. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "testutil.h"

/* A fresh temporary path (the file is created empty by mkstemp; the writer
 * replaces it). */
static char *temp_path(void) {
    char *p = strdup("/tmp/minfer-gguf-test-XXXXXX");
    int fd = mkstemp(p);
    if (fd < 0) {
        free(p);
        return NULL;
    }
    close(fd);
    return p;
}

/* ---- deep comparison of parsed files ---- */

static bool str_eq(gguf_str a, gguf_str b) { return a.len == b.len && !memcmp(a.ptr, b.ptr, (size_t)a.len); }

static bool value_eq(const gguf_value *a, const gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case GGUF_U8: case GGUF_U16: case GGUF_U32: case GGUF_U64: return a->u == b->u;
    case GGUF_I8: case GGUF_I16: case GGUF_I32: case GGUF_I64: return a->i == b->i;
    case GGUF_F32: case GGUF_F64: return !memcmp(&a->f, &b->f, sizeof a->f);
    case GGUF_BOOL: return a->b == b->b;
    case GGUF_STR: return str_eq(a->s, b->s);
    case GGUF_ARR: break;
    default: return false;
    }
    if (a->arr.elem != b->arr.elem || a->arr.n != b->arr.n) return false;
    uint64_t n = a->arr.n;
    size_t sz = gguf_vtype_size(a->arr.elem);
    if (sz) return n == 0 || !memcmp(a->arr.raw, b->arr.raw, (size_t)n * sz);
    for (uint64_t i = 0; i < n; i++) {
        if (a->arr.elem == GGUF_STR ? !str_eq(a->arr.strs[i], b->arr.strs[i]) : !value_eq(&a->arr.items[i], &b->arr.items[i]))
            return false;
    }
    return true;
}

static void compare_files(const gguf_file *a, const gguf_file *b, const char *what) {
    CHECK(a->n_kv == b->n_kv, "%s: %" PRIu64 " keys, expected %" PRIu64, what, b->n_kv, a->n_kv);
    for (uint64_t i = 0; i < a->n_kv && i < b->n_kv; i++) {
        CHECK(!strcmp(a->kv[i].key, b->kv[i].key), "%s: key %" PRIu64 " is '%s', expected '%s'", what, i, b->kv[i].key, a->kv[i].key);
        CHECK(value_eq(&a->kv[i].v, &b->kv[i].v), "%s: value of '%s' differs", what, a->kv[i].key);
    }
    CHECK(a->n_tensors == b->n_tensors, "%s: %" PRIu64 " tensors, expected %" PRIu64, what, b->n_tensors, a->n_tensors);
    for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
        const gguf_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        CHECK(!strcmp(x->name, y->name), "%s: tensor %" PRIu64 " is '%s', expected '%s'", what, i, y->name, x->name);
        CHECK(x->type == y->type && x->n_dims == y->n_dims && !memcmp(x->ne, y->ne, sizeof x->ne) && x->nbytes == y->nbytes,
              "%s: tensor '%s': type or shape differs", what, x->name);
        CHECK(x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes), "%s: tensor '%s': data differs", what, x->name);
    }
}

/* Reads `path`, writes a copy of every key and tensor in order to a temp
 * file, and compares. Returns whether the bytes were identical. */
static bool roundtrip(const char *path, bool require_identical) {
    gguf_file *in = NULL;
    mf_status s = gguf_open(path, &in);
    CHECK(!s, "%s: %s", path, mf_last_error());
    if (s) return false;
    gguf_writer *w;
    s = gguf_writer_new(&w);
    if (!s) s = gguf_writer_copy_kv(w, in, NULL, NULL);
    for (uint64_t i = 0; i < in->n_tensors && !s; i++) s = gguf_writer_copy_tensor(w, &in->tensors[i]);
    CHECK(!s, "%s: copying into the writer: %s", path, mf_last_error());
    char *tmp = temp_path();
    CHECK(tmp != NULL, "cannot create a temporary file");
    bool identical = false;
    if (!s && tmp) {
        uint64_t predicted = gguf_writer_size(w);
        s = gguf_writer_write_file(w, tmp);
        CHECK(!s, "%s: writing %s: %s", path, tmp, mf_last_error());
        gguf_file *out = NULL;
        if (!s) {
            s = gguf_open(tmp, &out);
            CHECK(!s, "%s: re-reading the copy: %s", path, mf_last_error());
        }
        if (out) {
            CHECK(out->size == predicted, "%s: gguf_writer_size said %" PRIu64 ", file has %zu bytes", path, predicted, out->size);
            CHECK(out->version == 3, "%s: copy has version %u", path, out->version);
            compare_files(in, out, path);
            identical = in->size == out->size && !memcmp(in->base, out->base, in->size);
            if (!identical) {
                size_t k = 0, lim = in->size < out->size ? in->size : out->size;
                while (k < lim && in->base[k] == out->base[k]) k++;
                fprintf(stderr, "  %s: copy differs from the input at byte 0x%zx (sizes %zu / %zu)\n", path, k, in->size, out->size);
            }
            if (require_identical) CHECK(identical, "%s: the copy is not byte-identical to the input", path);
            /* the in-memory output is the same bytes */
            uint8_t *mem = NULL;
            size_t mn = 0;
            s = gguf_writer_write_mem(w, &mem, &mn);
            CHECK(!s && mn == out->size && !memcmp(mem, out->base, mn), "%s: write_mem differs from write_file", path);
            free(mem);
            gguf_close(out);
        }
    }
    if (tmp) {
        unlink(tmp);
        free(tmp);
    }
    gguf_writer_free(w);
    gguf_close(in);
    return identical;
}

/* ---- writer features ---- */

static bool keep_llama(const char *key, void *ud) {
    (void)ud;
    return !strncmp(key, "llama.", 6);
}

static void filtered_copy(void) {
    gguf_file *in = NULL;
    if (gguf_open("../shared/models/stories260K.gguf", &in)) return;
    gguf_writer *w;
    gguf_writer_new(&w);
    mf_status s = gguf_writer_copy_kv(w, in, keep_llama, NULL);
    uint64_t want = 0;
    for (uint64_t i = 0; i < in->n_kv; i++) want += keep_llama(in->kv[i].key, NULL);
    CHECK(!s && gguf_writer_n_kv(w) == want && want == 8, "filtered copy: %" PRIu64 " keys, expected %" PRIu64, gguf_writer_n_kv(w), want);
    /* the file type changes, as a quantizer would do it, keeping its place */
    s = gguf_writer_set_u32(w, "llama.block_count", 6);
    CHECK(!s && gguf_writer_n_kv(w) == want, "replacing a key added one");
    uint8_t *buf = NULL;
    size_t n = 0;
    s = gguf_writer_write_mem(w, &buf, &n);
    gguf_file *f = NULL;
    if (!s) s = gguf_parse(buf, n, "filtered", &f);
    CHECK(!s, "filtered copy: %s", mf_last_error());
    if (f) {
        uint32_t bc = 0;
        CHECK(!gguf_get_u32(f, "llama.block_count", true, &bc) && bc == 6, "llama.block_count = %u", bc);
        int64_t pos = 0; /* llama.* keys before it in the input */
        for (int64_t i = 0; i < gguf_find_key(in, "llama.block_count"); i++) pos += keep_llama(in->kv[i].key, NULL);
        CHECK(gguf_find_key(f, "llama.block_count") == pos, "replaced key moved (index %" PRId64 ", expected %" PRId64 ")",
              gguf_find_key(f, "llama.block_count"), pos);
        CHECK(f->n_tensors == 0 && !gguf_get(f, "general.architecture"), "filtered copy has extra content");
    }
    gguf_close(f);
    free(buf);
    gguf_writer_free(w);
    gguf_close(in);
}

/* A streamed tensor: row r of a [16 x 8] f32 matrix holds r*100 + column,
 * written in uneven chunks. */
typedef struct stream_ud {
    int calls;
    int mode; /* 0 = correct, 1 = too few bytes, 2 = too many, 3 = fail */
} stream_ud;

static mf_status stream_rows(void *ud, const gguf_wtensor *t, gguf_sink *out) {
    stream_ud *u = ud;
    u->calls++;
    if (u->mode == 3) return MF_ERR_INTERNAL;
    float row[16];
    for (int64_t r = 0; r < t->ne[1]; r++) {
        for (int c = 0; c < 16; c++) row[c] = (float)(r * 100 + c);
        if (u->mode == 1 && r == t->ne[1] - 1) break;
        mf_status s = gguf_sink_write(out, row, 24);
        if (!s) s = gguf_sink_write(out, (const uint8_t *)row + 24, sizeof row - 24);
        if (s) return s;
    }
    if (u->mode == 2) return gguf_sink_write(out, row, 4);
    return MF_OK;
}

/* The public inspection API's rendering of the values features() wrote. */
static void api_text(const char *path) {
    mf_gguf *g = NULL;
    mf_status s = mf_gguf_open(path, &g);
    CHECK(!s, "mf_gguf_open: %s", mf_last_error());
    if (s) return;
    static const struct { const char *key, *type, *text; int items, bytes; } c[] = {
        {"v.u8", "string", "\"now a string\"", 3, -1},
        {"v.u8", "string", "\"now \"... (12 bytes)", 3, 4},
        {"v.i8", "i8", "-5", 3, -1},
        {"v.u64", "u64", "18446744073709551615", 3, -1},
        {"v.i64", "i64", "-9223372036854775807", 3, -1},
        {"v.f32", "f32", "0.1", 3, -1},
        {"v.f64", "f64", "0.1", 3, -1},
        {"v.bool", "bool", "true", 3, -1},
        {"v.nul", "string", "\"a\\x00b\"", 3, -1},
        {"a.str", "array[string]", "[3 strings: \"a\", \"\", \"h\xc3\xa9llo\\n\"]", 3, -1},
        {"a.str", "array[string]", "[3 strings: \"a\", ...]", 1, -1},
        {"a.str", "array[string]", "[3 strings: ...]", 0, -1},
        {"a.i32", "array[i32]", "[4 i32: -2147483648, -1, 0, 2147483647]", -1, -1},
        {"a.u64", "array[u64]", "[2 u64: 18446744073709551615, 1]", 3, -1},
        {"a.f32", "array[f32]", "[3 f32: 1.5, -0, 1e-30]", 3, -1},
        {"a.bool", "array[bool]", "[3 bool: true, false, true]", 3, -1},
        {"a.empty", "array[f32]", "[0 f32]", 3, -1},
        {"a.nested", "array[array]", "[3 arrays: [2 i32: 1, 2], [0 u8], [1 arrays: [2 strings: \"x\", \"yz\"]]]", 3, -1},
        {"a.nested", "array[array]", "[3 arrays: [2 i32: 1, ...], ...]", 1, -1},
    };
    char buf[256];
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int64_t k = mf_gguf_find_key(g, c[i].key);
        CHECK(k >= 0 && !strcmp(mf_gguf_key(g, k), c[i].key), "find %s", c[i].key);
        if (k < 0) continue;
        int64_t n = mf_gguf_value_text(g, k, c[i].items, c[i].bytes, buf, sizeof buf);
        CHECK(!strcmp(buf, c[i].text) && n == (int64_t)strlen(c[i].text), "%s: rendered %s, expected %s", c[i].key, buf, c[i].text);
        CHECK(!strcmp(mf_gguf_value_type(g, k), c[i].type), "%s: type %s, expected %s", c[i].key, mf_gguf_value_type(g, k), c[i].type);
    }
    /* snprintf semantics: cut to the buffer, full length returned */
    int64_t k = mf_gguf_find_key(g, "a.i32");
    char small[8];
    int64_t n = mf_gguf_value_text(g, k, -1, -1, small, sizeof small);
    CHECK(n == 39 && !strcmp(small, "[4 i32:"), "cut rendering: %" PRId64 " '%s'", n, small);
    CHECK(mf_gguf_value_text(g, k, -1, -1, NULL, 0) == 39, "length query");
    CHECK(mf_gguf_value_text(g, 999, -1, -1, buf, sizeof buf) == -1 && !mf_gguf_key(g, -1) && !mf_gguf_value_type(g, 999),
          "bad indices");
    CHECK(mf_gguf_find_key(g, "absent") == -1, "absent key");
    /* tensors, version, sizes */
    mf_gguf_tensor_info t;
    CHECK(mf_gguf_n_tensors(g) == 3 && mf_gguf_n_kv(g) == 28 && mf_gguf_version(g) == 3 && mf_gguf_alignment(g) == 64, "counts");
    CHECK(!mf_gguf_tensor(g, 1, &t) && !strcmp(t.name, "streamed") && !strcmp(t.type, "f32") && t.n_dims == 2 && t.ne[0] == 16 &&
              t.ne[1] == 8 && t.ne[2] == 1 && t.n_elements == 128 && t.nbytes == 512 && t.offset % 64 == 0 &&
              t.offset >= mf_gguf_data_offset(g) && t.offset + t.nbytes <= mf_gguf_file_size(g),
          "tensor info");
    CHECK(!mf_gguf_tensor(g, 2, &t) && !strcmp(t.type, "q8_0") && t.type_id == 8 && t.nbytes == 68, "q8 tensor info");
    CHECK(mf_gguf_tensor(g, 3, &t) == MF_ERR_INVALID_ARG && mf_gguf_tensor(g, -1, &t) == MF_ERR_INVALID_ARG, "tensor index");
    mf_gguf_close(g);
    CHECK(mf_gguf_open("../shared/models/tinyllamas-stories-260k-f32-header.gguf", &g) == MF_ERR_UNSUPPORTED && !g &&
              strstr(mf_last_error(), "version 1"),
          "mf_gguf_open on v1: %s", mf_last_error());
}

static void features(void) {
    gguf_writer *w;
    CHECK(!gguf_writer_new(&w), "new");
    static const char *strs[] = {"a", "", "héllo\n"};
    static const uint8_t u8s[] = {0, 255};
    static const int8_t i8s[] = {-128, 127};
    static const uint16_t u16s[] = {65535};
    static const int16_t i16s[] = {-32768};
    static const uint32_t u32s[] = {4000000000u};
    static const int32_t i32s[] = {INT32_MIN, -1, 0, INT32_MAX};
    static const uint64_t u64s[] = {UINT64_MAX, 1};
    static const int64_t i64s[] = {INT64_MIN};
    static const float f32s[] = {1.5f, -0.0f, 1e-30f};
    static const double f64s[] = {1e300, -2.5};
    static const bool bools[] = {true, false, true};
    mf_status s = MF_OK;
    s |= gguf_writer_set_str(w, "general.architecture", "test");
    s |= gguf_writer_set_u8(w, "v.u8", 250);
    s |= gguf_writer_set_i8(w, "v.i8", -5);
    s |= gguf_writer_set_u16(w, "v.u16", 65000);
    s |= gguf_writer_set_i16(w, "v.i16", -32000);
    s |= gguf_writer_set_u32(w, "v.u32", 4000000000u);
    s |= gguf_writer_set_i32(w, "v.i32", -2000000000);
    s |= gguf_writer_set_u64(w, "v.u64", UINT64_MAX);
    s |= gguf_writer_set_i64(w, "v.i64", INT64_MIN + 1);
    s |= gguf_writer_set_f32(w, "v.f32", 0.1f);
    s |= gguf_writer_set_f64(w, "v.f64", 0.1);
    s |= gguf_writer_set_bool(w, "v.bool", true);
    s |= gguf_writer_set_strn(w, "v.nul", "a\0b", 3);
    s |= gguf_writer_set_arr_str(w, "a.str", strs, 3);
    s |= gguf_writer_set_arr(w, "a.u8", GGUF_U8, u8s, 2);
    s |= gguf_writer_set_arr(w, "a.i8", GGUF_I8, i8s, 2);
    s |= gguf_writer_set_arr(w, "a.u16", GGUF_U16, u16s, 1);
    s |= gguf_writer_set_arr(w, "a.i16", GGUF_I16, i16s, 1);
    s |= gguf_writer_set_arr(w, "a.u32", GGUF_U32, u32s, 1);
    s |= gguf_writer_set_arr(w, "a.i32", GGUF_I32, i32s, 4);
    s |= gguf_writer_set_arr(w, "a.u64", GGUF_U64, u64s, 2);
    s |= gguf_writer_set_arr(w, "a.i64", GGUF_I64, i64s, 1);
    s |= gguf_writer_set_arr(w, "a.f32", GGUF_F32, f32s, 3);
    s |= gguf_writer_set_arr(w, "a.f64", GGUF_F64, f64s, 2);
    s |= gguf_writer_set_arr(w, "a.bool", GGUF_BOOL, bools, 3);
    s |= gguf_writer_set_arr(w, "a.empty", GGUF_F32, NULL, 0);
    /* [[1, 2], [], [["x", "yz"]]] */
    uint8_t ints[8] = {1, 0, 0, 0, 2, 0, 0, 0};
    gguf_str xs[2] = {{"x", 1}, {"yz", 2}};
    gguf_value deepest = {.type = GGUF_ARR, .arr = {.elem = GGUF_STR, .n = 2, .strs = xs}};
    gguf_value items[3] = {
        {.type = GGUF_ARR, .arr = {.elem = GGUF_I32, .n = 2, .raw = ints}},
        {.type = GGUF_ARR, .arr = {.elem = GGUF_U8, .n = 0}},
        {.type = GGUF_ARR, .arr = {.elem = GGUF_ARR, .n = 1, .items = &deepest}},
    };
    gguf_value nested = {.type = GGUF_ARR, .arr = {.elem = GGUF_ARR, .n = 3, .items = items}};
    s |= gguf_writer_set_value(w, "a.nested", &nested);
    /* replace keeps the position; remove drops it */
    s |= gguf_writer_set_str(w, "v.u8", "now a string");
    s |= gguf_writer_set_u32(w, "to.remove", 1);
    CHECK(gguf_writer_remove(w, "to.remove") && !gguf_writer_remove(w, "to.remove"), "remove");
    s |= gguf_writer_set_u32(w, "general.alignment", 64);
    CHECK(!s, "setting values: %s", mf_last_error());

    /* tensors: in memory, streamed, and a quantized one */
    static float small[3] = {1, 2, 3};
    static uint8_t q8[2 * 34];
    for (size_t i = 0; i < sizeof q8; i++) q8[i] = (uint8_t)i;
    stream_ud su = {0, 0};
    const int64_t ne_small[] = {3}, ne_stream[] = {16, 8}, ne_q8[] = {64, 1};
    s = gguf_writer_add_tensor(w, "small", MF_TYPE_F32, 1, ne_small, small);
    if (!s) s = gguf_writer_add_tensor_fn(w, "streamed", MF_TYPE_F32, 2, ne_stream, stream_rows, &su);
    if (!s) s = gguf_writer_add_tensor(w, "q8", MF_TYPE_Q8_0, 2, ne_q8, q8);
    CHECK(!s, "adding tensors: %s", mf_last_error());

    char *tmp = temp_path();
    if (!tmp) return;
    s = gguf_writer_write_file(w, tmp);
    CHECK(!s && su.calls == 1, "write: %s (callback called %d times)", mf_last_error(), su.calls);
    gguf_file *f = NULL;
    if (!s) s = gguf_open(tmp, &f);
    CHECK(!s, "re-reading: %s", mf_last_error());
    if (f) {
        CHECK(f->alignment == 64 && f->data_offset % 64 == 0 && f->size % 64 == 0, "alignment 64 not honoured");
        CHECK(f->size == gguf_writer_size(w), "size %zu vs predicted %" PRIu64, f->size, gguf_writer_size(w));
        CHECK(f->n_kv == 28 && !strcmp(f->kv[1].key, "v.u8") && f->kv[1].v.type == GGUF_STR, "key order after replace/remove");
        const gguf_value *v;
        uint32_t u32 = 0;
        int32_t i32 = 0;
        float f32 = 0;
        bool b = false;
        char buf[32];
        CHECK(!gguf_get_u32(f, "v.u32", true, &u32) && u32 == 4000000000u, "v.u32");
        CHECK(!gguf_get_i32(f, "v.i32", true, &i32) && i32 == -2000000000, "v.i32");
        CHECK(!gguf_get_f32(f, "v.f32", true, &f32) && f32 == 0.1f, "v.f32");
        CHECK(!gguf_get_bool(f, "v.bool", true, &b) && b, "v.bool");
        CHECK(!gguf_get_str(f, "v.u8", true, buf, sizeof buf) && !strcmp(buf, "now a string"), "v.u8 replaced");
        CHECK((v = gguf_get(f, "v.i8")) && v->type == GGUF_I8 && v->i == -5, "v.i8");
        CHECK((v = gguf_get(f, "v.u16")) && v->type == GGUF_U16 && v->u == 65000, "v.u16");
        CHECK((v = gguf_get(f, "v.i16")) && v->type == GGUF_I16 && v->i == -32000, "v.i16");
        CHECK((v = gguf_get(f, "v.u64")) && v->type == GGUF_U64 && v->u == UINT64_MAX, "v.u64");
        CHECK((v = gguf_get(f, "v.i64")) && v->type == GGUF_I64 && v->i == INT64_MIN + 1, "v.i64");
        CHECK((v = gguf_get(f, "v.f64")) && v->type == GGUF_F64 && v->f == 0.1, "v.f64");
        CHECK((v = gguf_get(f, "v.nul")) && v->type == GGUF_STR && v->s.len == 3 && !memcmp(v->s.ptr, "a\0b", 3), "v.nul");
        CHECK((v = gguf_get(f, "a.str")) && v->arr.elem == GGUF_STR && v->arr.n == 3 && v->arr.strs[1].len == 0 &&
                  v->arr.strs[2].len == 7 && !memcmp(v->arr.strs[2].ptr, "héllo\n", 7), "a.str");
        CHECK((v = gguf_get(f, "a.i32")) && v->arr.n == 4 && gguf_arr_int(v, 0) == INT32_MIN && gguf_arr_int(v, 3) == INT32_MAX, "a.i32");
        CHECK((v = gguf_get(f, "a.u64")) && (uint64_t)gguf_arr_int(v, 0) == UINT64_MAX, "a.u64");
        CHECK((v = gguf_get(f, "a.i8")) && gguf_arr_int(v, 0) == -128, "a.i8");
        CHECK((v = gguf_get(f, "a.i16")) && gguf_arr_int(v, 0) == -32768, "a.i16");
        CHECK((v = gguf_get(f, "a.u32")) && gguf_arr_int(v, 0) == 4000000000ll, "a.u32");
        CHECK((v = gguf_get(f, "a.f32")) && gguf_arr_float(v, 0) == 1.5 && gguf_arr_float(v, 2) == (double)1e-30f, "a.f32");
        CHECK((v = gguf_get(f, "a.f64")) && gguf_arr_float(v, 0) == 1e300, "a.f64");
        CHECK((v = gguf_get(f, "a.bool")) && v->arr.elem == GGUF_BOOL && gguf_arr_int(v, 0) == 1 && gguf_arr_int(v, 1) == 0, "a.bool");
        CHECK((v = gguf_get(f, "a.empty")) && v->arr.elem == GGUF_F32 && v->arr.n == 0, "a.empty");
        CHECK((v = gguf_get(f, "a.nested")) && value_eq(v, &nested), "a.nested differs");
        const gguf_tensor *t = gguf_find_tensor(f, "streamed");
        CHECK(t && t->nbytes == 16 * 8 * 4 && t->offset % 64 == 0, "streamed tensor shape");
        if (t) {
            const float *d = t->data;
            bool ok = true;
            for (int r = 0; r < 8; r++)
                for (int c = 0; c < 16; c++) ok &= d[r * 16 + c] == (float)(r * 100 + c);
            CHECK(ok, "streamed tensor data");
        }
        t = gguf_find_tensor(f, "q8");
        CHECK(t && t->type == MF_TYPE_Q8_0 && t->nbytes == 68 && !memcmp(t->data, q8, 68), "q8 tensor");
        t = gguf_find_tensor(f, "small");
        CHECK(t && t->offset == 0 && !memcmp(t->data, small, 12), "small tensor");
        gguf_close(f);
    }
    api_text(tmp);
    unlink(tmp);

    /* callbacks that write the wrong amount, or fail: no file is left behind */
    static const char *modes[] = {"", "callback wrote", "more bytes than", ""};
    for (int mode = 1; mode <= 3; mode++) {
        su = (stream_ud){0, mode};
        mf_err_clear();
        s = gguf_writer_write_file(w, tmp);
        CHECK(s != MF_OK, "callback mode %d was accepted", mode);
        if (mode != 3) CHECK(strstr(mf_last_error(), modes[mode]) && strstr(mf_last_error(), "streamed"), "mode %d: %s", mode, mf_last_error());
        CHECK(access(tmp, F_OK) != 0, "a failed write left %s behind", tmp);
        uint8_t *mem = (uint8_t *)1;
        size_t mn = 1;
        s = gguf_writer_write_mem(w, &mem, &mn);
        CHECK(s != MF_OK && mem == NULL && mn == 0, "write_mem with callback mode %d", mode);
    }
    gguf_writer_free(w);
    free(tmp);
}

static void refusals(void) {
    gguf_writer *w;
    gguf_writer_new(&w);
    static float d[64];
    const int64_t ne[] = {64, 1}, ne_bad[] = {33}, ne_zero[] = {0}, ne_neg[] = {-1}, ne_huge[] = {INT64_MAX, 2};
    struct { mf_status s; const char *word; } c[] = {
        {gguf_writer_set_u32(w, "", 1), "empty"},
        {gguf_writer_set_u32(w, "general.alignment", 48), "power of two"},
        {gguf_writer_set_u32(w, "general.alignment", 0), "power of two"},
        {gguf_writer_set_i32(w, "general.alignment", 32), "must be a u32"},
        {gguf_writer_set_arr(w, "x", GGUF_STR, d, 1), "numeric"},
        {gguf_writer_set_value(w, "x", &(gguf_value){.type = GGUF_ARR, .arr = {.elem = (gguf_vtype)42}}), "element type"},
        {gguf_writer_add_tensor(w, "t", MF_TYPE_Q8_0, 1, ne_bad, d), "not a multiple"},
        {gguf_writer_add_tensor(w, "t", MF_TYPE_F32, 1, ne_zero, d), "must be >= 1"},
        {gguf_writer_add_tensor(w, "t", MF_TYPE_F32, 1, ne_neg, d), "must be >= 1"},
        {gguf_writer_add_tensor(w, "t", MF_TYPE_F32, 2, ne_huge, d), "overflow"},
        {gguf_writer_add_tensor(w, "t", MF_TYPE_F32, 0, ne, d), "dimensions"},
        {gguf_writer_add_tensor(w, "t", MF_TYPE_F32, 5, ne, d), "dimensions"},
        {gguf_writer_add_tensor(w, "t", (mf_type)4, 1, ne, d), "unknown tensor type"},
        {gguf_writer_add_tensor(w, "", MF_TYPE_F32, 1, ne, d), "empty"},
        {gguf_writer_add_tensor(w, "t", MF_TYPE_F32, 1, ne, NULL), "no data"},
    };
    /* (each call overwrote the previous message; a few are re-checked below) */
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) CHECK(c[i].s != MF_OK, "refusal case %zu (%s) was accepted", i, c[i].word);
    CHECK(gguf_writer_n_kv(w) == 0 && gguf_writer_n_tensors(w) == 0, "refused items were added");
    /* messages, one at a time */
    CHECK(gguf_writer_add_tensor(w, "t", MF_TYPE_Q8_0, 1, ne_bad, d) && strstr(mf_last_error(), "row length 33"), "%s", mf_last_error());
    CHECK(gguf_writer_set_u32(w, "general.alignment", 3) && strstr(mf_last_error(), "alignment 3"), "%s", mf_last_error());
    /* duplicate tensor names are caught when writing */
    CHECK(!gguf_writer_add_tensor(w, "dup", MF_TYPE_F32, 1, ne, d) && !gguf_writer_add_tensor(w, "dup", MF_TYPE_F32, 1, ne, d), "add dup");
    uint8_t *mem = NULL;
    size_t mn = 0;
    CHECK(gguf_writer_write_mem(w, &mem, &mn) != MF_OK && strstr(mf_last_error(), "duplicate tensor name 'dup'"), "%s", mf_last_error());
    free(mem);
    /* an unwritable destination */
    CHECK(gguf_writer_write_file(w, "/nonexistent-dir/x.gguf") == MF_ERR_IO && strstr(mf_last_error(), "/nonexistent-dir/x.gguf"),
          "%s", mf_last_error());
    gguf_writer_free(w);
}

/* The no-mmap load (file read into anonymous memory) gives the same view as
 * the mapping: same keys and tensors, identical bytes; a missing or
 * truncated file fails the same way. */
static void read_copy(void) {
    const char *path = "../shared/models/stories260K-q4_k_m.gguf";
    gguf_file *a = NULL, *b = NULL;
    CHECK(gguf_open_ex(path, false, &a) == MF_OK && a, "mapped open: %s", mf_last_error());
    CHECK(gguf_open_ex(path, true, &b) == MF_OK && b, "read-copy open: %s", mf_last_error());
    if (a && b) {
        CHECK(a->size == b->size && a->n_kv == b->n_kv && a->n_tensors == b->n_tensors, "same shape of file");
        CHECK(!memcmp(a->map.data, b->map.data, a->size), "read copy differs from the mapping");
        CHECK(b->map.map_size % (2u << 20) == 0 && b->map.map_size >= b->size, "copy rounded to 2 MiB");
        for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
            const gguf_tensor *x = &a->tensors[i], *y = &b->tensors[i];
            CHECK(!strcmp(x->name, y->name) && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes),
                  "tensor %s differs", x->name);
            CHECK((const uint8_t *)y->data >= b->map.data && (const uint8_t *)y->data + y->nbytes <= b->map.data + b->size,
                  "tensor %s outside the copy", y->name);
        }
    }
    gguf_close(a);
    gguf_close(b);
    /* truncated: same refusal as the mapped reader */
    size_t n = 0;
    uint8_t *bytes = test_read_file(path, &n);
    if (bytes) {
        char tmp[] = "/tmp/minfer-readcopy-XXXXXX";
        int fd = mkstemp(tmp);
        CHECK(fd >= 0, "mkstemp");
        if (fd >= 0) {
            CHECK(write(fd, bytes, n / 2) == (ssize_t)(n / 2), "write");
            close(fd);
            gguf_file *t = NULL;
            CHECK(gguf_open_ex(tmp, true, &t) != MF_OK && !t, "truncated file accepted by the read-copy load");
            CHECK(strstr(mf_last_error(), "past the end of the file") != NULL, "message: %s", mf_last_error());
            unlink(tmp);
        }
        free(bytes);
    }
    gguf_file *m = NULL;
    CHECK(gguf_open_ex("../shared/models/does-not-exist.gguf", true, &m) == MF_ERR_IO && !m, "missing file");
}

int main(void) {
    /* stories260K.gguf was written by gguf-py, the f16 / q4_k_m variants by
     * llama-quantize (llama.cpp's writer) and llama-2-tiny-random by another
     * converter; all use alignment 32 and pad every tensor, the last one too,
     * which is what this writer does: copying keys and tensors in order must
     * give back the same bytes. */
    static const char *files[] = {
        "../shared/models/stories260K.gguf", "../shared/models/stories260K-f16.gguf",
        "../shared/models/stories260K-q4_k_m.gguf", "../shared/models/llama-2-tiny-random.gguf",
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) roundtrip(files[i], true);
    filtered_copy();
    features();
    refusals();
    read_copy();
    return test_summary("gguf_roundtrip");
}
