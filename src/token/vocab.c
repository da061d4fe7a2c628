/* vocab.c - loading a vocabulary from GGUF metadata with llama.cpp's defaults and overrides,
 * token attributes, special ids, the end-of-generation set, and per-token pieces.
 *
 * Where llama.cpp only warns about bad metadata (a special token id past the
 * end of the vocabulary), we do the same thing it does (keep the default) so
 * that every file it loads loads here too; malformed arrays and wrong value
 * types are errors naming the key. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "token/pretok.h"
#include "token/utf8.h"
#include "token/vocab_impl.h"

/* llama.cpp's token types (tokenizer.ggml.token_type) */
enum {
    TT_UNDEFINED = 0,
    TT_NORMAL = 1,
    TT_UNKNOWN = 2,
    TT_CONTROL = 3,
    TT_USER_DEFINED = 4,
    TT_UNUSED = 5,
    TT_BYTE = 6
};

/* ---- string table ------------------------------------------------------------ */

int64_t mf_vocab_find_string(const mf_vocab *v, const char *s, size_t n) {
    return mf_strmap_find(&v->tok_map, v->text, s, n);
}

int64_t mf_vocab_find(const mf_vocab *v, const char *s, size_t n) {
    int64_t id = mf_strmap_find(&v->tok_map, v->text, s, n);
    return id < v->n_tokens ? id : -1; /* merge-only strings are not tokens */
}

#define EXTRA_CHUNK (64 * 1024)

/* Merge-only strings live in append-only chunks so mf_strref pointers stay valid. */
mf_status mf_vocab_intern(mf_vocab *v, const char *s, size_t n, int32_t *id) {
    int64_t f = mf_vocab_find_string(v, s, n);
    if (f >= 0) {
        *id = (int32_t)f;
        return MF_OK;
    }
    if (v->n_strings >= (uint32_t)INT32_MAX) return mf_err(MF_ERR_FORMAT, "tokenizer: too many merge strings");
    if (v->n_strings == v->cap_strings) {
        uint32_t nc = v->cap_strings * 2;
        mf_strref *t = realloc(v->text, (size_t)nc * sizeof *t);
        if (!t) return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for merge strings");
        v->text = t;
        v->cap_strings = nc;
    }
    /* copy into the current chunk (a fresh one when full) */
    char *dst;
    if (n + 1 > EXTRA_CHUNK || v->extra_used + n + 1 > EXTRA_CHUNK || !v->n_extra_blobs) {
        size_t sz = n + 1 > EXTRA_CHUNK ? n + 1 : EXTRA_CHUNK;
        char **b = realloc(v->extra_blobs, (v->n_extra_blobs + 1) * sizeof *b);
        if (!b) return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for merge strings");
        v->extra_blobs = b;
        char *chunk = malloc(sz);
        if (!chunk) return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for merge strings");
        v->extra_blobs[v->n_extra_blobs++] = chunk;
        v->extra_used = 0;
    }
    dst = v->extra_blobs[v->n_extra_blobs - 1] + v->extra_used;
    if (n) memcpy(dst, s, n);
    dst[n] = 0;
    v->extra_used += n + 1;
    uint32_t idx = v->n_strings++;
    v->text[idx] = (mf_strref){dst, (uint32_t)n};
    *id = (int32_t)idx;
    return mf_strmap_put(&v->tok_map, v->text, idx);
}

/* ---- metadata helpers ------------------------------------------------------------ */

/* A string value without truncation; NULL when absent. */
static mf_status get_str(const gguf_file *f, const char *key, bool required, gguf_str *out, bool *found) {
    *found = false;
    const gguf_value *v = gguf_get(f, key);
    if (!v) return required ? mf_err(MF_ERR_FORMAT, "%s: no tokenizer: key '%s' is missing", f->path, key) : MF_OK;
    if (v->type != GGUF_STR)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' has type %s, expected string", f->path, key,
                      gguf_vtype_name(v->type));
    *out = v->s;
    *found = true;
    return MF_OK;
}

static void copy_name(char *dst, size_t cap, gguf_str s) {
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(dst, s.ptr, n);
    dst[n] = 0;
}

/* An array key with element type `elem` and at least `min_n` entries. */
static mf_status get_array(const gguf_file *f, const char *key, gguf_vtype elem, gguf_vtype elem2, uint64_t min_n,
                           const gguf_value **out) {
    *out = NULL;
    const gguf_value *v = gguf_get(f, key);
    if (!v) return MF_OK;
    if (v->type != GGUF_ARR || (v->arr.elem != elem && v->arr.elem != elem2))
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' must be an array of %s%s%s, found %s", f->path, key,
                      gguf_vtype_name(elem), elem2 != elem ? " or " : "", elem2 != elem ? gguf_vtype_name(elem2) : "",
                      v->type == GGUF_ARR ? "an array of other values" : gguf_vtype_name(v->type));
    if (v->arr.n < min_n)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' has %llu entries but the vocabulary has %llu tokens", f->path, key,
                      (unsigned long long)v->arr.n, (unsigned long long)min_n);
    *out = v;
    return MF_OK;
}

/* ---- pieces ------------------------------------------------------------------------ */

