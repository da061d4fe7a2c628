/* test_session_corrupt.c - session files that must be refused: truncated at
 * many offsets, any header byte or a spread of payload bytes flipped,
 * trailing bytes, another model, another KV type, more positions than the
 * context holds, not a session at all, a missing file. Each refusal has a
 * message naming the problem, and the context - cache rows, n_past, logits -
 * is exactly as before. Runs under ASan: the loader reads hostile input. */
#include "session_chat.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/context.h"

#define MODEL "../shared/models/stories260K.gguf"
#define N_CTX 256

/* Everything a load could change: n_past, logits and every cache row. */
typedef struct snap {
    uint32_t n_past;
    int32_t n_logits;
    float *logits;
    uint8_t *kv;
    size_t kv_bytes;
} snap;

static void take(mf_context *ctx, snap *s) {
    const uint32_t nl = ctx->model->hp.n_layer, nv = ctx->model->hp.n_vocab;
    /* every cell of the cache, held or not */
    const uint32_t nc = ctx->kv.n_pages * MF_KV_PAGE;
    int32_t *cells = malloc(sizeof(int32_t) * nc);
    for (uint32_t i = 0; i < nc; i++) cells[i] = (int32_t)i;
    const size_t per = ctx->be->ops->kv_read(ctx->be, 0, cells, nc, NULL);
    s->n_past = mf_context_n_past(ctx);
    s->n_logits = ctx->n_logits;
    s->logits = malloc(sizeof(float) * nv);
    memcpy(s->logits, mf_get_logits(ctx, -1) ? mf_get_logits(ctx, -1) : ctx->logits, sizeof(float) * nv);
    s->kv_bytes = per * nl;
    s->kv = malloc(s->kv_bytes);
    for (uint32_t l = 0; l < nl; l++) ctx->be->ops->kv_read(ctx->be, (int)l, cells, nc, s->kv + per * l);
    free(cells);
}

static bool same(mf_context *ctx, const snap *a) {
    snap b;
    take(ctx, &b);
    bool eq = a->n_past == b.n_past && a->n_logits == b.n_logits &&
              !memcmp(a->logits, b.logits, sizeof(float) * ctx->model->hp.n_vocab) && a->kv_bytes == b.kv_bytes &&
              !memcmp(a->kv, b.kv, a->kv_bytes);
    free(b.logits);
    free(b.kv);
    return eq;
}

static int g_refusals;

/* Loads a bad image into ctx: must fail with `code` (0 = any), a message
 * containing `word`, and leave ctx as `before`. */
static void refused(mf_context *ctx, const snap *before, const void *img, size_t len, mf_status code, const char *word,
                    const char *what) {
    mf_token *t = (mf_token *)1;
    void *u = (void *)1;
    mf_status st = mf_state_load_buffer(ctx, img, len, &t, NULL, &u, NULL);
    const char *msg = mf_last_error();
    CHECK(st != MF_OK, "%s: accepted", what);
    CHECK(!code || st == code, "%s: status %s, expected %s (%s)", what, mf_status_name(st), mf_status_name(code), msg);
    CHECK(strstr(msg, "session") && strstr(msg, word), "%s: message lacks '%s': %s", what, word, msg);
    CHECK(t == NULL && u == NULL, "%s: outputs not cleared", what);
    CHECK(same(ctx, before), "%s: the context changed", what);
    g_refusals++;
}

