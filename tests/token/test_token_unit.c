/* test_token_unit.c - tokenizer edge cases: empty and invalid input, special tokens with parse_special
 * on and off, buffer-too-small returns, out-of-range ids, streaming UTF-8, EOG sets, and malformed
 * vocabulary metadata (built in memory) that must fail with an error naming the key.
 * Expected ids come from llama.cpp (commit 3f545bec) on the same vocabulary files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "testutil.h"
#include "token/utf8.h"
#include "token/vocab.h"
#include "token/vocab_impl.h"

#define TOK "../shared/tokenizer/ggml-vocab-"

typedef struct loaded {
    gguf_file *f;
    mf_vocab *v;
} loaded;

static loaded load(const char *name) {
    char path[256];
    snprintf(path, sizeof path, TOK "%s.gguf", name);
    loaded l = {0};
    mf_status s = gguf_open(path, &l.f);
    CHECK(s == MF_OK, "%s: %s", path, mf_last_error());
    if (s) return l;
    s = mf_vocab_load(l.f, &l.v);
    CHECK(s == MF_OK, "%s: %s", path, mf_last_error());
    return l;
}

static void unload(loaded *l) {
    mf_vocab_free(l->v);
    gguf_close(l->f);
}

/* Tokenizes and compares with the expected ids (terminated by -2). */
static void expect_ids(const mf_vocab *v, const char *what, const char *text, size_t len, bool add, bool parse,
                       const int32_t *want) {
    mf_token got[256];
    int nw = 0;
    while (want[nw] != -2) nw++;
    int32_t n = mf_vocab_tokenize(v, text, len, got, 256, add, parse);
    bool ok = n == nw;
    for (int i = 0; ok && i < n; i++) ok = got[i] == want[i];
    CHECK(ok, "%s (add_special=%d parse_special=%d): got %d tokens, want %d", what, add, parse, n, nw);
    if (!ok) {
        fprintf(stderr, "  got:");
        for (int i = 0; i < n; i++) fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n");
    }
}

#define IDS(...) ((const int32_t[]){__VA_ARGS__, -2})
#define NONE ((const int32_t[]){-2})

static void test_empty(void) {
    const char *names[] = {"llama-spm", "qwen2", "llama-bpe", "bert-bge"};
    const int32_t *with_special[] = {IDS(1), NONE, IDS(128000), IDS(101, 102)};
    for (int i = 0; i < 4; i++) {
        loaded l = load(names[i]);
        if (!l.v) continue;
        expect_ids(l.v, names[i], "", 0, false, false, NONE);
        expect_ids(l.v, names[i], "", 0, true, true, with_special[i]);
        expect_ids(l.v, names[i], NULL, 0, true, false, with_special[i]); /* NULL with length 0 is empty */
        unload(&l);
    }
}

static void test_invalid_utf8_and_specials(void) {
    static const char in0[] = "\xff\xfe", in1[] = "a\xc3", in2[] = "<s>hello</s>", in3[] = "<|user|>  hi <|end|>\n",
                      in4[] = " <|endoftext|>x";
    loaded spm = load("llama-spm");
    if (spm.v) {
        expect_ids(spm.v, "spm invalid", in0, 2, false, false, IDS(29871, 258, 257));
        expect_ids(spm.v, "spm truncated", in1, 2, false, false, IDS(263, 198));
        expect_ids(spm.v, "spm specials off", in2, 12, false, false, IDS(529, 29879, 29958, 12199, 829, 29879, 29958));
        expect_ids(spm.v, "spm specials on", in2, 12, false, true, IDS(1, 22172, 2));
        expect_ids(spm.v, "spm specials on + BOS", in2, 12, true, true, IDS(1, 1, 22172, 2));
        expect_ids(spm.v, "spm invalid + BOS", in0, 2, true, false, IDS(1, 29871, 258, 257));
        unload(&spm);
    }
    loaded phi = load("phi-3");
    if (phi.v) {
        /* phi-3's special tokens strip the spaces after them (rstrip) */
        expect_ids(phi.v, "phi-3 rstrip", in3, strlen(in3), false, true, IDS(32010, 7251, 29871, 32007));
        expect_ids(phi.v, "phi-3 off", in3, strlen(in3), false, false,
                   IDS(529, 29989, 1792, 29989, 29958, 29871, 7251, 529, 29989, 355, 29989, 29958, 13));
        expect_ids(phi.v, "phi-3 eot", in4, strlen(in4), true, true, IDS(1, 259, 32000, 921));
        unload(&phi);
    }
    loaded qw = load("qwen2");
    if (qw.v) {
        expect_ids(qw.v, "qwen2 invalid", in0, 2, false, false, IDS(9973));
        expect_ids(qw.v, "qwen2 truncated", in1, 2, false, false, IDS(64, 5691));
        expect_ids(qw.v, "qwen2 specials off", in4, strlen(in4), false, false, IDS(82639, 8691, 723, 427, 91, 29, 87));
        expect_ids(qw.v, "qwen2 specials on", in4, strlen(in4), true, true, IDS(220, 151643, 87));
        unload(&qw);
    }
    loaded l3 = load("llama-bpe");
    if (l3.v) {
        expect_ids(l3.v, "llama-bpe BOS", in1, 2, true, false, IDS(128000, 64, 5809));
        unload(&l3);
    }
    loaded ds = load("deepseek-llm");
    if (ds.v) {
        /* a 3-byte space at the end stays in one word with the space after it */
        expect_ids(ds.v, "deepseek U+2029", "\xe2\x80\xa9 ", 4, false, false, IDS(350, 20535));
        expect_ids(ds.v, "deepseek U+2029 mid", "a\xe2\x80\xa9 b", 6, false, false, IDS(64, 350, 102, 270));
        unload(&ds);
    }
}

