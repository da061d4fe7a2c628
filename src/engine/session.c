/* session.c - mf_state_save / mf_state_load: a context's KV rows, last logits
 * and the caller's tokens and blob in a versioned, checksummed file that is
 * checked in full before anything reaches the context.
 *
 * Layout (integers little-endian; token ids, logits and KV rows are copied as
 * the host holds them, which every supported host stores little-endian):
 *
 *   0   "MINFERST"         magic
 *   8   u32 version        (1)
 *   12  u32 header size    (128)
 *   16  u64 model file size
 *   24  u64 model hash     XXH64 of the GGUF's bytes before the tensor data:
 *                          header, metadata and tensor table, so a retyped or
 *                          re-exported file with the same size is told apart
 *   32  u32 KV type, n_layer, k_width, v_width
 *   48  u64 bytes of K + V per position per layer
 *   56  u32 n_ctx (of the saver, informational), n_past, n_tokens, n_vocab,
 *           n_logits (0 or 1), 0
 *   80  u64 user blob length, payload length, payload hash (XXH64)
 *   104 16 zero bytes
 *   120 u64 header hash    XXH64 of bytes 0..120
 *   128 payload: n_tokens i32, n_logits x n_vocab f32, per layer n_past rows
 *       as the backend's kv_read lays them out, the user blob.
 *
 * The header has its own checksum so a damaged size field is reported as
 * damage, not as a confusing mismatch; the payload checksum covers the rest. */
#include "engine/context.h"
#include "core/alloc.h"
#include "core/error.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HDR_SIZE 128
#define HDR_HASHED 120
#define STATE_VERSION 1
static const char k_magic[8] = {'M', 'I', 'N', 'F', 'E', 'R', 'S', 'T'};

/* ---- XXH64 (streaming), a fast non-cryptographic 64-bit hash ------------ */

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL
#define P4 0x85EBCA77C2B2AE63ULL
#define P5 0x27D4EB2F165667C5ULL

typedef struct xxh64 {
    uint64_t v[4];
    uint64_t total;
    uint8_t mem[32];
    size_t n_mem;
} xxh64;

static uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t xround(uint64_t acc, uint64_t in) { return rotl64(acc + in * P2, 31) * P1; }
static uint64_t xmerge(uint64_t acc, uint64_t v) { return (acc ^ xround(0, v)) * P1 + P4; }

static void xxh64_init(xxh64 *h, uint64_t seed) {
    h->v[0] = seed + P1 + P2;
    h->v[1] = seed + P2;
    h->v[2] = seed;
    h->v[3] = seed - P1;
    h->total = 0;
    h->n_mem = 0;
}

static void xxh64_stripes(xxh64 *h, const uint8_t *p, size_t n) {
    for (; n >= 32; p += 32, n -= 32)
        for (int i = 0; i < 4; i++) h->v[i] = xround(h->v[i], rd64(p + 8 * i));
}

static void xxh64_update(xxh64 *h, const void *data, size_t n) {
    const uint8_t *p = data;
    h->total += n;
    if (h->n_mem) {
        size_t take = 32 - h->n_mem < n ? 32 - h->n_mem : n;
        memcpy(h->mem + h->n_mem, p, take);
        h->n_mem += take;
        p += take;
        n -= take;
        if (h->n_mem < 32) return;
        xxh64_stripes(h, h->mem, 32);
        h->n_mem = 0;
    }
    size_t whole = n & ~(size_t)31;
    xxh64_stripes(h, p, whole);
    memcpy(h->mem, p + whole, n - whole);
    h->n_mem = n - whole;
}

