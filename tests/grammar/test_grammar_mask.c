/* test_grammar_mask.c - the trie walk's mask against brute force: at many
 * positions of several grammars, a token is allowed by mf_grammar_apply
 * exactly when mf_grammar_accept takes it, on stories260K's vocabulary (SPM
 * with byte tokens) and Qwen2's (byte-level BPE, 151,936 tokens): pieces
 * ending inside UTF-8 characters are covered by both. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "minfer.h"
#include "testutil.h"

static void check_positions(const mf_model *m, const mf_grammar_vocab *v, const char *gbnf, const char *const *prefixes) {
    mf_grammar *g = NULL;
    mf_grammar_state *s = NULL;
    CHECK(!mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) && !mf_grammar_state_new(g, v, &s), "%s", mf_last_error());
    if (!s) { mf_grammar_free(g); return; }
    const int32_t n = mf_model_n_vocab(m);
    float *l = malloc(sizeof *l * (size_t)n);
    for (const char *const *p = prefixes; *p; p++) {
        for (int pass = 0; pass < 2; pass++) { /* the second pass is served from the cache */
            CHECK(!mf_grammar_state_reset(s) && !mf_grammar_accept_text(s, *p, strlen(*p)), "prefix %s: %s", *p, mf_last_error());
            for (int32_t t = 0; t < n; t++) l[t] = 0.0f;
            mf_status st = mf_grammar_apply(s, l);
            int bad = 0, allowed = 0;
            for (int32_t t = 0; t < n && !st; t++) {
                bool masked_ok = l[t] == 0.0f;
                bool accepts = mf_grammar_accept(s, t) == MF_OK;
                if (accepts && !mf_token_is_eog(m, t)) { /* it moved: back to the prefix */
                    mf_grammar_state_reset(s);
                    mf_grammar_accept_text(s, *p, strlen(*p));
                }
                allowed += masked_ok;
                if (masked_ok != accepts && bad++ < 3)
                    CHECK(0, "prefix \"%s\": token %d (%s) masked %s, accept %s", *p, t, mf_token_text(m, t),
                          masked_ok ? "allowed" : "out", accepts ? "takes it" : "refuses");
            }
            CHECK(!st || st == MF_ERR_FORMAT, "apply: %s", mf_last_error());
            if (!pass) printf("  \"%s\": %d tokens allowed\n", *p, allowed);
        }
    }
    mf_grammar_stats gs = mf_grammar_state_stats(s);
    CHECK(gs.cache_hits >= gs.cache_misses, "the second passes hit the cache (%llu hits, %llu misses)",
          (unsigned long long)gs.cache_hits, (unsigned long long)gs.cache_misses);
    free(l);
    mf_grammar_state_free(s);
    mf_grammar_free(g);
}

int main(void) {
    mf_model_params mp = mf_model_default_params();
    mp.vocab_only = true;
    mf_model *m = NULL;
    mf_grammar_vocab *v = NULL;
    if (mf_model_load("../shared/models/stories260K.gguf", &mp, &m) || mf_grammar_vocab_new(m, &v)) {
        CHECK(0, "%s", mf_last_error());
        return test_summary("test_grammar_mask");
    }
    check_positions(m, v, mf_grammar_json(),
                    (const char *const[]){"", "{", "{\"a", "{\"a\": ", "{\"a\": [1", "[tr", "\"\\", "\"\\u00", "-0.5e",
                                          "\"\xc3", "[\"\xe4\xb8", "12", NULL});
    check_positions(m, v, "root ::= [\\u00e0-\\u00ff]+ \" \" ( \"once\" | \"upon\" ) [\\n]?",
                    (const char *const[]){"", "\xc3", "\xc3\xa9", "\xc3\xa9 ", "\xc3\xa9 on", "\xc3\xa9 upon", NULL});
    check_positions(m, v, "root ::= \"The \" [a-z]{1,3} \".\"", (const char *const[]){"", "The ", "The ab", "The abc", NULL});
    mf_grammar_vocab_free(v);
    mf_model_free(m);

    /* a byte-level BPE vocabulary of 151,936 tokens, many ending inside characters */
    m = NULL, v = NULL;
    if (mf_model_load("../shared/tokenizer/ggml-vocab-qwen2.gguf", &mp, &m) || mf_grammar_vocab_new(m, &v)) {
        CHECK(0, "%s", mf_last_error());
    } else {
        check_positions(m, v, mf_grammar_json(), (const char *const[]){"", "{\"k\": \"v", "[1, \"\xe4", "[nu", NULL});
        /* inside a string after leads whose next byte is restricted */
        check_positions(m, v, mf_grammar_json(), (const char *const[]){"\"\xe0", "\"\xed", "\"\xf0", "\"\xf4", "\"\xf0\x90", NULL});
        /* loops the subtree shortcut must not take whole: a hole in the CJK
         * block (also from inside a character), ASCII that leaves the loop,
         * a loop that takes no multibyte character at all */
        check_positions(m, v, "root ::= [^\\u4e00-\\u4e0f\\n]* \"!\"",
                        (const char *const[]){"", "ab", "\xe4", "\xe4\xb8", "x\xe4\xb8", NULL});
        check_positions(m, v, "root ::= ( [a-z \\u00e0-\\uffff] | \"Q\" [0-9] )* \".\"", (const char *const[]){"", "q", "Q", NULL});
        check_positions(m, v, "root ::= [ -~]* \"\\n\"", (const char *const[]){"", "abc", NULL});
        /* bounded repeats, where each character leads to the next state
         * (the shortcut's chains): at the start, near the end, midway
         * through a character, at the last place */
        check_positions(m, v, "root ::= \"\\\"\" c{0,6} \"\\\"\"\nc ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" [\"\\\\nt]",
                        (const char *const[]){"\"", "\"abc", "\"abcd\xe4\xb8", "\"abcde", "\"abcdef", NULL});
        check_positions(m, v, "root ::= [a-z]{2,4} \".\"", (const char *const[]){"", "ab", "abcd", NULL});
    }
    mf_grammar_vocab_free(v);
    mf_model_free(m);
    return test_summary("test_grammar_mask");
}
