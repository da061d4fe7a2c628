/* bpe.c - byte-level BPE: merge table from tokenizer.ggml.merges and the rank-ordered merge of each word.
 *
 * Every string that takes part in a merge gets an integer id (token texts keep
 * their token id; the rare merge halves that are not tokens get ids past the
 * vocabulary), so the merge loop compares integers, never strings. The merge
 * order is llama.cpp's: lowest rank first, leftmost first among equal ranks. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "token/pretok.h"
#include "token/pair_heap.h"
#include "token/utf8.h"
#include "token/vocab_impl.h"

/* ---- merge table ------------------------------------------------------------ */

static inline uint64_t merge_key(int32_t l, int32_t r) { return (((uint64_t)(uint32_t)l << 32) | (uint32_t)r) + 1; }

static inline uint32_t merge_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    k ^= k >> 33;
    return (uint32_t)k;
}

static const mf_merge_slot *merge_find(const mf_vocab *v, int32_t l, int32_t r) {
    uint64_t k = merge_key(l, r);
    for (uint32_t i = merge_hash(k) & v->merge_mask;; i = (i + 1) & v->merge_mask) {
        const mf_merge_slot *s = &v->merges[i];
        if (s->key == k) return s;
        if (!s->key) return NULL;
    }
}

mf_status mf_bpe_load_merges(mf_vocab *v, const gguf_file *f) {
    const char *key = "tokenizer.ggml.merges";
    const gguf_value *m = gguf_get(f, key);
    if (!m) return mf_err(MF_ERR_FORMAT, "%s: BPE vocabulary without '%s'", f->path, key);
    if (m->type != GGUF_ARR || m->arr.elem != GGUF_STR)
        return mf_err(MF_ERR_FORMAT, "%s: '%s' must be an array of strings", f->path, key);
    if (m->arr.n > (uint64_t)INT32_MAX / 2)
        return mf_err(MF_ERR_FORMAT, "%s: '%s' has %llu entries, too many", f->path, key, (unsigned long long)m->arr.n);
    uint32_t n = (uint32_t)m->arr.n;
    uint32_t cap = 16;
    while (cap < n * 2u + 16u) cap <<= 1;
    v->merges = calloc(cap, sizeof *v->merges);
    if (!v->merges) return mf_err(MF_ERR_NOMEM, "%s: out of memory for %u merges", f->path, n);
    v->merge_mask = cap - 1;
    size_t cat_cap = 256;
    char *cat = malloc(cat_cap);
    if (!cat) return mf_err(MF_ERR_NOMEM, "%s: out of memory reading merges", f->path);
    for (uint32_t i = 0; i < n; i++) {
        const gguf_str *s = &m->arr.strs[i];
        /* "left right", split at the first space after the first byte */
        size_t len = (size_t)s->len, sp = len;
        for (size_t k = 1; k < len; k++)
            if (s->ptr[k] == ' ') {
                sp = k;
                break;
            }
        const char *l = s->ptr, *r = sp < len ? s->ptr + sp + 1 : s->ptr;
        size_t ll = sp < len ? sp : 0, rl = sp < len ? len - sp - 1 : 0;
        if (ll + rl > cat_cap) {
            cat_cap = (ll + rl) * 2 + 64;
            char *c = realloc(cat, cat_cap);
            if (!c) {
                free(cat);
                return mf_err(MF_ERR_NOMEM, "%s: out of memory reading merges", f->path);
            }
            cat = c;
        }
        memcpy(cat, l, ll);
        memcpy(cat + ll, r, rl);
        int32_t lid, rid, mid;
        mf_status st;
        if ((st = mf_vocab_intern(v, l, ll, &lid)) || (st = mf_vocab_intern(v, r, rl, &rid)) ||
            (st = mf_vocab_intern(v, cat, ll + rl, &mid))) {
            free(cat);
            return st;
        }
        uint64_t k = merge_key(lid, rid);
        uint32_t j = merge_hash(k) & v->merge_mask;
        while (v->merges[j].key && v->merges[j].key != k) j = (j + 1) & v->merge_mask;
        if (v->merges[j].key) continue; /* a repeated pair keeps its first (lowest) rank */
        v->merges[j].key = k;
        v->merges[j].rank = (int32_t)i;
        v->merges[j].merged = mid;
        v->n_merges++;
    }
    free(cat);
    return MF_OK;
}