static uint64_t xxh64_digest(const xxh64 *h) {
    uint64_t r;
    if (h->total >= 32) {
        r = rotl64(h->v[0], 1) + rotl64(h->v[1], 7) + rotl64(h->v[2], 12) + rotl64(h->v[3], 18);
        for (int i = 0; i < 4; i++) r = xmerge(r, h->v[i]);
    } else {
        r = h->v[2] + P5;
    }
    r += h->total;
    const uint8_t *p = h->mem;
    size_t n = h->n_mem;
    for (; n >= 8; p += 8, n -= 8) r = rotl64(r ^ xround(0, rd64(p)), 27) * P1 + P4;
    if (n >= 4) {
        r = rotl64(r ^ (uint64_t)rd32(p) * P1, 23) * P2 + P3;
        p += 4;
        n -= 4;
    }
    for (; n; p++, n--) r = rotl64(r ^ *p * P5, 11) * P1;
    r ^= r >> 33;
    r *= P2;
    r ^= r >> 29;
    r *= P3;
    r ^= r >> 32;
    return r;
}

static uint64_t xxh64_once(const void *data, size_t n) {
    xxh64 h;
    xxh64_init(&h, 0);
    xxh64_update(&h, data, n);
    return xxh64_digest(&h);
}

/* ---- header ------------------------------------------------------------- */

typedef struct state_hdr {
    uint32_t version, header_size;
    uint64_t model_size, model_hash;
    uint32_t kv_type, n_layer, k_width, v_width;
    uint64_t row_bytes;
    uint32_t n_ctx, n_past, n_tokens, n_vocab, n_logits;
    uint64_t user_len, payload_len, payload_hash;
} state_hdr;

static void wr32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> 8 * i);
}

static void hdr_encode(const state_hdr *h, uint8_t out[HDR_SIZE]) {
    memset(out, 0, HDR_SIZE);
    memcpy(out, k_magic, 8);
    wr32(out + 8, h->version);
    wr32(out + 12, h->header_size);
    wr64(out + 16, h->model_size);
    wr64(out + 24, h->model_hash);
    wr32(out + 32, h->kv_type);
    wr32(out + 36, h->n_layer);
    wr32(out + 40, h->k_width);
    wr32(out + 44, h->v_width);
    wr64(out + 48, h->row_bytes);
    wr32(out + 56, h->n_ctx);
    wr32(out + 60, h->n_past);
    wr32(out + 64, h->n_tokens);
    wr32(out + 68, h->n_vocab);
    wr32(out + 72, h->n_logits);
    wr64(out + 80, h->user_len);
    wr64(out + 88, h->payload_len);
    wr64(out + 96, h->payload_hash);
    wr64(out + HDR_HASHED, xxh64_once(out, HDR_HASHED));
}

static void hdr_decode(const uint8_t *p, state_hdr *h) {
    h->version = rd32(p + 8);
    h->header_size = rd32(p + 12);
    h->model_size = rd64(p + 16);
    h->model_hash = rd64(p + 24);
    h->kv_type = rd32(p + 32);
    h->n_layer = rd32(p + 36);
    h->k_width = rd32(p + 40);
    h->v_width = rd32(p + 44);
    h->row_bytes = rd64(p + 48);
    h->n_ctx = rd32(p + 56);
    h->n_past = rd32(p + 60);
    h->n_tokens = rd32(p + 64);
    h->n_vocab = rd32(p + 68);
    h->n_logits = rd32(p + 72);
    h->user_len = rd64(p + 80);
    h->payload_len = rd64(p + 88);
    h->payload_hash = rd64(p + 96);
}

static const char *kv_name(uint32_t t) {
    return t == MF_KV_F32 ? "f32" : t == MF_KV_F16 ? "f16" : t == MF_KV_Q8_0 ? "q8_0" : "unknown";
}

/* The cells of sequence seq's positions [0, n) (malloc'd). */
static int32_t *seq_cells(const mf_context *ctx, int seq, uint32_t n) {
    int32_t *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return NULL;
    for (uint32_t p = 0; p < n; p++) c[p] = mf_kv_cell(&ctx->kv, seq, p);
    return c;
}

