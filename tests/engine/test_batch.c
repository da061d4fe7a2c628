/* test_batch.c - many sequences in one context: batch invariance, sequence
 * operations, shared prefixes, and failed decodes that change nothing.
 *
 * Eight sequences with different prompts and lengths run through mixed
 * batches: a prompt prefilled in chunks of 1-9 tokens while others decode,
 * one sequence removed mid-way and its id reused for a new one, one
 * truncated after its continuation and regenerated, and a prefix shared by
 * three sequences through mf_kv_seq_cp (stored once: the page counts are
 * checked exactly). Every output row - every token is flagged - must be
 * bitwise equal to the same sequence run alone in a context of its own
 * (prompt in one mf_decode, then greedy tokens one at a time), so the greedy
 * continuations are identical too. This runs for every KV type and at 1, 2
 * and 3 threads, on models that exercise the paths attention can take:
 * GQA, a sliding window with soft-capping (gemma2), MoE (mixtral), biases
 * (qwen2). */
#include "testutil.h"
#include "minfer.h"

#include <stdlib.h>
#include <string.h>

#define N_SEQ 8
#define MAX_TOK 200

typedef struct plan {
    int id;            /* sequence id */
    int start, stop;   /* ticks: joins at start; removed at stop (-1: never) */
    int chunk;         /* prompt tokens per tick */
    int n_prompt, n_gen;
    int share_from;    /* -1, or a plan whose first n_share prompt tokens this one copies */
    int n_share;
    int regen_at;      /* tick at which it is truncated back to regen_pos and regenerates (-1: never) */
    int regen_pos;
    /* reference */
    mf_token tok[MAX_TOK];
    float *ref;        /* [n_prompt + n_gen][n_vocab] */
    /* mixed run */
    int pos;           /* next position */
    bool active, done;
} plan;

static uint32_t g_rng = 12345;
static uint32_t rnd(void) {
    g_rng = g_rng * 1664525u + 1013904223u;
    return g_rng >> 8;
}

static mf_token argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* The sequence alone: prompt in one call, then greedy tokens one by one. */
static bool reference(mf_model *m, plan *p, mf_kv_type kv) {
    const int V = mf_model_n_vocab(m);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 256;
    cp.n_threads = 1;
    cp.kv_type = kv;
    mf_context *c;
    if (mf_context_new(m, &cp, &c) != MF_OK) return false;
    p->ref = malloc(sizeof(float) * (size_t)V * (size_t)(p->n_prompt + p->n_gen));
    bool ok = mf_decode(c, p->tok, p->n_prompt, true) == MF_OK;
    for (int i = 0; ok && i < p->n_prompt; i++) memcpy(p->ref + (size_t)i * V, mf_get_logits(c, i), sizeof(float) * V);
    for (int g = 0; ok && g < p->n_gen; g++) {
        const int at = p->n_prompt + g; /* the token at position `at` is the argmax of row at-1 */
        p->tok[at] = argmax(p->ref + (size_t)(at - 1) * V, V);
        ok = mf_decode(c, &p->tok[at], 1, false) == MF_OK;
        if (ok) memcpy(p->ref + (size_t)at * V, mf_get_logits(c, -1), sizeof(float) * V);
    }
    CHECK(ok, "reference run: %s", mf_last_error());
    mf_context_free(c);
    return ok;
}

