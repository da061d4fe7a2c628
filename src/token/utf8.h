/* utf8.h - UTF-8 decoding the way llama.cpp's tokenizer does it, GPT-2's byte-to-unicode
 * mapping, and the code point substitutions that make PCRE2 classify text like llama.cpp. */
#ifndef MF_TOKEN_UTF8_H
#define MF_TOKEN_UTF8_H

#include <stddef.h>
#include <stdint.h>

#define MF_CPT_REPLACEMENT 0xFFFDu
/* What a 3-byte space becomes for patterns without \p{..} (their \s and \S
 * are rewritten to treat it as space); see mf_cpt_for_regex. */
#define MF_CPT_SPACE_STANDIN 0xE001u

/* Sequence length announced by a lead byte, from its top 4 bits (a stray
 * continuation byte counts as 1), as SentencePiece symbol splitting uses. */
static inline size_t mf_utf8_seq_len(uint8_t c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* Decodes one code point at s[*i] (i < n) and advances *i. Lenient like
 * llama.cpp: overlong forms and surrogates decode as written; a byte that does
 * not start a complete sequence yields U+FFFD and advances by one. Values above
 * U+10FFFF (which llama.cpp cannot re-encode) are treated as invalid too. */
uint32_t mf_utf8_decode(const uint8_t *s, size_t n, size_t *i);

/* Encodes any value up to U+10FFFF (surrogates included); returns 1..4. */
size_t mf_utf8_encode(uint32_t cpt, char *out);

/* GPT-2 byte-level alphabet: byte -> code point, and back (-1 if cpt is not
 * one of the 256). */
uint32_t mf_byte_to_cpt(uint8_t b);
int mf_cpt_to_byte(uint32_t cpt);

/* llama.cpp's whitespace set (Unicode White_Space). */
int mf_cpt_is_space(uint32_t cpt);

/* Code point to place in the text PCRE2 matches, with the same UTF-8 length
 * as cpt, so byte offsets carry over:
 *  - with_categories (patterns using \p{..}): a stand-in with llama.cpp's
 *    general category where PCRE2's Unicode tables disagree (code points new
 *    in Unicode 15; U+180E, which PCRE2 counts as space);
 *  - always: one canonical space per UTF-8 length for all non-ASCII spaces
 *    (llama.cpp replaces them by 0x0B, so they match \s but never a literal
 *    or range in a class), and a private-use stand-in for surrogates, which
 *    PCRE2 cannot take. */
uint32_t mf_cpt_for_regex(uint32_t cpt, int with_categories);

#endif
