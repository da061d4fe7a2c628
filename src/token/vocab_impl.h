/* vocab_impl.h - the tokenizer subsystem's private data structures (not for other subsystems). */
#ifndef MF_TOKEN_VOCAB_IMPL_H
#define MF_TOKEN_VOCAB_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "token/vocab.h"

/* ---- string -> index hash table --------------------------------------- */

/* A string with its length; token texts may hold any byte, NUL included. */
typedef struct mf_strref {
    const char *s;
    uint32_t len;
} mf_strref;

/* Open addressing over indices into a caller-owned mf_strref array (the
 * keys). Slot value 0 means empty, otherwise index + 1. */
typedef struct mf_strmap {
    uint32_t mask;
    uint32_t count;
    uint32_t *slot;
    uint32_t *hash;
} mf_strmap;

uint64_t mf_hash_bytes(const void *p, size_t n);
mf_status mf_strmap_init(mf_strmap *m, uint32_t expected);
void mf_strmap_free(mf_strmap *m);
/* Index of the key equal to (s, n), or -1. */
int64_t mf_strmap_find(const mf_strmap *m, const mf_strref *keys, const char *s, size_t n);
/* Maps keys[idx] to idx; an existing equal key is re-pointed at idx (the
 * last insertion wins, as llama.cpp's text -> id map does). */
mf_status mf_strmap_put(mf_strmap *m, const mf_strref *keys, uint32_t idx);

/* ---- pre-tokenizer ------------------------------------------------------ */

#define MF_PRETOK_MAX_REGEX 8

typedef struct mf_pretok {
    const char *name; /* canonical pre-tokenizer name */
    int n_regex;
    void *code[MF_PRETOK_MAX_REGEX];    /* pcre2_code_8 *, JIT-compiled when available */
    bool uses_cat[MF_PRETOK_MAX_REGEX]; /* pattern uses \p{..}: match on category-normalised text */
    bool byte_encode;                   /* GPT-2 byte-to-unicode mapping of words */
} mf_pretok;

/* ---- BPE merges --------------------------------------------------------- */

/* (left string id, right string id) -> rank and id of the merged string.
 * String ids below n_tokens are token ids; above are texts that occur in
 * merges without being tokens. */
typedef struct mf_merge_slot {
    uint64_t key; /* (left << 32 | right) + 1; 0 = empty */
    int32_t rank;
    int32_t merged;
} mf_merge_slot;

struct mf_vocab {
    mf_vocab_kind kind;
    char model_name[32]; /* tokenizer.ggml.model */
    char pre_name[64];   /* tokenizer.ggml.pre as stored ("" if absent) */

    int32_t n_tokens;
    mf_strref *text;    /* per string id: token texts, then merge-only strings */
    uint32_t n_strings; /* n_tokens + merge-only strings */
    uint32_t cap_strings;
    float *score;
    uint32_t *attr;
    mf_strmap tok_map;  /* text -> string id */
    char *text_blob;    /* token texts, NUL-terminated */
    char **extra_blobs; /* merge-only strings, one allocation each chunk */
    size_t n_extra_blobs;
    size_t extra_used; /* bytes used in the last extra blob */
    size_t max_token_len;

    /* token_to_piece(special = true) of every token, computed at load */
    uint32_t *piece_off;
    uint32_t *piece_len;
    char *piece_blob;

    /* special ids (-1 = none) */
    mf_token bos, eos, eot, eom, unk, sep, pad, mask, nl;
    mf_token fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    uint8_t *is_eog; /* per token */
    int32_t n_eog;

    /* flags */
    bool add_bos, add_eos, add_sep, add_space_prefix;
    bool ignore_merges, clean_spaces, remove_extra_ws, escape_whitespaces;
    bool wpm_lowercase, wpm_strip_accents;

    /* tokens matched whole before the tokenizer runs (CONTROL, USER_DEFINED,
     * UNKNOWN), longest text first */
    mf_token *special;
    int32_t n_special;
    uint32_t *sp_first;    /* 65537 offsets into sp_by_prefix, by first two bytes */
    int32_t *sp_by_prefix; /* indices into special[] of texts of 2+ bytes */

    /* SPM: byte -> token for byte fallback (-1 if none) */
    mf_token byte_token[256];

    /* BPE */
    mf_pretok pre;
    unsigned pre_flags; /* MF_PT_* of the pre-tokenizer name */
    mf_merge_slot *merges;
    uint32_t merge_mask;
    uint32_t n_merges;
    int32_t byte_sym[256]; /* raw byte -> string id of its byte-encoded char (-1 if none) */
};

/* ---- internal entry points --------------------------------------------- */

/* Growable token output. `oom` latches an allocation failure. */
typedef struct mf_tokvec {
    mf_token *v;
    size_t n, cap;
    bool oom;
} mf_tokvec;

void mf_tokvec_push(mf_tokvec *t, mf_token id);

int64_t mf_vocab_find(const mf_vocab *v, const char *s, size_t n);        /* token id or -1 */
int64_t mf_vocab_find_string(const mf_vocab *v, const char *s, size_t n); /* string id (token or merge-only) or -1 */

/* Tokenizers over one raw-text fragment (specials already split off). */
void mf_spm_tokenize(const mf_vocab *v, const char *text, size_t len, bool space_prefix, mf_tokvec *out);
mf_status mf_bpe_tokenize(const mf_vocab *v, const char *text, size_t len, mf_tokvec *out);
mf_status mf_wpm_tokenize(const mf_vocab *v, const char *text, size_t len, mf_tokvec *out);

/* BPE setup (bpe.c / pretok.c). */
mf_status mf_bpe_load_merges(mf_vocab *v, const gguf_file *f);
mf_status mf_pretok_init(mf_pretok *p, const char *name, const char *path);
void mf_pretok_free(mf_pretok *p);
/* Adds a string that is not a token to the string table; returns its id. */
mf_status mf_vocab_intern(mf_vocab *v, const char *s, size_t n, int32_t *id);

#endif