static void make_plans(plan *pl, int *n_plans, int V) {
    /* id, start, stop, chunk, n_prompt, n_gen, share_from, n_share, regen_at, regen_pos */
    static const int spec[][10] = {
        {0, 0, -1, 9, 70, 12, -1, 0, -1, 0},   /* a long prompt in chunks of 9 */
        {1, 0, -1, 1, 11, 30, -1, 0, 40, 14},  /* token by token; regenerates from 14 at tick 40 */
        {2, 2, -1, 5, 23, 16, -1, 0, -1, 0},
        {3, 1, 12, 4, 30, 20, -1, 0, -1, 0},   /* removed at tick 12 mid-way */
        {3, 13, -1, 7, 19, 10, -1, 0, -1, 0},  /* a new sequence in id 3 */
        {4, 5, -1, 3, 8, 25, -1, 0, -1, 0},
        {5, 0, -1, 8, 90, 6, -1, 0, -1, 0},    /* holds the shared prefix */
        {6, 14, -1, 6, 81, 9, 6, 70, -1, 0},   /* 70 tokens shared with 5, then its own */
        {7, 14, -1, 2, 76, 9, 6, 70, -1, 0},
    };
    *n_plans = (int)(sizeof spec / sizeof spec[0]);
    for (int i = 0; i < *n_plans; i++) {
        plan *p = &pl[i];
        memset(p, 0, sizeof *p);
        p->id = spec[i][0], p->start = spec[i][1], p->stop = spec[i][2], p->chunk = spec[i][3];
        p->n_prompt = spec[i][4], p->n_gen = spec[i][5], p->share_from = spec[i][6], p->n_share = spec[i][7];
        p->regen_at = spec[i][8], p->regen_pos = spec[i][9];
        for (int t = 0; t < p->n_prompt; t++) p->tok[t] = (mf_token)(3 + rnd() % (uint32_t)(V - 3));
        if (p->share_from >= 0) memcpy(p->tok, pl[p->share_from].tok, sizeof(mf_token) * (size_t)p->n_share);
    }
}

static int pages_for(int n) { return (n + (int)mf_kv_page_size() - 1) / (int)mf_kv_page_size(); }

