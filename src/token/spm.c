/* spm.c - SentencePiece-style tokenization (tokenizer.ggml.model = llama): score-driven bigram merges
 * over UTF-8 characters, with byte fallback (<0xNN>) for what no token covers.
 *
 * Starting from single characters, the adjacent pair whose concatenation is
 * the token with the highest score merges first (leftmost on ties), until no
 * adjacent pair forms a token. */
#include <stdlib.h>
#include <string.h>

#include "token/pair_heap.h"
#include "token/utf8.h"
#include "token/vocab_impl.h"

typedef struct spm_sym {
    int32_t prev, next;
    uint32_t off, len; /* len 0 once merged into its left neighbour */
} spm_sym;

typedef struct spm_pair {
    float score;
    int32_t left, right;
    uint32_t size;
} spm_pair;

typedef struct spm_state {
    const mf_vocab *v;
    const char *text;
    spm_sym *sym;
    spm_pair *heap;
    size_t heap_n, heap_cap;
    bool oom;
} spm_state;

static inline bool pair_before(const spm_pair *a, const spm_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

MF_PAIR_HEAP(spm_state, spm_pair, pair_before)

static void try_pair(spm_state *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t size = s->sym[l].len + s->sym[r].len;
    int64_t id = mf_vocab_find(s->v, s->text + s->sym[l].off, size);
    if (id < 0) return;
    heap_push(s, (spm_pair){s->v->score[id], l, r, size});
}

void mf_spm_tokenize(const mf_vocab *v, const char *raw, size_t raw_len, bool space_prefix, mf_tokvec *out) {
    /* spaces are spelled U+2581 in SentencePiece vocabularies */
    size_t spaces = space_prefix;
    for (size_t i = 0; i < raw_len; i++) spaces += raw[i] == ' ';
    size_t len = raw_len + space_prefix + 2 * spaces;
    char *text = malloc(len ? len : 1);
    spm_sym *sym = malloc((len ? len : 1) * sizeof *sym);
    spm_state s = {.v = v, .text = text, .sym = sym};
    if (!text || !sym) {
        out->oom = true;
        goto done;
    }
    size_t o = 0;
    if (space_prefix) {
        memcpy(text, "\xE2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < raw_len; i++) {
        if (raw[i] == ' ') {
            memcpy(text + o, "\xE2\x96\x81", 3);
            o += 3;
        } else {
            text[o++] = raw[i];
        }
    }

    int32_t ns = 0;
    for (size_t i = 0; i < len;) {
        size_t n = mf_utf8_seq_len((uint8_t)text[i]);
        if (n > len - i) n = len - i;
        sym[ns] = (spm_sym){ns - 1, ns + 1, (uint32_t)i, (uint32_t)n};
        ns++;
        i += n;
    }
    if (ns == 0) goto done;
    sym[ns - 1].next = -1;
    for (int32_t i = 1; i < ns; i++) try_pair(&s, i - 1, i);
    while (s.heap_n && !s.oom) {
        spm_pair p = heap_pop(&s);
        spm_sym *a = &sym[p.left], *b = &sym[p.right];
        if (a->len == 0 || b->len == 0 || a->len + b->len != p.size) continue; /* stale */
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0) sym[b->next].prev = p.left;
        try_pair(&s, a->prev, p.left);
        try_pair(&s, p.left, a->next);
    }
    if (s.oom) {
        out->oom = true;
        goto done;
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        int64_t id = mf_vocab_find(v, text + sym[i].off, sym[i].len);
        if (id >= 0) {
            mf_tokvec_push(out, (mf_token)id);
            continue;
        }
        /* no token for this character: one byte token per byte */
        for (uint32_t k = 0; k < sym[i].len; k++) {
            mf_token b = v->byte_token[(uint8_t)text[sym[i].off + k]];
            if (b < 0) b = v->unk; /* llama.cpp would throw here; UNK is the closest honest answer */
            if (b >= 0) mf_tokvec_push(out, b);
        }
    }
done:
    free(text);
    free(sym);
    free(s.heap);
}