static uint8_t byte_of_token(const mf_strref *t) {
    /* "<0xNN>": the two characters after "<0x" read as hex (llama.cpp's rule) */
    char hex[3] = {0, 0, 0};
    for (size_t i = 0; i < 2 && 3 + i < t->len; i++) hex[i] = t->s[3 + i];
    return (uint8_t)strtol(hex, NULL, 16);
}

typedef struct strbuf {
    char *p;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 1 << 16;
        while (nc < b->n + n) nc *= 2;
        char *q = realloc(b->p, nc);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* Appends token id's piece as llama.cpp renders it with special = true. */
static void render_piece(const mf_vocab *v, int32_t id, strbuf *b) {
    const mf_strref *t = &v->text[id];
    uint32_t a = v->attr[id];
    if (a & (MF_TATTR_UNKNOWN | MF_TATTR_CONTROL | MF_TATTR_USER_DEFINED)) {
        sb_put(b, t->s, t->len);
        return;
    }
    if (a & MF_TATTR_NORMAL) {
        if (v->kind != MF_VOCAB_BPE || v->escape_whitespaces) {
            /* U+2581 -> space */
            for (uint32_t i = 0; i < t->len;) {
                if (i + 3 <= t->len && memcmp(t->s + i, "\xE2\x96\x81", 3) == 0) {
                    sb_put(b, " ", 1);
                    i += 3;
                } else {
                    sb_put(b, t->s + i++, 1);
                }
            }
            return;
        }
        /* byte-level BPE: each character of the spelling is one byte */
        const uint8_t *s = (const uint8_t *)t->s;
        for (size_t i = 0; i < t->len;) {
            uint32_t c = mf_utf8_decode(s, t->len, &i);
            int byte = mf_cpt_to_byte(c);
            if (byte >= 0) {
                uint8_t ch = (uint8_t)byte;
                sb_put(b, &ch, 1);
            } else {
                /* not in the byte alphabet: llama.cpp's marker, verbatim */
                char u[4], hex[16];
                size_t k = mf_utf8_encode(c, u);
                sb_put(b, "[UNK_BYTE_0x", 12);
                for (size_t j = 0; j < k; j++) {
                    snprintf(hex, sizeof hex, "%02x", (uint8_t)u[j]);
                    sb_put(b, hex, 2);
                }
                sb_put(b, t->s, t->len);
                sb_put(b, "]", 1);
            }
        }
        return;
    }
    if (a & MF_TATTR_BYTE) {
        uint8_t ch = byte_of_token(t);
        sb_put(b, &ch, 1);
    }
    /* UNUSED / UNDEFINED tokens render as nothing */
}

/* ---- loading ------------------------------------------------------------------------- */

#define FW_BAR "\xEF\xBD\x9C"  /* U+FF5C FULLWIDTH VERTICAL LINE (DeepSeek's special tokens) */
#define SP_MARK "\xE2\x96\x81" /* U+2581, SentencePiece's space */

static const char *const k_eot_texts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "<|end_of_text|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "<" FW_BAR "end" SP_MARK "of" SP_MARK "sentence" FW_BAR ">",
                                          "<end_of_utterance>",
                                          NULL};
static const char *const k_eom_texts[] = {"<|eom_id|>", NULL};
static const char *const k_fim_pre_texts[] = {"<|fim_prefix|>",
                                              "<fim-prefix>",
                                              "<fim_prefix>",
                                              "<" FW_BAR "fim" SP_MARK "begin" FW_BAR ">",
                                              "<PRE>",
                                              SP_MARK "<PRE>",
                                              "<|code_prefix|>",
                                              "<|prefix|>",
                                              NULL};
static const char *const k_fim_suf_texts[] = {"<|fim_suffix|>",
                                              "<fim-suffix>",
                                              "<fim_suffix>",
                                              "<" FW_BAR "fim" SP_MARK "hole" FW_BAR ">",
                                              "<SUF>",
                                              SP_MARK "<SUF>",
                                              "<|code_suffix|>",
                                              "<|suffix|>",
                                              NULL};
static const char *const k_fim_mid_texts[] = {"<|fim_middle|>",
                                              "<fim-middle>",
                                              "<fim_middle>",
                                              "<" FW_BAR "fim" SP_MARK "end" FW_BAR ">",
                                              "<MID>",
                                              SP_MARK "<MID>",
                                              "<|code_middle|>",
                                              "<|middle|>",
                                              NULL};
static const char *const k_fim_pad_texts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL};
static const char *const k_fim_rep_texts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                              "<REPO>",       "<reponame>",    NULL};
static const char *const k_fim_sep_texts[] = {"<|file_sep|>", NULL};
/* texts that end generation whatever their declared role */
static const char *const k_eog_texts[] = {"<|eot_id|>",
                                          "<|im_end|>",
                                          "<|end|>",
                                          "<|return|>",
                                          "<|call|>",
                                          "<|flush|>",
                                          "<|calls|>",
                                          "<end_of_turn>",
                                          "<|endoftext|>",
                                          "</s>",
                                          "<|eom_id|>",
                                          "<EOT>",
                                          "_<EOT>",
                                          "[EOT]",
                                          "[EOS]",
                                          "<|end_of_text|>",
                                          "<end_of_utterance>",
                                          "<eos>",
                                          "<turn|>",
                                          "<|tool_response>",
                                          "<" FW_BAR "end" SP_MARK "of" SP_MARK "sentence" FW_BAR ">",
                                          "[e~[",
                                          NULL};

