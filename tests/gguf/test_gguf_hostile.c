/* test_gguf_hostile.c - the GGUF reader against corrupted files: every variant
 * must be refused with a non-OK status and one line naming the file and what
 * was wrong, without crashing or reading outside the buffer (run under ASan:
 * every variant lives in a malloc'd buffer of exactly its size).
 *
 * Two valid bases are corrupted: ../shared/models/stories260K.gguf and a small
 * file built here with the writer that holds every value type, a string array,
 * a numeric array, a nested array and tensors of several types. Fields are
 * found by their names (a key's or tensor's length-prefixed name is unique in
 * these files), so the mutations need no second parser. */
#include <ctype.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "testutil.h"

/* ---- little-endian patching ---- */

static void put_u32(uint8_t *p, size_t off, uint32_t v) {
    for (int i = 0; i < 4; i++) p[off + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, size_t off, uint64_t v) {
    for (int i = 0; i < 8; i++) p[off + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p, size_t off) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[off + (size_t)i];
    return v;
}

/* ---- a raw byte builder for files the writer would refuse to make ---- */

typedef struct raw {
    uint8_t *p;
    size_t n, cap;
} raw;

static void r_bytes(raw *r, const void *src, size_t n) {
    if (r->n + n > r->cap) {
        r->cap = (r->n + n) * 2 + 64;
        r->p = realloc(r->p, r->cap);
        if (!r->p) abort();
    }
    memcpy(r->p + r->n, src, n);
    r->n += n;
}

static void r_u32(raw *r, uint32_t v) {
    uint8_t b[4];
    put_u32(b, 0, v);
    r_bytes(r, b, 4);
}

static void r_u64(raw *r, uint64_t v) {
    uint8_t b[8];
    put_u64(b, 0, v);
    r_bytes(r, b, 8);
}

static void r_str(raw *r, const char *s) {
    r_u64(r, strlen(s));
    r_bytes(r, s, strlen(s));
}

static void r_header(raw *r, uint64_t n_tensors, uint64_t n_kv) {
    r_bytes(r, "GGUF", 4);
    r_u32(r, 3);
    r_u64(r, n_tensors);
    r_u64(r, n_kv);
}

/* ---- checking one variant ---- */

static int g_variants;
static bool g_verbose; /* MINFER_TEST_VERBOSE=1 prints every refusal message */

static bool contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return true;
    }
    return n == 0;
}

/* `words` is "a|b|c": the message must contain one of them. "" accepts any
 * message: for variants whose first detectable fault depends on the bytes that
 * happen to follow (a count a little too large reads the next field as a key). */
static bool contains_any(const char *msg, const char *words) {
    if (!words[0]) return true;
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", words);
    for (char *save = NULL, *w = strtok_r(tmp, "|", &save); w; w = strtok_r(NULL, "|", &save))
        if (contains_ci(msg, w)) return true;
    return false;
}

/* Parses a private, exactly-sized copy of buf[0..n) and checks the refusal. */
static void expect_fail(const uint8_t *buf, size_t n, const char *label, const char *words) {
    g_variants++;
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, buf, n);
    gguf_file *f = NULL;
    mf_status s = gguf_parse(copy, n, label, &f);
    const char *msg = mf_last_error();
    if (g_verbose && !strstr(label, "truncated at")) fprintf(stderr, "  %s\n", msg);
    CHECK(s != MF_OK, "%s: accepted, expected a refusal mentioning '%s'", label, words);
    if (s != MF_OK) {
        CHECK(f == NULL, "%s: failed but returned a file", label);
        CHECK(msg[0] != 0, "%s: empty error message", label);
        CHECK(strstr(msg, label) != NULL, "%s: message does not name the file: %s", label, msg);
        CHECK(contains_any(msg, words), "%s: message lacks '%s': %s", label, words, msg);
        CHECK(strchr(msg, '\n') == NULL && strlen(msg) < 1000, "%s: message is not one short line: %s", label, msg);
    }
    gguf_close(f);
    free(copy);
}

static void expect_ok(const uint8_t *buf, size_t n, const char *label) {
    uint8_t *copy = malloc(n ? n : 1);
    if (n) memcpy(copy, buf, n);
    gguf_file *f = NULL;
    mf_status s = gguf_parse(copy, n, label, &f);
    CHECK(s == MF_OK, "%s: refused a valid file: %s", label, mf_last_error());
    gguf_close(f);
    free(copy);
}

