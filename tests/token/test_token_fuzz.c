/* test_token_fuzz.c - random vocabularies (odd texts, duplicate and empty tokens, unknown token types,
 * NaN scores, merges of non-tokens, special ids past the end, random flags) loaded from in-memory GGUFs
 * and used on random input: every call must either work or fail with a message, never crash, and
 * every id it returns must be in range. Fixed seed; meant to run under ASan/UBSan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "testutil.h"
#include "token/vocab.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return n ? (uint32_t)(g_rng % n) : 0;
}

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 1024;
        b->p = realloc(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void put_u32(buf *b, uint32_t x) { put(b, &x, 4); }
static void put_u64(buf *b, uint64_t x) { put(b, &x, 8); }
static void put_str(buf *b, const char *s, size_t n) {
    put_u64(b, n);
    put(b, s, n);
}
static void put_key(buf *b, const char *k, uint32_t type, uint64_t *nkv) {
    put_str(b, k, strlen(k));
    put_u32(b, type);
    (*nkv)++;
}

/* Random short text from pieces tokenizers care about. */
static size_t rnd_text(char *out, size_t max_pieces) {
    static const char *const pieces[] = {"a",
                                         "b",
                                         "c",
                                         "ab",
                                         " ",
                                         "  ",
                                         "\n",
                                         "\xe2\x96\x81",
                                         "\xc4\xa0",
                                         "<",
                                         ">",
                                         "<s>",
                                         "</s>",
                                         "<0x41>",
                                         "<0xZZ>",
                                         "<0x",
                                         "\xff",
                                         "\xc3",
                                         "\xc3\xa9",
                                         "\xe6\x97\xa5",
                                         "'s",
                                         "1",
                                         "23",
                                         "\xf0\x9f\xa6\x99",
                                         "\xed\xa0\x80",
                                         "\xe3\x80\x80",
                                         "\x00",
                                         "x"};
    size_t n = 0, k = rnd((uint32_t)max_pieces + 1);
    for (size_t i = 0; i < k; i++) {
        const char *p = pieces[rnd(sizeof pieces / sizeof pieces[0])];
        size_t l = p[0] ? strlen(p) : 1; /* "\x00" is one NUL byte */
        memcpy(out + n, p, l);
        n += l;
    }
    return n;
}