static bool text_in(const mf_strref *t, const char *const *list) {
    for (; *list; list++)
        if (strlen(*list) == t->len && memcmp(*list, t->s, t->len) == 0) return true;
    return false;
}

static int64_t find_cstr(const mf_vocab *v, const char *s) { return mf_vocab_find(v, s, strlen(s)); }

typedef struct special_key {
    uint32_t len;
    mf_token id;
} special_key;

/* longest text first; ties by id so the order never depends on the sort */
static int cmp_special(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The special token ids, their defaults, and the keys that set them. */
static mf_status read_special_ids(mf_vocab *v, const gguf_file *f) {
    struct {
        const char *key;
        mf_token *id;
    } keys[] = {
        {"tokenizer.ggml.bos_token_id", &v->bos},
        {"tokenizer.ggml.eos_token_id", &v->eos},
        {"tokenizer.ggml.eot_token_id", &v->eot},
        {"tokenizer.ggml.eom_token_id", &v->eom},
        {"tokenizer.ggml.unknown_token_id", &v->unk},
        {"tokenizer.ggml.seperator_token_id", &v->sep},
        {"tokenizer.ggml.padding_token_id", &v->pad},
        {"tokenizer.ggml.mask_token_id", &v->mask},
        {"tokenizer.ggml.fim_pre_token_id", &v->fim_pre},
        {"tokenizer.ggml.fim_suf_token_id", &v->fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &v->fim_mid},
        {"tokenizer.ggml.fim_pad_token_id", &v->fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &v->fim_rep},
        {"tokenizer.ggml.fim_sep_token_id", &v->fim_sep},
        /* older names of the first three FIM keys */
        {"tokenizer.ggml.prefix_token_id", &v->fim_pre},
        {"tokenizer.ggml.suffix_token_id", &v->fim_suf},
        {"tokenizer.ggml.middle_token_id", &v->fim_mid},
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        mf_token *id = keys[i].id;
        if (*id >= v->n_tokens) *id = -1; /* a default past the end is no token */
        uint32_t x = UINT32_MAX;
        bool present = gguf_get(f, keys[i].key) != NULL;
        mf_status s = gguf_get_u32(f, keys[i].key, false, &x);
        if (s) return s;
        /* out of range: llama.cpp keeps the default (stories260K says 4294967295) */
        if (present && x < (uint32_t)v->n_tokens) *id = (mf_token)x;
    }
    return MF_OK;
}

static void set_attr_by_text(mf_vocab *v, const char *text, uint32_t bit, bool on) {
    int64_t id = find_cstr(v, text);
    if (id < 0 || id >= v->n_tokens) return;
    if (on)
        v->attr[id] |= bit;
    else
        v->attr[id] &= ~bit;
}

static bool contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = hay; *p; p++) {
        size_t k = 0;
        while (k < n && p[k] && tolower((unsigned char)p[k]) == needle[k]) k++;
        if (k == n) return true;
    }
    return false;
}

/* The token a text maps to, if it is the one the text -> id map keeps
 * (llama.cpp's text-driven rules only ever see those). */
static bool canonical(const mf_vocab *v, int32_t id) { return mf_vocab_find(v, v->text[id].s, v->text[id].len) == id; }

