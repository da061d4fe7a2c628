/* synth_vocab.c - the vocabulary of a synthetic model: generated
 * (SentencePiece-style, so any text tokenizes through byte fallback in
 * minfer and llama.cpp alike) or copied from another GGUF and padded to the
 * preset's size. */
#include "synth/synth.h"
#include "core/error.h"
#include "token/vocab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's token types (tokenizer.ggml.token_type) */
enum { TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_UNUSED = 5, TT_BYTE = 6 };

#define N_FIXED (3 + 256) /* <unk> <s> </s> and the byte tokens */
#define SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's stand-in for a space */

/* Filler piece k, in a fixed order of groups: the space mark alone, each
 * printable ASCII character, each of those after the space mark, then every
 * lower-case word of 2, 3, 4, ... letters, bare and after the space mark.
 * The groups are disjoint, so all pieces differ (llama.cpp requires unique
 * texts), and every word of L letters is the join of two shorter pieces
 * that come earlier, so SentencePiece's pair merges can reach it. Returns
 * the length written to buf (at least 16 bytes for k < 26^8). */
static size_t filler_piece(int64_t k, char *buf) {
    size_t o = 0;
    if (k == 0) {
        memcpy(buf, SPACE, 3);
        return 3;
    }
    k -= 1;
    if (k < 2 * 94) {
        if (k >= 94) {
            memcpy(buf, SPACE, 3);
            o = 3;
            k -= 94;
        }
        buf[o++] = (char)(0x21 + k);
        return o;
    }
    k -= 2 * 94;
    int64_t count = 26 * 26; /* words of `len` letters */
    int len = 2;
    while (k >= 2 * count) {
        k -= 2 * count;
        count *= 26;
        len++;
    }
    if (k & 1) {
        memcpy(buf, SPACE, 3);
        o = 3;
    }
    int64_t w = k >> 1;
    for (int i = len - 1; i >= 0; i--) {
        buf[o + (size_t)i] = (char)('a' + w % 26);
        w /= 26;
    }
    return o + (size_t)len;
}

mf_status synth_vocab_generate(gguf_writer *w, int32_t n_vocab) {
    if (n_vocab < N_FIXED + 1)
        return mf_err(MF_ERR_INVALID_ARG, "synth: a generated vocabulary needs more than %d tokens, not %d", N_FIXED,
                      (int)n_vocab);
    const size_t n = (size_t)n_vocab;
    char **texts = malloc(n * sizeof *texts);
    char *blob = malloc(n * 16);
    float *scores = malloc(n * sizeof *scores);
    int32_t *types = malloc(n * sizeof *types);
    mf_status s = MF_OK;
    if (!texts || !blob || !scores || !types) {
        s = mf_err(MF_ERR_NOMEM, "synth: out of memory for %d tokens", (int)n_vocab);
        goto done;
    }
    char *p = blob;
    for (size_t i = 0; i < n; i++) {
        texts[i] = p;
        size_t len;
        if (i == 0) len = (size_t)sprintf(p, "<unk>");
        else if (i == 1) len = (size_t)sprintf(p, "<s>");
        else if (i == 2) len = (size_t)sprintf(p, "</s>");
        else if (i < N_FIXED) len = (size_t)sprintf(p, "<0x%02X>", (unsigned)(i - 3));
        else len = filler_piece((int64_t)(i - N_FIXED), p);
        p[len] = 0;
        p += len + 1;
        types[i] = i == 0 ? TT_UNKNOWN : i < 3 ? TT_CONTROL : i < N_FIXED ? TT_BYTE : TT_NORMAL;
        /* SentencePiece scores are log-probabilities: earlier pieces are
         * likelier and win a merge; the fixed tokens carry 0 as in real
         * llama vocabularies */
        scores[i] = i < N_FIXED ? 0.0f : -(float)(i - N_FIXED);
    }
    if (!s) s = gguf_writer_set_str(w, "tokenizer.ggml.model", "llama");
    if (!s) s = gguf_writer_set_str(w, "tokenizer.ggml.pre", "default");
    if (!s) s = gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)texts, n);
    if (!s) s = gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, n);
    if (!s) s = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, n);
    if (!s) s = gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1);
    if (!s) s = gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2);
    if (!s) s = gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0);
    if (!s) s = gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true);
    if (!s) s = gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false);
done:
    free(texts);
    free(blob);
    free(scores);
    free(types);
    return s;
}

/* ---- copying ---- */

static bool is_tokenizer_key(const char *key, void *ud) {
    (void)ud;
    return !strncmp(key, "tokenizer.", 10);
}

/* Appends unused "[PADn]" tokens (as llama.cpp's converter pads Qwen's and
 * others' vocabularies up to the embedding's rows), with matching entries in
 * the per-token arrays that the file has. */