/* ---- the merge loop ------------------------------------------------------------ */

typedef struct bpe_sym {
    int32_t id; /* string id of the symbol's text, -1 if it has none */
    int32_t prev, next;
    uint32_t off, len; /* bytes of the word; len 0 once merged away */
} bpe_sym;

typedef struct bpe_pair {
    int32_t rank;
    int32_t left, right;
    int32_t merged;
    uint32_t size;
} bpe_pair;

/* Per-call memo of word -> tokens: running text repeats its words, and a
 * repeated word costs one hash lookup instead of a merge loop. */
typedef struct word_memo {
    uint32_t *slot; /* index + 1 into ent, 0 = empty */
    uint32_t mask;
    struct memo_ent {
        uint64_t hash;
        uint32_t word_off, word_len; /* in bytes */
        uint32_t tok_off, tok_n;     /* in toks */
    } * ent;
    uint32_t n_ent;
    size_t cap_ent_sz;
    char *bytes;
    size_t n_bytes, cap_bytes;
    mf_token *toks;
    size_t n_toks, cap_toks;
} word_memo;

#define MEMO_MAX_WORD 48       /* longer words are rare and not worth keeping */
#define MEMO_MAX_ENTRIES 65536 /* bounds the memo's memory on huge inputs */

typedef struct bpe_scratch {
    word_memo memo;
    bpe_sym *sym;
    size_t sym_cap;
    bpe_pair *heap;
    size_t heap_n, heap_cap;
    char *buf; /* byte-encoded word, for whole-word lookups and the fallback */
    size_t buf_cap;
    bool oom;
} bpe_scratch;

