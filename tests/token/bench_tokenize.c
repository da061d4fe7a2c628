/* bench_tokenize.c - tokenizer throughput in MB/s on ~1 MB of text with the qwen2 and llama-bpe vocabularies.
 *
 * Built with the tests but not registered with ctest (a benchmark, not a check).
 * Run from the project root:  build/tests/bench_tokenize [text-file] [vocab.gguf ...]
 * Without a file it tokenizes 1 MiB of generated text (fixed seed): English-like
 * sentences with numbers, punctuation, code, some accented, Cyrillic, CJK and emoji words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/gguf.h"
#include "testutil.h"
#include "token/vocab.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng % n);
}

static const char *const k_words[] = {
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "I",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "time",
    "people",
    "model",
    "language",
    "inference",
    "token",
    "tokenizer",
    "vocabulary",
    "merge",
    "running",
    "quickly",
    "beautiful",
    "government",
    "international",
    "understanding",
    "development",
    "children",
    "information",
    "because",
    "through",
    "between",
    "important",
    "different",
    "following",
    "without",
    "another",
    "don't",
    "it's",
    "we're",
    "they've",
    "I'll",
    "she'd",
    "GPU",
    "CPU",
    "llama.cpp",
    "HTTP/1.1",
    "e-mail",
    "naïve",
    "café",
    "résumé",
    "Zürich",
    "über",
    "façade",
    "привет",
    "мир",
    "язык",
    "日本語",
    "中文",
    "모델",
    "🦙",
    "🚀",
    "→",
    "—",
    "…",
    "«quote»",
    "$100",
    "3.14159",
    "2024-01-15",
    "#include",
    "x += 1;",
    "(a, b)",
};

static char *make_text(size_t target, size_t *len) {
    char *t = malloc(target + 256);
    size_t n = 0;
    size_t nw = sizeof k_words / sizeof k_words[0];
    while (n < target) {
        int words = 5 + (int)rnd(16);
        for (int w = 0; w < words && n < target; w++) {
            const char *s = k_words[rnd((uint32_t)nw)];
            if (w) t[n++] = ' ';
            size_t k = strlen(s);
            memcpy(t + n, s, k);
            if (w == 0 && t[n] >= 'a' && t[n] <= 'z') t[n] -= 32;
            n += k;
            if (rnd(12) == 0) n += (size_t)sprintf(t + n, " %u", rnd(100000));
            if (rnd(10) == 0) t[n++] = ',';
        }
        t[n++] = rnd(8) ? '.' : '?';
        if (rnd(6) == 0) {
            memcpy(t + n, "\n\n", 2);
            n += 2;
        } else if (rnd(10) == 0) {
            memcpy(t + n, "\n    ", 5);
            n += 5;
        } else {
            t[n++] = ' ';
        }
    }
    *len = n;
    return t;
}

static void bench(const char *path, const char *text, size_t len) {
    gguf_file *f = NULL;
    mf_vocab *v = NULL;
    double t0 = now();
    if (gguf_open(path, &f) || mf_vocab_load(f, &v)) {
        fprintf(stderr, "%s: %s\n", path, mf_last_error());
        gguf_close(f);
        return;
    }
    double t_load = now() - t0;
    mf_token *tok = malloc((len + 16) * sizeof *tok);
    (void)mf_vocab_tokenize(v, text, len, tok, (int32_t)(len + 16), false, false); /* warm up caches and pages */
    for (int special = 0; special < 2; special++) {
        double best = 1e30;
        int32_t n = 0;
        for (int rep = 0; rep < 5; rep++) {
            t0 = now();
            n = mf_vocab_tokenize(v, text, len, tok, (int32_t)(len + 16), false, special);
            double dt = now() - t0;
            if (dt < best) best = dt;
        }
        printf("%-44s %s: %8d tokens, %6.1f ms, %6.2f MB/s%s\n", path, special ? "parse_special" : "plain        ", n,
               best * 1e3, (double)len / best / 1e6, special ? "" : "");
    }
    printf("%-44s load: %.0f ms (%d tokens, %u merges, pre-tokenizer %s)\n", path, t_load * 1e3, mf_vocab_n_tokens(v),
           mf_vocab_n_merges(v), mf_vocab_pre_name(v));
    free(tok);
    mf_vocab_free(v);
    gguf_close(f);
}

int main(int argc, char **argv) {
    size_t len = 0;
    char *text = NULL;
    if (argc > 1 && strcmp(argv[1], "-") != 0) {
        text = test_read_file(argv[1], &len);
        if (!text) return 1;
    } else {
        text = make_text(1 << 20, &len);
    }
    printf("text: %zu bytes\n", len);
    if (argc > 2) {
        for (int i = 2; i < argc; i++) bench(argv[i], text, len);
    } else {
        bench("../shared/tokenizer/ggml-vocab-qwen2.gguf", text, len);
        bench("../shared/tokenizer/ggml-vocab-llama-bpe.gguf", text, len);
    }
    free(text);
    return 0;
}
