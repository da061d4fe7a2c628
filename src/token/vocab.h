/* vocab.h - the tokenizer subsystem's interface to the rest of minfer.
 *
 * A vocabulary is read from a GGUF's tokenizer.ggml.* metadata (tokens, scores,
 * token types, merges, special token ids, add_bos/add_eos, pre-tokenizer name)
 * and tokenizes exactly as llama.cpp does for the same file. The public API
 * functions mf_tokenize / mf_token_to_piece / ... delegate here. */
#ifndef MF_TOKEN_VOCAB_H
#define MF_TOKEN_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "minfer.h"
#include "gguf/gguf.h"

typedef struct mf_vocab mf_vocab;

/* Reads the vocabulary; a GGUF without tokenizer metadata, or with a
 * tokenizer model minfer does not implement, is an error naming it. */
mf_status mf_vocab_load(const gguf_file *f, mf_vocab **out);
void mf_vocab_free(mf_vocab *v);

int32_t mf_vocab_n_tokens(const mf_vocab *v);
/* "llama" (SentencePiece-style), "gpt2" (byte-level BPE), ... */
const char *mf_vocab_model_name(const mf_vocab *v);

/* Same contract as mf_tokenize() in minfer.h. */
int32_t mf_vocab_tokenize(const mf_vocab *v, const char *text, size_t len, mf_token *out, int32_t cap,
                          bool add_special, bool parse_special);
/* Same contract as mf_token_to_piece() in minfer.h. */
int32_t mf_vocab_token_to_piece(const mf_vocab *v, mf_token tok, char *buf, int32_t cap, bool special);
const char *mf_vocab_token_text(const mf_vocab *v, mf_token tok);

mf_token mf_vocab_bos(const mf_vocab *v);
mf_token mf_vocab_eos(const mf_vocab *v);
bool mf_vocab_is_eog(const mf_vocab *v, mf_token tok);
bool mf_vocab_add_bos(const mf_vocab *v);
bool mf_vocab_add_eos(const mf_vocab *v);

#endif
