/* tokenize.c - `minfer tokenize`: print a text's token ids (and pieces). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer tokenize -m MODEL.gguf [-p TEXT] [--no-bos] [--no-parse-special] [--pieces]\n"
            "  Prints the token ids, space-separated (text from stdin when -p is absent).\n"
            "  --no-bos             do not add BOS/EOS even if the vocabulary asks for them\n"
            "  --no-parse-special   treat control-token texts like \"<s>\" as plain text\n"
            "  --pieces             one line per token: id and its piece (quoted, escaped)\n"
            "Vocabulary-only GGUF files work too.\n");
}

static void print_escaped(const char *s, int32_t n) {
    putchar('\'');
    for (int32_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || c == '\'') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('\'');
}

int cmd_tokenize(int argc, char **argv) {
    const char *model_path = NULL, *text = NULL;
    bool no_bos = false, pieces = false, parse_special = true;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) model_path = argv[++i];
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && i + 1 < argc) text = argv[++i];
        else if (!strcmp(a, "--no-bos")) no_bos = true;
        else if (!strcmp(a, "--no-parse-special")) parse_special = false;
        else if (!strcmp(a, "--pieces")) pieces = true;
        else { fprintf(stderr, "minfer tokenize: unknown option or missing value '%s' (see --help)\n", a); return 2; }
    }
    if (!model_path) { fprintf(stderr, "minfer tokenize: no model given (-m FILE)\n"); return 2; }
    char *stdin_text = NULL;
    size_t len;
    if (!text) {
        stdin_text = cli_read_stdin(&len);
        if (!stdin_text) { fprintf(stderr, "minfer tokenize: cannot read stdin\n"); return 1; }
        text = stdin_text;
    } else {
        len = strlen(text);
    }
    int rc = 1;
    mf_model *model = NULL;
    mf_token *toks = NULL;
    mf_model_params mp = mf_model_default_params();
    mp.vocab_only = true;
    if (mf_model_load(model_path, &mp, &model)) { fprintf(stderr, "minfer tokenize: %s\n", mf_last_error()); goto done; }
    bool add = !no_bos;
    int32_t n = mf_tokenize(model, text, len, NULL, 0, add, parse_special);
    if (n == INT32_MIN) { fprintf(stderr, "minfer tokenize: %s\n", mf_last_error()); goto done; }
    int32_t cap = n < 0 ? -n : n;
    toks = malloc(sizeof *toks * (size_t)(cap ? cap : 1));
    if (!toks) goto done;
    n = mf_tokenize(model, text, len, toks, cap, add, parse_special);
    for (int32_t i = 0; i < n; i++) {
        if (pieces) {
            char buf[512];
            int32_t m = mf_token_to_piece(model, toks[i], buf, sizeof buf, true);
            printf("%6d -> ", toks[i]);
            print_escaped(buf, m > 0 ? m : 0);
            putchar('\n');
        } else {
            printf(i ? " %d" : "%d", toks[i]);
        }
    }
    if (!pieces) putchar('\n');
    rc = 0;
done:
    free(toks);
    mf_model_free(model);
    free(stdin_text);
    return rc;
}