/* The context's side of the header: everything a file must match. */
static void ctx_identity(const mf_context *ctx, state_hdr *h) {
    const gguf_file *g = ctx->model->gguf;
    const mf_hparams *hp = &ctx->model->hp;
    memset(h, 0, sizeof *h);
    h->version = STATE_VERSION;
    h->header_size = HDR_SIZE;
    h->model_size = g->size;
    h->model_hash = xxh64_once(g->base, (size_t)g->data_offset);
    h->kv_type = (uint32_t)ctx->kv_type;
    h->n_layer = hp->n_layer;
    h->k_width = hp->n_head_kv * hp->head_dim_k;
    h->v_width = hp->n_head_kv * hp->head_dim_v;
    int l0;
    mf_backend *kb = mf_context_kv_be(ctx, 0, &l0);
    h->row_bytes = hp->n_layer ? kb->ops->kv_read(kb, l0, NULL, 1, NULL) : 0;
    h->n_ctx = ctx->n_ctx;
    h->n_vocab = hp->n_vocab;
}

/* Payload bytes for the header's counts; false if they overflow. */
static bool payload_size(const state_hdr *h, uint64_t *out) {
    uint64_t kv, lg, n = (uint64_t)h->n_tokens * 4;
    if (__builtin_mul_overflow((uint64_t)h->n_logits * h->n_vocab, (uint64_t)4, &lg)) return false;
    if (__builtin_mul_overflow((uint64_t)h->n_layer * h->n_past, h->row_bytes, &kv)) return false;
    if (__builtin_add_overflow(n, lg, &n) || __builtin_add_overflow(n, kv, &n) ||
        __builtin_add_overflow(n, h->user_len, &n))
        return false;
    *out = n;
    return true;
}

/* ---- save --------------------------------------------------------------- */

/* Where payload bytes go: a FILE or a preallocated buffer; hashed on the way. */
typedef struct sink {
    FILE *f;
    uint8_t *buf;
    size_t pos;
    xxh64 h;
    bool failed;
} sink;

static void sink_put(sink *s, const void *p, size_t n) {
    if (s->failed || !n) return;
    xxh64_update(&s->h, p, n);
    if (s->f) {
        if (fwrite(p, 1, n, s->f) != n) s->failed = true;
    } else if (p != s->buf + s->pos) {
        memcpy(s->buf + s->pos, p, n);
    }
    s->pos += n;
}

static mf_status save_prepare(const mf_context *ctx, int32_t seq, const mf_token *tokens, uint32_t n_tokens,
                              const void *user, size_t user_len, state_hdr *h) {
    if (!ctx) return mf_err(MF_ERR_INVALID_ARG, "session: NULL context");
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq_max)
        return mf_err(MF_ERR_INVALID_ARG, "session: sequence id %d is out of range (n_seq_max %u)", seq, ctx->n_seq_max);
    const uint32_t n_past = ctx->kv.seq[seq].n_pos;
    if (n_tokens && (!tokens || n_tokens != n_past))
        return mf_err(MF_ERR_INVALID_ARG, "session: %u token ids given for %u cached positions (give all or none)",
                      n_tokens, n_past);
    if (user_len && !user) return mf_err(MF_ERR_INVALID_ARG, "session: user blob of %zu bytes is NULL", user_len);
    ctx_identity(ctx, h);
    h->n_past = n_past;
    h->n_tokens = n_tokens;
    h->n_logits = mf_context_seq_logits(ctx, seq) ? 1 : 0;
    h->user_len = user_len;
    if (!payload_size(h, &h->payload_len)) return mf_err(MF_ERR_INVALID_ARG, "session: state too large");
    return MF_OK;
}

/* Streams the payload into `s`: tokens, logits, KV rows one layer at a time
 * (one layer's rows are the only copy held), the blob. */
