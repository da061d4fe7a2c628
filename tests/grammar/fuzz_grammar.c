/* fuzz_grammar.c - libFuzzer harness for the GBNF parser, the matcher and
 * the JSON Schema converter (clang only; see tests/grammar/CMakeLists.txt).
 * The first byte picks the input's kind:
 *   even: GBNF text. Refused with a one-line message, or parsed; then a
 *         text-only state walks the input's own bytes and a few fixed
 *         strings, and every rejection leaves it usable.
 *   odd:  a JSON Schema. Refused with a one-line message, or converted to
 *         GBNF that the parser must accept (a grammar the converter writes
 *         and the parser refuses is a bug of ours, not the user's). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "minfer.h"

static void require(int cond) {
    if (!cond) abort(); /* the fuzzer reports the input */
}

static void one_line_error(void) {
    const char *msg = mf_last_error();
    require(msg && msg[0] != 0 && strchr(msg, '\n') == NULL);
}

static void walk(const mf_grammar *g, const uint8_t *text, size_t n) {
    mf_grammar_state *s = NULL;
    if (mf_grammar_state_new(g, NULL, &s)) {
        one_line_error();
        return;
    }
    static const char *probe[] = {"a", "0", " ", "{\"a\": 1}", "\xc3\xa9", "\xe2\x82"};
    for (size_t i = 0; i < sizeof probe / sizeof probe[0]; i++) {
        (void)mf_grammar_accept_text(s, probe[i], strlen(probe[i]));
        (void)mf_grammar_done(s);
    }
    require(mf_grammar_state_reset(s) == MF_OK);
    /* the input's own bytes, a few at a time: each accepted piece moves the
     * state, a rejected one leaves it where it was */
    for (size_t i = 0; i < n && i < 256; i += 3)
        (void)mf_grammar_accept_text(s, (const char *)text + i, n - i < 3 ? n - i : 3);
    (void)mf_grammar_done(s);
    mf_grammar_state_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int schema = data[0] & 1;
    const uint8_t *body = data + 1;
    const size_t n = size - 1;
    if (!schema) {
        /* an exact-size copy (no terminator), so ASan sees a read past the end */
        char *buf = malloc(n ? n : 1);
        if (!buf) return 0;
        if (n) memcpy(buf, body, n);
        mf_grammar *g = NULL;
        if (mf_grammar_parse(buf, n, NULL, &g)) {
            one_line_error();
        } else {
            walk(g, body, n);
            mf_grammar_free(g);
        }
        free(buf);
        return 0;
    }
    char *js = malloc(n + 1);
    if (!js) return 0;
    memcpy(js, body, n);
    js[n] = 0;
    char *gbnf = NULL;
    if (mf_json_schema_to_grammar(js, &gbnf)) {
        one_line_error();
    } else {
        mf_grammar *g = NULL;
        require(mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) == MF_OK);
        walk(g, body, n);
        mf_grammar_free(g);
        free(gbnf);
    }
    free(js);
    return 0;
}