/* ---- locating fields by name ---- */

/* Offset of the u64 length that precedes `name` in the file; 0 if absent
 * (offset 0 is the magic, so never a name). */
static size_t locate(const uint8_t *p, size_t n, const char *name) {
    size_t len = strlen(name);
    for (size_t i = 24; i + 8 + len <= n; i++)
        if (get_u64(p, i) == len && !memcmp(p + i + 8, name, len)) return i;
    return 0;
}

typedef struct base {
    const char *label;
    uint8_t *p;
    size_t n;
    size_t end;          /* end of the last tensor's data: any shorter file is invalid */
    uint64_t n_kv, n_tensors;
    const char *k_str;   /* a string value */
    const char *k_strs;  /* an array of strings */
    const char *k_nums;  /* an array of numbers */
    const char *k_u32;   /* a u32 */
    const char *t_2d;    /* a 2-D f32 tensor, first in the data section */
    const char *t_1d;    /* a 1-D tensor that follows it */
} base;

/* Field offsets of key k: the value type tag and the value. */
static size_t key_type(const base *b, const char *k) {
    size_t o = locate(b->p, b->n, k);
    CHECK(o != 0, "%s: key %s not found in the base file", b->label, k);
    return o ? o + 8 + strlen(k) : 0;
}

/* Field offsets of tensor t: n_dims; ne[d] = +4+8d; type and offset after. */
static size_t tensor_ndims(const base *b, const char *t) {
    size_t o = locate(b->p, b->n, t);
    CHECK(o != 0, "%s: tensor %s not found in the base file", b->label, t);
    return o ? o + 8 + strlen(t) : 0;
}

static uint32_t get_u32(const uint8_t *p, size_t off) { return (uint32_t)get_u64(p, off) & 0xffffffffu; }

static size_t tensor_type_off(const base *b, const char *t) {
    size_t nd = tensor_ndims(b, t);
    return nd ? nd + 4 + 8 * (size_t)get_u32(b->p, nd) : 0;
}

/* A mutated copy of the base: patch, check, restore. */
typedef struct mut {
    uint8_t *p;
    size_t n;
    char label[160];
} mut;

static mut *mut_new(const base *b, const char *what) {
    mut *m = malloc(sizeof *m);
    m->p = malloc(b->n);
    memcpy(m->p, b->p, b->n);
    m->n = b->n;
    snprintf(m->label, sizeof m->label, "%s[%s]", b->label, what);
    return m;
}

static void mut_check(mut *m, const char *words) {
    expect_fail(m->p, m->n, m->label, words);
    free(m->p);
    free(m);
}

#define TRUNC "truncated|past the end|cannot fit"

static void header_cases(const base *b) {
    mut *m;
    /* magic and version */
    m = mut_new(b, "bad magic");
    memcpy(m->p, "GGUX", 4);
    mut_check(m, "magic");
    m = mut_new(b, "big-endian magic");
    memcpy(m->p, "FUGG", 4);
    mut_check(m, "big-endian");
    m = mut_new(b, "ggjt magic");
    memcpy(m->p, "tjgg", 4);
    mut_check(m, "magic");
    static const struct { uint32_t v; const char *word; } versions[] = {
        {0, "version 0"}, {1, "version 1"}, {4, "version 4"}, {0x03000000u, "big-endian"},
        {0x02000000u, "byte-swapped"}, {0xffffffffu, "version"}};
    for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "version 0x%x", versions[i].v);
        m = mut_new(b, what);
        put_u32(m->p, 4, versions[i].v);
        mut_check(m, versions[i].word);
    }
    /* counts */
    static const uint64_t huge[] = {UINT64_MAX, 1ull << 63, 1ull << 40, 1ull << 32, 100000000};
    for (size_t i = 0; i < sizeof huge / sizeof huge[0]; i++) {
        char what[48];
        snprintf(what, sizeof what, "n_tensors %" PRIu64, huge[i]);
        m = mut_new(b, what);
        put_u64(m->p, 8, huge[i]);
        mut_check(m, "tensor count|cannot fit");
        snprintf(what, sizeof what, "n_kv %" PRIu64, huge[i]);
        m = mut_new(b, what);
        put_u64(m->p, 16, huge[i]);
        mut_check(m, "metadata count|cannot fit");
    }
    /* a few more entries than the file has: they are read out of what follows */
    m = mut_new(b, "n_kv + 3");
    put_u64(m->p, 16, b->n_kv + 3);
    mut_check(m, "");
    m = mut_new(b, "n_tensors + 2");
    put_u64(m->p, 8, b->n_tensors + 2);
    mut_check(m, "");
}