static void test_buffers_and_ranges(void) {
    loaded l = load("llama-spm");
    if (!l.v) return;
    const mf_vocab *v = l.v;
    mf_token t[8];
    int32_t n = mf_vocab_tokenize(v, "Hello world", 11, NULL, 0, true, false);
    CHECK(n == -3, "size query returns the negated count: %d", n);
    n = mf_vocab_tokenize(v, "Hello world", 11, t, 2, true, false);
    CHECK(n == -3, "too small a buffer returns the negated count: %d", n);
    n = mf_vocab_tokenize(v, "Hello world", 11, t, 3, true, false);
    CHECK(n == 3 && t[0] == 1, "exact buffer: %d", n);
    CHECK(mf_vocab_tokenize(v, "x", 1, t, -1, false, false) == INT32_MIN, "negative cap is an error");
    CHECK(mf_vocab_tokenize(v, NULL, 3, t, 8, false, false) == INT32_MIN, "NULL text with length is an error");
    CHECK(mf_vocab_tokenize(v, "x", 1, NULL, 8, false, false) == INT32_MIN, "NULL output with cap is an error");
    CHECK(mf_vocab_tokenize(NULL, "x", 1, t, 8, false, false) == INT32_MIN, "NULL vocab is an error");

    char buf[16];
    /* "▁Hello" (15043) renders " Hello" */
    CHECK(mf_vocab_token_to_piece(v, 15043, buf, 16, false) == 6 && memcmp(buf, " Hello", 6) == 0, "piece");
    CHECK(mf_vocab_token_to_piece(v, 15043, buf, 5, false) == -6, "piece too big for buffer returns -6");
    CHECK(mf_vocab_token_to_piece(v, 15043, NULL, 0, false) == -6, "piece size query");
    CHECK(mf_vocab_token_to_piece(v, 13, buf, 16, false) == 1 && buf[0] == '\n', "<0x0A> renders a newline");
    CHECK(mf_vocab_token_to_piece(v, 1, buf, 16, false) == 0, "control token renders empty");
    CHECK(mf_vocab_token_to_piece(v, 1, buf, 16, true) == 3 && memcmp(buf, "<s>", 3) == 0, "control token, special");
    CHECK(mf_vocab_token_to_piece(v, 0, buf, 16, false) == 0, "unknown token renders empty");
    CHECK(mf_vocab_token_to_piece(v, -1, buf, 16, false) == INT32_MIN, "id -1 is an error");
    CHECK(strstr(mf_last_error(), "out of range") != NULL, "message says out of range: %s", mf_last_error());
    CHECK(mf_vocab_token_to_piece(v, 32000, buf, 16, false) == INT32_MIN, "id n_vocab is an error");
    CHECK(mf_vocab_token_text(v, 32000) == NULL && mf_vocab_token_text(v, -5) == NULL, "text of bad id is NULL");
    CHECK(mf_vocab_token_attr(v, 32000) == 0 && !mf_vocab_is_eog(v, 32000) && !mf_vocab_is_eog(v, -1), "bad id");
    CHECK(strcmp(mf_vocab_token_text(v, 2), "</s>") == 0, "token text");
    mf_token bad[2] = {15043, 99999};
    CHECK(mf_vocab_detokenize(v, bad, 2, buf, 16, false, false) == INT32_MIN, "detokenize rejects a bad id");
    unload(&l);
}

