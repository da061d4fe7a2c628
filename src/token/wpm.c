/* wpm.c - WordPiece (tokenizer.ggml.model = bert): BERT's basic normalisation and word split,
 * then greedy longest-match pieces per word with the U+2581 word-start marker llama.cpp's GGUFs use.
 *
 * Unicode properties come from utf8proc (categories, simple lowercase, the
 * first code point of the canonical decomposition for accent stripping). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/error.h"
#include "token/utf8.h"
#include "token/vocab_impl.h"

static bool is_cjk(uint32_t c) {
    /* BERT's "Chinese character" blocks (HF's ranges, including its 0x2B920 start) */
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static uint32_t first_of_nfd(uint32_t c) {
    utf8proc_int32_t buf[8];
    int last = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char((utf8proc_int32_t)c, buf, 8, UTF8PROC_DECOMPOSE, &last);
    return n >= 1 ? (uint32_t)buf[0] : c;
}

typedef struct words {
    char *buf; /* U+2581 + word, for each word, back to back */
    size_t n, cap;
    size_t *ends; /* end offset of each word in buf */
    size_t nw, capw;
    bool oom;
} words;

static void w_put(words *w, const char *s, size_t n) {
    if (w->n + n > w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 256;
        while (nc < w->n + n) nc *= 2;
        char *b = realloc(w->buf, nc);
        if (!b) {
            w->oom = true;
            return;
        }
        w->buf = b;
        w->cap = nc;
    }
    memcpy(w->buf + w->n, s, n);
    w->n += n;
}

/* Closes the current word if it has any characters. */
static void w_end(words *w) {
    size_t start = w->nw ? w->ends[w->nw - 1] : 0;
    if (w->n == start + 3) { /* only the marker: no word yet */
        return;
    }
    if (w->nw == w->capw) {
        size_t nc = w->capw ? w->capw * 2 : 64;
        size_t *e = realloc(w->ends, nc * sizeof *e);
        if (!e) {
            w->oom = true;
            return;
        }
        w->ends = e;
        w->capw = nc;
    }
    w->ends[w->nw++] = w->n;
    w_put(w, "\xE2\x96\x81", 3); /* the next word's start marker */
}

mf_status mf_wpm_tokenize(const mf_vocab *v, const char *text, size_t len, mf_tokvec *out) {
    words w = {0};
    w_put(&w, "\xE2\x96\x81", 3);
    for (size_t i = 0; i < len && !w.oom;) {
        uint32_t c = mf_utf8_decode((const uint8_t *)text, len, &i);
        if (v->wpm_strip_accents) c = first_of_nfd(c);
        if (mf_cpt_is_space(c)) {
            w_end(&w);
            continue;
        }
        utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)c);
        bool control = cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CO ||
                       cat == UTF8PROC_CATEGORY_CS;
        if (c == 0 || c == MF_CPT_REPLACEMENT || control) continue;
        bool mark = cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
        if (v->wpm_strip_accents && mark) continue;
        bool punct = cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
        bool symbol = cat >= UTF8PROC_CATEGORY_SM && cat <= UTF8PROC_CATEGORY_SO;
        char u[4];
        uint32_t lc = v->wpm_lowercase ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)c) : c;
        size_t k = mf_utf8_encode(lc, u);
        if (punct || (c < 0x7F && symbol) || is_cjk(c)) {
            w_end(&w); /* a word of its own */
            w_put(&w, u, k);
            w_end(&w);
        } else {
            w_put(&w, u, k);
        }
    }
    w_end(&w);
    if (w.oom) {
        free(w.buf);
        free(w.ends);
        return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory normalising %zu bytes", len);
    }
    /* longest vocabulary match from the left; a word with an unmatched
     * position becomes one UNK */
    size_t start = 0;
    for (size_t k = 0; k < w.nw; k++) {
        const char *s = w.buf + start;
        size_t n = w.ends[k] - start;
        start = w.ends[k];
        size_t before = out->n;
        for (size_t i = 0; i < n; i++) {
            size_t j = n < i + v->max_token_len + 1 ? n : i + v->max_token_len + 1;
            bool hit = false;
            for (; j > i; j--) {
                int64_t id = mf_vocab_find(v, s + i, j - i);
                if (id >= 0 && id < v->n_tokens) {
                    mf_tokvec_push(out, (mf_token)id);
                    hit = true;
                    i = j - 1;
                    break;
                }
            }
            if (!hit) {
                out->n = before;
                break;
            }
        }
        if (out->n == before && v->unk >= 0) mf_tokvec_push(out, v->unk);
    }
    free(w.buf);
    free(w.ends);
    return MF_OK;
}