/* The mixed run; returns the number of rows compared. */
static long mixed(mf_model *m, plan *pl, int n_plans, mf_kv_type kv, int threads, const char *name) {
    const int V = mf_model_n_vocab(m);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 1024;
    cp.n_seq_max = N_SEQ;
    cp.n_batch = 16; /* batches of up to 40 tokens run as several steps */
    cp.n_threads = threads;
    cp.kv_type = kv;
    mf_context *c;
    if (mf_context_new(m, &cp, &c) != MF_OK) {
        CHECK(0, "%s: context: %s", name, mf_last_error());
        return 0;
    }
    mf_batch b;
    mf_batch_init(&b, 64);
    int *owner = malloc(sizeof(int) * 64); /* plan of each batch entry */
    long compared = 0;
    bool ok = true;
    for (int i = 0; i < n_plans; i++) pl[i].pos = 0, pl[i].active = pl[i].done = false;
    for (int tick = 0; tick < 200 && ok; tick++) {
        bool any = false;
        for (int i = 0; i < n_plans; i++) {
            plan *p = &pl[i];
            if (p->active && tick == p->stop) {
                CHECK(mf_kv_seq_rm(c, p->id, 0, -1) == MF_OK, "%s: seq_rm: %s", name, mf_last_error());
                CHECK(mf_kv_seq_pos_max(c, p->id) == -1, "%s: removed sequence %d still holds positions", name, p->id);
                p->active = false;
                p->done = true;
            }
            if (!p->active && !p->done && tick == p->start) {
                p->active = true;
                if (p->share_from >= 0) {
                    const plan *src = &pl[p->share_from];
                    const uint32_t before = mf_kv_pages_used(c);
                    CHECK(src->pos >= p->n_share, "%s: plan order: the prefix is not cached yet", name);
                    CHECK(mf_kv_seq_cp(c, src->id, p->id, p->n_share) == MF_OK, "%s: seq_cp: %s", name, mf_last_error());
                    CHECK(mf_kv_pages_used(c) == before, "%s: sharing a prefix took %u pages (it should take none)",
                          name, mf_kv_pages_used(c) - before);
                    CHECK(mf_kv_seq_pos_max(c, p->id) == p->n_share - 1, "%s: shared sequence holds %d positions", name,
                          mf_kv_seq_pos_max(c, p->id) + 1);
                    p->pos = p->n_share;
                }
            }
            if (p->active && tick == p->regen_at) {
                CHECK(mf_kv_seq_rm(c, p->id, p->regen_pos, -1) == MF_OK, "%s: truncate: %s", name, mf_last_error());
                p->pos = p->regen_pos;
            }
        }
        mf_batch_clear(&b);
        for (int i = 0; i < n_plans; i++) {
            plan *p = &pl[i];
            if (!p->active) continue;
            const int end = p->n_prompt + p->n_gen;
            int take = p->pos < p->n_prompt ? p->chunk : 1;
            if (p->pos < p->n_prompt && p->pos + take > p->n_prompt) take = p->n_prompt - p->pos;
            for (int k = 0; k < take && p->pos < end; k++) {
                owner[b.n_tokens] = i;
                /* past the prompt the token is the greedy pick of this run's own previous row (checked below
                 * to be the reference's) */
                mf_batch_add(&b, p->tok[p->pos], p->pos, p->id, true);
                p->pos++;
            }
            if (p->pos == end && p->regen_at < 0) p->active = false, p->done = true;
            if (p->pos == end && p->regen_at >= 0 && tick > p->regen_at) p->active = false, p->done = true;
        }
        if (!b.n_tokens) {
            for (int i = 0; i < n_plans; i++) any |= !pl[i].done;
            if (!any) break;
            continue;
        }
        if (mf_decode_batch(c, &b) != MF_OK) {
            CHECK(0, "%s tick %d: decode: %s", name, tick, mf_last_error());
            ok = false;
            break;
        }
        for (int e = 0; e < b.n_tokens; e++) {
            const plan *p = &pl[owner[e]];
            const int pos = b.pos[e];
            const float *lg = mf_get_logits_ith(c, e);
            CHECK(lg != NULL, "%s: no logits for entry %d", name, e);
            if (!lg) continue;
            if (memcmp(lg, p->ref + (size_t)pos * V, sizeof(float) * V)) {
                CHECK(0, "%s kv %d t%d tick %d: sequence %d position %d: logits differ from the sequence alone", name,
                      (int)kv, threads, tick, p->id, pos);
                ok = false;
            }
            compared++;
            if (pos + 1 >= p->n_prompt && pos + 1 < p->n_prompt + p->n_gen)
                CHECK(argmax(lg, V) == p->tok[pos + 1], "%s: sequence %d: greedy token after %d differs", name, p->id, pos);
        }
        if (tick == 20) {
            /* 5, 6, 7 share page 0 (positions 0-63 of the 70-token prefix); 6 and 7 each copied the partly
             * shared page 1 when they wrote into it (copy on write) */
            int expect = 0;
            for (int i = 0; i < n_plans; i++)
                if (pl[i].active || (!pl[i].done && pl[i].pos)) expect += pages_for(pl[i].pos);
            for (int i = 0; i < n_plans; i++) {
                const plan *p = &pl[i];
                if (p->share_from >= 0 && p->active) expect -= pages_for(p->n_share) - (p->n_share % 64 ? 1 : 0);
            }
            /* finished sequences still hold their pages */
            for (int i = 0; i < n_plans; i++)
                if (pl[i].done && pl[i].stop < 0) expect += pages_for(pl[i].pos);
            CHECK((int)mf_kv_pages_used(c) == expect, "%s: %u KV pages in use, expected %d (shared prefix stored once)",
                  name, mf_kv_pages_used(c), expect);
        }
    }
    for (int i = 0; i < n_plans; i++)
        CHECK(pl[i].done, "%s: plan %d (sequence %d) did not finish", name, i, pl[i].id);
    free(owner);
    mf_batch_free(&b);
    mf_context_free(c);
    return compared;
}

/* Errors change nothing: a wrong position, an unknown sequence, a full
 * cache and an abort leave every sequence and page as they were, and the
 * same work then succeeds with the reference's bits. */
static int g_abort_after;
static bool abort_cb(void *ud) {
    (void)ud;
    return --g_abort_after < 0;
}