static mf_status save_payload(const mf_context *ctx, int32_t seq, const state_hdr *h, const mf_token *tokens,
                              const void *user, sink *s) {
    xxh64_init(&s->h, 0);
    sink_put(s, tokens, (size_t)h->n_tokens * sizeof(mf_token));
    if (h->n_logits) sink_put(s, mf_context_seq_logits(ctx, seq), (size_t)h->n_vocab * sizeof(float));
    if (h->n_past && h->n_layer) {
        const size_t layer_bytes = (size_t)h->n_past * h->row_bytes;
        uint8_t *tmp = s->f ? malloc(layer_bytes) : NULL;
        int32_t *cells = seq_cells(ctx, seq, h->n_past);
        if ((s->f && !tmp) || !cells) {
            free(tmp);
            free(cells);
            return mf_err(MF_ERR_NOMEM, "session: out of memory for %zu bytes of KV rows", layer_bytes);
        }
        for (uint32_t l = 0; l < h->n_layer && !s->failed; l++) {
            /* in memory the rows land straight in the image; hash them there */
            uint8_t *dst = s->f ? tmp : s->buf + s->pos;
            int ll;
            mf_backend *kb = mf_context_kv_be(ctx, l, &ll);
            kb->ops->kv_read(kb, ll, cells, h->n_past, dst);
            sink_put(s, dst, layer_bytes);
        }
        free(cells);
        free(tmp);
    }
    sink_put(s, user, h->user_len);
    return MF_OK;
}

mf_status mf_state_seq_save_buffer(const mf_context *ctx, int32_t seq, const mf_token *tokens, uint32_t n_tokens,
                                   const void *user, size_t user_len, void **out, size_t *out_len) {
    if (!out) return mf_err(MF_ERR_INVALID_ARG, "session: NULL output");
    *out = NULL;
    if (out_len) *out_len = 0;
    state_hdr h;
    mf_status st = save_prepare(ctx, seq, tokens, n_tokens, user, user_len, &h);
    if (st) return st;
    if (h.payload_len > SIZE_MAX - HDR_SIZE) return mf_err(MF_ERR_NOMEM, "session: state too large for memory");
    const size_t total = HDR_SIZE + (size_t)h.payload_len;
    uint8_t *buf = malloc(total);
    if (!buf) return mf_err(MF_ERR_NOMEM, "session: out of memory for a %zu-byte state image", total);
    sink s = {.buf = buf, .pos = HDR_SIZE};
    st = save_payload(ctx, seq, &h, tokens, user, &s);
    if (st) {
        free(buf);
        return st;
    }
    h.payload_hash = xxh64_digest(&s.h);
    hdr_encode(&h, buf);
    *out = buf;
    if (out_len) *out_len = total;
    return MF_OK;
}

mf_status mf_state_seq_save(const mf_context *ctx, int32_t seq, const char *path, const mf_token *tokens,
                            uint32_t n_tokens, const void *user, size_t user_len) {
    if (!path) return mf_err(MF_ERR_INVALID_ARG, "session: NULL path");
    state_hdr h;
    mf_status st = save_prepare(ctx, seq, tokens, n_tokens, user, user_len, &h);
    if (st) return st;
    /* a unique temporary name in the same directory, so rename() is atomic */
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) return mf_err(MF_ERR_NOMEM, "out of memory");
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = mf_err(MF_ERR_IO, "session file %s: cannot create a temporary file next to it: %s", path, strerror(errno));
        free(tmp);
        return st;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        st = mf_err(MF_ERR_IO, "session file %s: %s", path, strerror(errno));
        close(fd);
        goto fail;
    }
    uint8_t head[HDR_SIZE] = {0};
    sink s = {.f = f};
    /* the header's checksums are known only after the payload: write zeros, come back */
    if (fwrite(head, 1, HDR_SIZE, f) != HDR_SIZE) s.failed = true;
    st = save_payload(ctx, seq, &h, tokens, user, &s);
    if (st) goto fail_file;
    h.payload_hash = xxh64_digest(&s.h);
    hdr_encode(&h, head);
    if (s.failed || fflush(f) || fseek(f, 0, SEEK_SET) || fwrite(head, 1, HDR_SIZE, f) != HDR_SIZE || fflush(f) ||
        fsync(fileno(f))) {
        st = mf_err(MF_ERR_IO, "session file %s: write failed: %s", path, strerror(errno));
        goto fail_file;
    }
    if (fclose(f)) {
        f = NULL;
        st = mf_err(MF_ERR_IO, "session file %s: write failed: %s", path, strerror(errno));
        goto fail;
    }
    f = NULL;
    if (rename(tmp, path)) {
        st = mf_err(MF_ERR_IO, "session file %s: cannot rename the temporary file into place: %s", path, strerror(errno));
        goto fail;
    }
    free(tmp);
    return MF_OK;
