/* pretok.c - pre-tokenizer regex sets by tokenizer.ggml.pre name, compiled with PCRE2 (UTF+UCP, JIT),
 * and the word splitter that applies them in sequence.
 *
 * The patterns are the ones llama.cpp uses for each name (taken from the
 * models' tokenizer.json files). As in llama.cpp, each regex of a set splits
 * the pieces the previous ones produced, and the text between two matches
 * is a piece of its own. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "token/pretok.h"
#include "token/vocab_impl.h"

/* ---- the regex sets ------------------------------------------------------ */

#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RX_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RX_LLAMA3                                                                                                      \
    RX_CONTRACTIONS                                                                                                    \
        "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                                                       \
    RX_CONTRACTIONS                                                                                                    \
        "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_CJK_DEEPSEEK "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+"
#define RX_DEEPSEEK3                                                                                                   \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"                 \
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
#define RX_PORO " ?[^(\\s|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{964}\\x{6D4}\\x{60C})]+"
#define RX_NEWLINES "[^\\n]+|[\\n]+"
#define RX_CASED_WORDS(LU, LL, TAIL)                                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?" LU "*" LL "+" TAIL "|[^\\r\\n\\p{L}\\p{N}]?" LU "+" LL "*" TAIL
#define RX_UPPER_LA "((?=[\\p{L}])([^a-z]))"
#define RX_LOWER_LA "((?=[\\p{L}])([^A-Z]))"
#define RX_UPPER_LMA "((?=[\\p{L}\\p{M}])([^a-z]))"
#define RX_LOWER_LMA "((?=[\\p{L}\\p{M}])([^A-Z]))"
#define RX_CONTR_OPT RX_CONTRACTIONS "?"

typedef struct rx_set {
    const char *id;
    const char *rx[MF_PRETOK_MAX_REGEX];
} rx_set;