/* llama.cpp's end-of-generation set and the attribute fixes that go with it. */
static void build_eog(mf_vocab *v) {
    struct {
        const char *const *texts;
        mf_token *id;
    } detect[] = {{k_eot_texts, &v->eot},         {k_eom_texts, &v->eom},         {k_fim_pre_texts, &v->fim_pre},
                  {k_fim_suf_texts, &v->fim_suf}, {k_fim_mid_texts, &v->fim_mid}, {k_fim_pad_texts, &v->fim_pad},
                  {k_fim_rep_texts, &v->fim_rep}, {k_fim_sep_texts, &v->fim_sep}};
    /* ids the metadata did not give, found by text. llama.cpp takes the first
     * match in its hash map's order, which for libstdc++ runs roughly from the
     * last token inserted to the first; taking the highest id gives the same
     * choice on the vocabularies we test (e.g. <|eot_id|> over <|end_of_text|>) */
    for (size_t d = 0; d < sizeof detect / sizeof detect[0]; d++) {
        if (*detect[d].id >= 0) continue;
        int64_t best = -1;
        for (const char *const *t = detect[d].texts; *t; t++) {
            int64_t id = find_cstr(v, *t);
            if (id > best) best = id;
        }
        if (best >= 0) {
            *detect[d].id = (mf_token)best;
            v->attr[best] |= MF_TATTR_CONTROL;
        }
    }
    /* control tokens named "unused..." are unused */
    for (int32_t i = 0; i < v->n_tokens; i++) {
        const mf_strref *t = &v->text[i];
        if (!(v->attr[i] & MF_TATTR_CONTROL) || t->len < 6) continue;
        for (uint32_t k = 0; k + 6 <= t->len; k++)
            if (memcmp(t->s + k, "unused", 6) == 0) {
                if (canonical(v, i)) v->attr[i] |= MF_TATTR_UNUSED;
                break;
            }
    }
    memset(v->is_eog, 0, (size_t)v->n_tokens);
    if (v->fim_pad >= 0) v->is_eog[v->fim_pad] = 1;
    if (v->fim_rep >= 0) v->is_eog[v->fim_rep] = 1;
    if (v->fim_sep >= 0) v->is_eog[v->fim_sep] = 1;
    for (const char *const *t = k_eog_texts; *t; t++) {
        int64_t id = find_cstr(v, *t);
        if (id < 0) continue;
        v->is_eog[id] = 1;
        v->attr[id] |= MF_TATTR_CONTROL;
    }
    /* gpt-oss renders these always */
    static const char *const always_shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", NULL};
    for (const char *const *t = always_shown; *t; t++) {
        int64_t id = find_cstr(v, *t);
        if (id >= 0) v->attr[id] = MF_TATTR_USER_DEFINED;
    }
    if (v->eos >= 0) v->is_eog[v->eos] = 1;
    if (v->eot >= 0) v->is_eog[v->eot] = 1;
    if (v->eom >= 0) v->is_eog[v->eom] = 1;
    /* harmony / solar-open: "<|end|>" ends a message, not the generation */
    static const char *const ret[] = {"<|return|>", NULL}, *const call[] = {"<|call|>", "<|calls|>", NULL},
                             *const flush[] = {"<|flush|>", NULL}, *const end[] = {"<|end|>", NULL},
                             *const tool[] = {"<|tool_response>", NULL}, *const s_end[] = {"</s>", NULL};
    bool has_return = false, has_call = false, has_flush = false, has_tool_response = false;
    mf_token end_id = -1, s_id = -1;
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (!v->is_eog[i]) continue;
        const mf_strref *t = &v->text[i];
        if (text_in(t, ret))
            has_return = true;
        else if (text_in(t, call))
            has_call = true;
        else if (text_in(t, flush))
            has_flush = true;
        else if (text_in(t, end))
            end_id = i;
        if (text_in(t, tool))
            has_tool_response = true;
        else if (text_in(t, s_end))
            s_id = i;
    }
    if (end_id >= 0 && ((has_return && has_call) || (has_call && has_flush))) {
        v->is_eog[end_id] = 0;
        v->attr[end_id] = MF_TATTR_USER_DEFINED;
    }
    /* gemma4: "</s>" is not an end of generation there */
    if (has_tool_response && s_id >= 0) {
        v->is_eog[s_id] = 0;
        v->attr[s_id] = MF_TATTR_NORMAL;
    }
    v->n_eog = 0;
    for (int32_t i = 0; i < v->n_tokens; i++) v->n_eog += v->is_eog[i];
}

static mf_status build_pieces(mf_vocab *v) {
    strbuf b = {0};
    v->piece_off = malloc((size_t)v->n_tokens * sizeof *v->piece_off);
    v->piece_len = malloc((size_t)v->n_tokens * sizeof *v->piece_len);
    if (!v->piece_off || !v->piece_len) return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for token pieces");
    for (int32_t i = 0; i < v->n_tokens && !b.oom; i++) {
        size_t at = b.n;
        render_piece(v, i, &b);
        if (b.n > UINT32_MAX) b.oom = true;
        v->piece_off[i] = (uint32_t)at;
        v->piece_len[i] = (uint32_t)(b.n - at);
    }
    if (b.oom) {
        free(b.p);
        return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for token pieces");
    }
    v->piece_blob = b.p ? b.p : malloc(1);
    return v->piece_blob ? MF_OK : mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for token pieces");
}

static mf_status build_specials(mf_vocab *v) {
    int32_t n = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        n += (v->attr[i] & (MF_TATTR_CONTROL | MF_TATTR_USER_DEFINED | MF_TATTR_UNKNOWN)) != 0;
    v->special = malloc((size_t)(n ? n : 1) * sizeof *v->special);
    special_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!v->special || !keys) {
        free(keys);
        return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for special tokens");
    }
    v->n_special = 0;
    for (int32_t i = 0; i < v->n_tokens; i++)
        if (v->attr[i] & (MF_TATTR_CONTROL | MF_TATTR_USER_DEFINED | MF_TATTR_UNKNOWN))
            keys[v->n_special++] = (special_key){v->text[i].len, i};
    qsort(keys, (size_t)v->n_special, sizeof *keys, cmp_special);
    for (int32_t k = 0; k < v->n_special; k++) v->special[k] = keys[k].id;
    free(keys);

    /* index by first two bytes, so a tokenize call finds in one pass which
     * special texts occur in its input at all */
    v->sp_first = calloc(65536 + 1, sizeof *v->sp_first);
    v->sp_by_prefix = malloc((size_t)(n ? n : 1) * sizeof *v->sp_by_prefix);
    if (!v->sp_first || !v->sp_by_prefix) return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for special tokens");
    for (int32_t k = 0; k < v->n_special; k++) {
        const mf_strref *t = &v->text[v->special[k]];
        if (t->len >= 2) v->sp_first[(uint8_t)t->s[0] | (uint32_t)(uint8_t)t->s[1] << 8]++;
    }
    uint32_t acc = 0;
    for (uint32_t p = 0; p <= 65536; p++) {
        uint32_t c = p < 65536 ? v->sp_first[p] : 0;
        v->sp_first[p] = acc;
        acc += c;
    }
    uint32_t *fill = calloc(65536, sizeof *fill);
    if (!fill) return mf_err(MF_ERR_NOMEM, "tokenizer: out of memory for special tokens");
    for (int32_t k = 0; k < v->n_special; k++) {
        const mf_strref *t = &v->text[v->special[k]];
        if (t->len < 2) continue;
        uint32_t p = (uint8_t)t->s[0] | (uint32_t)(uint8_t)t->s[1] << 8;
        v->sp_by_prefix[v->sp_first[p] + fill[p]++] = k;
    }
    free(fill);
    return MF_OK;
}