fail_file:
    fclose(f);
fail:
    unlink(tmp);
    free(tmp);
    return st;
}

/* ---- load --------------------------------------------------------------- */

mf_status mf_state_seq_load_buffer(mf_context *ctx, int32_t seq, const void *buf, size_t len, mf_token **tokens,
                                   uint32_t *n_tokens, void **user, size_t *user_len) {
    if (tokens) *tokens = NULL;
    if (n_tokens) *n_tokens = 0;
    if (user) *user = NULL;
    if (user_len) *user_len = 0;
    if (!ctx || (!buf && len)) return mf_err(MF_ERR_INVALID_ARG, "session: NULL argument");
    if (seq < 0 || (uint32_t)seq >= ctx->n_seq_max)
        return mf_err(MF_ERR_INVALID_ARG, "session: sequence id %d is out of range (n_seq_max %u)", seq, ctx->n_seq_max);
    const uint8_t *p = buf;
    if (len < HDR_SIZE) {
        if (len >= 8 && memcmp(p, k_magic, 8))
            return mf_err(MF_ERR_FORMAT, "session: not a minfer session file (no MINFERST magic)");
        return mf_err(MF_ERR_FORMAT, "session: truncated: %zu bytes, the header alone is %d", len, HDR_SIZE);
    }
    if (memcmp(p, k_magic, 8)) return mf_err(MF_ERR_FORMAT, "session: not a minfer session file (no MINFERST magic)");
    if (rd64(p + HDR_HASHED) != xxh64_once(p, HDR_HASHED))
        return mf_err(MF_ERR_FORMAT, "session: header checksum mismatch: the file is damaged or was altered");
    state_hdr f, c;
    hdr_decode(p, &f);
    if (f.version != STATE_VERSION)
        return mf_err(MF_ERR_UNSUPPORTED, "session: format version %u; this build reads version %d", f.version,
                      STATE_VERSION);
    if (f.header_size != HDR_SIZE)
        return mf_err(MF_ERR_FORMAT, "session: header size %u, expected %d", f.header_size, HDR_SIZE);
    ctx_identity(ctx, &c);
    if (f.model_size != c.model_size || f.model_hash != c.model_hash)
        return mf_err(MF_ERR_INVALID_ARG,
                      "session: saved for another model (model file of %llu bytes, metadata hash %016llx; "
                      "this model: %llu bytes, %016llx)",
                      (unsigned long long)f.model_size, (unsigned long long)f.model_hash,
                      (unsigned long long)c.model_size, (unsigned long long)c.model_hash);
    if (f.kv_type != c.kv_type)
        return mf_err(MF_ERR_INVALID_ARG,
                      "session: holds a KV cache of type %s; this context's is %s (use the same KV type)",
                      kv_name(f.kv_type), kv_name(c.kv_type));
    if (f.n_layer != c.n_layer || f.k_width != c.k_width || f.v_width != c.v_width || f.row_bytes != c.row_bytes ||
        f.n_vocab != c.n_vocab)
        return mf_err(MF_ERR_INVALID_ARG,
                      "session: KV shape differs (%u layers, rows %u+%u, %llu bytes, vocab %u; this context: "
                      "%u layers, rows %u+%u, %llu bytes, vocab %u)",
                      f.n_layer, f.k_width, f.v_width, (unsigned long long)f.row_bytes, f.n_vocab, c.n_layer,
                      c.k_width, c.v_width, (unsigned long long)c.row_bytes, c.n_vocab);
    if (f.n_past > ctx->n_ctx)
        return mf_err(MF_ERR_CONTEXT_FULL, "session: holds %u positions; this context has n_ctx %u", f.n_past,
                      ctx->n_ctx);
    if (f.n_logits > 1 || (f.n_tokens && f.n_tokens != f.n_past))
        return mf_err(MF_ERR_FORMAT, "session: bad counts (%u logit rows, %u tokens for %u positions)", f.n_logits,
                      f.n_tokens, f.n_past);
    uint64_t want;
    if (!payload_size(&f, &want) || want != f.payload_len)
        return mf_err(MF_ERR_FORMAT, "session: the header's sizes do not add up to its payload length");
    if (f.payload_len != len - HDR_SIZE)
        return mf_err(MF_ERR_FORMAT, "session: %s: the header announces %llu payload bytes, the file has %zu",
                      f.payload_len > len - HDR_SIZE ? "truncated" : "trailing bytes",
                      (unsigned long long)f.payload_len, len - HDR_SIZE);
    const uint8_t *pl = p + HDR_SIZE;
    if (xxh64_once(pl, (size_t)f.payload_len) != f.payload_hash)
        return mf_err(MF_ERR_FORMAT, "session: payload checksum mismatch: the file is damaged or was altered");

    const size_t tok_bytes = (size_t)f.n_tokens * sizeof(mf_token);
    const size_t logit_bytes = (size_t)f.n_logits * f.n_vocab * sizeof(float);
    const size_t layer_bytes = (size_t)f.n_past * (size_t)f.row_bytes;
    const uint8_t *kv = pl + tok_bytes + logit_bytes;
    const uint8_t *ub = kv + (size_t)f.n_layer * layer_bytes;
    for (uint32_t i = 0; i < f.n_tokens; i++) {
        int32_t t;
        memcpy(&t, pl + (size_t)i * 4, 4);
        if (t < 0 || (uint32_t)t >= f.n_vocab)
            return mf_err(MF_ERR_FORMAT, "session: token %u is id %d, outside the vocabulary of %u", i, t, f.n_vocab);
    }
    /* outputs first: a failed allocation must still leave the context untouched */
    mf_token *toks = NULL;
    char *ublob = NULL;
    if (tokens && f.n_tokens) {
        toks = malloc(tok_bytes);
        if (!toks) return mf_err(MF_ERR_NOMEM, "out of memory");
        memcpy(toks, pl, tok_bytes);
    }
    if (user && f.user_len) {
        ublob = malloc((size_t)f.user_len + 1);
        if (!ublob) {
            free(toks);
            return mf_err(MF_ERR_NOMEM, "out of memory for a %llu-byte session blob", (unsigned long long)f.user_len);
        }
        memcpy(ublob, ub, (size_t)f.user_len);
        ublob[f.user_len] = 0;
    }

    /* everything checked but room: sequence 0 gets fresh cells for the file's
     * positions (copy-on-write never applies: they are all new) */
    int32_t *cells = malloc((f.n_past ? f.n_past : 1) * sizeof *cells);
    if (!cells) {
        free(toks);
        free(ublob);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    mf_kv_save(&ctx->kv);
    mf_kv_truncate_seq(&ctx->kv, seq, 0);
    mf_status st = MF_OK;
    for (uint32_t p = 0; p < f.n_past && !st; p++) {
        int32_t copy;
        st = mf_kv_append(&ctx->kv, seq, &cells[p], &copy);
    }
    float *row = NULL;
    if (!st && f.n_logits && !(row = mf_context_one_logit_row(ctx, seq))) st = mf_err(MF_ERR_NOMEM, "out of memory");
    if (st) {
        mf_kv_restore(&ctx->kv);
        free(cells);
        free(toks);
        free(ublob);
        return mf_err_prefix(st, "session");
    }
    /* now the context changes */
    for (uint32_t l = 0; l < f.n_layer && f.n_past; l++) {
        int ll;
        mf_backend *kb = mf_context_kv_be(ctx, l, &ll);
        kb->ops->kv_write(kb, ll, cells, f.n_past, kv + (size_t)l * layer_bytes);
    }
    free(cells);
    if (f.n_logits) memcpy(row, pl + tok_bytes, logit_bytes);
    else ctx->n_logits = 0;
    if (tokens) *tokens = toks;
    if (n_tokens) *n_tokens = f.n_tokens;
    if (user) *user = ublob;
    if (user_len) *user_len = (size_t)f.user_len;
    return MF_OK;
}

mf_status mf_state_seq_load(mf_context *ctx, int32_t seq, const char *path, mf_token **tokens, uint32_t *n_tokens, void **user,
                        size_t *user_len) {
    if (!path) return mf_err(MF_ERR_INVALID_ARG, "session: NULL path");
    /* read, not mmap: what is checked is exactly what gets loaded, even if
     * the file changes underneath */
    FILE *fp = fopen(path, "rb");
    if (!fp) return mf_err(MF_ERR_IO, "session file %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(fp), &sb) || !S_ISREG(sb.st_mode)) {
        fclose(fp);
        return mf_err(MF_ERR_IO, "session file %s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        fclose(fp);
        return mf_err(MF_ERR_NOMEM, "session file %s: out of memory for %zu bytes", path, len);
    }
    size_t got = fread(buf, 1, len, fp);
    bool err = ferror(fp);
    fclose(fp);
    if (err) {
        free(buf);
        return mf_err(MF_ERR_IO, "session file %s: read failed", path);
    }
    mf_status st = mf_state_seq_load_buffer(ctx, seq, buf, got, tokens, n_tokens, user, user_len);
    free(buf);
    if (st) {
        /* "session: x" -> "session file PATH: x" */
        const char *m = mf_last_error();
        if (!strncmp(m, "session: ", 9)) {
            char *msg = malloc(strlen(m) + 1);
            if (msg) {
                strcpy(msg, m + 9);
                mf_err(st, "session file %s: %s", path, msg);
                free(msg);
            }
        }
    }
    return st;
}

/* ---- sequence 0: the calls sessions had before there were sequences ---- */

mf_status mf_state_save(const mf_context *ctx, const char *path, const mf_token *tokens, uint32_t n_tokens,
                        const void *user, size_t user_len) {
    return mf_state_seq_save(ctx, 0, path, tokens, n_tokens, user, user_len);
}

mf_status mf_state_load(mf_context *ctx, const char *path, mf_token **tokens, uint32_t *n_tokens, void **user,
                        size_t *user_len) {
    return mf_state_seq_load(ctx, 0, path, tokens, n_tokens, user, user_len);
}

mf_status mf_state_save_buffer(const mf_context *ctx, const mf_token *tokens, uint32_t n_tokens, const void *user,
                               size_t user_len, void **out, size_t *out_len) {
    return mf_state_seq_save_buffer(ctx, 0, tokens, n_tokens, user, user_len, out, out_len);
}

mf_status mf_state_load_buffer(mf_context *ctx, const void *buf, size_t len, mf_token **tokens, uint32_t *n_tokens,
                               void **user, size_t *user_len) {
    return mf_state_seq_load_buffer(ctx, 0, buf, len, tokens, n_tokens, user, user_len);
}