static void test_special_ids(void) {
    loaded l = load("llama-spm");
    if (l.v) {
        CHECK(mf_vocab_bos(l.v) == 1 && mf_vocab_eos(l.v) == 2 && mf_vocab_unk(l.v) == 0, "llama-spm ids");
        CHECK(mf_vocab_add_bos(l.v) && !mf_vocab_add_eos(l.v), "llama-spm adds BOS");
        CHECK(mf_vocab_is_eog(l.v, 2) && !mf_vocab_is_eog(l.v, 1), "llama-spm EOG = {2}");
        CHECK(mf_vocab_nl(l.v) == 13, "newline token <0x0A>");
        CHECK(mf_vocab_get_kind(l.v) == MF_VOCAB_SPM, "kind");
        unload(&l);
    }
    l = load("qwen2");
    if (l.v) {
        CHECK(mf_vocab_is_eog(l.v, 151643) && mf_vocab_is_eog(l.v, 151645), "qwen2 <|endoftext|>, <|im_end|> end");
        CHECK(!mf_vocab_is_eog(l.v, 151644), "<|im_start|> does not end generation");
        CHECK(!mf_vocab_add_bos(l.v), "qwen2 adds no BOS");
        CHECK(mf_vocab_eot(l.v) == 151645 || mf_vocab_eot(l.v) == 151643, "qwen2 EOT found by text");
        CHECK(strcmp(mf_vocab_pre_name(l.v), "qwen2") == 0, "pre name");
        unload(&l);
    }
    l = load("llama-bpe");
    if (l.v) {
        CHECK(mf_vocab_bos(l.v) == 128000 && mf_vocab_eos(l.v) == 128001 && mf_vocab_add_bos(l.v), "llama3 ids");
        CHECK(mf_vocab_is_eog(l.v, 128009) && mf_vocab_is_eog(l.v, 128001), "<|eot_id|> and <|end_of_text|> end");
        CHECK(mf_vocab_eot(l.v) == 128009, "llama3 EOT is <|eot_id|>: %d", mf_vocab_eot(l.v));
        unload(&l);
    }
    l = load("gpt-neox");
    if (l.v) {
        CHECK(strcmp(mf_vocab_pre_name(l.v), "default") == 0, "no tokenizer.ggml.pre means the default set");
        unload(&l);
    }
}

/* Special ids, add flags and end-of-generation sets as llama.cpp reports them
 * (llama_vocab_bos/eos/eot/sep/nl/pad/fim_pre/fim_pad/fim_rep/fim_sep, get_add_bos/eos, is_eog). */