static void failures(mf_model *m, plan *p) {
    const int V = mf_model_n_vocab(m);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 128;
    cp.n_seq_max = 2;
    cp.n_threads = 2;
    cp.kv_type = MF_KV_F32;
    cp.abort_cb = abort_cb;
    g_abort_after = 1 << 30;
    mf_context *c;
    if (mf_context_new(m, &cp, &c) != MF_OK) {
        CHECK(0, "context: %s", mf_last_error());
        return;
    }
    mf_batch b;
    mf_batch_init(&b, 256);
    for (int i = 0; i < 10; i++) mf_batch_add(&b, p->tok[i], i, 0, false);
    CHECK(mf_decode_batch(c, &b) == MF_OK, "prefill: %s", mf_last_error());
    const uint32_t pages = mf_kv_pages_used(c);

    mf_batch_clear(&b);
    mf_batch_add(&b, p->tok[10], 11, 0, true); /* position 11: the sequence continues at 10 */
    CHECK(mf_decode_batch(c, &b) == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "continues at position 10"),
          "a skipped position: %s", mf_last_error());
    mf_batch_clear(&b);
    mf_batch_add(&b, p->tok[10], 10, 0, true);
    mf_batch_add(&b, p->tok[0], 0, 2, true);
    CHECK(mf_decode_batch(c, &b) == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "sequence id 2"),
          "an unknown sequence: %s", mf_last_error());
    mf_batch_clear(&b);
    mf_batch_add(&b, V, 10, 0, true);
    CHECK(mf_decode_batch(c, &b) == MF_ERR_INVALID_ARG, "a token id out of range: %s", mf_last_error());
    /* 128 + 64 cells in all: sequence 1 cannot take 190 positions next to sequence 0's 10 */
    mf_batch_clear(&b);
    for (int i = 0; i < 190; i++) mf_batch_add(&b, p->tok[i % p->n_prompt], i, 1, false);
    CHECK(mf_decode_batch(c, &b) == MF_ERR_CONTEXT_FULL, "a full cache: %s", mf_last_error());
    CHECK(mf_kv_pages_used(c) == pages && mf_kv_seq_pos_max(c, 0) == 9 && mf_kv_seq_pos_max(c, 1) == -1,
          "a failed decode changed the cache (%u pages, was %u; positions %d, %d)", mf_kv_pages_used(c), pages,
          mf_kv_seq_pos_max(c, 0), mf_kv_seq_pos_max(c, 1));
    CHECK(mf_kv_seq_rm(c, 0, 2, 5) == MF_ERR_UNSUPPORTED, "a hole in the middle must be refused");
    /* every page taken (3 pages: 128 cells + one for the second sequence), then one more is needed */
    mf_batch_clear(&b);
    for (int i = 0; i < 120; i++) mf_batch_add(&b, p->tok[i % p->n_prompt], i, 1, false);
    CHECK(mf_decode_batch(c, &b) == MF_OK && mf_kv_pages_used(c) == mf_kv_pages_total(c) && mf_kv_pages_total(c) == 3,
          "filling the cache: %s (%u of %u pages)", mf_last_error(), mf_kv_pages_used(c), mf_kv_pages_total(c));
    mf_batch_clear(&b);
    for (int i = 10; i < 70; i++) mf_batch_add(&b, p->tok[i], i, 0, true);
    CHECK(mf_decode_batch(c, &b) == MF_ERR_CONTEXT_FULL && strstr(mf_last_error(), "pages"), "no free page: %s",
          mf_last_error());
    CHECK(mf_kv_seq_pos_max(c, 0) == 9 && mf_kv_seq_pos_max(c, 1) == 119, "a decode without pages changed the cache");
    CHECK(mf_kv_seq_keep(c, 0) == MF_OK && mf_kv_pages_used(c) == pages, "seq_keep: %u pages", mf_kv_pages_used(c));

    /* an abort after the first layer: nothing kept, then the same batch runs clean */
    mf_batch_clear(&b);
    mf_batch_add(&b, p->tok[10], 10, 0, true);
    mf_batch_add(&b, p->tok[11], 11, 0, true);
    g_abort_after = 0;
    CHECK(mf_decode_batch(c, &b) == MF_ERR_ABORTED, "abort: %s", mf_last_error());
    CHECK(mf_kv_seq_pos_max(c, 0) == 9 && mf_kv_pages_used(c) == pages, "an aborted decode changed the cache");
    g_abort_after = 1 << 30;
    CHECK(mf_decode_batch(c, &b) == MF_OK, "after the abort: %s", mf_last_error());
    CHECK(!memcmp(mf_get_logits_ith(c, 1), p->ref + (size_t)11 * V, sizeof(float) * V),
          "after an abort the logits differ from the sequence alone");
    /* thread count changed between decodes: same bits */
    CHECK(mf_context_set_threads(c, 3) == MF_OK && mf_context_n_threads(c) == 3, "set_threads: %s", mf_last_error());
    mf_batch_clear(&b);
    mf_batch_add(&b, p->tok[12], 12, 0, true);
    CHECK(mf_decode_batch(c, &b) == MF_OK, "decode at 3 threads: %s", mf_last_error());
    CHECK(!memcmp(mf_get_logits_ith(c, 0), p->ref + (size_t)12 * V, sizeof(float) * V),
          "logits changed with the thread count");
    mf_batch_free(&b);
    mf_context_free(c);
}