static inline bool pair_less(const bpe_pair *a, const bpe_pair *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

MF_PAIR_HEAP(bpe_scratch, bpe_pair, pair_less)

static void try_pair(const mf_vocab *v, bpe_scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const bpe_sym *a = &s->sym[l], *b = &s->sym[r];
    if (a->id < 0 || b->id < 0) return;
    const mf_merge_slot *m = merge_find(v, a->id, b->id);
    if (!m) return;
    heap_push(s, (bpe_pair){m->rank, l, r, m->merged, a->len + b->len});
}

static bool reserve(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t nc = *cap ? *cap : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

/* The word as the vocabulary spells it: GPT-2 byte alphabet, or raw UTF-8. */
static const char *spelled(const mf_vocab *v, bpe_scratch *s, const char *w, size_t n, size_t *out_len) {
    if (!v->pre.byte_encode) {
        *out_len = n;
        return w;
    }
    if (!reserve((void **)&s->buf, &s->buf_cap, 2 * n + 1, 1)) {
        s->oom = true;
        *out_len = 0;
        return "";
    }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += mf_utf8_encode(mf_byte_to_cpt((uint8_t)w[i]), s->buf + o);
    *out_len = o;
    return s->buf;
}

static struct memo_ent *memo_find(word_memo *m, const char *w, size_t n, uint64_t h, uint32_t **slot_out) {
    if (!m->slot) return NULL;
    for (uint32_t i = (uint32_t)h & m->mask;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) {
            *slot_out = &m->slot[i];
            return NULL;
        }
        struct memo_ent *x = &m->ent[e - 1];
        if (x->hash == h && x->word_len == n && memcmp(m->bytes + x->word_off, w, n) == 0) return x;
    }
}

static void memo_put(word_memo *m, uint32_t *slot, const char *w, size_t n, uint64_t h, const mf_token *t, size_t nt) {
    if (!slot || m->n_ent >= MEMO_MAX_ENTRIES) return;
    if (!reserve((void **)&m->ent, &m->cap_ent_sz, m->n_ent + 1, sizeof *m->ent) ||
        !reserve((void **)&m->bytes, &m->cap_bytes, m->n_bytes + n, 1) ||
        !reserve((void **)&m->toks, &m->cap_toks, m->n_toks + nt, sizeof *m->toks))
        return; /* the memo is only an optimisation */
    m->ent[m->n_ent] = (struct memo_ent){h, (uint32_t)m->n_bytes, (uint32_t)n, (uint32_t)m->n_toks, (uint32_t)nt};
    memcpy(m->bytes + m->n_bytes, w, n);
    m->n_bytes += n;
    if (nt) memcpy(m->toks + m->n_toks, t, nt * sizeof *t);
    m->n_toks += nt;
    *slot = ++m->n_ent;
}

static void bpe_word_uncached(const mf_vocab *v, bpe_scratch *s, const char *w, size_t n, mf_tokvec *out);

static void bpe_word(const mf_vocab *v, bpe_scratch *s, const char *w, size_t n, mf_tokvec *out) {
    if (n == 0) return;
    if (n > MEMO_MAX_WORD || !s->memo.slot) {
        bpe_word_uncached(v, s, w, n, out);
        return;
    }
    uint64_t h = mf_hash_bytes(w, n);
    uint32_t *slot = NULL;
    struct memo_ent *e = memo_find(&s->memo, w, n, h, &slot);
    if (e) {
        for (uint32_t i = 0; i < e->tok_n; i++) mf_tokvec_push(out, s->memo.toks[e->tok_off + i]);
        return;
    }
    size_t before = out->n;
    bpe_word_uncached(v, s, w, n, out);
    if (!out->oom) memo_put(&s->memo, slot, w, n, h, out->n > before ? out->v + before : NULL, out->n - before);
}

static void bpe_word_uncached(const mf_vocab *v, bpe_scratch *s, const char *w, size_t n, mf_tokvec *out) {
    if (v->ignore_merges || (v->pre_flags & MF_PT_NEWLINE_WORD)) {
        bool whole = v->ignore_merges;
        if (!whole) {
            whole = true; /* gemma4: only a word made of newlines */
            for (size_t i = 0; i < n; i++) whole &= w[i] == '\n';
        }
        if (whole) {
            size_t sl;
            const char *sp = spelled(v, s, w, n, &sl);
            int64_t id = mf_vocab_find(v, sp, sl);
            if (id >= 0) {
                mf_tokvec_push(out, (mf_token)id);
                return;
            }
        }
    }
    if (!reserve((void **)&s->sym, &s->sym_cap, n, sizeof *s->sym)) {
        s->oom = true;
        return;
    }
    int32_t ns = 0;
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        int32_t id;
        if (v->pre.byte_encode) {
            id = v->byte_sym[(uint8_t)w[i]];
        } else {
            len = mf_utf8_seq_len((uint8_t)w[i]);
            if (len > n - i) len = n - i;
            int64_t f = mf_vocab_find_string(v, w + i, len);
            id = f >= 0 ? (int32_t)f : -1;
        }
        s->sym[ns] = (bpe_sym){id, ns - 1, ns + 1, (uint32_t)i, (uint32_t)len};
        ns++;
        i += len;
    }
    s->sym[ns - 1].next = -1;
    s->heap_n = 0;
    for (int32_t i = 1; i < ns; i++) try_pair(v, s, i - 1, i);
    while (s->heap_n) {
        bpe_pair p = heap_pop(s);
        bpe_sym *a = &s->sym[p.left], *b = &s->sym[p.right];
        /* stale: one side already merged into something else */
        if (a->len == 0 || b->len == 0 || a->len + b->len != p.size) continue;
        a->id = p.merged;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0) s->sym[b->next].prev = p.left;
        try_pair(v, s, a->prev, p.left);
        try_pair(v, s, p.left, a->next);
    }
    for (int32_t i = 0; i >= 0; i = s->sym[i].next) {
        const bpe_sym *y = &s->sym[i];
        if (y->id >= 0 && y->id < v->n_tokens) {
            mf_tokvec_push(out, y->id);
            continue;
        }
        /* not a token: llama.cpp emits the single-byte tokens of its spelling */
        const char *raw = w + y->off;
        if (v->pre.byte_encode) {
            size_t sl;
            const char *sp = spelled(v, s, raw, y->len, &sl);
            for (size_t k = 0; k < sl; k++) {
                int64_t id = mf_vocab_find(v, sp + k, 1);
                if (id >= 0) mf_tokvec_push(out, (mf_token)id);
            }
        } else {
            for (uint32_t k = 0; k < y->len; k++) {
                char hex[7];
                static const char digits[] = "0123456789ABCDEF";
                uint8_t c = (uint8_t)raw[k];
                hex[0] = '<', hex[1] = '0', hex[2] = 'x', hex[3] = digits[c >> 4], hex[4] = digits[c & 15],
                hex[5] = '>';
                int64_t id = mf_vocab_find(v, hex, 6);
                if (id >= 0) mf_tokvec_push(out, (mf_token)id);
            }
        }
    }
}