static void test_special_table(void) {
    static const struct {
        const char *name;
        int32_t ids[10]; /* bos eos eot sep nl pad fim_pre fim_pad fim_rep fim_sep */
        int add_bos, add_eos;
        int32_t eog[4];
    } k[] = {
        {"baichuan", {1, 2, -1, -1, 403, 0, -1, -1, -1, -1}, 1, 0, {2, -2}},
        {"bert-bge", {101, -1, -1, 102, 0, 0, -1, 0, -1, -1}, 1, 0, {0, -2}},
        {"deepseek-coder", {32013, 32014, 32014, -1, 185, 32014, 32016, -1, -1, -1}, 1, 0, {32014, -2}},
        {"deepseek-llm", {100000, 100001, 100001, -1, 185, 100001, -1, -1, -1, -1}, 1, 0, {100001, -2}},
        {"falcon", {11, 11, 11, -1, 193, -1, -1, -1, -1, -1}, 0, 0, {11, -2}},
        {"gpt-2", {50256, 50256, 50256, -1, 198, -1, -1, -1, -1, -1}, 0, 0, {50256, -2}},
        {"gpt-neox", {0, 0, 0, -1, 187, -1, -1, -1, -1, -1}, 0, 0, {0, -2}},
        {"llama-bpe", {128000, 128001, 128009, -1, 198, -1, -1, -1, -1, -1}, 1, 0, {128001, 128009, -2}},
        {"llama-spm", {1, 2, -1, -1, 13, -1, -1, -1, -1, -1}, 1, 0, {2, -2}},
        {"mpt", {0, 0, 0, -1, 187, -1, -1, -1, -1, -1}, 0, 0, {0, -2}},
        {"phi-3", {1, 32000, 32007, -1, 13, 32000, -1, -1, -1, -1}, 1, 0, {2, 32000, 32007, -2}},
        {"qwen2", {151643, 151643, 151645, -1, 198, 151643, -1, -1, -1, -1}, 0, 0, {128247, 151643, 151645, -2}},
        {"refact", {0, 0, 0, -1, 203, -1, 1, 4, 18, -1}, 0, 0, {0, 4, 18, -2}},
        {"starcoder", {0, 0, 0, -1, 222, -1, 1, 4, -1, -1}, 0, 0, {0, 4, -2}},
    };
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        loaded l = load(k[i].name);
        if (!l.v) continue;
        const mf_vocab *v = l.v;
        int32_t got[10] = {v->bos, v->eos,     v->eot,     v->sep,     v->nl,
                           v->pad, v->fim_pre, v->fim_pad, v->fim_rep, v->fim_sep};
        for (int j = 0; j < 10; j++)
            CHECK(got[j] == k[i].ids[j], "%s: special id #%d is %d, llama.cpp %d", k[i].name, j, got[j], k[i].ids[j]);
        CHECK(v->add_bos == (k[i].add_bos != 0) && v->add_eos == (k[i].add_eos != 0), "%s: add_bos/add_eos", k[i].name);
        int ne = 0;
        while (k[i].eog[ne] != -2) ne++;
        int found = 0;
        for (mf_token t = 0; t < v->n_tokens; t++) {
            if (!mf_vocab_is_eog(v, t)) continue;
            bool listed = false;
            for (int j = 0; j < ne; j++) listed |= k[i].eog[j] == t;
            CHECK(listed, "%s: token %d ends generation here but not in llama.cpp", k[i].name, t);
            found++;
        }
        CHECK(found == ne, "%s: %d end-of-generation tokens, llama.cpp %d", k[i].name, found, ne);
        unload(&l);
    }
}

static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t j = i;
        uint32_t c = mf_utf8_decode((const uint8_t *)s, n, &j);
        if (c == MF_CPT_REPLACEMENT && !(j - i == 3 && memcmp(s + i, "\xef\xbf\xbd", 3) == 0)) return false;
        i = j;
    }
    return true;
}

static void test_streaming(void) {
    CHECK(mf_utf8_complete_prefix("", 0) == 0, "empty");
    CHECK(mf_utf8_complete_prefix("abc", 3) == 3, "ascii");
    CHECK(mf_utf8_complete_prefix("a\xe6\x97", 3) == 1, "cut 3-byte char");
    CHECK(mf_utf8_complete_prefix("a\xe6\x97\xa5", 4) == 4, "whole 3-byte char");
    CHECK(mf_utf8_complete_prefix("\xf0\x9f\xa6", 3) == 0, "cut emoji");
    CHECK(mf_utf8_complete_prefix("\xf0\x9f\xa6\x99", 4) == 4, "whole emoji");
    CHECK(mf_utf8_complete_prefix("x\xc3", 2) == 1, "cut 2-byte char");
    CHECK(mf_utf8_complete_prefix("x\x80", 2) == 2, "stray continuation byte is emitted");
    CHECK(mf_utf8_complete_prefix("x\xff", 2) == 2, "invalid byte is emitted");
    CHECK(mf_utf8_complete_prefix("\x80\x80\x80\x80", 4) == 4, "only continuation bytes");

    /* stream a byte-level BPE continuation whose pieces split characters */
    loaded l = load("llama-bpe");
    if (!l.v) return;
    const char *text = "日本語 🦙 naïve — «ok»";
    mf_token t[64];
    int32_t n = mf_vocab_tokenize(l.v, text, strlen(text), t, 64, false, false);
    CHECK(n > 0, "tokenize");
    char pending[64], out[256];
    size_t np = 0, no = 0;
    bool split_seen = false;
    for (int32_t i = 0; i < n; i++) {
        int32_t k = mf_vocab_token_to_piece(l.v, t[i], pending + np, (int32_t)(sizeof pending - np), false);
        CHECK(k >= 0, "piece");
        if (k < 0) break;
        np += (size_t)k;
        size_t ok = mf_utf8_complete_prefix(pending, np);
        if (ok < np) split_seen = true;
        CHECK(valid_utf8(pending, ok), "emitted chunk is valid UTF-8");
        memcpy(out + no, pending, ok);
        no += ok;
        memmove(pending, pending + ok, np - ok);
        np -= ok;
    }
    CHECK(np == 0 && no == strlen(text) && memcmp(out, text, no) == 0, "streamed text equals input");
    CHECK(split_seen, "some piece ended inside a character (test covers the hold-back)");
    unload(&l);
}

