/* pretok.h - BPE pre-tokenizers: which regexes split text into words, chosen by tokenizer.ggml.pre. */
#ifndef MF_TOKEN_PRETOK_H
#define MF_TOKEN_PRETOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "minfer.h"

/* Vocabulary flags a pre-tokenizer name implies (llama.cpp sets them the same way). */
enum {
    MF_PT_IGNORE_MERGES = 1 << 0, /* a word that is a whole token skips the merges */
    MF_PT_ADD_BOS = 1 << 1,       /* default add_bos = true */
    MF_PT_NO_CLEAN = 1 << 2,      /* no clean-up of spaces when detokenizing */
    MF_PT_ADD_SEP = 1 << 3,
    MF_PT_NO_BOS_ID = 1 << 4,    /* no default BOS id */
    MF_PT_ESCAPE_WS = 1 << 5,    /* spaces become U+2581 before splitting (SPM-style BPE) */
    MF_PT_RAW_UTF8 = 1 << 6,     /* words are not mapped to the GPT-2 byte alphabet */
    MF_PT_NEWLINE_WORD = 1 << 7, /* a word of newlines that is a token stays whole (gemma4) */
};

/* Looks up a pre-tokenizer by name ("" = the default set). Returns false if
 * the name is unknown or needs custom code minfer lacks (*unsupported set). */
bool mf_pretok_lookup(const char *name, const char **canonical, unsigned *flags, bool *unsupported);

/* Splits text into words. `subject_cat` / `subject_ws` are the text as PCRE2
 * sees it for patterns with / without Unicode categories (same length n as
 * the text; see mf_cpt_for_regex). Appends each word's end offset to *ends
 * (growing it); words are contiguous and cover [0, n). */
struct mf_pretok;
mf_status mf_pretok_split(const struct mf_pretok *p, const char *subject_cat, const char *subject_ws, size_t n,
                          size_t **ends, size_t *n_ends, size_t *cap_ends);

#endif