static void kv_cases(const base *b) {
    mut *m;
    size_t o;
    /* string lengths */
    static const uint64_t huge_len[] = {UINT64_MAX, 1ull << 62, 1ull << 32, 0x7fffffffffffffffull};
    for (size_t i = 0; i < sizeof huge_len / sizeof huge_len[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "key length %" PRIu64, huge_len[i]);
        m = mut_new(b, what);
        put_u64(m->p, locate(b->p, b->n, b->k_str), huge_len[i]);
        mut_check(m, "length");
        snprintf(what, sizeof what, "string value length %" PRIu64, huge_len[i]);
        m = mut_new(b, what);
        put_u64(m->p, key_type(b, b->k_str) + 4, huge_len[i]);
        mut_check(m, "length");
        snprintf(what, sizeof what, "string element length %" PRIu64, huge_len[i]);
        m = mut_new(b, what);
        put_u64(m->p, key_type(b, b->k_strs) + 4 + 12, huge_len[i]);
        mut_check(m, "length");
        snprintf(what, sizeof what, "string array count %" PRIu64, huge_len[i]);
        m = mut_new(b, what);
        put_u64(m->p, key_type(b, b->k_strs) + 4 + 4, huge_len[i]);
        mut_check(m, "array");
        snprintf(what, sizeof what, "numeric array count %" PRIu64, huge_len[i]);
        m = mut_new(b, what);
        put_u64(m->p, key_type(b, b->k_nums) + 4 + 4, huge_len[i]);
        mut_check(m, "array");
    }
    m = mut_new(b, "empty key");
    put_u64(m->p, locate(b->p, b->n, b->k_str), 0);
    mut_check(m, "empty key");
    /* value and element types */
    static const uint32_t bad_types[] = {13, 14, 255, 0x80000000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof bad_types / sizeof bad_types[0]; i++) {
        char what[48];
        snprintf(what, sizeof what, "value type %" PRIu32, bad_types[i]);
        m = mut_new(b, what);
        put_u32(m->p, key_type(b, b->k_u32), bad_types[i]);
        mut_check(m, "unknown value type");
        snprintf(what, sizeof what, "array element type %" PRIu32, bad_types[i]);
        m = mut_new(b, what);
        put_u32(m->p, key_type(b, b->k_strs) + 4, bad_types[i]);
        mut_check(m, "unknown array element type");
    }
    /* a string array that claims to hold arrays, and a scalar retyped as a string */
    m = mut_new(b, "string array as array of arrays");
    put_u32(m->p, key_type(b, b->k_strs) + 4, GGUF_ARR);
    mut_check(m, "");
    m = mut_new(b, "u32 as string");
    put_u32(m->p, key_type(b, b->k_u32), GGUF_STR);
    mut_check(m, "");
    /* duplicate keys: give the string key the u32 key's name when lengths match,
     * else make the string key's name the first bytes of itself repeated */
    o = locate(b->p, b->n, b->k_str);
    if (strlen(b->k_str) == strlen(b->k_u32)) {
        m = mut_new(b, "duplicate key");
        memcpy(m->p + o + 8, b->k_u32, strlen(b->k_u32));
        mut_check(m, "duplicate");
    }
    /* a key that breaks lines: the message must stay one line */
    m = mut_new(b, "key with newlines");
    memset(m->p + o + 8, '\n', strlen(b->k_str));
    put_u32(m->p, key_type(b, b->k_str), 99);
    mut_check(m, "unknown value type");
}