/* One sequence's state: saved from sequence 1 of a many-sequence context
 * (beside another sequence), loaded into sequence 3 of another and into a
 * one-sequence context, then continued: the logits are the sequence alone's. */
static void seq_state(mf_model *m, plan *p) {
    const int V = mf_model_n_vocab(m);
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 512;
    cp.n_seq_max = 4;
    cp.n_threads = 2;
    cp.kv_type = MF_KV_F32;
    mf_context *a, *b, *c;
    if (mf_context_new(m, &cp, &a) || mf_context_new(m, &cp, &b)) {
        CHECK(0, "context: %s", mf_last_error());
        return;
    }
    cp.n_seq_max = 1;
    cp.n_ctx = 256;
    CHECK(mf_context_new(m, &cp, &c) == MF_OK, "context: %s", mf_last_error());
    mf_batch bt;
    mf_batch_init(&bt, 128);
    for (int i = 0; i < 30; i++) mf_batch_add(&bt, p->tok[i], i, 1, i == 29);
    for (int i = 0; i < 12; i++) mf_batch_add(&bt, p->tok[40 + i], i, 0, i == 11); /* another sequence beside it */
    CHECK(mf_decode_batch(a, &bt) == MF_OK, "prefill: %s", mf_last_error());
    CHECK(mf_get_logits_seq(a, 1) && !memcmp(mf_get_logits_seq(a, 1), p->ref + (size_t)29 * V, sizeof(float) * V),
          "mf_get_logits_seq differs from the sequence alone");
    void *img = NULL;
    size_t len = 0;
    CHECK(mf_state_seq_save_buffer(a, 1, p->tok, 30, "x", 1, &img, &len) == MF_OK, "seq save: %s", mf_last_error());
    /* into sequence 3 of a context that holds something in sequence 0 already */
    mf_batch_clear(&bt);
    for (int i = 0; i < 5; i++) mf_batch_add(&bt, p->tok[i], i, 0, false);
    CHECK(mf_decode_batch(b, &bt) == MF_OK, "other sequence: %s", mf_last_error());
    mf_context *dst[2] = {b, c};
    const int seq[2] = {3, 0};
    for (int k = 0; k < 2; k++) {
        mf_token *toks = NULL;
        uint32_t nt = 0;
        CHECK(mf_state_seq_load_buffer(dst[k], seq[k], img, len, &toks, &nt, NULL, NULL) == MF_OK, "seq load: %s",
              mf_last_error());
        CHECK(nt == 30 && toks && !memcmp(toks, p->tok, 30 * sizeof(mf_token)), "restored ids differ");
        free(toks);
        CHECK(mf_kv_seq_pos_max(dst[k], seq[k]) == 29, "restored sequence holds %d positions",
              mf_kv_seq_pos_max(dst[k], seq[k]) + 1);
        CHECK(mf_get_logits(dst[k], -1) && !memcmp(mf_get_logits(dst[k], -1), p->ref + (size_t)29 * V, sizeof(float) * V),
              "restored logits differ");
        mf_batch_clear(&bt);
        mf_batch_add(&bt, p->tok[30], 30, seq[k], true);
        CHECK(mf_decode_batch(dst[k], &bt) == MF_OK, "continue: %s", mf_last_error());
        CHECK(!memcmp(mf_get_logits_ith(dst[k], 0), p->ref + (size_t)30 * V, sizeof(float) * V),
              "a restored sequence continues with other logits than the sequence alone (into sequence %d)", seq[k]);
    }
    CHECK(mf_kv_seq_pos_max(b, 0) == 4, "loading sequence 3 touched sequence 0");
    CHECK(mf_state_seq_load_buffer(b, 4, img, len, NULL, NULL, NULL, NULL) == MF_ERR_INVALID_ARG,
          "a sequence id out of range must be refused");
    free(img);
    mf_batch_free(&bt);
    mf_context_free(a);
    mf_context_free(b);
    mf_context_free(c);
}