static mf_status pad(gguf_writer *w, const gguf_file *f, const gguf_value *tokens, int32_t n_vocab) {
    const uint64_t n0 = tokens->arr.n, n = (uint64_t)n_vocab;
    mf_status s = MF_OK;
    gguf_str *strs = malloc(n * sizeof *strs);
    char *blob = malloc((n - n0) * 24);
    int32_t *types = NULL;
    float *scores = NULL;
    if (!strs || !blob) {
        s = mf_err(MF_ERR_NOMEM, "synth: out of memory padding the vocabulary");
        goto done;
    }
    memcpy(strs, tokens->arr.strs, n0 * sizeof *strs);
    char *p = blob;
    for (uint64_t i = n0; i < n; i++) {
        int len = sprintf(p, "[PAD%" PRIu64 "]", i);
        strs[i] = (gguf_str){p, (uint64_t)len};
        p += len + 1;
    }
    /* a "[PADn]" text the vocabulary already holds would make two tokens
     * with one text, which llama.cpp refuses */
    for (uint64_t i = 0; i < n0; i++) {
        const gguf_str *t = &strs[i];
        uint64_t id;
        char tail;
        if (t->len > 5 && t->len < 24 && !memcmp(t->ptr, "[PAD", 4) && t->ptr[t->len - 1] == ']') {
            char tmp[24];
            memcpy(tmp, t->ptr, t->len);
            tmp[t->len] = 0;
            if (sscanf(tmp, "[PAD%" SCNu64 "%c", &id, &tail) == 2 && tail == ']' && id >= n0 && id < n) {
                s = mf_err(MF_ERR_FORMAT, "%s: token %" PRIu64 " is already '%s', which padding would repeat", f->path,
                           i, tmp);
                goto done;
            }
        }
    }
    gguf_value tv = *tokens;
    tv.arr.n = n;
    tv.arr.strs = strs;
    if ((s = gguf_writer_set_value(w, "tokenizer.ggml.tokens", &tv))) goto done;

    const gguf_value *tt = gguf_get(f, "tokenizer.ggml.token_type");
    if (tt && tt->type == GGUF_ARR && gguf_vtype_is_int(tt->arr.elem) && tt->arr.n >= n0) {
        if (!(types = malloc(n * sizeof *types))) {
            s = mf_err(MF_ERR_NOMEM, "synth: out of memory padding the vocabulary");
            goto done;
        }
        for (uint64_t i = 0; i < n; i++) types[i] = i < n0 ? (int32_t)gguf_arr_int(tt, i) : TT_UNUSED;
        if ((s = gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_I32, types, n))) goto done;
    }
    const gguf_value *sc = gguf_get(f, "tokenizer.ggml.scores");
    if (sc && sc->type == GGUF_ARR && sc->arr.elem != GGUF_STR && sc->arr.elem != GGUF_ARR && sc->arr.n >= n0) {
        if (!(scores = malloc(n * sizeof *scores))) {
            s = mf_err(MF_ERR_NOMEM, "synth: out of memory padding the vocabulary");
            goto done;
        }
        /* far below any real piece, so a padding token never wins a merge */
        for (uint64_t i = 0; i < n; i++) scores[i] = i < n0 ? (float)gguf_arr_float(sc, i) : -1000.0f;
        if ((s = gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_F32, scores, n))) goto done;
    }
done:
    free(strs);
    free(blob);
    free(types);
    free(scores);
    return s;
}

mf_status synth_vocab_copy(gguf_writer *w, const char *path, int32_t n_vocab, const char *preset, int32_t *n_source) {
    gguf_file *f = NULL;
    mf_status s = gguf_open(path, &f);
    if (s) return s;
    /* what minfer cannot tokenize with is refused here, not after writing */
    mf_vocab *v = NULL;
    if ((s = mf_vocab_load(f, &v))) goto done;
    mf_vocab_free(v);
    const gguf_value *tokens = gguf_get(f, "tokenizer.ggml.tokens"); /* present: the load checked it */
    if (tokens->arr.n > (uint64_t)n_vocab) {
        s = mf_err(MF_ERR_INVALID_ARG,
                   "%s: the vocabulary has %" PRIu64 " tokens, more than preset %s's %d (the embedding's rows); "
                   "use a vocabulary of at most that size",
                   path, tokens->arr.n, preset, (int)n_vocab);
        goto done;
    }
    *n_source = (int32_t)tokens->arr.n;
    if ((s = gguf_writer_copy_kv(w, f, is_tokenizer_key, NULL))) goto done;
    if (tokens->arr.n < (uint64_t)n_vocab) s = pad(w, f, tokens, n_vocab);
done:
    gguf_close(f);
    return s;
}