/* ---- one fragment --------------------------------------------------------------- */

mf_status mf_bpe_tokenize(const mf_vocab *v, const char *text, size_t len, mf_tokvec *out) {
    mf_status st = MF_OK;
    char *esc = NULL, *re = NULL, *scat = NULL, *sws = NULL;
    size_t *ends = NULL, n_ends = 0, cap_ends = 0;
    bpe_scratch s = {0};

    if (v->escape_whitespaces) {
        /* SPM-style BPE: spaces become U+2581 before anything else */
        size_t spaces = 0;
        for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
        esc = malloc(len + 2 * spaces + 1);
        if (!esc) goto oom;
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
            if (text[i] == ' ') {
                memcpy(esc + o, "\xE2\x96\x81", 3);
                o += 3;
            } else {
                esc[o++] = text[i];
            }
        }
        text = esc;
        len = o;
    }

    /* Decode as llama.cpp does (invalid bytes -> U+FFFD) and re-encode; the
     * words are cut from this text. The two subjects PCRE2 matches have the
     * same byte length, so offsets carry over. */
    re = malloc(3 * len + 1);
    scat = malloc(3 * len + 1);
    sws = malloc(3 * len + 1);
    if (!re || !scat || !sws) goto oom;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if ((uint8_t)text[i] < 0x80) { /* ASCII is the same in all three */
            re[n] = scat[n] = sws[n] = text[i++];
            n++;
            continue;
        }
        uint32_t c = mf_utf8_decode((const uint8_t *)text, len, &i);
        size_t k = mf_utf8_encode(c, re + n);
        mf_utf8_encode(mf_cpt_for_regex(c, 1), scat + n);
        mf_utf8_encode(mf_cpt_for_regex(c, 0), sws + n);
        n += k;
    }
    if ((st = mf_pretok_split(&v->pre, scat, sws, n, &ends, &n_ends, &cap_ends))) goto done;
    if (n_ends > 64) { /* worth a memo */
        uint32_t cap = 1024;
        while (cap < 2 * n_ends && cap < 2 * MEMO_MAX_ENTRIES) cap <<= 1;
        s.memo.slot = calloc(cap, sizeof *s.memo.slot);
        s.memo.mask = cap - 1;
    }
    size_t a = 0;
    for (size_t k = 0; k < n_ends && !s.oom && !out->oom; k++) {
        bpe_word(v, &s, re + a, ends[k] - a, out);
        a = ends[k];
    }
    if (s.oom || out->oom) goto oom;
    goto done;
oom:
    st = mf_err(MF_ERR_NOMEM, "tokenizer: out of memory tokenizing %zu bytes", len);
done:
    free(esc);
    free(re);
    free(scat);
    free(sws);
    free(ends);
    free(s.sym);
    free(s.heap);
    free(s.buf);
    free(s.memo.slot);
    free(s.memo.ent);
    free(s.memo.bytes);
    free(s.memo.toks);
    return st;
}
