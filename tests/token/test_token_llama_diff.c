/* test_token_llama_diff.c - a corpus of adversarial inputs with llama.cpp's own token ids for every
 * vocabulary in ../shared/tokenizer, with and without add_special/parse_special (tests/token/data). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "testutil.h"
#include "token/vocab.h"

#define DATA "tests/token/data/"

static int hexval(char c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

int main(void) {
    size_t nc = 0, ne = 0;
    char *cases_txt = test_read_file(DATA "llama_diff_cases.hex", &nc);
    char *exp = test_read_file(DATA "llama_diff_expected.txt", &ne);
    if (!cases_txt || !exp) return test_summary("test_token_llama_diff");
    /* decode the cases */
    char *cases[256];
    size_t lens[256];
    int n_cases = 0;
    for (char *line = strtok(cases_txt, "\n"); line && n_cases < 256; line = strtok(NULL, "\n")) {
        size_t hl = strlen(line);
        cases[n_cases] = malloc(hl / 2 + 1);
        for (size_t i = 0; i + 1 < hl; i += 2)
            cases[n_cases][i / 2] = (char)(hexval(line[i]) * 16 + hexval(line[i + 1]));
        lens[n_cases++] = hl / 2;
    }
    CHECK(n_cases == 64, "64 cases expected, read %d", n_cases);

    char cur_vocab[64] = "";
    gguf_file *f = NULL;
    mf_vocab *v = NULL;
    int pass = 0, total = 0, vpass = 0, vtotal = 0;
    mf_token *tok = malloc(65536 * sizeof *tok);
    printf("llama.cpp regression corpus, passed/checked per vocabulary:\n");
    char *save = NULL;
    for (char *line = strtok_r(exp, "\n", &save);; line = strtok_r(NULL, "\n", &save)) {
        char name[64] = "", flags[4] = "";
        int idx = -1, used = 0;
        if (line && sscanf(line, "%63s %3s %d:%n", name, flags, &idx, &used) < 3) {
            CHECK(0, "bad expected line: %s", line);
            continue;
        }
        if (!line || strcmp(name, cur_vocab) != 0) {
            if (cur_vocab[0]) printf("  %-16s %d/%d\n", cur_vocab, vpass, vtotal);
            mf_vocab_free(v);
            gguf_close(f);
            v = NULL;
            f = NULL;
            if (!line) break;
            snprintf(cur_vocab, sizeof cur_vocab, "%s", name);
            vpass = vtotal = 0;
            char path[256];
            snprintf(path, sizeof path, "../shared/tokenizer/ggml-vocab-%s.gguf", name);
            mf_status s = gguf_open(path, &f);
            if (!s) s = mf_vocab_load(f, &v);
            CHECK(s == MF_OK, "%s: %s", path, mf_last_error());
        }
        if (!v || idx < 0 || idx >= n_cases) continue;
        bool add = flags[0] == '1', parse = flags[1] == '1';
        int32_t n = mf_vocab_tokenize(v, cases[idx], lens[idx], tok, 65536, add, parse);
        bool ok = n >= 0;
        char *p = line + used;
        int32_t k = 0;
        for (;; k++) {
            char *end;
            long x = strtol(p, &end, 10);
            if (end == p) break;
            p = end;
            if (!ok || k >= n || tok[k] != (mf_token)x) ok = false;
        }
        ok = ok && k == n;
        CHECK(ok, "%s flags %s case %d differs from llama.cpp", name, flags, idx);
        vtotal++, total++;
        vpass += ok, pass += ok;
    }
    printf("total %d/%d\n", pass, total);
    CHECK(total == 64 * 2 * 14, "expected 1792 checked cases, got %d", total);
    for (int i = 0; i < n_cases; i++) free(cases[i]);
    free(tok);
    free(cases_txt);
    free(exp);
    return test_summary("test_token_llama_diff");
}