static mf_status load_tokens(mf_vocab *v, const gguf_file *f) {
    const char *key = "tokenizer.ggml.tokens";
    const gguf_value *tv = gguf_get(f, key);
    if (!tv) return mf_err(MF_ERR_FORMAT, "%s: no tokenizer: key '%s' is missing", f->path, key);
    if (tv->type != GGUF_ARR || tv->arr.elem != GGUF_STR)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' must be an array of strings", f->path, key);
    if (tv->arr.n == 0) return mf_err(MF_ERR_FORMAT, "%s: key '%s' holds no tokens", f->path, key);
    if (tv->arr.n >= (uint64_t)INT32_MAX / 2)
        return mf_err(MF_ERR_FORMAT, "%s: key '%s' holds %llu tokens, too many", f->path, key,
                      (unsigned long long)tv->arr.n);
    int32_t n = (int32_t)tv->arr.n;
    v->n_tokens = n;

    const gguf_value *scores, *types;
    mf_status s;
    if ((s = get_array(f, "tokenizer.ggml.scores", GGUF_F32, GGUF_I32, (uint64_t)n, &scores))) return s;
    if ((s = get_array(f, "tokenizer.ggml.token_type", GGUF_I32, GGUF_I32, (uint64_t)n, &types))) return s;

    /* token texts, NUL-terminated; an empty text becomes "[EMPTY_<id>]" as in llama.cpp */
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) total += (tv->arr.strs[i].len ? (size_t)tv->arr.strs[i].len : 24) + 1;
    v->cap_strings = (uint32_t)n + 1024;
    v->text = malloc((size_t)v->cap_strings * sizeof *v->text);
    v->text_blob = malloc(total);
    v->score = malloc((size_t)n * sizeof *v->score);
    v->attr = malloc((size_t)n * sizeof *v->attr);
    v->is_eog = malloc((size_t)n);
    if (!v->text || !v->text_blob || !v->score || !v->attr || !v->is_eog)
        return mf_err(MF_ERR_NOMEM, "%s: out of memory for %d tokens", f->path, n);
    if ((s = mf_strmap_init(&v->tok_map, (uint32_t)n + (uint32_t)n / 4))) return s;
    char *p = v->text_blob;
    for (int32_t i = 0; i < n; i++) {
        const gguf_str *g = &tv->arr.strs[i];
        size_t len = (size_t)g->len;
        if (len)
            memcpy(p, g->ptr, len);
        else
            len = (size_t)snprintf(p, 24, "[EMPTY_%d]", i);
        p[len] = 0;
        if (len > UINT32_MAX) return mf_err(MF_ERR_FORMAT, "%s: token %d is longer than 4 GiB", f->path, i);
        v->text[i] = (mf_strref){p, (uint32_t)len};
        p += len + 1;
        if (len > v->max_token_len) v->max_token_len = len;
        if ((s = mf_strmap_put(&v->tok_map, v->text, (uint32_t)i))) return s;

        v->score[i] = scores ? (float)gguf_arr_float(scores, (uint64_t)i) : 0.0f;
        uint32_t a = MF_TATTR_NORMAL;
        if (types) {
            switch (gguf_arr_int(types, (uint64_t)i)) {
            case TT_UNKNOWN: a = MF_TATTR_UNKNOWN; break;
            case TT_UNUSED: a = MF_TATTR_UNUSED; break;
            case TT_NORMAL: a = MF_TATTR_NORMAL; break;
            case TT_CONTROL: a = MF_TATTR_CONTROL; break;
            case TT_USER_DEFINED: a = MF_TATTR_USER_DEFINED; break;
            case TT_BYTE: a = MF_TATTR_BYTE; break;
            default: a = MF_TATTR_UNDEFINED; break;
            }
        }
        v->attr[i] = a;
    }
    v->n_strings = (uint32_t)n;
    return MF_OK;
}

