/* test_token_golden.c - prompts and continuations of llama.cpp's golden runs: tokenizing each
 * text prompt gives llama.cpp's prompt_tokens, and the greedy tokens' pieces, concatenated, give
 * the bytes of greedy_text_hex. */
#include <glob.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "testutil.h"
#include "token/vocab.h"

#define GOLDEN "../shared/golden/"
#define MODELS "../shared/models/"

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static void print_hex(FILE *o, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) fprintf(o, "%02x", (unsigned char)s[i]);
}

static void check_case(const char *json_path, const char *model_dir, int *n_cases) {
    json_error_t jerr;
    json_t *j = json_load_file(json_path, 0, &jerr);
    CHECK(j != NULL, "%s: %s", json_path, jerr.text);
    if (!j) return;
    const char *input = json_string_value(json_object_get(j, "input"));
    if (!input || strcmp(input, "text") != 0) {
        json_decref(j);
        return; /* ids given directly: nothing to tokenize */
    }
    const char *model = json_string_value(json_object_get(j, "model"));
    const char *prompt = json_string_value(json_object_get(j, "prompt"));
    json_t *add_bos = json_object_get(j, "add_bos");
    json_t *want = json_object_get(j, "prompt_tokens");
    json_t *greedy = json_object_get(j, "greedy_tokens");
    const char *hex = json_string_value(json_object_get(j, "greedy_text_hex"));
    CHECK(model && prompt && json_is_boolean(add_bos) && json_is_array(want) && json_is_array(greedy) && hex,
          "%s: missing fields", json_path);
    if (!(model && prompt && json_is_boolean(add_bos) && json_is_array(want) && json_is_array(greedy) && hex)) {
        json_decref(j);
        return;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s%s", model_dir, model);
    gguf_file *f = NULL;
    mf_vocab *v = NULL;
    mf_status s = gguf_open(path, &f);
    CHECK(s == MF_OK, "%s: %s", path, mf_last_error());
    if (!s) {
        s = mf_vocab_load(f, &v);
        CHECK(s == MF_OK, "%s: %s", path, mf_last_error());
    }
    if (v) {
        (*n_cases)++;
        /* the prompt */
        mf_token tok[512];
        int32_t n = mf_vocab_tokenize(v, prompt, strlen(prompt), tok, 512, json_is_true(add_bos), true);
        bool ok = n == (int32_t)json_array_size(want);
        for (int32_t i = 0; ok && i < n; i++)
            ok = tok[i] == (mf_token)json_integer_value(json_array_get(want, (size_t)i));
        CHECK(ok, "%s: prompt \"%s\" tokenizes differently from llama.cpp", json_path, prompt);
        if (!ok) {
            fprintf(stderr, "  got:");
            for (int32_t i = 0; i < n; i++) fprintf(stderr, " %d", tok[i]);
            fprintf(stderr, "\n");
        }
        /* the continuation, piece by piece */
        size_t hl = strlen(hex);
        char *expect = malloc(hl / 2 + 1), *got = malloc(64 * 1024);
        size_t ne = 0, ng = 0;
        for (size_t i = 0; i + 1 < hl; i += 2) expect[ne++] = (char)(hexval(hex[i]) * 16 + hexval(hex[i + 1]));
        for (size_t i = 0; i < json_array_size(greedy); i++) {
            mf_token t = (mf_token)json_integer_value(json_array_get(greedy, i));
            int32_t k = mf_vocab_token_to_piece(v, t, got + ng, (int32_t)(64 * 1024 - ng), false);
            CHECK(k >= 0, "%s: piece of token %d: %d", json_path, t, k);
            if (k > 0) ng += (size_t)k;
        }
        /* llama.cpp rendered greedy_text with llama_detokenize, which drops the
         * space SentencePiece put in front of the first piece; pieces one by one
         * keep it, so compare them past that one space */
        size_t skip = mf_vocab_get_kind(v) == MF_VOCAB_SPM && ng > 0 && got[0] == ' ' && (ne == 0 || expect[0] != ' ');
        bool same = ng - skip == ne && memcmp(got + skip, expect, ne) == 0;
        CHECK(same, "%s: greedy pieces concatenate differently from greedy_text_hex", json_path);
        if (!same) {
            fprintf(stderr, "  want: ");
            print_hex(stderr, expect, ne);
            fprintf(stderr, "\n  got:  ");
            print_hex(stderr, got, ng);
            fprintf(stderr, "\n");
        }
        /* and the whole sequence at once, as llama_detokenize renders it */
        mf_token seq[256];
        int32_t ns = (int32_t)json_array_size(greedy);
        if (ns > 256) ns = 256;
        for (int32_t i = 0; i < ns; i++) seq[i] = (mf_token)json_integer_value(json_array_get(greedy, (size_t)i));
        char *whole = malloc(64 * 1024);
        int32_t nwh = mf_vocab_detokenize(v, seq, ns, whole, 64 * 1024, false, false);
        bool same2 = nwh >= 0 && (size_t)nwh == ne && memcmp(whole, expect, ne) == 0;
        CHECK(same2, "%s: detokenized greedy continuation differs from greedy_text_hex", json_path);
        /* too small a buffer reports the size needed */
        if (ne > 0)
            CHECK(mf_vocab_detokenize(v, seq, ns, whole, 0, false, false) == -(int32_t)ne, "%s: size query", json_path);
        free(whole);
        printf("  %-40s prompt %s, pieces %s, detokenize %s\n", json_path + strlen(GOLDEN), ok ? "ok" : "DIFFERS",
               same ? "ok" : "DIFFER", same2 ? "ok" : "DIFFERS");
        free(expect);
        free(got);
    }
    mf_vocab_free(v);
    gguf_close(f);
    json_decref(j);
}

static void run_glob(const char *pattern, const char *model_dir, int *n_cases) {
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    CHECK(rc == 0 && g.gl_pathc > 0, "no golden files match %s", pattern);
    if (rc != 0) return;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        if (strstr(g.gl_pathv[i], "zoo_manifest.json")) continue;
        check_case(g.gl_pathv[i], model_dir, n_cases);
    }
    globfree(&g);
}

int main(void) {
    int n = 0;
    printf("golden prompts and continuations (llama.cpp):\n");
    run_glob(GOLDEN "stories260K/*.json", MODELS, &n);
    run_glob(GOLDEN "llama-2-tiny-random.hello.json", MODELS, &n);
    run_glob(GOLDEN "zoo/*.json", MODELS "zoo/", &n);
    CHECK(n >= 15, "only %d text goldens found", n);
    printf("%d text goldens checked\n", n);
    return test_summary("test_token_golden");
}
