/* test_token_vectors.c - llama.cpp's tokenizer test vectors: every ../shared/tokenizer/ggml-vocab-*.gguf
 * must reproduce its .inp/.out cases exactly (add_special = false, parse_special = false). */
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "testutil.h"
#include "token/vocab.h"

#define DIR "../shared/tokenizer/"
#define SEP "\n__ggml_vocab_test__\n"

/* Vocabularies the shared folder is known to ship: a missing one is a failure. */
static const char *const k_required[] = {"baichuan", "bert-bge", "deepseek-coder", "deepseek-llm", "falcon",
                                         "gpt-2",    "gpt-neox", "llama-bpe",      "llama-spm",    "mpt",
                                         "phi-3",    "qwen2",    "refact",         "starcoder",    NULL};

static void print_escaped(FILE *o, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", o);
        else if (c == '\t')
            fputs("\\t", o);
        else if (c < 0x20)
            fprintf(o, "\\x%02x", c);
        else
            fputc(c, o);
    }
}

static int run_vocab(const char *name, int *total_pass, int *total_cases) {
    char path[512], inp_path[600], out_path[600];
    snprintf(path, sizeof path, DIR "ggml-vocab-%s.gguf", name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("  %-16s skipped: no vocabulary file (%s), only test vectors\n", name, path);
        return 0;
    }
    gguf_file *f = NULL;
    mf_vocab *v = NULL;
    mf_status s = gguf_open(path, &f);
    CHECK(s == MF_OK, "%s: gguf_open: %s", path, mf_last_error());
    if (s) return 1;
    s = mf_vocab_load(f, &v);
    CHECK(s == MF_OK, "%s: mf_vocab_load: %s", path, mf_last_error());
    if (s) {
        gguf_close(f);
        return 1;
    }
    size_t inp_n = 0, out_n = 0;
    char *inp = test_read_file(inp_path, &inp_n);
    char *outs = test_read_file(out_path, &out_n);
    int pass = 0, cases = 0;
    if (inp && outs) {
        char *ip = inp, *op = outs;
        mf_token *tok = malloc(1 << 20);
        for (;;) {
            char *sep = strstr(ip, SEP);
            if (!sep) break;
            char *eol = strchr(op, '\n');
            CHECK(eol != NULL, "%s: .out has fewer lines than .inp has cases", name);
            if (!eol) break;
            size_t len = (size_t)(sep - ip);
            *eol = 0;
            /* expected ids */
            int32_t want[4096];
            int nw = 0;
            for (char *p = op; *p;) {
                char *end;
                long x = strtol(p, &end, 10);
                if (end == p) break;
                if (nw < 4096) want[nw++] = (int32_t)x;
                p = end;
            }
            int32_t n = mf_vocab_tokenize(v, ip, len, tok, (1 << 20) / (int)sizeof *tok, false, false);
            bool ok = n == nw;
            for (int i = 0; ok && i < n; i++) ok = tok[i] == want[i];
            cases++;
            if (ok) {
                pass++;
            } else {
                fprintf(stderr, "FAIL %s case %d: \"", name, cases);
                print_escaped(stderr, ip, len);
                fprintf(stderr, "\"\n  want:");
                for (int i = 0; i < nw; i++) fprintf(stderr, " %d", want[i]);
                fprintf(stderr, "\n  got: ");
                if (n < 0) fprintf(stderr, " error %d: %s", n, mf_last_error());
                for (int i = 0; i < n; i++) fprintf(stderr, " %d", tok[i]);
                fprintf(stderr, "\n");
            }
            CHECK(ok, "%s: case %d differs from llama.cpp", name, cases);
            ip = sep + strlen(SEP);
            op = eol + 1;
        }
        CHECK(*op == 0, "%s: .out has more lines than .inp has cases", name);
        free(tok);
    }
    printf("  %-16s %d/%d  (%s%s%s)\n", name, pass, cases, mf_vocab_model_name(v),
           mf_vocab_pre_name(v)[0] ? ", pre " : "", mf_vocab_pre_name(v));
    CHECK(cases > 0, "%s: no test cases read", name);
    *total_pass += pass;
    *total_cases += cases;
    free(inp);
    free(outs);
    mf_vocab_free(v);
    gguf_close(f);
    return 0;
}

int main(void) {
    for (int i = 0; k_required[i]; i++) {
        char path[512];
        snprintf(path, sizeof path, DIR "ggml-vocab-%s.gguf", k_required[i]);
        struct stat st;
        CHECK(stat(path, &st) == 0, "required vocabulary missing: %s", path);
    }
    glob_t g;
    int rc = glob(DIR "ggml-vocab-*.gguf.inp", 0, NULL, &g);
    CHECK(rc == 0 && g.gl_pathc > 0, "no test vectors under " DIR);
    int total_pass = 0, total_cases = 0;
    printf("tokenizer test vectors (llama.cpp), passed/cases:\n");
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) {
        const char *p = g.gl_pathv[i] + strlen(DIR "ggml-vocab-");
        char name[128];
        size_t n = strlen(p) - strlen(".gguf.inp");
        if (n >= sizeof name) continue;
        memcpy(name, p, n);
        name[n] = 0;
        run_vocab(name, &total_pass, &total_cases);
    }
    if (rc == 0) globfree(&g);
    printf("total %d/%d\n", total_pass, total_cases);
    return test_summary("test_token_vectors");
}