static void tensor_cases(const base *b) {
    mut *m;
    size_t nd = tensor_ndims(b, b->t_2d), nd1 = tensor_ndims(b, b->t_1d);
    size_t ty = tensor_type_off(b, b->t_2d), ty1 = tensor_type_off(b, b->t_1d);
    size_t off = ty + 4, off1 = ty1 + 4;
    /* name */
    m = mut_new(b, "tensor name length huge");
    put_u64(m->p, locate(b->p, b->n, b->t_2d), 1ull << 60);
    mut_check(m, "length");
    m = mut_new(b, "tensor name empty");
    put_u64(m->p, locate(b->p, b->n, b->t_2d), 0);
    mut_check(m, "empty");
    /* dimension counts */
    static const uint32_t ndims[] = {0, 5, 64, 0xffffffffu};
    for (size_t i = 0; i < sizeof ndims / sizeof ndims[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "n_dims %" PRIu32, ndims[i]);
        m = mut_new(b, what);
        put_u32(m->p, nd, ndims[i]);
        mut_check(m, "dimensions");
    }
    /* dimensions */
    static const struct { uint64_t ne; const char *word; } dims[] = {
        {0, "is 0"}, {UINT64_MAX, "out of range"}, {1ull << 63, "out of range"}, {(uint64_t)-4096, "out of range"},
        {1ull << 40, "past the end"}, {1ull << 62, "overflow|past the end"}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        char what[48];
        snprintf(what, sizeof what, "ne[1] = %" PRIu64, dims[i].ne);
        m = mut_new(b, what);
        put_u64(m->p, nd + 4 + 8, dims[i].ne);
        mut_check(m, dims[i].word);
        snprintf(what, sizeof what, "ne[0] = %" PRIu64, dims[i].ne);
        m = mut_new(b, what);
        put_u64(m->p, nd + 4, dims[i].ne);
        mut_check(m, dims[i].word);
    }
    /* products that overflow int64 although each dimension fits */
    m = mut_new(b, "ne 2^32 x 2^32");
    put_u64(m->p, nd + 4, 1ull << 32);
    put_u64(m->p, nd + 12, 1ull << 32);
    mut_check(m, "overflow");
    m = mut_new(b, "ne 2^62 x 3");
    put_u64(m->p, nd + 4, 1ull << 62);
    put_u64(m->p, nd + 12, 3);
    mut_check(m, "overflow");
    /* bytes overflow although elements fit: f64 with 2^61 elements */
    m = mut_new(b, "byte size overflow");
    put_u64(m->p, nd + 4, 1ull << 31);
    put_u64(m->p, nd + 12, 1ull << 31);
    put_u32(m->p, ty, MF_TYPE_F64);
    mut_check(m, "overflow|past the end");
    /* tensor types */
    static const uint32_t types[] = {4, 5, 31, 32, 33, 36, 37, 38, MF_TYPE_COUNT, 1000, 0x80000000u, 0xffffffffu};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "tensor type %" PRIu32, types[i]);
        m = mut_new(b, what);
        put_u32(m->p, ty, types[i]);
        mut_check(m, "unknown tensor type");
    }
    /* row length not a multiple of the block size (rows of 64 or 8 floats) */
    m = mut_new(b, "rows not a multiple of q4_K blocks");
    put_u32(m->p, ty, MF_TYPE_Q4_K);
    mut_check(m, "not a multiple");
    m = mut_new(b, "ne[0] 33 as q8_0");
    put_u64(m->p, nd + 4, 33);
    put_u32(m->p, ty, MF_TYPE_Q8_0);
    mut_check(m, "not a multiple");
    /* offsets */
    static const uint64_t past[] = {1ull << 40, UINT64_MAX - 31, UINT64_MAX & ~(uint64_t)4095, 0x7fffffffffffffe0ull};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) {
        char what[48];
        snprintf(what, sizeof what, "offset 0x%" PRIx64, past[i]);
        m = mut_new(b, what);
        put_u64(m->p, off1, past[i]);
        mut_check(m, "past the end");
    }
    m = mut_new(b, "offset at the end of the file");
    put_u64(m->p, off1, (b->n + 31) / 32 * 32);
    mut_check(m, "past the end");
    for (uint64_t d = 1; d < 32; d += 7) {
        char what[48];
        snprintf(what, sizeof what, "offset misaligned by %" PRIu64, d);
        m = mut_new(b, what);
        put_u64(m->p, off1, get_u64(b->p, off1) + d);
        mut_check(m, "misaligned");
    }
    m = mut_new(b, "overlapping tensors");
    put_u64(m->p, off1, get_u64(b->p, off));
    mut_check(m, "overlap");
    m = mut_new(b, "partly overlapping tensors");
    put_u64(m->p, off1, get_u64(b->p, off) + 32);
    mut_check(m, "overlap");
    /* duplicate tensor names (same length names are needed: swap in the 2-D name's prefix) */
    if (strlen(b->t_1d) == strlen(b->t_2d)) {
        m = mut_new(b, "duplicate tensor name");
        memcpy(m->p + locate(b->p, b->n, b->t_1d) + 8, b->t_2d, strlen(b->t_2d));
        mut_check(m, "duplicate");
    }
    (void)nd1;
}

