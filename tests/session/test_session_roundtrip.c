/* test_session_roundtrip.c - a conversation saved after two turns and resumed
 * in a second process continues bitwise: the restored logits, the third
 * turn's prefill (only its new tokens; nothing of the history is decoded
 * again) and every logit of the third reply equal the uninterrupted run's.
 * Checked for each KV type (f32, f16, q8_0) through files, plus the buffer
 * API: save -> load -> save gives the same bytes, and an empty context. */
#include "session_chat.h"
#include "testutil.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/context.h"

#define MODEL "../shared/models/stories260K.gguf"
#define N_GEN 12
#define N_CTX 512

static const char *const k_turns[3] = {"Hello there", "Tell me a story about a cat", "And then what happened?"};

static const char *kv_name(mf_kv_type t) { return t == MF_KV_F32 ? "f32" : t == MF_KV_F16 ? "f16" : "q8_0"; }

/* Second process: restore, answer turn 3, write what it saw to `out`:
 * u32 n_past, reused, prefilled, then the restored logits row and N_GEN rows. */
static int resume(const char *state, const char *out, mf_kv_type kv) {
    mf_model *m;
    if (mf_model_load(MODEL, NULL, &m)) return 3;
    tchat c;
    if (!tchat_open(&c, m, kv, N_CTX)) return 3;
    mf_token *toks = NULL;
    uint32_t n_toks = 0;
    void *user = NULL;
    size_t ulen = 0;
    if (mf_state_load(c.ctx, state, &toks, &n_toks, &user, &ulen)) {
        fprintf(stderr, "resume: %s\n", mf_last_error());
        return 4;
    }
    /* the blob holds the conversation */
    json_decref(c.msgs);
    c.msgs = json_loadb(user, ulen, 0, NULL);
    if (!json_is_array(c.msgs) || n_toks != mf_context_n_past(c.ctx)) return 5;
    memcpy(c.cache, toks, sizeof *toks * n_toks);
    c.n_cache = n_toks;
    const int32_t nv = mf_model_n_vocab(m);
    float *rows = malloc(sizeof(float) * (size_t)nv * (N_GEN + 1));
    const float *restored = mf_get_logits(c.ctx, -1);
    if (!rows || !restored) return 6;
    memcpy(rows, restored, sizeof(float) * (size_t)nv);
    uint32_t n_past = mf_context_n_past(c.ctx);
    if (!tchat_turn(&c, k_turns[2], N_GEN, rows + nv)) return 7;
    FILE *f = fopen(out, "wb");
    uint32_t head[3] = {n_past, c.last_reused, c.last_prefill};
    if (!f || fwrite(head, sizeof head, 1, f) != 1 || fwrite(rows, sizeof(float) * (size_t)nv, N_GEN + 1, f) != N_GEN + 1)
        return 8;
    fclose(f);
    free(rows);
    free(toks);
    free(user);
    tchat_close(&c);
    mf_model_free(m);
    return 0;
}

static void roundtrip_files(mf_model *m, mf_kv_type kv, const char *dir) {
    const int32_t nv = mf_model_n_vocab(m);
    char state[512], out[512];
    snprintf(state, sizeof state, "%s/chat-%s.session", dir, kv_name(kv));
    snprintf(out, sizeof out, "%s/resumed-%s.bin", dir, kv_name(kv));
    tchat c;
    CHECK(tchat_open(&c, m, kv, N_CTX), "context (%s)", kv_name(kv));
    CHECK(tchat_turn(&c, k_turns[0], N_GEN, NULL) && tchat_turn(&c, k_turns[1], N_GEN, NULL), "turns 1-2 (%s)",
          kv_name(kv));
    CHECK(c.last_reused > 0, "turn 2 reused nothing of turn 1 (%s)", kv_name(kv));
    char *blob = json_dumps(c.msgs, JSON_COMPACT);
    mf_status st = mf_state_save(c.ctx, state, c.cache, c.n_cache, blob, strlen(blob));
    CHECK(st == MF_OK, "save (%s): %s", kv_name(kv), mf_last_error());
    free(blob);
    const uint32_t n_past = mf_context_n_past(c.ctx);
    float *at_save = malloc(sizeof(float) * (size_t)nv);
    float *rows = malloc(sizeof(float) * (size_t)nv * N_GEN);
    memcpy(at_save, mf_get_logits(c.ctx, -1), sizeof(float) * (size_t)nv);
    /* the uninterrupted run */
    CHECK(tchat_turn(&c, k_turns[2], N_GEN, rows), "turn 3 (%s)", kv_name(kv));
    const uint32_t prefill3 = c.last_prefill;
    CHECK(c.last_reused == n_past, "uninterrupted turn 3 reused %u of %u cached tokens", c.last_reused, n_past);

    /* the resumed run, in another process */
    pid_t pid = fork();
    if (pid == 0) {
        char kvs[8];
        snprintf(kvs, sizeof kvs, "%d", (int)kv);
        execl("/proc/self/exe", "test_session_roundtrip", "--resume", state, out, kvs, (char *)NULL);
        _exit(127);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "resumed process failed (%s): status %d", kv_name(kv), ws);
    size_t sz = 0;
    uint8_t *res = test_read_file(out, &sz);
    const size_t want = 12 + sizeof(float) * (size_t)nv * (N_GEN + 1);
    CHECK(res && sz == want, "resumed output %zu bytes, expected %zu", sz, want);
    if (res && sz == want) {
        uint32_t head[3];
        memcpy(head, res, sizeof head);
        const float *restored = (const float *)(res + 12), *rrows = restored + nv;
        CHECK(head[0] == n_past, "%s: restored %u positions, saved %u", kv_name(kv), head[0], n_past);
        CHECK(head[1] == n_past, "%s: resumed turn 3 reused %u of %u restored tokens (history re-prefilled)",
              kv_name(kv), head[1], n_past);
        CHECK(head[2] == prefill3, "%s: resumed turn 3 prefilled %u tokens, uninterrupted %u", kv_name(kv), head[2],
              prefill3);
        CHECK(!memcmp(restored, at_save, sizeof(float) * (size_t)nv), "%s: restored logits differ from the saved ones",
              kv_name(kv));
        int same = 0;
        for (int g = 0; g < N_GEN; g++) {
            bool eq = !memcmp(rrows + (size_t)g * nv, rows + (size_t)g * nv, sizeof(float) * (size_t)nv);
            CHECK(eq, "%s: turn 3 token %d: logits differ between the resumed and the uninterrupted run", kv_name(kv), g);
            same += eq;
        }
        if (same == N_GEN)
            fprintf(stderr, "%s: %u positions restored, turn 3 prefilled %u new tokens in both runs, %d x %d logits bitwise equal\n",
                    kv_name(kv), n_past, prefill3, N_GEN, nv);
    }
    free(res);
    free(at_save);
    free(rows);
    tchat_close(&c);
}