static const rx_set k_sets[] = {
    {"default", {"[\\p{P}\\$\\+<=>\\^~\\|]+", RX_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"}},
    {"gpt2", {RX_GPT2}},
    {"llama3", {RX_LLAMA3}},
    {"jais2",
     {RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                      "\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|"
                      "\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}"}},
    {"deepseek-llm",
     {"[\r\n]",
      "\\s?[A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}"
      "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}"
      "\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}"
      "\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
      "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}"
      "\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-"
      "\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"
      "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}"
      "\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}"
      "\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
      "\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}"
      "\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"
      "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
      "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-"
      "\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}]+",
      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+", "\\s+$",
      RX_CJK_DEEPSEEK, "\\p{N}+"}},
    {"deepseek-v3", {"\\p{N}{1,3}", "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+", RX_DEEPSEEK3}},
    {"youtu",
     {"[\\x{AC00}-\\x{D7A3}\\x{3131}-\\x{318E}]+|"
      "[\\x{FF01}\\x{2026}\\x{201C}\\x{201D}\\x{2018}\\x{2019}\\x{2014}\\x{FF1A}\\x{FF1B}\\x{FF0C}\\x{3001}-\\x{303F}"
      "\\x{FE30}-\\x{FE4F}]+|[\\x{3105}-\\x{312F}]+|[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
      RX_CASED_WORDS("[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]", "[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]",
                     RX_CONTR_OPT) "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_CJK_DEEPSEEK, "\\p{N}"}},
    {"falcon", {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RX_GPT2, "[0-9][0-9][0-9]"}},
    {"starcoder", {"\\p{N}", RX_GPT2}},
    {"qwen2", {RX_QWEN2}},
    {"qwen35",
     {RX_CONTRACTIONS
      "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
      "\\s+(?!\\S)|\\s+"}},
    {"poro", {RX_PORO}},
    {"viking", {RX_PORO, "\\p{N}"}},
    {"tekken",
     {RX_CASED_WORDS(RX_UPPER_LA, RX_LOWER_LA,
                     "") "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"chameleon",
     {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z", "([\\t\\n]|    |  )", "\\p{N}",
      "[\\p{P}!-/:-@\\[-`{-~]", RX_GPT2}},
    {"gpt4o",
     {RX_CASED_WORDS(RX_UPPER_LA, RX_LOWER_LA,
                     RX_CONTR_OPT) "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"granite-embed-multi",
     {RX_CASED_WORDS(RX_UPPER_LMA, RX_LOWER_LMA,
                     RX_CONTR_OPT) "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"bailingmoe",
     {"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"seed-coder",
     {RX_CONTRACTIONS
      "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"laguna", {RX_NEWLINES, RX_QWEN2}},
    {"exaone-moe",
     {RX_CONTRACTIONS
      "|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|"
      "\\s*[\\r\\n]|\\s+(?!\\S)|\\s+"}},
    {"newlines", {RX_NEWLINES}},
    {"minicpm5",
     {"\\p{N}{1,3}",
      RX_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                      "\\s+(?!\\S)|\\s+"}},
};

/* ---- names -> set + flags ------------------------------------------------- */

typedef struct pt_name {
    const char *name;
    const char *set; /* NULL: known to llama.cpp but needs custom code minfer lacks */
    unsigned flags;
} pt_name;

#define NC MF_PT_NO_CLEAN
static const pt_name k_names[] = {
    {"", "default", 0},
    {"default", "default", 0},
    {"minicpm5", "minicpm5", MF_PT_IGNORE_MERGES},
    {"llama3", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"llama-v3", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"llama-bpe", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"falcon3", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"falcon-h1", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"pixtral", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"midm-2.0", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"lfm2", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"jina-v5-nano", "llama3", MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"deepseek-llm", "deepseek-llm", NC},
    {"deepseek-coder", "deepseek-coder", NC},
    {"deepseek-v3", "deepseek-v3", NC},
    {"youtu", "youtu", NC | MF_PT_IGNORE_MERGES},
    {"falcon", "falcon", 0},
    {"mpt", "gpt2", 0},
    {"starcoder", "starcoder", 0},
    {"gpt-2", "gpt2", 0},
    {"phi-2", "gpt2", 0},
    {"jina-es", "gpt2", 0},
    {"jina-de", "gpt2", 0},
    {"gigachat", "gpt2", 0},
    {"jina-v2-es", "gpt2", 0},
    {"jina-v2-de", "gpt2", 0},
    {"a.x-4.0", "gpt2", 0},
    {"mellum", "gpt2", 0},
    {"modern-bert", "gpt2", 0},
    {"jais-2", "jais2", 0},
    {"gemma4", "newlines", MF_PT_ESCAPE_WS | MF_PT_RAW_UTF8 | MF_PT_NEWLINE_WORD},
    {"granite-embed-multi-311m", "newlines", MF_PT_ESCAPE_WS | MF_PT_RAW_UTF8 | MF_PT_NEWLINE_WORD},
    {"sarvam-moe", "newlines", MF_PT_ESCAPE_WS | MF_PT_RAW_UTF8 | NC},
    {"jina-v1-en", "gpt2", MF_PT_ADD_SEP},
    {"jina-v2-code", "gpt2", MF_PT_ADD_SEP},
    {"roberta-bpe", "gpt2", MF_PT_ADD_SEP},
    {"whitespace", NULL, 0},
    {"refact", "starcoder", 0},
    {"command-r", "starcoder", NC},
    {"qwen2", "qwen2", NC},
    {"deepseek-r1-qwen", "qwen2", NC},
    {"kormo", "qwen2", NC},
    {"f2llmv2", "qwen2", NC},
    {"qwen35", "qwen35", NC},
    {"stablelm2", "qwen2", 0},
    {"olmo", "gpt2", 0},
    {"dbrx", "llama3", 0},
    {"smaug-bpe", "llama3", 0},
    {"poro-chat", "poro", NC},
    {"glm4", "llama3", MF_PT_NO_BOS_ID},
    {"chatglm-bpe", "llama3", MF_PT_NO_BOS_ID},
    {"viking", "viking", NC},
    {"jais", "gpt2", 0},
    {"tekken", "tekken", NC | MF_PT_IGNORE_MERGES | MF_PT_ADD_BOS},
    {"smollm", "starcoder", NC},
    {"codeshell", "starcoder", 0},
    {"bloom", "poro", 0},
    {"gpt3-finnish", "poro", 0},
    {"exaone", "starcoder", 0},
    {"exaone4", "gpt2", 0},
    {"exaone-moe", "exaone-moe", 0},
    {"chameleon", "chameleon", MF_PT_ADD_BOS | NC},
    {"minerva-7b", "starcoder", 0},
    {"megrez", "qwen2", 0},
    {"gpt-4o", "gpt4o", NC},
    {"llama4", "gpt4o", NC},
    {"kanana2", "gpt4o", NC},
    {"talkie", "gpt4o", NC},
    {"granite-embed-multi-97m", "granite-embed-multi", NC | MF_PT_IGNORE_MERGES},
    {"tiny_aya", NULL, 0},
    {"cohere2moe", NULL, 0},
    {"superbpe", NULL, 0},
    {"trillion", "gpt2", NC},
    {"granite-docling", "gpt2", NC},
    {"bailingmoe", "bailingmoe", NC},
    {"bailingmoe2", "bailingmoe", NC},
    {"llada-moe", "bailingmoe", NC},
    {"seed-coder", "seed-coder", NC},
    {"hunyuan", "qwen2", NC},
    {"hunyuan-dense", "deepseek-v3", NC},
    {"joyai-llm", "deepseek-v3", NC},
    {"kimi-k2", NULL, 0},
    {"grok-2", "qwen2", NC},
    {"afmoe", NULL, 0},
    {"laguna", "laguna", NC},
    {"minimax-m2", "gpt4o", NC},
    {"solar-open", "qwen2", NC},
    {"mellum2", "starcoder", 0},
};
#undef NC

bool mf_pretok_lookup(const char *name, const char **canonical, unsigned *flags, bool *unsupported) {
    *unsupported = false;
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (strcmp(k_names[i].name, name) != 0) continue;
        if (!k_names[i].set) {
            *unsupported = true;
            return false;
        }
        *canonical = k_names[i].set;
        *flags = k_names[i].flags;
        return true;
    }
    return false;
}

/* Adapts a pattern to the text PCRE2 sees (see mf_cpt_for_regex):
 *  - llama.cpp matches patterns with categories on text where every letter
 *    collapsed to one class, so its \p{Lu}/\p{Ll}/... all mean \p{L};
 *  - patterns without categories see 3-byte spaces as MF_CPT_SPACE_STANDIN,
 *    so their \s and \S must count it as space. */
static char *rewrite_pattern(const char *rx, bool categories) {
    size_t n = strlen(rx);
    char *out = malloc(6 * n + 1); /* "\\s" (2 bytes) grows to 12 */
    if (!out) return NULL;
    size_t o = 0;
    bool in_class = false;
    for (size_t i = 0; i < n;) {
        if (rx[i] == '\\' && i + 1 < n) {
            char e = rx[i + 1];
            if (categories && strncmp(rx + i, "\\p{L", 4) == 0 && i + 6 <= n && rx[i + 5] == '}' &&
                strchr("ultmo", rx[i + 4])) {
                memcpy(out + o, "\\p{L}", 5);
                o += 5;
                i += 6;
                continue;
            }
            if (!categories && (e == 's' || e == 'S')) {
                const char *r =
                    in_class ? (e == 's' ? "\\s\\x{E001}" : NULL) : (e == 's' ? "[\\s\\x{E001}]" : "[^\\s\\x{E001}]");
                if (r) {
                    size_t k = strlen(r);
                    memcpy(out + o, r, k);
                    o += k;
                    i += 2;
                    continue;
                }
            }
            out[o++] = rx[i++]; /* any other escape, copied whole */
            out[o++] = rx[i++];
            continue;
        }
        if (!in_class && rx[i] == '[') {
            in_class = true;
            out[o++] = rx[i++];
            if (i < n && rx[i] == '^') out[o++] = rx[i++];
            if (i < n && rx[i] == ']') out[o++] = rx[i++]; /* a leading ']' is a literal */
            continue;
        }
        if (in_class && rx[i] == ']') in_class = false;
        out[o++] = rx[i++];
    }
    out[o] = 0;
    return out;
}

mf_status mf_pretok_init(mf_pretok *p, const char *set_id, const char *path) {
    memset(p, 0, sizeof *p);
    const rx_set *set = NULL;
    for (size_t i = 0; i < sizeof k_sets / sizeof k_sets[0]; i++)
        if (strcmp(k_sets[i].id, set_id) == 0) set = &k_sets[i];
    if (!set) return mf_err(MF_ERR_INTERNAL, "%s: pre-tokenizer set '%s' missing", path, set_id);
    p->name = set->id;
    p->byte_encode = true;
    for (int r = 0; r < MF_PRETOK_MAX_REGEX && set->rx[r]; r++) {
        bool categories = strstr(set->rx[r], "\\p{") != NULL;
        char *pat = rewrite_pattern(set->rx[r], categories);
        if (!pat) {
            mf_pretok_free(p);
            return mf_err(MF_ERR_NOMEM, "%s: out of memory compiling pre-tokenizer regexes", path);
        }
        int err;
        PCRE2_SIZE eoff;
        pcre2_code *code = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &eoff, NULL);
        p->uses_cat[r] = categories;
        free(pat);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            mf_pretok_free(p);
            return mf_err(MF_ERR_INTERNAL, "%s: pre-tokenizer '%s' regex %d does not compile at offset %zu: %s", path,
                          set_id, r, (size_t)eoff, (const char *)msg);
        }
        /* JIT is an optimisation: without it PCRE2 interprets the same pattern */
        (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        p->code[r] = code;
        p->n_regex = r + 1;
    }
    return MF_OK;
}

void mf_pretok_free(mf_pretok *p) {
    for (int r = 0; r < MF_PRETOK_MAX_REGEX; r++) {
        pcre2_code_free((pcre2_code *)p->code[r]);
        p->code[r] = NULL;
    }
    p->n_regex = 0;
}

/* ---- splitting ------------------------------------------------------------- */

typedef struct split_ctx {
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
} split_ctx;

static int push_end(size_t **ends, size_t *n, size_t *cap, size_t v) {
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        size_t *e = realloc(*ends, nc * sizeof *e);
        if (!e) return -1;
        *ends = e;
        *cap = nc;
    }
    (*ends)[(*n)++] = v;
    return 0;
}

static int match(split_ctx *c, const pcre2_code *code, const char *s, size_t len, size_t pos, uint32_t opts) {
    for (;;) {
        int rc = pcre2_match(code, (PCRE2_SPTR)s, len, pos, opts | PCRE2_NO_UTF_CHECK, c->md, c->mctx);
        if (rc != PCRE2_ERROR_JIT_STACKLIMIT || c->jstack) return rc;
        /* a long run of one character class can outgrow the default 32 KiB JIT stack */
        c->mctx = pcre2_match_context_create(NULL);
        c->jstack = pcre2_jit_stack_create(64 * 1024, 512 * 1024 * 1024, NULL);
        if (!c->mctx || !c->jstack) return PCRE2_ERROR_NOMEMORY;
        pcre2_jit_stack_assign(c->mctx, NULL, c->jstack);
    }
}

/* Splits s[0..len) (one piece) into matches and the gaps between them. */
static int split_piece(split_ctx *c, const pcre2_code *code, const char *s, size_t len, size_t base, size_t **ends,
                       size_t *n, size_t *cap) {
    size_t pos = 0, last = 0;
    uint32_t opts = 0;
    while (pos <= len) {
        int rc = match(c, code, s, len, pos, opts);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (!opts) break;
            /* no non-empty match where the empty one was: step one character on */
            opts = 0;
            pos++;
            while (pos < len && ((uint8_t)s[pos] & 0xC0) == 0x80) pos++;
            continue;
        }
        if (rc < 0) return rc;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t m0 = ov[0], m1 = ov[1];
        if (m0 > last && push_end(ends, n, cap, base + m0)) return PCRE2_ERROR_NOMEMORY;
        if (m1 > m0) {
            if (push_end(ends, n, cap, base + m1)) return PCRE2_ERROR_NOMEMORY;
            last = m1;
            pos = m1;
            opts = 0;
        } else {
            if (m0 > last) last = m0;
            pos = m0;
            opts = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        }
    }
    if (last < len && push_end(ends, n, cap, base + len)) return PCRE2_ERROR_NOMEMORY;
    return 0;
}

mf_status mf_pretok_split(const mf_pretok *p, const char *subject_cat, const char *subject_ws, size_t n, size_t **ends,
                          size_t *n_ends, size_t *cap_ends) {
    size_t *cur = NULL, ncur = 0, capcur = 0;
    mf_status st = MF_OK;
    split_ctx c = {0};
    c.md = pcre2_match_data_create(1, NULL);
    if (!c.md || push_end(&cur, &ncur, &capcur, n)) {
        st = mf_err(MF_ERR_NOMEM, "tokenizer: out of memory splitting %zu bytes", n);
        goto done;
    }
    for (int r = 0; r < p->n_regex; r++) {
        const char *subj = p->uses_cat[r] ? subject_cat : subject_ws;
        size_t *nxt = NULL, nn = 0, capn = 0;
        size_t a = 0;
        for (size_t k = 0; k < ncur; k++) {
            size_t b = cur[k];
            int rc = split_piece(&c, (const pcre2_code *)p->code[r], subj + a, b - a, a, &nxt, &nn, &capn);
            if (rc < 0) {
                free(nxt);
                if (rc == PCRE2_ERROR_NOMEMORY)
                    st = mf_err(MF_ERR_NOMEM, "tokenizer: out of memory splitting %zu bytes", n);
                else {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    st =
                        mf_err(MF_ERR_INTERNAL, "tokenizer: pre-tokenizer '%s' regex %d failed on a %zu-byte piece: %s",
                               p->name, r, b - a, (const char *)msg);
                }
                goto done;
            }
            a = b;
        }
        free(cur);
        cur = nxt;
        ncur = nn;
        capcur = capn;
    }
    for (size_t k = 0; k < ncur; k++) {
        if (push_end(ends, n_ends, cap_ends, cur[k])) {
            st = mf_err(MF_ERR_NOMEM, "tokenizer: out of memory splitting %zu bytes", n);
            goto done;
        }
    }
done:
    free(cur);
    pcre2_match_data_free(c.md);
    pcre2_match_context_free(c.mctx);
    pcre2_jit_stack_free(c.jstack);
    return st;
}