static void truncation_cases(const base *b) {
    char label[96];
    /* every offset up to the end of the tensor infos, then a sample of the data */
    size_t hdr_end = 0;
    gguf_file *f;
    if (gguf_parse(b->p, b->n, b->label, &f) == MF_OK) {
        hdr_end = (size_t)f->data_offset;
        gguf_close(f);
    }
    for (size_t n = 0; n < b->end; n += n < hdr_end + 64 ? 1 : 997) {
        snprintf(label, sizeof label, "%s[truncated at %zu]", b->label, n);
        expect_fail(b->p, n, label, TRUNC "|not a GGUF file");
    }
    for (size_t n = b->end > 8 ? b->end - 8 : 0; n < b->end; n++) {
        snprintf(label, sizeof label, "%s[truncated at %zu]", b->label, n);
        expect_fail(b->p, n, label, TRUNC);
    }
}

/* Random corruption of the header region: anything may happen except a crash,
 * an empty message or a multi-line one. */
static void random_cases(const base *b, int iters) {
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    gguf_file *f;
    size_t hdr_end = 64;
    if (gguf_parse(b->p, b->n, b->label, &f) == MF_OK) {
        hdr_end = (size_t)f->data_offset;
        gguf_close(f);
    }
    uint8_t *copy = malloc(b->n);
    for (int it = 0; it < iters; it++) {
        memcpy(copy, b->p, b->n);
        int flips = 1 + (int)((rng >> 60) & 3);
        for (int k = 0; k < flips; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            size_t pos = (size_t)((rng >> 20) % hdr_end);
            copy[pos] = (uint8_t)(rng >> 52);
        }
        gguf_file *g = NULL;
        mf_status s = gguf_parse(copy, b->n, "random", &g);
        if (s) {
            const char *msg = mf_last_error();
            CHECK(msg[0] && !strchr(msg, '\n'), "%s random #%d: bad message '%s'", b->label, it, msg);
        } else {
            /* accepted: everything handed out must lie inside the buffer */
            for (uint64_t i = 0; i < g->n_tensors; i++) {
                const gguf_tensor *t = &g->tensors[i];
                const uint8_t *d = t->data;
                CHECK(d >= copy && d + t->nbytes <= copy + b->n, "%s random #%d: tensor outside the file", b->label, it);
            }
        }
        gguf_close(g);
    }
    free(copy);
}

static void run_base(const base *b) {
    fprintf(stderr, "-- %s (%zu bytes)\n", b->label, b->n);
    expect_ok(b->p, b->n, b->label);
    header_cases(b);
    kv_cases(b);
    tensor_cases(b);
    truncation_cases(b);
    random_cases(b, 3000);
}

/* ---- files built by hand ---- */

static void nested_cases(void) {
    /* arrays of arrays nested `depth` deep: up to GGUF_MAX_ARRAY_DEPTH is fine */
    static const int depths[] = {1, 8, 9, 100, 100000};
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        raw r = {0};
        r_header(&r, 0, 1);
        r_str(&r, "deep");
        r_u32(&r, GGUF_ARR);
        for (int d = 0; d < depths[i] - 1; d++) {
            r_u32(&r, GGUF_ARR);
            r_u64(&r, 1);
        }
        r_u32(&r, GGUF_U8);
        r_u64(&r, 1);
        r_bytes(&r, "x", 1);
        char label[64];
        snprintf(label, sizeof label, "nested-%d.gguf", depths[i]);
        if (depths[i] <= GGUF_MAX_ARRAY_DEPTH) expect_ok(r.p, r.n, label);
        else expect_fail(r.p, r.n, label, "nested");
        free(r.p);
    }
    /* an array of arrays whose inner element type is bogus */
    raw r = {0};
    r_header(&r, 0, 1);
    r_str(&r, "inner");
    r_u32(&r, GGUF_ARR);
    r_u32(&r, GGUF_ARR);
    r_u64(&r, 2);
    r_u32(&r, GGUF_I32);
    r_u64(&r, 1);
    r_u32(&r, 7);
    r_u32(&r, 77);
    r_u64(&r, 1);
    expect_fail(r.p, r.n, "nested-inner-type.gguf", "unknown array element type");
    free(r.p);
    /* an array of a million empty arrays in a file far too small */
    r = (raw){0};
    r_header(&r, 0, 1);
    r_str(&r, "many");
    r_u32(&r, GGUF_ARR);
    r_u32(&r, GGUF_ARR);
    r_u64(&r, 1000000);
    for (int k = 0; k < 100; k++) {
        r_u32(&r, GGUF_U8);
        r_u64(&r, 0);
    }
    expect_fail(r.p, r.n, "nested-many.gguf", "cannot fit");
    free(r.p);
}

