/* utf8.c - lenient UTF-8 decoding, GPT-2 byte alphabet, regex subject stand-ins, streaming helper. */
#include "token/utf8.h"

#include "token/vocab.h"

uint32_t mf_utf8_decode(const uint8_t *s, size_t n, size_t *i) {
    size_t p = *i;
    uint8_t c = s[p];
    if (c < 0x80) {
        *i = p + 1;
        return c;
    }
    size_t len;
    uint32_t cpt;
    if ((c & 0xE0) == 0xC0) {
        len = 2;
        cpt = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        cpt = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        cpt = c & 0x07;
    } else {
        *i = p + 1; /* continuation byte or 0xF8..0xFF */
        return MF_CPT_REPLACEMENT;
    }
    if (p + len > n) {
        *i = p + 1;
        return MF_CPT_REPLACEMENT;
    }
    for (size_t k = 1; k < len; k++) {
        uint8_t d = s[p + k];
        if ((d & 0xC0) != 0x80) {
            *i = p + 1;
            return MF_CPT_REPLACEMENT;
        }
        cpt = (cpt << 6) | (d & 0x3F);
    }
    if (cpt > 0x10FFFF) {
        *i = p + 1;
        return MF_CPT_REPLACEMENT;
    }
    *i = p + len;
    return cpt;
}

