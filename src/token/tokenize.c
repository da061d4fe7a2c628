/* tokenize.c - text to token ids: special tokens split off whole first, then the vocabulary's
 * tokenizer on each remaining piece of text, then BOS/EOS as the vocabulary asks. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "token/vocab_impl.h"

void mf_tokvec_push(mf_tokvec *t, mf_token id) {
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        mf_token *v = realloc(t->v, nc * sizeof *v);
        if (!v) {
            t->oom = true;
            return;
        }
        t->v = v;
        t->cap = nc;
    }
    t->v[t->n++] = id;
}

/* ---- special-token partition ---------------------------------------------------- */

/* A piece of the input: raw text (tok < 0) or one special token. */
typedef struct frag {
    mf_token tok;
    size_t off, len;
} frag;

typedef struct fraglist {
    frag *f;
    size_t n, cap;
} fraglist;

static bool frag_push(fraglist *l, frag x) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 16;
        frag *f = realloc(l->f, nc * sizeof *f);
        if (!f) return false;
        l->f = f;
        l->cap = nc;
    }
    l->f[l->n++] = x;
    return true;
}

static inline bool c_isspace(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Marks which special texts occur anywhere in the input. A text absent from
 * the whole input cannot occur in any piece of it, so the partition below
 * only has to look for these. */
static void find_present(const mf_vocab *v, const char *text, size_t len, uint8_t *present) {
    bool byte_seen[256] = {false};
    for (size_t i = 0; i < len; i++) byte_seen[(uint8_t)text[i]] = true;
    for (int32_t k = 0; k < v->n_special; k++) {
        const mf_strref *t = &v->text[v->special[k]];
        if (t->len == 1) present[k] = byte_seen[(uint8_t)t->s[0]];
    }
    for (size_t i = 0; i + 1 < len; i++) {
        uint32_t p = (uint8_t)text[i] | (uint32_t)(uint8_t)text[i + 1] << 8;
        for (uint32_t j = v->sp_first[p]; j < v->sp_first[p + 1]; j++) {
            int32_t k = v->sp_by_prefix[j];
            const mf_strref *t = &v->text[v->special[k]];
            if (!present[k] && t->len <= len - i && memcmp(text + i, t->s, t->len) == 0) present[k] = 1;
        }
    }
}

/* llama.cpp's order: each special text in turn, longest first, is cut out of
 * every raw piece left by the previous ones, left to right. */
static mf_status partition(const mf_vocab *v, const char *text, size_t len, bool parse_special, fraglist *out) {
    fraglist cur = {0}, nxt = {0};
    uint8_t *present = NULL;
    mf_status st = MF_OK;
    if (!frag_push(&cur, (frag){-1, 0, len})) goto oom;
    if (v->n_special) {
        present = calloc((size_t)v->n_special, 1);
        if (!present) goto oom;
        find_present(v, text, len, present);
    }
    for (int32_t k = 0; k < v->n_special; k++) {
        if (!present[k]) continue;
        mf_token id = v->special[k];
        uint32_t attr = v->attr[id];
        /* without parse_special only user-defined texts are matched */
        if (!parse_special && (attr & (MF_TATTR_CONTROL | MF_TATTR_UNKNOWN))) continue;
        const mf_strref *t = &v->text[id];
        nxt.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            frag f = cur.f[i];
            if (f.tok >= 0) {
                if (!frag_push(&nxt, f)) goto oom;
                continue;
            }
            size_t base = f.off, blen = f.len;
            while (blen > 0) {
                const char *m = memmem(text + base, blen, t->s, t->len);
                if (!m) {
                    if (!frag_push(&nxt, (frag){-1, base, blen})) goto oom;
                    break;
                }
                size_t at = (size_t)(m - text);
                size_t left = at - base;
                if (attr & MF_TATTR_LSTRIP)
                    while (left > 0 && c_isspace(text[base + left - 1])) left--;
                if (left > 0 && !frag_push(&nxt, (frag){-1, base, left})) goto oom;
                if (!frag_push(&nxt, (frag){id, 0, 0})) goto oom;
                size_t roff = at + t->len, rlen = base + blen - roff;
                if (attr & MF_TATTR_RSTRIP)
                    while (rlen > 0 && c_isspace(text[roff])) roff++, rlen--;
                base = roff;
                blen = rlen;
            }
        }
        fraglist tmp = cur;
        cur = nxt;
        nxt = tmp;
    }
    *out = cur;
    cur.f = NULL;
    goto done;
oom:
    st = mf_err(MF_ERR_NOMEM, "tokenizer: out of memory splitting special tokens from %zu bytes", len);
done:
    free(cur.f);
    free(nxt.f);
    free(present);
    return st;
}

