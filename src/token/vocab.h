/* vocab.h - the tokenizer subsystem's interface to the rest of minfer.
 *
 * A vocabulary is read from a GGUF's tokenizer.ggml.* metadata (tokens, scores,
 * token types, merges, special token ids, add_bos/add_eos, pre-tokenizer name)
 * and tokenizes exactly as llama.cpp does for the same file. The public API
 * functions mf_tokenize / mf_token_to_piece / ... delegate here.
 *
 * Supported tokenizer models: "llama" (SentencePiece-style score merges with
 * byte fallback), "gpt2" (byte-level BPE with the pre-tokenizer regexes named
 * by tokenizer.ggml.pre, matched with PCRE2), "bert" (WordPiece). A vocabulary
 * is immutable after loading; every function here may be called from several
 * threads at once. */
#ifndef MF_TOKEN_VOCAB_H
#define MF_TOKEN_VOCAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "minfer.h"
#include "gguf/gguf.h"

typedef struct mf_vocab mf_vocab;

typedef enum mf_vocab_kind {
    MF_VOCAB_SPM = 0, /* tokenizer.ggml.model = llama */
    MF_VOCAB_BPE,     /* gpt2 (and gemma4's SPM-style BPE) */
    MF_VOCAB_WPM,     /* bert */
} mf_vocab_kind;

/* Token attributes, derived from tokenizer.ggml.token_type plus llama.cpp's
 * overrides (same bit values as llama.cpp's llama_token_attr). */
enum {
    MF_TATTR_UNDEFINED = 0,
    MF_TATTR_UNKNOWN = 1 << 0,
    MF_TATTR_UNUSED = 1 << 1,
    MF_TATTR_NORMAL = 1 << 2,
    MF_TATTR_CONTROL = 1 << 3,
    MF_TATTR_USER_DEFINED = 1 << 4,
    MF_TATTR_BYTE = 1 << 5,
    MF_TATTR_NORMALIZED = 1 << 6,
    MF_TATTR_LSTRIP = 1 << 7,
    MF_TATTR_RSTRIP = 1 << 8,
    MF_TATTR_SINGLE_WORD = 1 << 9,
};

/* Reads the vocabulary; a GGUF without tokenizer metadata, or with a
 * tokenizer model minfer does not implement, is an error naming it. */
mf_status mf_vocab_load(const gguf_file *f, mf_vocab **out);
void mf_vocab_free(mf_vocab *v);

int32_t mf_vocab_n_tokens(const mf_vocab *v);
/* "llama" (SentencePiece-style), "gpt2" (byte-level BPE), ... */
const char *mf_vocab_model_name(const mf_vocab *v);
mf_vocab_kind mf_vocab_get_kind(const mf_vocab *v);
/* Pre-tokenizer in use for BPE ("default" when the file names none); "" otherwise. */
const char *mf_vocab_pre_name(const mf_vocab *v);
uint32_t mf_vocab_n_merges(const mf_vocab *v);

/* Same contract as mf_tokenize() in minfer.h. */
int32_t mf_vocab_tokenize(const mf_vocab *v, const char *text, size_t len, mf_token *out, int32_t cap, bool add_special,
                          bool parse_special);
/* Same contract as mf_token_to_piece() in minfer.h; a token id out of range
 * (or a NULL buffer with cap > 0) returns INT32_MIN with mf_last_error() set. */
int32_t mf_vocab_token_to_piece(const mf_vocab *v, mf_token tok, char *buf, int32_t cap, bool special);
/* Whole-sequence detokenization as llama_detokenize(): remove_special drops a
 * leading BOS / trailing EOS the vocabulary adds itself, unparse_special
 * renders control tokens, and the BPE vocabularies' clean-up of spaces before
 * punctuation is applied. Returns bytes written or the negated size needed. */
int32_t mf_vocab_detokenize(const mf_vocab *v, const mf_token *tokens, int32_t n, char *buf, int32_t cap,
                            bool remove_special, bool unparse_special);
const char *mf_vocab_token_text(const mf_vocab *v, mf_token tok);
/* Attribute bits (MF_TATTR_*) of a token; 0 if out of range. */
uint32_t mf_vocab_token_attr(const mf_vocab *v, mf_token tok);
float mf_vocab_token_score(const mf_vocab *v, mf_token tok);

/* Special tokens; -1 if the vocabulary has none. */
mf_token mf_vocab_bos(const mf_vocab *v);
mf_token mf_vocab_eos(const mf_vocab *v);
mf_token mf_vocab_eot(const mf_vocab *v);
mf_token mf_vocab_unk(const mf_vocab *v);
mf_token mf_vocab_pad(const mf_vocab *v);
mf_token mf_vocab_sep(const mf_vocab *v);
mf_token mf_vocab_nl(const mf_vocab *v);
bool mf_vocab_is_eog(const mf_vocab *v, mf_token tok);
bool mf_vocab_add_bos(const mf_vocab *v);
bool mf_vocab_add_eos(const mf_vocab *v);

/* Streaming output: the number of leading bytes of s[0..n) that do not end in
 * an unfinished multi-byte UTF-8 sequence. A caller emits that many bytes and
 * keeps the rest until the next piece arrives, so it never prints half a
 * character. Bytes that can never become valid UTF-8 count as complete. */
size_t mf_utf8_complete_prefix(const char *s, size_t n);

#endif