mf_status mf_vocab_load(const gguf_file *f, mf_vocab **out) {
    *out = NULL;
    mf_vocab *v = calloc(1, sizeof *v);
    if (!v) return mf_err(MF_ERR_NOMEM, "%s: out of memory for the vocabulary", f->path);
    mf_status s;
    gguf_str model, pre = {"", 0};
    bool found, has_pre;
    if ((s = get_str(f, "tokenizer.ggml.model", true, &model, &found))) goto fail;
    if ((s = get_str(f, "tokenizer.ggml.pre", false, &pre, &has_pre))) goto fail;
    copy_name(v->model_name, sizeof v->model_name, model);
    copy_name(v->pre_name, sizeof v->pre_name, pre);
    if (model.len >= sizeof v->model_name || pre.len >= sizeof v->pre_name) {
        s = mf_err(MF_ERR_UNSUPPORTED, "%s: tokenizer model/pre-tokenizer name too long", f->path);
        goto fail;
    }

    v->bos = 1, v->eos = 2, v->unk = 0;
    v->eot = v->eom = v->sep = v->pad = v->mask = v->nl = -1;
    v->fim_pre = v->fim_suf = v->fim_mid = v->fim_pad = v->fim_rep = v->fim_sep = -1;
    v->escape_whitespaces = true;
    v->wpm_lowercase = true;
    char pre_buf[64];
    snprintf(pre_buf, sizeof pre_buf, "%s", v->pre_name);
    const char *pre_name = pre_buf;
    if (strcmp(v->model_name, "llama") == 0) {
        v->kind = MF_VOCAB_SPM;
        v->add_space_prefix = true;
        v->add_bos = true;
    } else if (strcmp(v->model_name, "bert") == 0) {
        v->kind = MF_VOCAB_WPM;
        v->bos = 101, v->eos = -1, v->unk = 100, v->sep = 102, v->pad = 0, v->mask = 103;
        v->add_sep = true;
        v->add_bos = true;
        v->clean_spaces = true;
    } else if (strcmp(v->model_name, "gpt2") == 0 || strcmp(v->model_name, "gemma4") == 0) {
        v->kind = MF_VOCAB_BPE;
        if (strcmp(v->model_name, "gemma4") == 0) {
            v->bos = v->eos = v->unk = -1;
            pre_name = "gemma4";
        } else {
            v->bos = v->eos = 11, v->unk = -1;
        }
        v->escape_whitespaces = false;
        v->clean_spaces = true;
        const char *canon;
        unsigned fl;
        bool unsupported;
        if (!mf_pretok_lookup(pre_name, &canon, &fl, &unsupported)) {
            s = mf_err(MF_ERR_UNSUPPORTED, "%s: %s pre-tokenizer '%s' (tokenizer.ggml.pre)", f->path,
                       unsupported ? "unsupported" : "unknown", pre_name);
            goto fail;
        }
        v->pre_flags = fl;
        if (fl & MF_PT_IGNORE_MERGES) v->ignore_merges = true;
        if (fl & MF_PT_ADD_BOS) v->add_bos = true;
        if (fl & MF_PT_NO_CLEAN) v->clean_spaces = false;
        if (fl & MF_PT_ADD_SEP) v->add_sep = true;
        if (fl & MF_PT_NO_BOS_ID) v->bos = -1;
        if (fl & MF_PT_ESCAPE_WS) v->escape_whitespaces = true;
        if ((s = mf_pretok_init(&v->pre, canon, f->path))) goto fail;
        if (fl & MF_PT_RAW_UTF8) v->pre.byte_encode = false;
        snprintf(v->pre_name, sizeof v->pre_name, "%s", pre_name[0] ? pre_name : "default");
    } else {
        s = mf_err(MF_ERR_UNSUPPORTED,
                   "%s: unsupported tokenizer model '%s' (tokenizer.ggml.model; minfer reads llama, gpt2, bert)",
                   f->path, v->model_name);
        goto fail;
    }
    if (v->kind != MF_VOCAB_BPE) v->pre_name[0] = 0;
    if ((s = gguf_get_bool(f, "tokenizer.ggml.add_space_prefix", false, &v->add_space_prefix))) goto fail;
    if ((s = gguf_get_bool(f, "tokenizer.ggml.remove_extra_whitespaces", false, &v->remove_extra_ws))) goto fail;

    if ((s = load_tokens(v, f))) goto fail;
    if (v->kind == MF_VOCAB_BPE && (s = mf_bpe_load_merges(v, f))) goto fail;

    for (int b = 0; b < 256; b++) {
        char buf[8];
        int64_t id = -1;
        if (v->kind == MF_VOCAB_SPM) {
            snprintf(buf, sizeof buf, "<0x%02X>", b);
            id = find_cstr(v, buf);
            if (id < 0) {
                buf[0] = (char)b;
                id = mf_vocab_find(v, buf, 1);
            }
            v->byte_token[b] = id >= 0 && id < v->n_tokens ? (mf_token)id : -1;
        } else if (v->kind == MF_VOCAB_BPE) {
            size_t k = mf_utf8_encode(mf_byte_to_cpt((uint8_t)b), buf);
            id = mf_vocab_find_string(v, buf, k);
            v->byte_sym[b] = (int32_t)id;
            v->byte_token[b] = id >= 0 && id < v->n_tokens ? (mf_token)id : -1;
        } else {
            v->byte_token[b] = -1;
        }
    }

    if ((s = read_special_ids(v, f))) goto fail;
    {
        bool x;
        if ((s = gguf_get_bool(f, "tokenizer.ggml.add_bos_token", false, &v->add_bos))) goto fail;
        if ((s = gguf_get_bool(f, "tokenizer.ggml.add_eos_token", false, &v->add_eos))) goto fail;
        if ((s = gguf_get_bool(f, "tokenizer.ggml.add_sep_token", false, &v->add_sep))) goto fail;
        if (v->kind == MF_VOCAB_BPE && strcmp(pre_name, "gemma4") == 0) v->add_bos = true;
        x = v->wpm_lowercase;
        if ((s = gguf_get_bool(f, "tokenizer.ggml.normalizer.lowercase", false, &x))) goto fail;
        v->wpm_lowercase = x;
        v->wpm_strip_accents = x;
        if ((s = gguf_get_bool(f, "tokenizer.ggml.normalizer.strip_accents", false, &v->wpm_strip_accents))) goto fail;
    }
    build_eog(v);
    if ((s = build_specials(v))) goto fail;
    if ((s = build_pieces(v))) goto fail;

    /* per-model attributes llama.cpp applies by name */
    {
        char name[256] = "", arch[64] = "";
        gguf_str gs;
        if (!get_str(f, "general.name", false, &gs, &found) && found) copy_name(name, sizeof name, gs);
        if (!get_str(f, "general.architecture", false, &gs, &found) && found) copy_name(arch, sizeof arch, gs);
        mf_err_clear();
        const char *pre_raw = pre_buf; /* the name as stored, whatever the tokenizer kind */
        if (strstr(pre_raw, "jina-v2-de") || strstr(pre_raw, "jina-v2-es") || strstr(pre_raw, "jina-v2-code") ||
            strstr(arch, "nomic-bert-moe") || strstr(arch, "jina-bert-v3")) {
            set_attr_by_text(v, "<mask>", MF_TATTR_LSTRIP, true);
        } else if (contains_ci(name, "phi-3") || contains_ci(name, "phi3")) {
            for (int32_t k = 0; k < v->n_special; k++) v->attr[v->special[k]] |= MF_TATTR_RSTRIP;
            set_attr_by_text(v, "</s>", MF_TATTR_RSTRIP, true);
            set_attr_by_text(v, "<unk>", MF_TATTR_RSTRIP, false);
            set_attr_by_text(v, "<s>", MF_TATTR_RSTRIP, false);
            set_attr_by_text(v, "<|endoftext|>", MF_TATTR_RSTRIP, false);
        } else if (contains_ci(name, "modern-bert")) {
            set_attr_by_text(v, "[MASK]", MF_TATTR_LSTRIP, true);
        }
    }

    /* the newline token, as llama.cpp determines it */
    if (v->kind == MF_VOCAB_SPM) {
        v->nl = v->byte_token['\n'] >= 0 ? v->byte_token['\n'] : v->pad;
    } else if (v->kind == MF_VOCAB_WPM) {
        v->nl = v->pad;
    } else {
        mf_token t[8];
        int32_t k = mf_vocab_tokenize(v, "\n", 1, t, 8, false, false);
        v->nl = k > 0 ? t[0] : v->pad;
    }
    *out = v;
    return MF_OK;
fail:
    mf_vocab_free(v);
    return s;
}

