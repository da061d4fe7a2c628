/* api_token.c - the public tokenizer functions of minfer.h, over the model's vocabulary. */
#include "model/model.h"
#include "core/error.h"

int32_t mf_tokenize(const mf_model *m, const char *text, size_t len, mf_token *tokens, int32_t cap, bool add_special,
                    bool parse_special) {
    return mf_vocab_tokenize(m->vocab, text, len, tokens, cap, add_special, parse_special);
}

int32_t mf_token_to_piece(const mf_model *m, mf_token tok, char *buf, int32_t cap, bool special) {
    return mf_vocab_token_to_piece(m->vocab, tok, buf, cap, special);
}

const char *mf_token_text(const mf_model *m, mf_token tok) { return mf_vocab_token_text(m->vocab, tok); }
mf_token mf_token_bos(const mf_model *m) { return mf_vocab_bos(m->vocab); }
mf_token mf_token_eos(const mf_model *m) { return mf_vocab_eos(m->vocab); }
bool mf_token_is_eog(const mf_model *m, mf_token tok) { return mf_vocab_is_eog(m->vocab, tok); }
bool mf_model_add_bos(const mf_model *m) { return mf_vocab_add_bos(m->vocab); }

size_t mf_utf8_complete(const char *s, size_t n) { return mf_utf8_complete_prefix(s, n); }

int32_t mf_detokenize(const mf_model *m, const mf_token *tokens, int32_t n, char *buf, int32_t cap, bool remove_special,
                      bool unparse_special) {
    return mf_vocab_detokenize(m->vocab, tokens, n, buf, cap, remove_special, unparse_special);
}