/* ---- entry point -------------------------------------------------------------------- */

int32_t mf_vocab_tokenize(const mf_vocab *v, const char *text, size_t len, mf_token *out, int32_t cap, bool add_special,
                          bool parse_special) {
    if (!v) {
        mf_err(MF_ERR_INVALID_ARG, "tokenize: no vocabulary");
        return INT32_MIN;
    }
    if ((!text && len > 0) || cap < 0 || (cap > 0 && !out)) {
        mf_err(MF_ERR_INVALID_ARG, "tokenize: bad arguments (text %s, len %zu, cap %d)", text ? "set" : "NULL", len,
               cap);
        return INT32_MIN;
    }
    fraglist frags = {0};
    mf_tokvec tv = {0};
    mf_status st = MF_OK;
    if (len > 0 && (st = partition(v, text, len, parse_special, &frags))) goto fail;

    bool bos = add_special && (v->kind == MF_VOCAB_WPM || v->add_bos);
    bool eos = add_special && v->kind != MF_VOCAB_WPM && v->add_eos;
    bool sep = add_special && v->kind == MF_VOCAB_WPM;
    if ((bos && v->bos < 0) || (eos && v->eos < 0) || (sep && v->sep < 0)) {
        st = mf_err(MF_ERR_INVALID_ARG, "tokenize: the vocabulary asks for a %s token it does not have",
                    bos && v->bos < 0   ? "BOS"
                    : eos && v->eos < 0 ? "EOS"
                                        : "separator");
        goto fail;
    }
    if (bos) mf_tokvec_push(&tv, v->bos);
    bool prev_special = true; /* SentencePiece prefixes a space at the start and after a special token */
    for (size_t i = 0; i < frags.n && !tv.oom; i++) {
        const frag *f = &frags.f[i];
        if (f->tok >= 0) {
            mf_tokvec_push(&tv, f->tok);
            prev_special = true;
            continue;
        }
        switch (v->kind) {
        case MF_VOCAB_SPM: mf_spm_tokenize(v, text + f->off, f->len, v->add_space_prefix && prev_special, &tv); break;
        case MF_VOCAB_BPE: st = mf_bpe_tokenize(v, text + f->off, f->len, &tv); break;
        case MF_VOCAB_WPM: st = mf_wpm_tokenize(v, text + f->off, f->len, &tv); break;
        }
        if (st) goto fail;
        prev_special = false;
    }
    if (eos) mf_tokvec_push(&tv, v->eos);
    if (sep) mf_tokvec_push(&tv, v->sep);
    if (tv.oom) {
        st = mf_err(MF_ERR_NOMEM, "tokenize: out of memory for the tokens of %zu bytes", len);
        goto fail;
    }
    if (tv.n > (size_t)INT32_MAX) {
        st = mf_err(MF_ERR_INVALID_ARG, "tokenize: %zu bytes give more than 2^31 tokens", len);
        goto fail;
    }
    int32_t n = (int32_t)tv.n;
    if (n > cap) {
        n = -n;
    } else if (n > 0) {
        memcpy(out, tv.v, (size_t)n * sizeof *out);
    }
    free(frags.f);
    free(tv.v);
    return n;
fail:
    free(frags.f);
    free(tv.v);
    (void)st;
    return INT32_MIN;
}