void mf_vocab_free(mf_vocab *v) {
    if (!v) return;
    mf_pretok_free(&v->pre);
    mf_strmap_free(&v->tok_map);
    for (size_t i = 0; i < v->n_extra_blobs; i++) free(v->extra_blobs[i]);
    free(v->extra_blobs);
    free(v->text);
    free(v->text_blob);
    free(v->score);
    free(v->attr);
    free(v->is_eog);
    free(v->piece_off);
    free(v->piece_len);
    free(v->piece_blob);
    free(v->special);
    free(v->sp_first);
    free(v->sp_by_prefix);
    free(v->merges);
    free(v);
}

/* ---- accessors -------------------------------------------------------------------------- */

int32_t mf_vocab_n_tokens(const mf_vocab *v) { return v ? v->n_tokens : 0; }
const char *mf_vocab_model_name(const mf_vocab *v) { return v->model_name; }
mf_vocab_kind mf_vocab_get_kind(const mf_vocab *v) { return v->kind; }
const char *mf_vocab_pre_name(const mf_vocab *v) { return v->pre_name; }
uint32_t mf_vocab_n_merges(const mf_vocab *v) { return v->n_merges; }
mf_token mf_vocab_bos(const mf_vocab *v) { return v->bos; }
mf_token mf_vocab_eos(const mf_vocab *v) { return v->eos; }
mf_token mf_vocab_eot(const mf_vocab *v) { return v->eot; }
mf_token mf_vocab_unk(const mf_vocab *v) { return v->unk; }
mf_token mf_vocab_pad(const mf_vocab *v) { return v->pad; }
mf_token mf_vocab_sep(const mf_vocab *v) { return v->sep; }
mf_token mf_vocab_nl(const mf_vocab *v) { return v->nl; }
bool mf_vocab_add_bos(const mf_vocab *v) { return v->add_bos; }
bool mf_vocab_add_eos(const mf_vocab *v) { return v->add_eos; }