static void one_vocab(int iter) {
    buf b = {0};
    uint64_t nkv = 0;
    static const char *const models[] = {"llama", "gpt2", "bert", "gpt2", "llama"};
    static const char *const pres[] = {"gpt-2",     "llama-bpe", "qwen2",   "deepseek-llm", "deepseek-coder",
                                       "falcon",    "starcoder", "default", "gemma4",       "tekken",
                                       "chameleon", "youtu",     ""};
    const char *model = models[rnd(5)];
    put_key(&b, "tokenizer.ggml.model", GGUF_STR, &nkv);
    put_str(&b, model, strlen(model));
    if (strcmp(model, "gpt2") == 0) {
        const char *pre = pres[rnd(sizeof pres / sizeof pres[0])];
        if (pre[0]) {
            put_key(&b, "tokenizer.ggml.pre", GGUF_STR, &nkv);
            put_str(&b, pre, strlen(pre));
        }
    }
    if (rnd(4) == 0) {
        put_key(&b, "general.name", GGUF_STR, &nkv);
        put_str(&b, "Phi3-fuzz", 9);
    }
    uint32_t n = 1 + rnd(48);
    char texts[64][64];
    size_t lens[64];
    put_key(&b, "tokenizer.ggml.tokens", GGUF_ARR, &nkv);
    put_u32(&b, GGUF_STR);
    put_u64(&b, n);
    for (uint32_t i = 0; i < n; i++) {
        lens[i] = rnd_text(texts[i], 3);
        put_str(&b, texts[i], lens[i]);
    }
    if (rnd(4)) {
        put_key(&b, "tokenizer.ggml.scores", GGUF_ARR, &nkv);
        put_u32(&b, GGUF_F32);
        put_u64(&b, n);
        for (uint32_t i = 0; i < n; i++) {
            float s = rnd(10) == 0 ? NAN : rnd(10) == 0 ? INFINITY : -(float)rnd(1000) / 7.0f;
            put(&b, &s, 4);
        }
    }
    if (rnd(4)) {
        put_key(&b, "tokenizer.ggml.token_type", GGUF_ARR, &nkv);
        put_u32(&b, GGUF_I32);
        put_u64(&b, n);
        for (uint32_t i = 0; i < n; i++) {
            int32_t t = rnd(3) ? 1 : (int32_t)rnd(10) - 1; /* mostly normal, some of every type and worse */
            put(&b, &t, 4);
        }
    }
    if (strcmp(model, "gpt2") == 0) {
        uint32_t m = rnd(40);
        put_key(&b, "tokenizer.ggml.merges", GGUF_ARR, &nkv);
        put_u32(&b, GGUF_STR);
        put_u64(&b, m);
        for (uint32_t i = 0; i < m; i++) {
            char s[160];
            size_t l = 0;
            if (rnd(4)) {
                size_t a = rnd(n), c = rnd(n);
                memcpy(s, texts[a], lens[a]);
                l = lens[a];
                if (rnd(8)) s[l++] = ' ';
                memcpy(s + l, texts[c], lens[c]);
                l += lens[c];
            } else {
                l = rnd_text(s, 4);
            }
            put_str(&b, s, l);
        }
    }
    static const char *const ids[] = {"tokenizer.ggml.bos_token_id",       "tokenizer.ggml.eos_token_id",
                                      "tokenizer.ggml.unknown_token_id",   "tokenizer.ggml.padding_token_id",
                                      "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.eot_token_id"};
    for (int i = 0; i < 6; i++) {
        if (rnd(2)) continue;
        put_key(&b, ids[i], GGUF_U32, &nkv);
        put_u32(&b, rnd(3) ? rnd(n + 2) : UINT32_MAX);
    }
    static const char *const flags[] = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                        "tokenizer.ggml.add_space_prefix"};
    for (int i = 0; i < 3; i++) {
        if (rnd(2)) continue;
        put_key(&b, flags[i], GGUF_BOOL, &nkv);
        uint8_t x = (uint8_t)rnd(2);
        put(&b, &x, 1);
    }

    buf g = {0};
    put(&g, "GGUF", 4);
    put_u32(&g, 3);
    put_u64(&g, 0);
    put_u64(&g, nkv);
    put(&g, b.p, b.n);
    while (g.n % 32) put(&g, "", 1);
    free(b.p);

    gguf_file *f = NULL;
    mf_vocab *v = NULL;
    mf_status s = gguf_parse(g.p, g.n, "fuzz.gguf", &f);
    CHECK(s == MF_OK, "iteration %d: GGUF does not parse: %s", iter, mf_last_error());
    if (!s) {
        s = mf_vocab_load(f, &v);
        CHECK(s == MF_OK || mf_last_error()[0], "iteration %d: failure without a message", iter);
    }
    if (v) {
        int32_t nt = mf_vocab_n_tokens(v);
        for (int k = 0; k < 24; k++) {
            char text[256];
            size_t len = rnd_text(text, 24);
            mf_token t[512];
            bool add = rnd(2), parse = rnd(2);
            int32_t r = mf_vocab_tokenize(v, text, len, t, 512, add, parse);
            CHECK(r >= 0 || (r == INT32_MIN && mf_last_error()[0]), "iteration %d: tokenize returned %d", iter, r);
            for (int32_t i = 0; i < r; i++)
                CHECK(t[i] >= 0 && t[i] < nt, "iteration %d: id %d out of range", iter, t[i]);
            if (r > 0) {
                char out[4096];
                int32_t d = mf_vocab_detokenize(v, t, r, out, sizeof out, rnd(2), rnd(2));
                CHECK(d > INT32_MIN, "iteration %d: detokenize failed: %s", iter, mf_last_error());
            }
        }
        for (int32_t i = 0; i < nt; i++) {
            char p[512];
            CHECK(mf_vocab_token_to_piece(v, i, p, sizeof p, rnd(2)) >= 0, "iteration %d: piece of %d", iter, i);
            (void)mf_vocab_is_eog(v, i);
        }
        mf_vocab_free(v);
    }
    gguf_close(f);
    free(g.p);
}

int main(void) {
    for (int i = 0; i < 400; i++) one_vocab(i);
    return test_summary("test_token_fuzz");
}