/* save -> load -> save is the identity on the image; an empty context round-trips. */
static void roundtrip_buffers(mf_model *m) {
    tchat a, b;
    CHECK(tchat_open(&a, m, MF_KV_Q8_0, N_CTX) && tchat_open(&b, m, MF_KV_Q8_0, N_CTX), "contexts");
    void *img0 = NULL, *img1 = NULL, *img2 = NULL;
    size_t n0 = 0, n1 = 0, n2 = 0;
    CHECK(mf_state_save_buffer(a.ctx, NULL, 0, NULL, 0, &img0, &n0) == MF_OK, "save empty: %s", mf_last_error());
    CHECK(n0 == 128, "an empty state is %zu bytes, expected just the header", n0);
    CHECK(tchat_turn(&a, k_turns[0], 5, NULL), "turn");
    CHECK(mf_state_save_buffer(a.ctx, a.cache, a.n_cache, "blob", 4, &img1, &n1) == MF_OK, "save: %s", mf_last_error());
    mf_token *t = NULL;
    uint32_t nt = 0;
    void *u = NULL;
    size_t ul = 0;
    CHECK(mf_state_load_buffer(b.ctx, img1, n1, &t, &nt, &u, &ul) == MF_OK, "load: %s", mf_last_error());
    CHECK(nt == a.n_cache && t && !memcmp(t, a.cache, sizeof *t * nt), "tokens differ after load");
    CHECK(ul == 4 && u && !memcmp(u, "blob", 5), "user blob differs after load (NUL-terminated too)");
    CHECK(mf_context_n_past(b.ctx) == mf_context_n_past(a.ctx), "n_past differs after load");
    CHECK(mf_state_save_buffer(b.ctx, t, nt, u, ul, &img2, &n2) == MF_OK, "save again: %s", mf_last_error());
    CHECK(n1 == n2 && !memcmp(img1, img2, n1), "save(load(image)) differs from the image");
    free(t);
    free(u);
    free(img2);
    img2 = NULL;
    /* the empty image empties a context: no positions, no logits */
    CHECK(mf_state_load_buffer(b.ctx, img0, n0, NULL, NULL, NULL, NULL) == MF_OK, "load empty: %s", mf_last_error());
    CHECK(mf_context_n_past(b.ctx) == 0 && mf_get_logits(b.ctx, -1) == NULL, "empty state left positions or logits");
    /* token ids must cover every cached position, or be absent */
    CHECK(mf_state_save_buffer(a.ctx, a.cache, a.n_cache - 1, NULL, 0, &img2, &n2) == MF_ERR_INVALID_ARG,
          "save with too few token ids accepted");
    free(img0);
    free(img1);
    free(img2);
    tchat_close(&a);
    tchat_close(&b);
}

int main(int argc, char **argv) {
    if (argc == 5 && !strcmp(argv[1], "--resume")) return resume(argv[2], argv[3], (mf_kv_type)atoi(argv[4]));
    mf_model *m = NULL;
    CHECK(mf_model_load(MODEL, NULL, &m) == MF_OK, "load %s: %s", MODEL, mf_last_error());
    if (!m) return test_summary("session_roundtrip");
    char dir[] = "/tmp/mf-session-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    roundtrip_files(m, MF_KV_F16, dir);
    roundtrip_files(m, MF_KV_F32, dir);
    roundtrip_files(m, MF_KV_Q8_0, dir);
    roundtrip_buffers(m);
    /* saving is temp + rename: nothing but the finished files is left */
    DIR *d = opendir(dir);
    struct dirent *e;
    int n_files = 0;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        CHECK(!strstr(e->d_name, ".tmp."), "temporary file left behind: %s", e->d_name);
        n_files++;
        char p[600];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    if (d) closedir(d);
    CHECK(n_files == 6, "%d files in the session directory, expected 6", n_files);
    rmdir(dir);
    mf_model_free(m);
    return test_summary("session_roundtrip");
}