bool mf_vocab_is_eog(const mf_vocab *v, mf_token tok) { return v && tok >= 0 && tok < v->n_tokens && v->is_eog[tok]; }

const char *mf_vocab_token_text(const mf_vocab *v, mf_token tok) {
    if (!v || tok < 0 || tok >= v->n_tokens) return NULL;
    return v->text[tok].s;
}

uint32_t mf_vocab_token_attr(const mf_vocab *v, mf_token tok) {
    if (!v || tok < 0 || tok >= v->n_tokens) return 0;
    return v->attr[tok];
}

float mf_vocab_token_score(const mf_vocab *v, mf_token tok) {
    if (!v || tok < 0 || tok >= v->n_tokens) return 0.0f;
    return v->score[tok];
}

int32_t mf_vocab_token_to_piece(const mf_vocab *v, mf_token tok, char *buf, int32_t cap, bool special) {
    if (!v) {
        mf_err(MF_ERR_INVALID_ARG, "token_to_piece: no vocabulary");
        return INT32_MIN;
    }
    if (tok < 0 || tok >= v->n_tokens) {
        mf_err(MF_ERR_INVALID_ARG, "token_to_piece: token id %d out of range (vocabulary has %d tokens)", tok,
               v->n_tokens);
        return INT32_MIN;
    }
    if (cap < 0 || (cap > 0 && !buf)) {
        mf_err(MF_ERR_INVALID_ARG, "token_to_piece: bad output buffer (cap %d)", cap);
        return INT32_MIN;
    }
    if (!special && (v->attr[tok] & (MF_TATTR_UNKNOWN | MF_TATTR_CONTROL))) return 0;
    uint32_t n = v->piece_len[tok];
    if (n > (uint32_t)INT32_MAX) n = INT32_MAX;
    if ((int32_t)n > cap) return -(int32_t)n;
    if (n) memcpy(buf, v->piece_blob + v->piece_off[tok], n);
    return (int32_t)n;
}

int32_t mf_vocab_detokenize(const mf_vocab *v, const mf_token *tokens, int32_t n, char *buf, int32_t cap,
                            bool remove_special, bool unparse_special) {
    if (!v || n < 0 || (n > 0 && !tokens) || cap < 0 || (cap > 0 && !buf)) {
        mf_err(MF_ERR_INVALID_ARG, "detokenize: bad arguments (n %d, cap %d)", n, cap);
        return INT32_MIN;
    }
    bool strip_space = v->add_space_prefix; /* the space the tokenizer put in front */
    if (remove_special && v->add_bos && n > 0 && tokens[0] == v->bos) {
        strip_space = false;
        tokens++;
        n--;
    }
    if (remove_special && v->add_eos && n > 0 && tokens[n - 1] == v->eos) n--;
    int64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        mf_token t = tokens[i];
        if (t < 0 || t >= v->n_tokens) {
            mf_err(MF_ERR_INVALID_ARG, "detokenize: token id %d out of range (vocabulary has %d tokens)", t,
                   v->n_tokens);
            return INT32_MIN;
        }
        bool strip = strip_space;
        strip_space = false;
        if (!unparse_special && (v->attr[t] & (MF_TATTR_UNKNOWN | MF_TATTR_CONTROL))) continue;
        const char *p = v->piece_blob + v->piece_off[t];
        uint32_t len = v->piece_len[t];
        if (strip && len && p[0] == ' ') p++, len--;
        if (total + len <= cap) memcpy(buf + total, p, len);
        total += len;
        if (total > INT32_MAX) {
            mf_err(MF_ERR_INVALID_ARG, "detokenize: output larger than 2 GiB");
            return INT32_MIN;
        }
    }
    if (total > cap) return -(int32_t)total;
    if (v->clean_spaces) {
        /* BPE clean-up as in HF's clean_up_tokenization_spaces */
        int32_t t = (int32_t)total, w;
        w = t ? 1 : 0; /* " ?" " !" " ." " ," lose the space */
        for (int32_t i = 1; i < t; i++) {
            char x = buf[i];
            if (buf[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) w--;
            buf[w++] = x;
        }
        t = w;
        w = t ? 1 : 0; /* " ' " -> "'" */
        for (int32_t i = 1; i < t; i++) {
            char x = buf[i];
            if (x == '\'' && i + 1 < t && buf[i - 1] == ' ' && buf[i + 1] == ' ') {
                w--;
                buf[++i] = 0;
            }
            buf[w++] = x;
        }
        t = w;
        w = t ? 1 : 0; /* " 's" " 'm" " 're" " 've" lose the space */
        for (int32_t i = 1; i < t; i++) {
            char x = buf[i];
            if (buf[i - 1] == ' ' && x == '\'' && i + 1 < t) {
                char x1 = buf[i + 1];
                if (x1 == 's' || x1 == 'm')
                    w--;
                else if (i + 2 < t && ((x1 == 'r' && buf[i + 2] == 'e') || (x1 == 'v' && buf[i + 2] == 'e')))
                    w--;
            }
            buf[w++] = x;
        }
        total = w;
    }
    return (int32_t)total;
}