static void test_roundtrip(void) {
    const char *names[] = {"llama-spm", "qwen2", "llama-bpe", "gpt-2", "starcoder", "deepseek-coder", "falcon"};
    const char *text = "Hello, world! It's 2024: naïve café, 日本語, tabs\tand\nnewlines   and spaces 🦙.";
    for (int i = 0; i < 7; i++) {
        loaded l = load(names[i]);
        if (!l.v) continue;
        mf_token t[256];
        int32_t n = mf_vocab_tokenize(l.v, text, strlen(text), t, 256, false, false);
        char buf[512];
        size_t o = 0;
        for (int32_t k = 0; k < n; k++) {
            int32_t r = mf_vocab_token_to_piece(l.v, t[k], buf + o, (int32_t)(sizeof buf - o), false);
            if (r > 0) o += (size_t)r;
        }
        size_t skip = mf_vocab_get_kind(l.v) == MF_VOCAB_SPM && o && buf[0] == ' '; /* the prefix space */
        CHECK(o - skip == strlen(text) && memcmp(buf + skip, text, o - skip) == 0, "%s: pieces give back the text",
              names[i]);
        unload(&l);
    }
}

/* ---- malformed metadata ---------------------------------------------------------------------- */

typedef struct gb {
    uint8_t *p;
    size_t n, cap;
    uint64_t nkv;
} gb;

static void gb_raw(gb *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}
static void gb_u32(gb *b, uint32_t x) { gb_raw(b, &x, 4); }
static void gb_u64(gb *b, uint64_t x) { gb_raw(b, &x, 8); }
static void gb_s(gb *b, const char *s) {
    gb_u64(b, strlen(s));
    gb_raw(b, s, strlen(s));
}
static void gb_key(gb *b, const char *k, uint32_t type) {
    gb_s(b, k);
    gb_u32(b, type);
    b->nkv++;
}
static void kv_str(gb *b, const char *k, const char *v) {
    gb_key(b, k, GGUF_STR);
    gb_s(b, v);
}
static void kv_u32(gb *b, const char *k, uint32_t v) {
    gb_key(b, k, GGUF_U32);
    gb_u32(b, v);
}
static void kv_bool_as_u32(gb *b, const char *k) { kv_u32(b, k, 1); }
static void kv_strs(gb *b, const char *k, const char *const *v, int n) {
    gb_key(b, k, GGUF_ARR);
    gb_u32(b, GGUF_STR);
    gb_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) gb_s(b, v[i]);
}
static void kv_f32s(gb *b, const char *k, int n) {
    gb_key(b, k, GGUF_ARR);
    gb_u32(b, GGUF_F32);
    gb_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        float x = -(float)i;
        gb_raw(b, &x, 4);
    }
}
static void kv_i32s(gb *b, const char *k, int n, int32_t val) {
    gb_key(b, k, GGUF_ARR);
    gb_u32(b, GGUF_I32);
    gb_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) gb_raw(b, &val, 4);
}