size_t mf_utf8_encode(uint32_t cpt, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cpt < 0x80) {
        o[0] = (uint8_t)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cpt >> 6));
        o[1] = (uint8_t)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cpt >> 12));
        o[1] = (uint8_t)(0x80 | ((cpt >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cpt & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cpt >> 18));
    o[1] = (uint8_t)(0x80 | ((cpt >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cpt >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cpt & 0x3F));
    return 4;
}

/* GPT-2 keeps the printable Latin-1 bytes as themselves and moves the other
 * 68 (0x00-0x20, 0x7F-0xA0, 0xAD) to U+0100.. in byte order. */
static int byte_is_printable(unsigned b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t mf_byte_to_cpt(uint8_t b) {
    if (byte_is_printable(b)) return b;
    uint32_t k = 0;
    for (unsigned x = 0; x < b; x++) k += !byte_is_printable(x);
    return 256 + k;
}

int mf_cpt_to_byte(uint32_t cpt) {
    if (cpt < 256) return byte_is_printable(cpt) ? (int)cpt : -1;
    if (cpt >= 256 + 68) return -1;
    uint32_t k = cpt - 256;
    for (unsigned b = 0; b < 256; b++)
        if (!byte_is_printable(b) && k-- == 0) return (int)b;
    return -1;
}

int mf_cpt_is_space(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Code points llama.cpp's tables (Unicode 15) assign a general category that
 * PCRE2 10.42 (Unicode 14) does not know; each range with llama.cpp's major
 * category. Checked exhaustively against both in tests/token. */
typedef struct cat_range {
    uint32_t lo, hi;
    char cat; /* L N P S M, or O for "none of those" */
} cat_range;

static const cat_range k_cat_fix[] = {
    {0x00CF3, 0x00CF3, 'M'}, {0x00ECE, 0x00ECE, 'M'}, {0x0180E, 0x0180E, 'O'}, {0x02FFC, 0x02FFF, 'S'},
    {0x031EF, 0x031EF, 'S'}, {0x10EFD, 0x10EFF, 'M'}, {0x1123F, 0x11240, 'L'}, {0x11241, 0x11241, 'M'},
    {0x11B00, 0x11B09, 'P'}, {0x11F00, 0x11F01, 'M'}, {0x11F02, 0x11F02, 'L'}, {0x11F03, 0x11F03, 'M'},
    {0x11F04, 0x11F10, 'L'}, {0x11F12, 0x11F33, 'L'}, {0x11F34, 0x11F3A, 'M'}, {0x11F3E, 0x11F42, 'M'},
    {0x11F43, 0x11F4F, 'P'}, {0x11F50, 0x11F59, 'N'}, {0x1342F, 0x1342F, 'L'}, {0x13440, 0x13440, 'M'},
    {0x13441, 0x13446, 'L'}, {0x13447, 0x13455, 'M'}, {0x1B132, 0x1B132, 'L'}, {0x1B155, 0x1B155, 'L'},
    {0x1D2C0, 0x1D2D3, 'N'}, {0x1DF25, 0x1DF2A, 'L'}, {0x1E030, 0x1E06D, 'L'}, {0x1E08F, 0x1E08F, 'M'},
    {0x1E4D0, 0x1E4EB, 'L'}, {0x1E4EC, 0x1E4EF, 'M'}, {0x1E4F0, 0x1E4F9, 'N'}, {0x1F6DC, 0x1F6DC, 'S'},
    {0x1F774, 0x1F776, 'S'}, {0x1F77B, 0x1F77F, 'S'}, {0x1F7D9, 0x1F7D9, 'S'}, {0x1FA75, 0x1FA77, 'S'},
    {0x1FA87, 0x1FA88, 'S'}, {0x1FAAD, 0x1FAAF, 'S'}, {0x1FABB, 0x1FABD, 'S'}, {0x1FABF, 0x1FABF, 'S'},
    {0x1FACE, 0x1FACF, 'S'}, {0x1FADA, 0x1FADB, 'S'}, {0x1FAE8, 0x1FAE8, 'S'}, {0x1FAF7, 0x1FAF8, 'S'},
    {0x2B739, 0x2B739, 'L'}, {0x2EBF0, 0x2EE5D, 'L'}, {0x31350, 0x323AF, 'L'},
};

/* A code point of each major category, for 3-byte and 4-byte UTF-8. */
static uint32_t stand_in(char cat, int four_bytes) {
    switch (cat) {
    case 'L': return four_bytes ? 0x10000 : 0x0800; /* Linear B syllable / Samaritan letter: Lo */
    case 'N': return four_bytes ? 0x10107 : 0x0966; /* Aegean number one: No / Devanagari zero: Nd */
    case 'P': return four_bytes ? 0x10100 : 0x2010; /* Aegean word separator: Po / hyphen: Pd */
    case 'S': return four_bytes ? 0x10137 : 0x2100; /* Aegean weight unit / account of: So */
    case 'M': return four_bytes ? 0x101FD : 0x0900; /* combining marks: Mn */
    default: return four_bytes ? 0xF0000 : 0xE000;  /* private use: Co */
    }
}

uint32_t mf_cpt_for_regex(uint32_t c, int with_categories) {
    if (c < 0x80) return c;
    if (mf_cpt_is_space(c)) {
        if (c < 0x800) return 0x85; /* no explicit class in any pattern holds U+0085 */
        /* every 3-byte space lies inside some pattern's explicit range (deepseek's
         * U+0800-U+4E00), where llama.cpp's stand-in 0x0B never does: patterns
         * with categories have no such ranges, the others see a private-use
         * stand-in that their \s is rewritten to include */
        return with_categories ? 0x2000 : MF_CPT_SPACE_STANDIN;
    }
    if (c == MF_CPT_SPACE_STANDIN) return 0xE000;
    if (c >= 0xD800 && c <= 0xDFFF) return 0xE000;
    if (c == 0x180E) return 0xE000; /* PCRE2 counts it as space, llama.cpp as a format character */
    if (with_categories && c >= 0xCF3) {
        size_t lo = 0, hi = sizeof k_cat_fix / sizeof k_cat_fix[0];
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (c < k_cat_fix[mid].lo)
                hi = mid;
            else if (c > k_cat_fix[mid].hi)
                lo = mid + 1;
            else
                return stand_in(k_cat_fix[mid].cat, c >= 0x10000);
        }
    }
    return c;
}

size_t mf_utf8_complete_prefix(const char *s, size_t n) {
    if (!s || n == 0) return 0;
    const uint8_t *u = (const uint8_t *)s;
    size_t i = n, k = 0;
    while (k < 3 && i > 0 && (u[i - 1] & 0xC0) == 0x80) {
        i--;
        k++;
    }
    if (i == 0) return n; /* nothing but continuation bytes: never completable */
    uint8_t c = u[i - 1];
    size_t need;
    if (c >= 0xC2 && c <= 0xDF)
        need = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        need = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        need = 4;
    else
        return n; /* ASCII, or a byte that starts no valid sequence */
    return n - (i - 1) < need ? i - 1 : n;
}