/* One tensor `t` of type f32 at relative offset `off`, with general.alignment
 * = `align` of type `atype`; the header is 90 bytes when align is a u32. */
static raw one_tensor_file(uint32_t atype, uint64_t align, uint64_t off, uint64_t extra) {
    raw r = {0};
    r_header(&r, 1, 1);
    r_str(&r, "general.alignment");
    r_u32(&r, atype);
    if (atype == GGUF_U64 || atype == GGUF_I64) r_u64(&r, align);
    else if (atype == GGUF_STR) r_str(&r, "32");
    else r_u32(&r, (uint32_t)align);
    r_str(&r, "t");
    r_u32(&r, 1);
    r_u64(&r, 1);
    r_u32(&r, MF_TYPE_F32);
    r_u64(&r, off);
    size_t target = (size_t)(r.n + off + 4 + extra + 64);
    while (r.n < target) r_bytes(&r, "\0", 1);
    return r;
}

static void alignment_cases(void) {
    raw r = one_tensor_file(GGUF_U32, 32, 0, 0);
    expect_ok(r.p, r.n, "align-32.gguf");
    free(r.p);
    static const struct { uint32_t type; uint64_t value; const char *label, *word; } bad[] = {
        {GGUF_U32, 0, "align-0.gguf", "power of two"},
        {GGUF_U32, 3, "align-3.gguf", "power of two"},
        {GGUF_U32, 48, "align-48.gguf", "power of two"},
        {GGUF_U32, 0xffffffffu, "align-max.gguf", "power of two"},
        {GGUF_I32, 32, "align-i32.gguf", "expected u32"},
        {GGUF_U64, 32, "align-u64.gguf", "expected u32"},
        {GGUF_STR, 32, "align-string.gguf", "expected u32"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        r = one_tensor_file(bad[i].type, bad[i].value, 0, 0);
        expect_fail(r.p, r.n, bad[i].label, bad[i].word);
        free(r.p);
    }
    /* alignment 1 is legal, but an f32 tensor at an odd file offset could not
     * be read through a float pointer: data starts at 90, so offset 1 -> 91 */
    r = one_tensor_file(GGUF_U32, 1, 2, 0);
    expect_ok(r.p, r.n, "align-1-even.gguf");
    free(r.p);
    r = one_tensor_file(GGUF_U32, 1, 1, 0);
    expect_fail(r.p, r.n, "align-1-odd.gguf", "misaligned for f32");
    free(r.p);
    /* a huge alignment puts the data section past the end */
    r = one_tensor_file(GGUF_U32, 1u << 31, 0, 0);
    expect_fail(r.p, r.n, "align-2G.gguf", TRUNC);
    free(r.p);
}

static void name_cases(void) {
    /* a 60000-byte key with a bad type: the message is cut short but keeps the reason */
    raw r = {0};
    r_header(&r, 0, 1);
    size_t klen = 60000;
    char *key = malloc(klen + 1);
    memset(key, 'k', klen);
    key[klen] = 0;
    r_str(&r, key);
    r_u32(&r, 4242);
    expect_fail(r.p, r.n, "long-key.gguf", "unknown value type");
    free(r.p);
    /* a key longer than the limit */
    r = (raw){0};
    r_header(&r, 0, 1);
    r_u64(&r, GGUF_MAX_KEY_LEN + 1);
    for (size_t i = 0; i <= GGUF_MAX_KEY_LEN; i++) r_bytes(&r, "k", 1);
    r_u32(&r, GGUF_U8);
    r_bytes(&r, "\0", 1);
    expect_fail(r.p, r.n, "too-long-key.gguf", "longer than");
    free(r.p);
    free(key);
    /* a key with a NUL byte */
    r = (raw){0};
    r_header(&r, 0, 1);
    r_u64(&r, 3);
    r_bytes(&r, "a\0b", 3);
    r_u32(&r, GGUF_U8);
    r_bytes(&r, "\0", 1);
    expect_fail(r.p, r.n, "nul-key.gguf", "NUL");
    free(r.p);
    /* tensor names: too long, NUL inside, control characters (message stays one line) */
    char name[GGUF_MAX_NAME_LEN + 2];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    r = (raw){0};
    r_header(&r, 1, 0);
    r_str(&r, name);
    r_u32(&r, 1);
    r_u64(&r, 4);
    r_u32(&r, MF_TYPE_F32);
    r_u64(&r, 0);
    expect_fail(r.p, r.n, "long-name.gguf", "longer than");
    free(r.p);
    r = (raw){0};
    r_header(&r, 1, 0);
    r_str(&r, "bad\r\nname\x1b[31m");
    r_u32(&r, 7);
    for (int k = 0; k < 8; k++) r_u64(&r, 0); /* room for the declared tensor */
    expect_fail(r.p, r.n, "ctl-name.gguf", "dimensions");
    CHECK(strstr(mf_last_error(), "bad\\x0d\\x0aname\\x1b[31m") != NULL, "control characters are not escaped: %s", mf_last_error());
    free(r.p);
}

/* ---- the small base file, built with the writer ---- */

static uint8_t *build_small(size_t *n) {
    gguf_writer *w;
    mf_status s = gguf_writer_new(&w);
    CHECK(!s, "writer: %s", mf_last_error());
    if (s) return NULL;
    static const char *strs[] = {"alpha", "beta", "", "delta"};
    static const int32_t ints[] = {1, -2, 3, -4, 5};
    static const float f32s[] = {0.5f, -1.25f};
    uint8_t inner_a[4] = {1, 0, 0, 0}, inner_b[8] = {2, 0, 0, 0, 3, 0, 0, 0};
    gguf_value items[2] = {
        {.type = GGUF_ARR, .arr = {.elem = GGUF_I32, .n = 1, .raw = inner_a}},
        {.type = GGUF_ARR, .arr = {.elem = GGUF_I32, .n = 2, .raw = inner_b}},
    };
    gguf_value nested = {.type = GGUF_ARR, .arr = {.elem = GGUF_ARR, .n = 2, .items = items}};
    s = gguf_writer_set_str(w, "general.architecture", "test");
    if (!s) s = gguf_writer_set_u32(w, "general.alignment", 32);
    if (!s) s = gguf_writer_set_str(w, "test.sss", "a string");
    if (!s) s = gguf_writer_set_u32(w, "test.u32", 7);
    if (!s) s = gguf_writer_set_u8(w, "test.u8", 200);
    if (!s) s = gguf_writer_set_i8(w, "test.i8", -100);
    if (!s) s = gguf_writer_set_u16(w, "test.u16", 60000);
    if (!s) s = gguf_writer_set_i16(w, "test.i16", -30000);
    if (!s) s = gguf_writer_set_i32(w, "test.i32", -7);
    if (!s) s = gguf_writer_set_u64(w, "test.u64", UINT64_MAX);
    if (!s) s = gguf_writer_set_i64(w, "test.i64", INT64_MIN);
    if (!s) s = gguf_writer_set_f32(w, "test.f32", 1e-5f);
    if (!s) s = gguf_writer_set_f64(w, "test.f64", 3.141592653589793);
    if (!s) s = gguf_writer_set_bool(w, "test.bool", true);
    if (!s) s = gguf_writer_set_arr_str(w, "test.strs", strs, 4);
    if (!s) s = gguf_writer_set_arr(w, "test.ints", GGUF_I32, ints, 5);
    if (!s) s = gguf_writer_set_arr(w, "test.f32s", GGUF_F32, f32s, 2);
    if (!s) s = gguf_writer_set_value(w, "test.nested", &nested);
    static float a[8 * 2], d[4];
    static uint16_t bb[16];
    static uint8_t q[2 * 34];
    for (int i = 0; i < 16; i++) a[i] = (float)i;
    const int64_t ne_a[] = {8, 2}, ne_b[] = {16}, ne_q[] = {32, 2}, ne_d[] = {4};
    if (!s) s = gguf_writer_add_tensor(w, "t.aa", MF_TYPE_F32, 2, ne_a, a);
    if (!s) s = gguf_writer_add_tensor(w, "t.bb", MF_TYPE_F16, 1, ne_b, bb);
    if (!s) s = gguf_writer_add_tensor(w, "t.qq", MF_TYPE_Q8_0, 2, ne_q, q);
    if (!s) s = gguf_writer_add_tensor(w, "t.dd", MF_TYPE_F32, 1, ne_d, d);
    uint8_t *buf = NULL;
    if (!s) s = gguf_writer_write_mem(w, &buf, n);
    CHECK(!s, "building the small file: %s", mf_last_error());
    gguf_writer_free(w);
    return buf;
}

static void fill_end(base *b) {
    gguf_file *f;
    b->end = b->n;
    if (gguf_parse(b->p, b->n, b->label, &f) != MF_OK) return;
    uint64_t end = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        uint64_t e = f->data_offset + f->tensors[i].offset + f->tensors[i].nbytes;
        if (e > end) end = e;
    }
    b->end = (size_t)end;
    b->n_kv = f->n_kv;
    b->n_tensors = f->n_tensors;
    gguf_close(f);
}