/* Wraps the key/values in a GGUF v3 header (no tensors) and loads the vocabulary. */
static mf_status load_built(gb *b, mf_vocab **v) {
    gb out = {0};
    gb_raw(&out, "GGUF", 4);
    gb_u32(&out, 3);
    gb_u64(&out, 0);
    gb_u64(&out, b->nkv);
    gb_raw(&out, b->p, b->n);
    while (out.n % 32) gb_raw(&out, "", 1);
    gguf_file *f = NULL;
    *v = NULL;
    mf_status s = gguf_parse(out.p, out.n, "built.gguf", &f);
    CHECK(s == MF_OK, "built GGUF parses: %s", mf_last_error());
    if (!s) s = mf_vocab_load(f, v);
    if (s == MF_OK) {
        /* a loaded vocabulary must tokenize without trouble */
        mf_token t[64];
        CHECK(mf_vocab_tokenize(*v, "ab ba <s>", 9, t, 64, true, true) >= 0, "built vocabulary tokenizes: %s",
              mf_last_error());
    }
    gguf_close(f);
    free(out.p);
    free(b->p);
    memset(b, 0, sizeof *b);
    return s;
}

static const char *const k_spm_tokens[] = {"<unk>",
                                           "<s>",
                                           "</s>",
                                           "\xe2\x96\x81",
                                           "a",
                                           "b",
                                           "\xe2\x96\x81"
                                           "a",
                                           "ab"};
static const char *const k_bpe_tokens[] = {"a", "b", "ab", "\xc4\xa0", "</s>"};
static const char *const k_bpe_merges[] = {"a b"};

enum {
    BREAK_NONE,
    BREAK_NO_MODEL,
    BREAK_MODEL,
    BREAK_TOKENS_TYPE,
    BREAK_SCORES_SHORT,
    BREAK_TYPES_TYPE,
    BREAK_BOS_TYPE,
    BREAK_BOS_RANGE,
    BREAK_ADD_BOS_TYPE,
    BREAK_NO_TOKENS,
    BREAK_EMPTY_TOKENS,
    BREAK_TYPES_SHORT
};

static mf_status build_spm(int brk, mf_vocab **v) {
    gb b = {0};
    int n = 8;
    if (brk != BREAK_NO_MODEL) kv_str(&b, "tokenizer.ggml.model", brk == BREAK_MODEL ? "t5" : "llama");
    if (brk == BREAK_TOKENS_TYPE)
        kv_i32s(&b, "tokenizer.ggml.tokens", n, 0);
    else if (brk == BREAK_EMPTY_TOKENS)
        kv_strs(&b, "tokenizer.ggml.tokens", k_spm_tokens, 0);
    else if (brk != BREAK_NO_TOKENS)
        kv_strs(&b, "tokenizer.ggml.tokens", k_spm_tokens, n);
    kv_f32s(&b, "tokenizer.ggml.scores", brk == BREAK_SCORES_SHORT ? n - 1 : n);
    if (brk == BREAK_TYPES_TYPE)
        kv_f32s(&b, "tokenizer.ggml.token_type", n);
    else
        kv_i32s(&b, "tokenizer.ggml.token_type", brk == BREAK_TYPES_SHORT ? 2 : n, 1);
    if (brk == BREAK_BOS_TYPE)
        kv_str(&b, "tokenizer.ggml.bos_token_id", "1");
    else
        kv_u32(&b, "tokenizer.ggml.bos_token_id", brk == BREAK_BOS_RANGE ? 1000 : 1);
    if (brk == BREAK_ADD_BOS_TYPE) kv_bool_as_u32(&b, "tokenizer.ggml.add_bos_token");
    return load_built(&b, v);
}

static void expect_fail(mf_status s, mf_vocab *v, const char *what, const char *needle) {
    CHECK(s != MF_OK, "%s: loads but should fail", what);
    if (s == MF_OK) {
        mf_vocab_free(v);
        return;
    }
    CHECK(strstr(mf_last_error(), needle) != NULL, "%s: message \"%s\" should name %s", what, mf_last_error(), needle);
}