static void run_model(const char *path, const char *name, bool all_kv) {
    mf_model *m;
    if (mf_model_load(path, NULL, &m) != MF_OK) {
        CHECK(0, "load %s: %s", path, mf_last_error());
        return;
    }
    const int V = mf_model_n_vocab(m);
    static plan pl[16];
    int n_plans;
    const mf_kv_type kinds[] = {MF_KV_F32, MF_KV_F16, MF_KV_Q8_0};
    for (int ki = 0; ki < (all_kv ? 3 : 1); ki++) {
        mf_context_params cp = mf_context_default_params();
        cp.kv_type = kinds[ki];
        cp.n_ctx = 64;
        mf_context *probe;
        if (mf_context_new(m, &cp, &probe) != MF_OK) {
            /* q8_0 needs K/V rows in whole blocks of 32: a refusal with a message, not a failure */
            CHECK(kinds[ki] == MF_KV_Q8_0, "%s: context: %s", name, mf_last_error());
            fprintf(stderr, "%s: q8_0 KV cache refused as it should be: %s\n", name, mf_last_error());
            continue;
        }
        mf_context_free(probe);
        g_rng = 12345;
        make_plans(pl, &n_plans, V);
        bool ok = true;
        for (int i = 0; i < n_plans && ok; i++) ok = reference(m, &pl[i], kinds[ki]);
        if (!ok) {
            for (int i = 0; i < n_plans; i++) free(pl[i].ref);
            continue;
        }
        for (int t = 1; t <= 3; t++) {
            long n = mixed(m, pl, n_plans, kinds[ki], t, name);
            fprintf(stderr, "%s kv %s, %d thread%s: %ld rows bitwise equal to the sequences alone\n", name,
                    kinds[ki] == MF_KV_F32 ? "f32" : kinds[ki] == MF_KV_F16 ? "f16" : "q8_0", t, t > 1 ? "s" : "", n);
        }
        if (ki == 0) failures(m, &pl[0]);
        if (ki == 0) seq_state(m, &pl[0]);
        for (int i = 0; i < n_plans; i++) free(pl[i].ref);
    }
    mf_model_free(m);
}

int main(int argc, char **argv) {
    /* "quick": the sanitizer build's run, on the smallest model only */
    const bool quick = argc > 1 && !strcmp(argv[1], "quick");
    run_model("../shared/models/stories260K.gguf", "stories260K", true);
    if (quick) return test_summary("test_batch (quick)");
    run_model("../shared/models/zoo/gemma2.gguf", "gemma2", true);
    run_model("../shared/models/zoo/mixtral.gguf", "mixtral", false);
    run_model("../shared/models/zoo/qwen2.gguf", "qwen2", false);
    return test_summary("test_batch");
}