/* ---- the refusal fixtures in ../shared/models ---- */

static void fixture_cases(void) {
    static const struct { const char *path, *words[3]; } fx[] = {
        {"../shared/models/tinyllamas-stories-260k-f32-header.gguf", {"version 1", "not supported", NULL}},
        {"../shared/models/tinyllamas-stories-260k-q8_0.gguf", {"blk.0.ffn_down.weight", "row length 172", "block size 32"}},
    };
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        gguf_file *f = NULL;
        mf_status s = gguf_open(fx[i].path, &f);
        const char *msg = mf_last_error();
        CHECK(s != MF_OK, "%s: accepted", fx[i].path);
        CHECK(strstr(msg, fx[i].path) != NULL, "%s: message does not name the file: %s", fx[i].path, msg);
        for (int k = 0; k < 3 && fx[i].words[k]; k++)
            CHECK(strstr(msg, fx[i].words[k]) != NULL, "%s: message lacks '%s': %s", fx[i].path, fx[i].words[k], msg);
        gguf_close(f);
    }
    gguf_file *f = NULL;
    mf_status s = gguf_open("../shared/models/no-such-file.gguf", &f);
    CHECK(s == MF_ERR_IO && strstr(mf_last_error(), "no-such-file.gguf"), "missing file: %d %s", s, mf_last_error());
    s = gguf_open("../shared/models", &f);
    CHECK(s != MF_OK && mf_last_error()[0], "a directory was accepted");
    s = gguf_parse(NULL, 0, "empty.gguf", &f);
    CHECK(s != MF_OK && strstr(mf_last_error(), "empty.gguf"), "empty buffer: %s", mf_last_error());
}

int main(void) {
    g_verbose = getenv("MINFER_TEST_VERBOSE") != NULL;
    size_t n = 0;
    uint8_t *small = build_small(&n);
    if (small) {
        base b = {.label = "small.gguf", .p = small, .n = n, .k_str = "test.sss", .k_strs = "test.strs",
                  .k_nums = "test.ints", .k_u32 = "test.u32", .t_2d = "t.aa", .t_1d = "t.bb"};
        fill_end(&b);
        run_base(&b);
        free(small);
    }
    uint8_t *st = test_read_file("../shared/models/stories260K.gguf", &n);
    if (st) {
        base b = {.label = "stories260K.gguf", .p = st, .n = n, .k_str = "general.name", .k_strs = "tokenizer.ggml.tokens",
                  .k_nums = "tokenizer.ggml.scores", .k_u32 = "llama.block_count", .t_2d = "token_embd.weight",
                  .t_1d = "output_norm.weight"};
        fill_end(&b);
        run_base(&b);
        free(st);
    }
    nested_cases();
    alignment_cases();
    name_cases();
    fixture_cases();
    fprintf(stderr, "%d corrupted variants refused\n", g_variants);
    return test_summary("gguf_hostile");
}