static void test_bad_metadata(void) {
    mf_vocab *v;
    mf_status s = build_spm(BREAK_NONE, &v);
    CHECK(s == MF_OK, "minimal SPM vocabulary loads: %s", mf_last_error());
    if (!s) {
        mf_token t[8];
        /* "\xe2\x96\x81" "a" scores -6, "ab" -7: the higher score merges first */
        CHECK(mf_vocab_tokenize(v, "ab", 2, t, 8, true, false) == 3 && t[0] == 1 && t[1] == 6 && t[2] == 5,
              "minimal SPM: BOS, then the space+a merge, then b");
        mf_vocab_free(v);
    }
    expect_fail(build_spm(BREAK_NO_MODEL, &v), v, "no tokenizer model", "tokenizer.ggml.model");
    expect_fail(build_spm(BREAK_MODEL, &v), v, "unsupported model", "'t5'");
    expect_fail(build_spm(BREAK_NO_TOKENS, &v), v, "no token list", "tokenizer.ggml.tokens");
    expect_fail(build_spm(BREAK_EMPTY_TOKENS, &v), v, "empty token list", "tokenizer.ggml.tokens");
    expect_fail(build_spm(BREAK_TOKENS_TYPE, &v), v, "tokens not strings", "tokenizer.ggml.tokens");
    expect_fail(build_spm(BREAK_SCORES_SHORT, &v), v, "scores too short", "tokenizer.ggml.scores");
    expect_fail(build_spm(BREAK_TYPES_TYPE, &v), v, "token types not integers", "tokenizer.ggml.token_type");
    expect_fail(build_spm(BREAK_TYPES_SHORT, &v), v, "token types too short", "tokenizer.ggml.token_type");
    expect_fail(build_spm(BREAK_BOS_TYPE, &v), v, "BOS id a string", "tokenizer.ggml.bos_token_id");
    expect_fail(build_spm(BREAK_ADD_BOS_TYPE, &v), v, "add_bos not a bool", "tokenizer.ggml.add_bos_token");
    /* an id past the vocabulary is what llama.cpp ignores (keeping the default): same here */
    s = build_spm(BREAK_BOS_RANGE, &v);
    CHECK(s == MF_OK && mf_vocab_bos(v) == 1, "BOS id out of range keeps the default");
    if (!s) mf_vocab_free(v);

    /* byte-level BPE */
    gb b = {0};
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_strs(&b, "tokenizer.ggml.tokens", k_bpe_tokens, 5);
    s = load_built(&b, &v);
    expect_fail(s, v, "BPE without merges", "tokenizer.ggml.merges");
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_strs(&b, "tokenizer.ggml.tokens", k_bpe_tokens, 5);
    kv_i32s(&b, "tokenizer.ggml.merges", 1, 0);
    expect_fail(load_built(&b, &v), v, "merges not strings", "tokenizer.ggml.merges");
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "no-such-pre");
    kv_strs(&b, "tokenizer.ggml.tokens", k_bpe_tokens, 5);
    kv_strs(&b, "tokenizer.ggml.merges", k_bpe_merges, 1);
    expect_fail(load_built(&b, &v), v, "unknown pre-tokenizer", "no-such-pre");
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "kimi-k2");
    kv_strs(&b, "tokenizer.ggml.tokens", k_bpe_tokens, 5);
    kv_strs(&b, "tokenizer.ggml.merges", k_bpe_merges, 1);
    expect_fail(load_built(&b, &v), v, "pre-tokenizer needing custom code", "kimi-k2");
    kv_str(&b, "tokenizer.ggml.model", "gpt2");
    kv_str(&b, "tokenizer.ggml.pre", "gpt-2");
    kv_strs(&b, "tokenizer.ggml.tokens", k_bpe_tokens, 5);
    kv_strs(&b, "tokenizer.ggml.merges", k_bpe_merges, 1);
    s = load_built(&b, &v);
    CHECK(s == MF_OK, "minimal BPE vocabulary loads: %s", mf_last_error());
    if (!s) {
        mf_token t[8];
        int32_t n = mf_vocab_tokenize(v, "ab", 2, t, 8, false, false);
        CHECK(n == 1 && t[0] == 2, "minimal BPE merges a+b: %d", n);
        n = mf_vocab_tokenize(v, "</s>", 4, t, 8, false, true);
        CHECK(n == 1 && t[0] == 4, "'</s>' is an end-of-generation text, so it became a control token");
        CHECK(mf_vocab_is_eog(v, 4), "'</s>' ends generation");
        n = mf_vocab_tokenize(v, "zz", 2, t, 8, false, false);
        CHECK(n == 0, "bytes with no token are dropped as llama.cpp does: %d", n);
        mf_vocab_free(v);
    }
}

int main(void) {
    test_empty();
    test_invalid_utf8_and_specials();
    test_buffers_and_ranges();
    test_special_ids();
    test_special_table();
    test_streaming();
    test_roundtrip();
    test_bad_metadata();
    return test_summary("test_token_unit");
}