int main(void) {
    mf_model *m = NULL, *other = NULL, *other2 = NULL;
    CHECK(mf_model_load(MODEL, NULL, &m) == MF_OK, "load: %s", mf_last_error());
    CHECK(mf_model_load("../shared/models/stories260K-f16.gguf", NULL, &other) == MF_OK, "load f16: %s", mf_last_error());
    CHECK(mf_model_load("../shared/models/llama-2-tiny-random.gguf", NULL, &other2) == MF_OK, "load tiny: %s",
          mf_last_error());
    if (!m || !other || !other2) return test_summary("session_corrupt");

    /* the good image: two turns */
    tchat src, dst;
    CHECK(tchat_open(&src, m, MF_KV_F16, N_CTX) && tchat_open(&dst, m, MF_KV_F16, N_CTX), "contexts");
    CHECK(tchat_turn(&src, "Hello there", 8, NULL) && tchat_turn(&src, "Tell me a story", 8, NULL), "turns");
    static const char blob[] = "{\"messages\": []}";
    void *img = NULL;
    size_t len = 0;
    CHECK(mf_state_save_buffer(src.ctx, src.cache, src.n_cache, blob, sizeof blob - 1, &img, &len) == MF_OK, "save: %s",
          mf_last_error());
    if (!img) return test_summary("session_corrupt");
    /* the target holds a different conversation, so any partial load would show */
    CHECK(tchat_turn(&dst, "Once upon a time", 4, NULL), "target turn");
    snap before;
    take(dst.ctx, &before);

    /* truncated: every offset through the header and the first tokens, then a spread */
    uint8_t *cut = malloc(len + 1);
    for (size_t n = 0; n < len; n = n < 200 ? n + 1 : n + (len - 200) / 37 + 1) {
        memcpy(cut, img, n);
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu of %zu bytes", n, len);
        refused(dst.ctx, &before, cut, n, MF_ERR_FORMAT, n < 128 ? "truncated" : "truncated", what);
    }
    memcpy(cut, img, len - 1);
    refused(dst.ctx, &before, cut, len - 1, MF_ERR_FORMAT, "truncated", "missing the last byte");
    memcpy(cut, img, len);
    cut[len] = 0;
    refused(dst.ctx, &before, cut, len + 1, MF_ERR_FORMAT, "trailing", "one byte appended");

    /* flipped: each header byte (two bit positions), then payload bytes across tokens, logits, KV rows and blob */
    for (size_t i = 0; i < len; i = i < 128 ? i + 1 : i + 97) {
        for (int b = 0; b < 2; b++) {
            memcpy(cut, img, len);
            cut[i] ^= b ? 0x80 : 0x01;
            char what[64];
            snprintf(what, sizeof what, "byte %zu ^ 0x%02x", i, b ? 0x80 : 0x01);
            const char *word = i < 8 ? "not a minfer session" : i < 128 ? "header checksum" : "payload checksum";
            refused(dst.ctx, &before, cut, len, MF_ERR_FORMAT, word, what);
        }
    }
    memcpy(cut, img, len);
    cut[len - 1] ^= 0x10;
    refused(dst.ctx, &before, cut, len, MF_ERR_FORMAT, "payload checksum", "last byte flipped");

    /* foreign: other models, another KV type, a context too short */
    tchat o1, o2, f32, shortc;
    CHECK(tchat_open(&o1, other, MF_KV_F16, N_CTX) && tchat_open(&o2, other2, MF_KV_F16, N_CTX) &&
              tchat_open(&f32, m, MF_KV_F32, N_CTX) && tchat_open(&shortc, m, MF_KV_F16, 64),
          "foreign contexts");
    tchat *foreign[] = {&o1, &o2, &f32, &shortc};
    const char *fword[] = {"another model", "another model", "KV cache of type f16", "n_ctx 64"};
    const mf_status fcode[] = {MF_ERR_INVALID_ARG, MF_ERR_INVALID_ARG, MF_ERR_INVALID_ARG, MF_ERR_CONTEXT_FULL};
    for (int i = 0; i < 4; i++) {
        CHECK(tchat_turn(foreign[i], "Hi", 3, NULL), "foreign turn %d", i);
        snap fb;
        take(foreign[i]->ctx, &fb);
        refused(foreign[i]->ctx, &fb, img, len, fcode[i], fword[i], fword[i]);
        free(fb.logits);
        free(fb.kv);
    }

    /* not a session: a GGUF file; and files: damage is reported with the path, a missing file is an I/O error */
    size_t glen = 0;
    void *gguf = test_read_file(MODEL, &glen);
    if (gguf) refused(dst.ctx, &before, gguf, glen, MF_ERR_FORMAT, "not a minfer session", "a GGUF file");
    free(gguf);
    char path[] = "/tmp/mf-corrupt-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    memcpy(cut, img, len);
    cut[500] ^= 4;
    CHECK(write(fd, cut, len) == (ssize_t)len, "write");
    close(fd);
    CHECK(mf_state_load(dst.ctx, path, NULL, NULL, NULL, NULL) == MF_ERR_FORMAT, "damaged file accepted");
    CHECK(strstr(mf_last_error(), path) && strstr(mf_last_error(), "checksum"), "file message: %s", mf_last_error());
    CHECK(same(dst.ctx, &before), "damaged file changed the context");
    unlink(path);
    CHECK(mf_state_load(dst.ctx, path, NULL, NULL, NULL, NULL) == MF_ERR_IO, "missing file: %s", mf_last_error());
    CHECK(same(dst.ctx, &before), "missing file changed the context");
    /* a failed save leaves nothing behind and no partial file */
    CHECK(mf_state_save(src.ctx, "/nonexistent-dir/x.session", NULL, 0, NULL, 0) == MF_ERR_IO, "save into a missing directory");

    /* and the intact image still loads, replacing the target's state */
    CHECK(mf_state_load_buffer(dst.ctx, img, len, NULL, NULL, NULL, NULL) == MF_OK, "intact image: %s", mf_last_error());
    CHECK(!same(dst.ctx, &before) && mf_context_n_past(dst.ctx) == src.n_cache, "intact image did not load");
    fprintf(stderr, "%d damaged or foreign images refused, context untouched each time\n", g_refusals);

    for (int i = 0; i < 4; i++) tchat_close(foreign[i]);
    free(before.logits);
    free(before.kv);
    free(cut);
    free(img);
    tchat_close(&src);
    tchat_close(&dst);
    mf_model_free(m);
    mf_model_free(other);
    mf_model_free(other2);
    return test_summary("session_corrupt");
}
