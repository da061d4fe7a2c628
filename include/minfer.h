/*
 * minfer.h - the public C API of minfer.
 *
 * Everything a program needs to load a GGUF model, tokenize text, run the
 * forward pass and sample tokens. Handles are opaque; every fallible call
 * returns an mf_status and, on failure, leaves a human-readable message for
 * the calling thread in mf_last_error() (like dlerror(), per thread, so two
 * threads working on two contexts never see each other's messages).
 */
#ifndef MINFER_H
#define MINFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ------------------------------------------------------------ */

typedef enum mf_status {
    MF_OK = 0,
    MF_ERR_IO,          /* file missing, unreadable, mmap failed */
    MF_ERR_FORMAT,      /* malformed or hostile input (GGUF, session, request) */
    MF_ERR_UNSUPPORTED, /* well-formed but not supported (architecture, type, version) */
    MF_ERR_NOMEM,       /* allocation failed */
    MF_ERR_INVALID_ARG, /* caller passed something out of range */
    MF_ERR_CONTEXT_FULL,/* the KV cache has no room for the batch */
    MF_ERR_INTERNAL,
    MF_ERR_ABORTED,     /* the abort callback stopped the call */
} mf_status;

/* Message describing the last failure on this thread ("" if none). */
const char *mf_last_error(void);
/* Short name of a status code ("format error", ...). */
const char *mf_status_name(mf_status s);

typedef int32_t mf_token;

/* ---- logging --------------------------------------------------------------
 * Everything the library prints (--verbose notes, the op profile, quantize
 * notes) goes through one process-wide callback; the default writes to
 * stderr. msg is one line ending in a newline. NULL restores the default. */
typedef enum mf_log_level { MF_LOG_DEBUG, MF_LOG_INFO, MF_LOG_WARN, MF_LOG_ERROR } mf_log_level;
typedef void (*mf_log_fn)(mf_log_level level, const char *msg, void *ud);
void mf_log_set(mf_log_fn fn, void *ud);

/* ---- model -------------------------------------------------------------- */

typedef struct mf_model mf_model;

typedef struct mf_model_params {
    bool verbose;       /* explain choices (SIMD level, KV type, ...) on stderr */
    bool vocab_only;    /* load the tokenizer only (vocabulary GGUFs, tokenize tools) */
    bool no_mmap;       /* read the file into memory advised for 2 MiB pages instead
                           of mapping it: a slower load and a private copy of the
                           weights, for a few % faster decode (fewer TLB misses) */
    bool no_repack;     /* keep every matrix in the file's layout; by default the
                           ones the CPU has x16 kernels for are interleaved 16 rows
                           at a time at load (also MINFER_NO_REPACK=1) */
    const char *backend; /* whose weight loader runs at load: "cpu" (default, NULL) or
                            "cpu-ref" (the scalar reference kernels, the file's layout);
                            contexts of the model run on that backend */
    int32_t gpu_layers;  /* with a device backend ("cuda"), llama.cpp's -ngl: how many
                            of the last layers run on the device, the first ones and
                            the token lookup on the CPU. 0 (default) or >= the layer
                            count: all of them; MF_GPU_LAYERS_AUTO: as many as fit in
                            the device's free memory (MINFER_CUDA_MEM_MIB=N pretends
                            N MiB are free) */
} mf_model_params;
#define MF_GPU_LAYERS_AUTO (-1)

mf_model_params mf_model_default_params(void);

mf_status mf_model_load(const char *path, const mf_model_params *params, mf_model **out);
void      mf_model_free(mf_model *model);

const char *mf_model_arch(const mf_model *model);   /* "llama", ... */
int32_t     mf_model_n_vocab(const mf_model *model);
int32_t     mf_model_n_ctx_train(const mf_model *model);
int32_t     mf_model_n_embd(const mf_model *model);
int32_t     mf_model_n_layer(const mf_model *model);
/* Layers run by a device backend: all of them, or with a split model
 * (mf_model_params.gpu_layers) the last ones; 0 for host backends. */
int32_t     mf_model_gpu_layers(const mf_model *model);
/* One-line description ("llama 5 layers, 64 embd, F32, 0.29M params"). */
const char *mf_model_desc(const mf_model *model);
/* The architecture traits the forward pass honours for this file
 * ("qwen3: RMSNorm, RoPE NeoX, QK-norm, ...; decoupled head dim 32 (...)"). */
const char *mf_model_traits(const mf_model *model);

/* ---- tokenizer ---------------------------------------------------------- */

/* Tokenize `len` bytes of `text`. add_special: prepend BOS (and append EOS)
 * as the vocabulary asks. parse_special: match control/special token texts
 * ("<s>") in the input as single tokens. Returns the number of tokens, or, if
 * `cap` is too small, the negated number needed; on error returns INT32_MIN
 * with mf_last_error() set. */
int32_t mf_tokenize(const mf_model *model, const char *text, size_t len,
                    mf_token *tokens, int32_t cap, bool add_special, bool parse_special);

/* The bytes of one token's piece ("▁the" -> " the", "<0x0A>" -> "\n").
 * Control tokens render as "" unless `special`. Returns the byte count, or the
 * negated size needed when `cap` is too small. */
int32_t mf_token_to_piece(const mf_model *model, mf_token tok, char *buf, int32_t cap, bool special);

/* The text of a whole sequence of tokens, as llama_detokenize gives it:
 * remove_special drops a leading BOS and trailing EOS the vocabulary adds,
 * unparse_special renders control tokens as their text. Returns the byte
 * count, or the negated size needed when `cap` is too small. */
int32_t mf_detokenize(const mf_model *model, const mf_token *tokens, int32_t n, char *buf, int32_t cap,
                      bool remove_special, bool unparse_special);

/* The raw vocabulary text of a token (as stored in the GGUF), or NULL. */
const char *mf_token_text(const mf_model *model, mf_token tok);

mf_token mf_token_bos(const mf_model *model);     /* -1 if none */
mf_token mf_token_eos(const mf_model *model);     /* -1 if none */
bool     mf_token_is_eog(const mf_model *model, mf_token tok); /* ends generation */
bool     mf_model_add_bos(const mf_model *model); /* prepend BOS when tokenizing with add_special */

/* Streaming output: how many leading bytes of s[0..n) form complete UTF-8
 * sequences. Print that many and keep the rest until the next piece arrives,
 * so a multi-byte character split across tokens is never emitted in halves. */
size_t   mf_utf8_complete(const char *s, size_t n);

/* ---- context: KV cache + scratch + thread pool ------------------------ */

typedef struct mf_context mf_context;

typedef enum mf_kv_type {
    MF_KV_F32 = 0,
    MF_KV_F16,
    MF_KV_Q8_0,
} mf_kv_type;

/* How embeddings of a sequence are pooled (llama.cpp's numbering, as GGUF's
 * `<arch>.pooling_type` stores it). */
typedef enum mf_pooling {
    MF_POOLING_UNSPECIFIED = -1, /* the model's pooling_type, or NONE when it has none */
    MF_POOLING_NONE = 0,         /* one vector per flagged token */
    MF_POOLING_MEAN = 1,         /* mean over the sequence's tokens in the batch */
    MF_POOLING_CLS = 2,          /* the token at position 0 */
    MF_POOLING_LAST = 3,         /* the sequence's last token in the batch */
} mf_pooling;

/* Return true to stop a decode between two layers: mf_decode_batch then
 * fails with MF_ERR_ABORTED and the KV cache is as it was before the call. */
typedef bool (*mf_abort_fn)(void *ud);

/* Sees the residual stream after each layer: x is [n_rows][n_embd] host
 * floats in step order (rows of one sequence together, in position order),
 * seq/pos give each row's sequence and position. It may modify x (an edit
 * overlay). Return false to abort the decode (as the abort callback). */
typedef bool (*mf_layer_fn)(int layer, float *x, int n_rows, int n_embd, const int32_t *seq, const int32_t *pos,
                            void *ud);

/* Replaces a layer's FFN: xn is the FFN's input (the normed residual,
 * [n_rows][n_embd] host floats, rows as for mf_layer_fn). Return 1 after
 * writing the FFN's output to out ([n_rows][n_embd]; post-norms and the
 * residual add then apply as for the model's own FFN), 0 to run the model's
 * FFN, 2 after writing to out an addition to the model's own FFN output (an
 * edit overlay's extra features: the model's FFN runs, then out is added),
 * -1 to abort the decode. */
typedef int (*mf_ffn_fn)(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                         const int32_t *pos, void *ud);

/* A thread pool several contexts can share (set mf_context_params.threadpool):
 * one set of workers for the whole process. Decodes of contexts sharing a
 * pool take turns on it. Free it after every context that uses it. */
typedef struct mf_threadpool mf_threadpool;
mf_status mf_threadpool_new(int32_t n_threads, mf_threadpool **out); /* 0 = all CPUs */
void      mf_threadpool_free(mf_threadpool *tp);
int32_t   mf_threadpool_n_threads(const mf_threadpool *tp);

typedef struct mf_context_params {
    uint32_t   n_ctx;      /* positions the KV cache holds in all (0 = 4096); one sequence
                              holds at most min(n_ctx, the model's training context),
                              which is what mf_context_n_ctx reports */
    uint32_t   n_batch;    /* max tokens per forward pass (bigger batches are split); 0 = 512 */
    uint32_t   n_seq_max;  /* sequences the cache can hold at once (ids 0..n_seq_max-1); 0 = 1 */
    int32_t    n_threads;  /* 0 = number of online CPUs */
    mf_threadpool *threadpool; /* a shared pool (n_threads then ignored); NULL = the context's own */
    mf_kv_type kv_type;
    bool       embeddings; /* compute embeddings (final normed hidden states) instead of logits */
    mf_pooling pooling;    /* with embeddings: how sequences are pooled */
    mf_abort_fn abort_cb;  /* checked between layers; NULL = never */
    void      *abort_ud;
    mf_layer_fn layer_cb;  /* residual stream after each layer; NULL = none */
    void      *layer_ud;
    mf_ffn_fn  ffn_cb;     /* per-layer FFN override; NULL = none */
    void      *ffn_ud;
    const char *backend;   /* "cpu" (default, NULL) or "cpu-ref" (the scalar reference kernels) */
    bool       verbose;
} mf_context_params;

mf_context_params mf_context_default_params(void);

mf_status mf_context_new(mf_model *model, const mf_context_params *params, mf_context **out);
void      mf_context_free(mf_context *ctx);

uint32_t  mf_context_n_ctx(const mf_context *ctx);
uint32_t  mf_context_n_seq_max(const mf_context *ctx);
/* Worker threads of the context's backend, changeable between decodes
 * (results do not depend on it). */
int32_t   mf_context_n_threads(const mf_context *ctx);
mf_status mf_context_set_threads(mf_context *ctx, int32_t n_threads);
/* Resuming at a layer, for searches that decode one prompt again and again
 * while only layers >= `layer` change (INSERT's strength search): until it
 * is turned off (x NULL), a decode skips the embedding and layers
 * 0..layer-1 and starts from x, the residual stream entering `layer`
 * ([n_rows][n_embd] host floats in step order, as a layer callback saw
 * them after layer - 1; the caller keeps them alive). Each decode must be
 * of those very rows (same tokens and positions) in one forward pass
 * (n_rows <= n_batch; a decode of another row count fails with
 * MF_ERR_INVALID_ARG): layers >= `layer` then compute bit for bit what a
 * full decode computes. The skipped layers' KV cells are not written. Host-
 * memory backends only (as the callbacks); layer in 1..n_layer - 1. */
mf_status mf_context_set_resume(mf_context *ctx, int32_t layer, const float *x, int32_t n_rows);
/* Number of positions sequence 0 holds in the KV cache. */
uint32_t  mf_context_n_past(const mf_context *ctx);
/* Forget sequence 0's cached positions from `n_keep` on (0 clears it). */
void      mf_kv_truncate(mf_context *ctx, uint32_t n_keep);

/* Run the model over `n` tokens of sequence 0 placed at positions
 * n_past..n_past+n-1 and append them to the KV cache. Batches longer than
 * n_batch are split. all_logits: keep logits for every token (else only the
 * last). A layer over mf_decode_batch. */
mf_status mf_decode(mf_context *ctx, const mf_token *tokens, int32_t n, bool all_logits);

/* Logits of the i-th output row of the last decode, in batch order (i < 0
 * counts from the end; after mf_decode without all_logits only the last
 * token has a row). NULL if out of range. */
const float *mf_get_logits(const mf_context *ctx, int32_t i);

/* ---- many sequences -----------------------------------------------------
 * A batch holds tokens of any sequences, each with its position, sequence id
 * and whether its output (logits, or an embedding) is wanted. A sequence
 * holds positions 0..n-1: its tokens in a batch continue at its n, in order.
 * On the CPU a sequence's results are bitwise the same whatever else is in
 * the batch, however its tokens are split across calls, at any thread
 * count. */

typedef struct mf_batch {
    int32_t   n_tokens;
    int32_t   cap;
    mf_token *token;
    int32_t  *pos;     /* NULL entries are not allowed; see mf_batch_add */
    int32_t  *seq_id;
    bool     *output;
} mf_batch;

mf_status mf_batch_init(mf_batch *b, int32_t cap);
void      mf_batch_free(mf_batch *b);
void      mf_batch_clear(mf_batch *b);
/* Appends one token; MF_ERR_INVALID_ARG when the batch is full. */
mf_status mf_batch_add(mf_batch *b, mf_token tok, int32_t pos, int32_t seq, bool output);

/* Runs the batch and appends every token to its sequence. Errors (bad ids,
 * positions that do not continue their sequence, no free KV page, an abort)
 * leave the KV cache as it was before the call. */
mf_status mf_decode_batch(mf_context *ctx, const mf_batch *b);

/* Logits / embedding of batch entry i of the last decode (NULL unless that
 * token had its output flag). Embeddings are n_embd floats. */
const float *mf_get_logits_ith(const mf_context *ctx, int32_t i);
const float *mf_get_embeddings_ith(const mf_context *ctx, int32_t i);
/* Logits of a sequence's last token in the last decode (NULL when the
 * sequence had no token in it or its last token was not flagged). */
const float *mf_get_logits_seq(const mf_context *ctx, int32_t seq);
/* The pooled embedding of a sequence of the last decode (NULL with pooling
 * none, or if the sequence had no token in it). */
const float *mf_get_embeddings_seq(const mf_context *ctx, int32_t seq);
/* The pooling the context applies (the model's when it asked for UNSPECIFIED). */
mf_pooling   mf_context_pooling(const mf_context *ctx);

/* Sequence operations. seq -1 means every sequence where it makes sense.
 * Remove positions [p0, p1) (p1 < 0: to the end). Only a removal that
 * reaches the end of the sequence is supported (holes in the middle would
 * need their positions shifted): others fail with MF_ERR_UNSUPPORTED. */
mf_status mf_kv_seq_rm(mf_context *ctx, int32_t seq, int32_t p0, int32_t p1);
/* dst becomes a copy of src's positions [0, p1) (p1 < 0: all), sharing its
 * pages: nothing is copied until one of them writes into a shared page. */
mf_status mf_kv_seq_cp(mf_context *ctx, int32_t src, int32_t dst, int32_t p1);
/* Drop every sequence but seq. */
mf_status mf_kv_seq_keep(mf_context *ctx, int32_t seq);
/* Largest position held by seq, or -1 when it is empty. */
int32_t   mf_kv_seq_pos_max(const mf_context *ctx, int32_t seq);
/* Pages of the KV cache in use and in all, and positions per page. */
uint32_t  mf_kv_pages_used(const mf_context *ctx);
uint32_t  mf_kv_pages_total(const mf_context *ctx);
uint32_t  mf_kv_page_size(void);

/* Tokens to prefill for `tokens` on sequence `seq`: drops what the sequence
 * holds past its longest common prefix with tokens[0..n) (at least one
 * token is always left to run, so logits exist) and returns that prefix's
 * length; tokens[prefix..n) then go in the next decode. `cached` are the ids
 * the sequence holds (the caller keeps them), n_cached of them. */
int32_t   mf_kv_seq_reuse_prefix(mf_context *ctx, int32_t seq, const mf_token *cached, int32_t n_cached,
                                 const mf_token *tokens, int32_t n);

/* ---- measurement --------------------------------------------------------- */

/* Bytes of weights one decode step reads: every matrix once, plus one row of
 * the token embedding (unless it is also the output head). */
uint64_t mf_model_bytes_per_token(const mf_model *model);
uint64_t mf_model_n_params(const mf_model *model);
uint64_t mf_model_size(const mf_model *model); /* bytes of tensor data */
/* Read bandwidth in GB/s: a streaming read of `bytes` (>= 64 MiB) by
 * n_threads threads (0 = all CPUs), best of 5. */
double mf_read_bandwidth(int n_threads, size_t bytes);
/* The same probe kept alive (its buffer, at least 64 MiB and faulted in at
 * creation, and its threads), so it can be run next to each measurement it
 * is a ceiling for: on a shared host the bandwidth moves within minutes.
 * new: NULL when the buffer or the threads cannot be had. run: best of
 * `passes` reads in GB/s, 0 for a NULL probe. */
typedef struct mf_bw_probe mf_bw_probe;
mf_bw_probe *mf_bw_probe_new(int n_threads, size_t bytes);
double       mf_bw_probe_run(mf_bw_probe *p, int passes);
void         mf_bw_probe_free(mf_bw_probe *p);

/* ---- sampling ----------------------------------------------------------- */

typedef struct mf_sampler mf_sampler;

typedef struct mf_sampler_params {
    float    temp;            /* <= 0: greedy */
    int32_t  top_k;           /* <= 0: off */
    float    top_p;           /* >= 1: off */
    float    min_p;           /* <= 0: off */
    float    repeat_penalty;  /* 1: off */
    float    freq_penalty;    /* 0: off */
    float    presence_penalty;/* 0: off */
    int32_t  penalty_last_n;  /* tokens of history the penalties see; 0 = off, -1 = n_ctx */
    uint64_t seed;
} mf_sampler_params;

/* llama.cpp's defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * repeat penalty 1.0 over the last 64 tokens. */
mf_sampler_params mf_sampler_default_params(void);

/* Builds the chain penalties -> top-k -> top-p -> min-p -> temperature ->
 * random draw (or argmax when temp <= 0). */
mf_status  mf_sampler_new(const mf_sampler_params *params, int32_t n_vocab, mf_sampler **out);
void       mf_sampler_free(mf_sampler *s);
mf_token   mf_sampler_sample(mf_sampler *s, const float *logits);
/* Record a token in the penalty history (prompt tokens and sampled ones). */
void       mf_sampler_accept(mf_sampler *s, mf_token tok);
void       mf_sampler_reset(mf_sampler *s);

/* ---- grammars (constrained sampling) ------------------------------------
 * A GBNF grammar (llama.cpp's format) is parsed once into an mf_grammar and
 * a model's vocabulary into an mf_grammar_vocab (a trie of every token's
 * bytes); both are read-only afterwards and may be shared by any number of
 * threads and sequences. Each sequence gets its own mf_grammar_state: states
 * are independent, so a server keeps one per request.
 *
 * Per step: mf_grammar_apply sets the logit of every token the grammar cannot
 * accept at the state's position to -inf (end-of-generation tokens are
 * allowed only where the grammar may end), then after the draw
 * mf_grammar_accept advances the state by the chosen token's bytes. Or let
 * mf_sampler_sample_grammar do both around the sampler chain. Tokens may end
 * inside a UTF-8 character; the state carries the partial character.
 *
 * Hostile grammars fail with MF_ERR_FORMAT and a message instead of
 * exhausting memory or time: left recursion is refused at parse time, and the
 * number of parse stacks and the expansion work per character are bounded. */

typedef struct mf_grammar mf_grammar;
typedef struct mf_grammar_vocab mf_grammar_vocab;
typedef struct mf_grammar_state mf_grammar_state;

/* Parses GBNF text (len bytes); `root` names the start rule (NULL: "root").
 * Errors are MF_ERR_FORMAT with "grammar: line L, column C: ..." (or the
 * rules involved, for left recursion). */
mf_status mf_grammar_parse(const char *text, size_t len, const char *root, mf_grammar **out);
void      mf_grammar_free(mf_grammar *g);
/* A built-in grammar for one JSON value (any type, whitespace bounded so a
 * generation always ends); NUL-terminated, static. */
const char *mf_grammar_json(void);

/* The vocabulary trie of a model (a vocab_only load is enough). */
mf_status mf_grammar_vocab_new(const mf_model *model, mf_grammar_vocab **out);
void      mf_grammar_vocab_free(mf_grammar_vocab *v);

/* A state at the start of g. v may be NULL for matching text only
 * (mf_grammar_accept_text); g and v must outlive the state. */
mf_status mf_grammar_state_new(const mf_grammar *g, const mf_grammar_vocab *v, mf_grammar_state **out);
void      mf_grammar_state_free(mf_grammar_state *s);
mf_status mf_grammar_state_reset(mf_grammar_state *s); /* back to the start */
/* Masks logits[0 .. n_vocab) in place. MF_ERR_FORMAT if no token is allowed. */
mf_status mf_grammar_apply(mf_grammar_state *s, float *logits);
/* Advances by a token. A token the grammar rejects gives MF_ERR_FORMAT and
 * leaves the state unchanged; an end-of-generation token is accepted (and
 * changes nothing) only where mf_grammar_done is true. */
mf_status mf_grammar_accept(mf_grammar_state *s, mf_token tok);
/* Advances by raw text (any bytes); unchanged on rejection, like accept. */
mf_status mf_grammar_accept_text(mf_grammar_state *s, const char *text, size_t len);
/* The text so far is a complete match: the grammar may end here. */
bool      mf_grammar_done(const mf_grammar_state *s);

typedef struct mf_grammar_stats {
    uint64_t cache_hits, cache_misses; /* masks served from the state's cache / computed */
    uint64_t trie_nodes;               /* trie nodes visited computing them */
} mf_grammar_stats;
mf_grammar_stats mf_grammar_state_stats(const mf_grammar_state *s);

/* mf_sampler_sample with the grammar's mask applied after the penalties and
 * before the rest of the chain; the drawn token is accepted into the grammar
 * state (not into the penalty history: call mf_sampler_accept as usual). */
mf_status mf_sampler_sample_grammar(mf_sampler *s, const float *logits, mf_grammar_state *g, mf_token *out);

/* JSON Schema (text) -> GBNF text (malloc'd; free it). Keywords it cannot
 * enforce are refused by name (MF_ERR_UNSUPPORTED), never ignored. */
mf_status mf_json_schema_to_grammar(const char *schema_json, char **gbnf_out);

/* ---- speculative decoding ----------------------------------------------
 * A drafter proposes the next few tokens cheaply; the target runs them all in
 * one batch (each with its output row) and mf_sampler_verify walks the rows
 * in order: row i either accepts draft i or replaces it, and the first
 * replacement ends the step. The caller then drops the rejected tail of the
 * sequence with mf_kv_seq_rm. Drafts are deterministic (the drafter's top
 * token), which makes the rejection rule exact: the tokens come out
 * distributed as the target's sampler says, and with greedy sampling they are
 * the tokens plain decoding gives (the target's rows are bitwise the same
 * however its tokens are batched). */

/* One row of the verification: the sampler's draw from `logits` (penalties,
 * the grammar's mask when g is not NULL, the chain), made so that it equals
 * `draft` with the probability the chain gives the draft. *out == draft means
 * accepted. draft < 0 is a plain draw (the row after the last draft). The
 * token is accepted into g, not into the penalty history. */
mf_status mf_sampler_verify(mf_sampler *s, const float *logits, mf_grammar_state *g, mf_token draft, mf_token *out);

/* Prompt lookup: the continuation of the most recent earlier occurrence of
 * the history's last n tokens (n from ngram_max down to ngram_min), at most
 * max tokens, into out. Returns how many (0: no match). */
int32_t mf_lookup_draft(const mf_token *hist, int32_t n_hist, int32_t ngram_min, int32_t ngram_max, int32_t max,
                        mf_token *out);

/* A draft model with its own context (n_seq sequences, the ids of the
 * target's): it keeps each sequence's cache in step with the history it is
 * given, decoding only what changed. */
typedef struct mf_drafter mf_drafter;

/* MF_ERR_INVALID_ARG naming the first difference when the two vocabularies
 * differ (size, special tokens or any token's text): a draft's ids must mean
 * the target's tokens. */
mf_status mf_vocab_check_same(const mf_model *draft, const mf_model *target);
/* Checks the vocabularies, then makes the draft's context from cp. The draft
 * model must outlive the drafter. */
mf_status mf_drafter_new(mf_model *draft, const mf_model *target, const mf_context_params *cp, mf_drafter **out);
void      mf_drafter_free(mf_drafter *d);
/* Up to max greedy tokens continuing hist[0 .. n_hist) on sequence seq,
 * stopping early when the draft's top probability falls below p_min or it
 * proposes an end-of-generation token. *n_out may be 0. max 0 only catches
 * the draft's cache up with hist (its prompt prefill, say). */
mf_status mf_drafter_propose(mf_drafter *d, int32_t seq, const mf_token *hist, int32_t n_hist, int32_t max,
                             float p_min, mf_token *out, int32_t *n_out);
/* The same for several sequences at once: their catch-up and every drafting
 * step share forwards. Each request's out holds max tokens; n_out is set. */
typedef struct mf_draft_req {
    int32_t seq;
    const mf_token *hist;
    int32_t n_hist;
    int32_t max;
    float p_min;
    mf_token *out;
    int32_t n_out;
} mf_draft_req;
mf_status mf_drafter_propose_batch(mf_drafter *d, mf_draft_req *reqs, int32_t n);

/* ---- GGUF inspection ----------------------------------------------------
 * A read-only look at any GGUF file's container (what `minfer info` prints)
 * without loading a model: version, metadata and tensor table. The file is
 * mapped and validated on open exactly as a model load validates it, so a bad
 * file fails here with the same message. Indices run from 0; an index out of
 * range gives NULL, -1 or MF_ERR_INVALID_ARG. Strings returned stay valid
 * until mf_gguf_close(). */

typedef struct mf_gguf mf_gguf;

mf_status   mf_gguf_open(const char *path, mf_gguf **out);
void        mf_gguf_close(mf_gguf *g);

uint32_t    mf_gguf_version(const mf_gguf *g);
uint64_t    mf_gguf_file_size(const mf_gguf *g);
uint64_t    mf_gguf_alignment(const mf_gguf *g);
uint64_t    mf_gguf_data_offset(const mf_gguf *g);  /* where tensor data starts */

int64_t     mf_gguf_n_kv(const mf_gguf *g);
const char *mf_gguf_key(const mf_gguf *g, int64_t i);
int64_t     mf_gguf_find_key(const mf_gguf *g, const char *key); /* -1 if absent */
/* Type of value i: "u32", "f32", "bool", "string", "array[string]", ... */
const char *mf_gguf_value_type(const mf_gguf *g, int64_t i);
/* Value i as one line of text, snprintf-style: writes at most cap-1 bytes
 * plus a NUL and returns the length the whole text has (-1 for a bad index).
 * Strings are quoted with C escapes and cut after max_str bytes
 * ("abc"... (5120 bytes)); arrays show their length, element type and first
 * max_items elements: [32000 strings: "<unk>", "<s>", "</s>", ...].
 * A negative max_items / max_str means no limit. */
int64_t     mf_gguf_value_text(const mf_gguf *g, int64_t i, int32_t max_items, int32_t max_str, char *buf, size_t cap);

typedef struct mf_gguf_tensor_info {
    const char *name;
    const char *type;       /* "f32", "f16", "q8_0", "q4_K", ... */
    int32_t     type_id;    /* GGUF's (ggml's) type number */
    uint32_t    n_dims;
    int64_t     ne[4];      /* ne[0] is the row length; unused dims are 1 */
    int64_t     n_elements;
    uint64_t    offset;     /* absolute position of the data in the file */
    uint64_t    nbytes;
} mf_gguf_tensor_info;

int64_t     mf_gguf_n_tensors(const mf_gguf *g);
mf_status   mf_gguf_tensor(const mf_gguf *g, int64_t i, mf_gguf_tensor_info *out);

/* ---- end of GGUF inspection --------------------------------------------- */

/* ==== quantize ==========================================================
 * Converts a GGUF model to another weight type the way llama-quantize does:
 * the same per-tensor type choices (mixtures such as Q4_K_M promote attn_v,
 * ffn_down and output to more bits by layer), the same fallbacks when a row
 * length does not fit a type's block, and the same bytes. Metadata is copied
 * with general.file_type set to llama.cpp's number for the type and
 * general.quantization_version = 2; tensors keep the input's order. The
 * output is written to a temporary file and renamed into place, so a failure
 * never leaves a partial file. */

typedef enum mf_quantize_event {
    MF_QUANTIZE_NOTE,   /* before writing: a remark on one tensor (a fallback type) in `message` */
    MF_QUANTIZE_CHUNK,  /* while writing: rows of tensor `index` were written; tensor_done on its last chunk */
} mf_quantize_event;

typedef struct mf_quantize_progress {
    mf_quantize_event event;
    int64_t     index;      /* tensor position in the file */
    int64_t     n_tensors;
    const char *name;
    const char *type_in;    /* "f32" */
    const char *type_out;   /* "q4_K" */
    bool        tensor_done;
    uint64_t    done_in;    /* bytes of input tensor data handled so far, all tensors */
    uint64_t    total_in;   /* bytes of input tensor data in all */
    const char *message;    /* MF_QUANTIZE_NOTE: one line, no newline; else NULL */
} mf_quantize_progress;

/* Return false to cancel: mf_quantize then fails (MF_ERR_INVALID_ARG,
 * "cancelled") and writes nothing. Called on the thread of mf_quantize. */
typedef bool (*mf_quantize_progress_fn)(const mf_quantize_progress *p, void *ud);

typedef struct mf_quantize_params {
    const char *type;               /* "Q4_K_M", "q8_0", "F16", ... (case-insensitive,
                                       llama-quantize's names; aliases Q3_K/Q4_K/Q5_K
                                       and llama.cpp's file-type numbers too) */
    int32_t     n_threads;          /* 0 = number of online CPUs */
    bool        pure;               /* no mixture: every quantized tensor gets the
                                       type's base (fallbacks still apply) */
    const char *output_tensor_type; /* tensor type for output.weight ("q8_0"); NULL = rules */
    const char *token_embedding_type; /* tensor type for token_embd.weight; NULL = rules */
    bool        allow_requantize;   /* convert tensors that are already quantized
                                       (dequantize, then quantize again) */
    mf_quantize_progress_fn progress; /* NULL: notes go to stderr */
    void       *progress_ud;
} mf_quantize_params;

typedef struct mf_quantize_result {
    int64_t  n_tensors;
    int64_t  n_converted;   /* tensors whose type changed */
    int64_t  n_fallback;    /* tensors that got a fallback type for their row length */
    uint64_t n_elements;    /* weights in all tensors */
    uint64_t bytes_in;      /* tensor data before and after (what llama-quantize */
    uint64_t bytes_out;     /*   calls model size and quant size) */
    uint64_t file_size_in;
    uint64_t file_size_out;
    int32_t  file_type;     /* general.file_type written */
    double   seconds;
} mf_quantize_result;

mf_quantize_params mf_quantize_default_params(void);

/* Quantizes `in` into `out` (which must not be the same file). Errors name
 * the file and tensor: unknown type (the message lists the valid ones), an
 * already-quantized input without allow_requantize, a row length no type in
 * the fallback chain can hold. `result` may be NULL. */
mf_status mf_quantize(const char *in, const char *out, const mf_quantize_params *params,
                      mf_quantize_result *result);

/* The type names mf_quantize accepts, ", "-separated ("Q4_0, Q4_1, ..."). */
const char *mf_quantize_type_names(void);

/* ==== end of quantize =================================================== */

/* ==== synth ==============================================================
 * Writes a model of a real shape with random weights, for benchmarks (speed
 * does not depend on what the weights say). A preset holds one real model's
 * hyperparameters and tensor shapes ("qwen2.5-0.5b", "llama-3.2-1b",
 * "qwen3-4b", "llama-3-8b", and small ones for tests). Weights are generated
 * tensor by tensor from the seed (same seed and type, same bytes, whatever the
 * thread count) and converted with mf_quantize's per-tensor rules for the
 * type (llama-quantize's mixtures and fallbacks) and its reference
 * quantizers, streaming: memory stays around one chunk of one tensor. The
 * vocabulary is generated (SentencePiece-style, the preset's real size) or
 * copied from a GGUF (every tokenizer.* key). The output is written to a
 * temporary file and renamed into place, so a failure never leaves a partial
 * file. */

typedef enum mf_synth_event {
    MF_SYNTH_PLAN,  /* before writing: tensor `index` will have `type` and shape n_dims/ne (once per tensor) */
    MF_SYNTH_NOTE,  /* before writing: a remark in `message` (a fallback type, a padded vocabulary) */
    MF_SYNTH_CHUNK, /* while writing: rows of tensor `index` were written; tensor_done on its last chunk */
} mf_synth_event;

typedef struct mf_synth_progress {
    mf_synth_event event;
    int64_t     index;      /* tensor position in the file (-1 for a note about no tensor) */
    int64_t     n_tensors;
    const char *name;       /* tensor name, or NULL */
    const char *type;       /* tensor type written ("q4_K"), or NULL */
    uint32_t    n_dims;
    int64_t     ne[4];      /* ne[0] is the row length; unused dims are 1 */
    bool        tensor_done;
    uint64_t    done;       /* weights written so far, all tensors */
    uint64_t    total;      /* weights in all */
    const char *message;    /* MF_SYNTH_NOTE: one line, no newline; else NULL */
} mf_synth_progress;

/* Return false to cancel: mf_synth then fails (MF_ERR_INVALID_ARG,
 * "cancelled") and writes nothing. Called on the thread of mf_synth. */
typedef bool (*mf_synth_progress_fn)(const mf_synth_progress *p, void *ud);

typedef struct mf_synth_params {
    const char *preset;      /* a name from mf_synth_preset_names() */
    const char *type;        /* any name mf_quantize accepts ("Q4_K_M", "q8_0", "F16", "F32") */
    uint64_t    seed;
    const char *vocab_path;  /* NULL: generate a vocabulary; else copy its tokenizer.* keys. It may
                                have fewer tokens than the preset (padded with unused "[PADn]"
                                tokens, so the shapes stay real), not more. */
    const char *chat_template; /* NULL: none (or the copied vocabulary's); else the template text,
                                written as tokenizer.chat_template (replacing a copied one) */
    int32_t     n_threads;   /* 0 = number of online CPUs */
    /* A deeper model that agrees with the preset's as closely as wanted (a
     * constructed target for speculative decoding, whose draft is the preset
     * itself): extra_layers (0..1024) more layers after the preset's, with
     * attn_output and ffn_down times extra_scale (finite, >= 0; 0 makes the
     * extra layers exact no-ops). Every tensor of the preset keeps its
     * values and its type (the types planned for the preset alone), so the
     * file without extra layers is byte for byte the first part of this one;
     * the extra layers get the types planned for the deeper model. */
    int32_t     extra_layers;
    float       extra_scale; /* default 1 */
    bool        dry_run;     /* plan (PLAN and NOTE events, result with file_size) but write nothing */
    mf_synth_progress_fn progress; /* NULL: no events */
    void       *progress_ud;
} mf_synth_params;

typedef struct mf_synth_result {
    const char *arch;        /* general.architecture written ("qwen2") */
    int64_t  n_tensors;
    int64_t  n_fallback;     /* tensors whose rows did not fit the mixture's type (llama-quantize's fallbacks) */
    uint64_t n_params;       /* weights in all tensors */
    uint64_t bytes;          /* tensor data */
    uint64_t file_size;
    int32_t  file_type;      /* general.file_type written */
    int32_t  n_vocab;        /* tokens in the file's vocabulary (= the embedding's rows) */
    int32_t  n_vocab_source; /* tokens the copied vocabulary had before padding (= n_vocab otherwise) */
    double   seconds;
} mf_synth_result;

/* seed 1, type "Q4_K_M", extra_scale 1, everything else 0 / NULL (preset
 * must be set). */
mf_synth_params mf_synth_default_params(void);

/* Writes the model to `out_path` (ignored, and may be NULL, with dry_run).
 * Errors: unknown preset or type (the message lists the valid ones), a
 * vocabulary file that is missing, unusable or larger than the preset's
 * vocabulary, I/O failures. `result` may be NULL. */
mf_status mf_synth(const mf_synth_params *params, const char *out_path, mf_synth_result *result);

/* The preset names, ", "-separated ("tiny, tiny-qwen2, ..."). */
const char *mf_synth_preset_names(void);
/* One line about preset i (0, 1, ...): name, architecture, shape and where
 * its numbers come from; NULL past the last one. */
const char *mf_synth_preset_desc(int i);

/* ==== end of synth ====================================================== */

/* ==== chat templates ====================================================
 * Renders a model's Jinja chat template (tokenizer.chat_template) exactly as
 * Hugging Face transformers does (jinja2 sandbox, trim_blocks, lstrip_blocks,
 * raise_exception, strftime_now, transformers' tojson). */

typedef struct mf_chat_params {
    bool        add_generation_prompt; /* default true */
    const char *bos_token;             /* bound to `bos_token`; NULL = "" */
    const char *eos_token;             /* bound to `eos_token`; NULL = "" */
    const char *kwargs_json;           /* JSON object of extra template variables
                                          ({"enable_thinking": false}); NULL = none */
    int64_t     now;                   /* clock of strftime_now(): seconds since the
                                          epoch, shown in UTC; 0 = local time now */
} mf_chat_params;

mf_chat_params mf_chat_default_params(void);

/* Renders `tmpl` over `conv_json`, a JSON object {"messages": [...],
 * "tools": [...]} in the OpenAI shape ("tools" and "documents" default to
 * None). On success *out is a malloc'd NUL-terminated string (free() it) and
 * *out_len (if not NULL) its length. Failures name the line and the Python
 * exception Jinja would raise ("chat template: line 12: TemplateError: ...";
 * raise_exception() in the template gives MF_ERR_INVALID_ARG, an unsupported
 * construct MF_ERR_UNSUPPORTED, anything else MF_ERR_FORMAT). */
mf_status mf_chat_render(const char *tmpl, const char *conv_json, const mf_chat_params *params,
                         char **out, size_t *out_len);

/* The template's end-of-turn text: what it writes right after an assistant
 * message ("<|im_end|>", "<|eot_id|>", "<end_of_turn>", "</s>"), found by
 * rendering a reply whose content is a sentinel and taking what follows it up
 * to whitespace; at most cap - 1 bytes go to out, NUL-terminated. Returns its
 * length: 0 when the template puts nothing there or refuses the probe.
 * params' add_generation_prompt is ignored. */
size_t mf_chat_turn_end(const char *tmpl, const mf_chat_params *params, char *out, size_t cap);

/* Parses a template without rendering it: syntax errors, unknown tags, and
 * filters/tests that do not exist (outside if-branches, as Jinja checks). */
mf_status mf_chat_check(const char *tmpl);

/* The tokenizer.chat_template of a GGUF file, without loading weights, as a
 * malloc'd string. A file without one gives the ChatML template and sets
 * *warning (if not NULL) to a message saying so; otherwise *warning = NULL. */
mf_status mf_chat_template_from_gguf(const char *path, char **out, const char **warning);

/* The ChatML template used as the fallback. */
const char *mf_chat_template_chatml(void);

/* ==== end of chat templates ============================================= */

/* ==== sessions ==========================================================
 * Saves what a context has computed - the KV rows of its cached positions,
 * the last logits, the caller's token ids for those positions and a blob of
 * the caller's own (the chat tool keeps its conversation there) - and loads
 * it back into a context of the same model and KV type, so work resumes with
 * nothing to recompute: after a load, mf_get_logits(ctx, -1) and every later
 * mf_decode give bitwise what the saving context would have given.
 *
 * File: a 128-byte header (magic "MINFERST", version, model identity = GGUF
 * file size + a 64-bit hash of its header, metadata and tensor table, KV type
 * and row shape, n_ctx, n_past, sizes, a checksum of the header), then the
 * payload (tokens, logits, KV rows layer by layer, user blob) and its
 * checksum. Loading checks all of it before the context is touched: a file of
 * another model or KV type, one longer than the context, or one truncated or
 * altered is refused with a message saying which, and the context stays as it
 * was. The checksums catch damage, not a forger. Saving writes a temporary
 * file next to `path` and renames it into place, so a failure never leaves a
 * partial file and never clobbers the previous one. */

/* tokens: the ids of the cached positions (n_tokens == mf_context_n_past), or
 * NULL with n_tokens 0 to store none. user/user_len: any bytes, or NULL/0. */
mf_status mf_state_save(const mf_context *ctx, const char *path, const mf_token *tokens, uint32_t n_tokens,
                        const void *user, size_t user_len);
/* Replaces the context's cache and logits with the file's. Each out pointer
 * may be NULL; otherwise *tokens and *user are malloc'd (free() them; NULL
 * when the file holds none), and *user has a NUL after its user_len bytes. */
mf_status mf_state_load(mf_context *ctx, const char *path, mf_token **tokens, uint32_t *n_tokens, void **user,
                        size_t *user_len);
/* The same in memory: *out is a malloc'd image of the file (free() it). */
mf_status mf_state_save_buffer(const mf_context *ctx, const mf_token *tokens, uint32_t n_tokens, const void *user,
                               size_t user_len, void **out, size_t *out_len);
mf_status mf_state_load_buffer(mf_context *ctx, const void *buf, size_t len, mf_token **tokens, uint32_t *n_tokens,
                               void **user, size_t *user_len);

/* The same for one sequence of a many-sequence context: its positions, the
 * logits of its last token in the last decode (when flagged), its ids and
 * the blob. Loading replaces that sequence only (its positions get fresh
 * cache pages; other sequences are untouched) and leaves that one row of
 * logits as the context's last output (mf_get_logits(ctx, -1) and
 * mf_get_logits_seq). The file format is the one above: a file saved from
 * sequence 0 of a one-sequence context loads into any sequence. */
mf_status mf_state_seq_save(const mf_context *ctx, int32_t seq, const char *path, const mf_token *tokens,
                            uint32_t n_tokens, const void *user, size_t user_len);
mf_status mf_state_seq_load(mf_context *ctx, int32_t seq, const char *path, mf_token **tokens, uint32_t *n_tokens,
                            void **user, size_t *user_len);
mf_status mf_state_seq_save_buffer(const mf_context *ctx, int32_t seq, const mf_token *tokens, uint32_t n_tokens,
                                   const void *user, size_t user_len, void **out, size_t *out_len);
mf_status mf_state_seq_load_buffer(mf_context *ctx, int32_t seq, const void *buf, size_t len, mf_token **tokens,
                                   uint32_t *n_tokens, void **user, size_t *user_len);

/* ==== end of sessions =================================================== */

/* ==== vindex ============================================================
 * A model's FFN as a queryable index (a directory): each FFN feature's gate
 * row (gate_vectors.bin), its down vector feature-major (down_features.bin)
 * and the vocabulary tokens that vector writes (down_meta.bin), the token
 * embeddings and the tokenizer; at level inference also the up rows and the
 * model's own tensors in their GGUF encoding, so mf_model_load(DIR) runs
 * the model from the vindex alone. index.json lists every file with its
 * size and sha256 and every layer's byte ranges. */

typedef struct mf_vindex mf_vindex;

typedef enum mf_vindex_level {
    MF_VINDEX_BROWSE = 0,    /* gate, down, labels, embeddings, tokenizer */
    MF_VINDEX_INFERENCE = 1, /* + up rows and the model's weights */
    MF_VINDEX_ALL = 2,       /* today the same files as inference */
} mf_vindex_level;

/* Called after each layer (layer == n_layer - 1 ends the per-layer work) and
 * for the whole-file steps (layer -1, `what` names the file). */
typedef void (*mf_vindex_progress_fn)(int layer, int n_layer, const char *what, void *ud);

typedef struct mf_vindex_build_params {
    mf_vindex_level level;
    const char *feature_type; /* gate/up/down copies: "f32" (default), "f16", "q8_0" */
    int32_t down_top_k;       /* tokens per feature in down_meta.bin (10; 0 = none) */
    int32_t n_threads;        /* 0 = all CPUs */
    mf_vindex_progress_fn progress;
    void *progress_ud;
} mf_vindex_build_params;

mf_vindex_build_params mf_vindex_default_build_params(void);
/* Builds `dir` (created; index.json is written last, under a temporary name
 * renamed into place, so an interrupted build is never a valid vindex). */
mf_status mf_vindex_build(const char *gguf_path, const char *dir, const mf_vindex_build_params *params);
/* Checks index.json and every file's size and sha256: the first mismatch is
 * the error, naming the file. `progress` (may be NULL) sees each file. */
mf_status mf_vindex_verify(const char *dir, mf_vindex_progress_fn progress, void *ud);

/* Opens a vindex: index.json validated, every listed size checked, the
 * feature files mapped (sha256s are only checked by mf_vindex_verify). */
mf_status mf_vindex_open(const char *dir, mf_vindex **out);
void      mf_vindex_free(mf_vindex *v);
bool      mf_vindex_is_dir(const char *path); /* a directory holding index.json */

typedef struct mf_vindex_info {
    const char *arch;
    const char *source_file, *source_sha256;
    const char *feature_type;  /* "f32" ... */
    mf_vindex_level level;
    int32_t n_layer, n_embd, n_vocab;
    int32_t n_features;        /* per layer: n_ff, or n_expert * n_ff_expert */
    int32_t n_expert, n_ff_expert; /* 0 for dense FFNs; feature = expert * n_ff_expert + f */
    int32_t down_top_k;
    bool gated;                /* gate * up; false: the activation's input is the up row */
    uint64_t bytes;            /* all files */
} mf_vindex_info;
void mf_vindex_get_info(const mf_vindex *v, mf_vindex_info *out);

/* Threads for mf_vindex_knn and the walk FFN (its scan and its gather of the
 * selected features; 0 = all CPUs; results do not depend on it). */
mf_status mf_vindex_set_threads(mf_vindex *v, int32_t n_threads);
/* Runs them on a shared pool's workers instead (NULL: a pool of its own
 * again, all CPUs). For a walk inside decodes of a context on the same pool:
 * the decoding thread drives both, so the walk's work and the context's never
 * overlap, and no second set of workers spins on the same cores between
 * them. The vindex's queries must then not run while another thread decodes
 * on the pool; free the pool after the vindex. */
mf_status mf_vindex_set_threadpool(mf_vindex *v, mf_threadpool *tp);

/* Gate KNN: for each of n_rows residual vectors x ([n_rows][n_embd]), the k
 * features of `layer` with the largest gate scores (dot of the stored gate
 * row and x), best first (ties: lower feature first): feat and score are
 * [n_rows][k]. k <= n_features (the scratch sized at open holds 4096; a
 * larger k grows it once). */
mf_status mf_vindex_knn(mf_vindex *v, int32_t layer, const float *x, int32_t n_rows, int32_t k, int32_t *feat,
                        float *score);

/* Optional HNSW gate KNN (src/vindex/hnsw.c): once set, mf_vindex_knn and
 * the walk FFN search a per-layer graph instead of scanning every gate row:
 * approximate (recall below 1), exact when ef >= n_features. A layer's graph
 * is built on its first query (its searches spread over the vindex's
 * threads) or by mf_vindex_hnsw_build, or mapped from a cache file
 * (mf_vindex_hnsw_load, below); it depends on m, ef_construction and
 * mips_transform only, never on the thread count. */
typedef struct mf_vindex_hnsw_params {
    int32_t m;               /* links per node and level, 2..128 (level 0: 2m); default 16 */
    int32_t ef;              /* search beam (raised to k), 1..2^24; default 64 */
    int32_t ef_construction; /* build beam, m..4096; default 128 */
    bool mips_transform;     /* link rows in the MIPS-to-Euclidean transform's space instead of by their
                                plain dot (measured worse; kept for comparison) */
} mf_vindex_hnsw_params;
mf_vindex_hnsw_params mf_vindex_default_hnsw_params(void);
/* params NULL: back to brute force (graphs freed). Built graphs are kept
 * when only ef changes. MF_ERR_INVALID_ARG for a parameter out of range. */
mf_status mf_vindex_set_hnsw(mf_vindex *v, const mf_vindex_hnsw_params *params);
/* Builds the graphs of layers l0..l1 now (several layers: one thread each). */
mf_status mf_vindex_hnsw_build(mf_vindex *v, int32_t l0, int32_t l1);
typedef struct mf_vindex_hnsw_stats {
    int32_t n_levels;
    int32_t unreachable;     /* nodes level 0 does not reach from the entry */
    int64_t n_links;
    uint64_t evals;          /* gate rows scored by all searches so far */
    uint64_t fallbacks;      /* walk rows scanned in full: their k-th |activation| was in reach of a negative score */
    size_t bytes;            /* the graph's memory (mapped from the cache file when loaded) */
    double build_ms;         /* 0 when loaded */
    bool loaded;             /* from a cache file (mf_vindex_hnsw_load), not built here */
} mf_vindex_hnsw_stats;
/* The layer's graph (built if need be). */
mf_status mf_vindex_hnsw_get_stats(mf_vindex *v, int32_t layer, mf_vindex_hnsw_stats *out);
/* The graph cache (src/vindex/hnsw_file.c): building takes minutes per layer
 * at 64k features, so the graphs of every layer can be saved in one file
 * (default DIR/hnsw_m<M>_efc<EFC>.bin, "_mips" before ".bin" with
 * mips_transform) and mapped back. The file records the parameters, the
 * build's version and gate_vectors.bin's size and sha256 from index.json;
 * loading checks its checksum and every count, offset and link, and refuses
 * (MF_ERR_FORMAT naming the file) a damaged file, one of other parameters
 * than those set, of another build version, or for other gate vectors.
 * A loaded graph is the graph a build makes, so every answer is the same.
 * The default path for params (NULL: those set), malloc'd; NULL on no memory. */
char     *mf_vindex_hnsw_cache_path(const mf_vindex *v, const mf_vindex_hnsw_params *params);
/* Builds the layers not built yet (as mf_vindex_hnsw_build(0, n_layer - 1))
 * and writes the file (path NULL: the default) under a temporary name
 * renamed into place. The bytes depend on the gates and parameters only. */
mf_status mf_vindex_hnsw_save(mf_vindex *v, const char *path);
/* Maps a saved file as the graphs of every layer (those built before are
 * dropped). path NULL: the default path, where a missing file is no error
 * (*loaded false, may be NULL); a named path must exist. Needs HNSW set. */
mf_status mf_vindex_hnsw_load(mf_vindex *v, const char *path, bool *loaded);
/* The graph caches in the vindex's directory (hnsw_*.bin), in name order,
 * from their 256-byte headers alone: cheap at any size (mf_vindex_verify
 * checks each whole). Fields a header too short or foreign to read are 0. */
typedef struct mf_vindex_hnsw_cache {
    char name[256];          /* the file's name in the directory */
    uint64_t bytes;          /* its size */
    int32_t m, ef_construction;
    bool mips_transform;
    int32_t n_layer, n_features;
    bool gates_match;        /* it records gate_vectors.bin's size and sha256 as index.json lists them */
    char problem[192];       /* "" when the header fits this vindex (shape, type, build version, gates, size,
                                name); else why --hnsw or verify would refuse it */
} mf_vindex_hnsw_cache;
/* *out malloc'd (free it; NULL when none), *n how many. */
mf_status mf_vindex_hnsw_caches(const mf_vindex *v, mf_vindex_hnsw_cache **out, int32_t *n);
/* One line for it, as `vindex info` and SHOW STATS print it, into buf. */
void mf_vindex_hnsw_cache_text(const mf_vindex_hnsw_cache *c, char *buf, size_t cap);

/* The tokens feature `feature` of `layer` writes, best first: up to cap
 * (token, score) pairs; returns how many (down_top_k at most), -1 if out of range. */
int32_t mf_vindex_feature_tokens(const mf_vindex *v, int32_t layer, int32_t feature, mf_token *tok, float *score,
                                 int32_t cap);
/* Feature rows decoded to floats (n_embd each): which is 0 gate, 1 up, 2 down.
 * MF_ERR_INVALID_ARG when out of range or the file is not in this vindex. */
mf_status mf_vindex_feature_row(const mf_vindex *v, int32_t which, int32_t layer, int32_t feature, float *out);
/* Token `tok`'s embedding row decoded to floats (n_embd). */
mf_status mf_vindex_embedding(const mf_vindex *v, mf_token tok, float *out);

/* Walk FFN: an mf_ffn_fn replacing every dense FFN of `model` by a sparse one
 * over the top-k gate features of each row (exact KNN, or the vindex's HNSW
 * graphs once mf_vindex_set_hnsw is on), with the up and down rows read
 * feature-major from the vindex. Set ctx params ffn_cb =
 * mf_walk_ffn and ffn_ud = the walk. The vindex must be of level inference,
 * of the same architecture and shapes as the model, with a dense FFN. k = 0 or
 * k >= n_features: every feature (the dense FFN in another sum order). */
typedef struct mf_walk mf_walk;
mf_status mf_walk_new(mf_vindex *v, const mf_model *model, int32_t k, mf_walk **out);
void      mf_walk_free(mf_walk *w);
int       mf_walk_ffn(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                      const int32_t *pos, void *ud);
/* The model's own dense FFN plus the vindex's edit overlay (inserted
 * features added, deleted ones taken out, rewritten down vectors swapped):
 * layers without edits run the model's FFN untouched. Same callback. */
mf_status mf_walk_new_overlay(mf_vindex *v, const mf_model *model, mf_walk **out);
/* Layers at or above `from` walk, those below run dense (default 0). */
void      mf_walk_set_first_layer(mf_walk *w, int32_t from);

/* Edit overlays: in memory only, the vindex's files are never written. A
 * deleted feature is never returned by the KNN, so it contributes nothing to
 * the walk FFN (mf_vindex_knn fills slots past the live features with -1).
 * A .vlp patch file is JSON naming its base by the source model's sha256;
 * apply refuses a patch of another model or with any bad operation, and
 * then changes nothing. */
mf_status mf_vindex_delete_feature(mf_vindex *v, int32_t layer, int32_t feature);
bool      mf_vindex_is_deleted(const mf_vindex *v, int32_t layer, int32_t feature);
int32_t   mf_vindex_n_deleted(const mf_vindex *v);
mf_status mf_vindex_apply_patch(mf_vindex *v, const char *path);
/* Writes the open patch's edits (those since BEGIN PATCH, or since the start
 * or the last APPLY); name NULL = the open patch's name. */
mf_status mf_vindex_save_patch(const mf_vindex *v, const char *path, const char *name);
/* New edits go to a patch of this name (what SAVE PATCH then writes). */
mf_status mf_vindex_begin_patch(mf_vindex *v, const char *name);
/* Rewrites a feature's down vector (n_embd floats, copied). Feature ids from
 * n_features up are the inserted features of that layer, in insertion order. */
mf_status mf_vindex_update_feature(mf_vindex *v, int32_t layer, int32_t feature, const float *down);
int32_t   mf_vindex_n_inserted(const mf_vindex *v, int32_t layer); /* live ones */
int32_t   mf_vindex_n_edits(const mf_vindex *v);                   /* operations applied */

/* INSERT INTO EDGES: a new feature at `layer` that makes the model continue
 * `prompt` with `target` (src/vindex/insert.c says how it is made). The
 * model must be the vindex's (mf_model_load of a vindex of level inference). */
typedef struct mf_vindex_insert_params {
    const mf_token *prompt;   /* BOS included, as the model is run */
    int32_t n_prompt;
    mf_token target;
    int32_t layer;            /* -1: the last layer where the target can win (tried last to first) */
    float alpha;              /* the strength is the smallest that wins times this (0: 1.5) */
    const char *entity, *relation, *target_text; /* recorded in the patch (may be NULL) */
    int32_t n_threads;
} mf_vindex_insert_params;
typedef struct mf_vindex_insert_result {
    int32_t layer, feature;   /* the new feature's id */
    float strength;           /* the down vector's length times the activation on the prompt */
    mf_token top_before;      /* the prompt's top token before */
    int32_t trials;           /* forward passes the strength search ran */
} mf_vindex_insert_result;
mf_status mf_vindex_insert(mf_vindex *v, mf_model *model, const mf_vindex_insert_params *p, mf_vindex_insert_result *r);

/* COMPILE: the overlay baked into a new GGUF with wider FFNs (every layer
 * n_ff + the most new features of a layer, rounded up to the down tensor's
 * block; src/vindex/compile.c says how), or into a new vindex of it (same
 * level, feature type and labels). Needs a vindex of level inference. */
typedef struct mf_vindex_compile_result {
    int32_t n_ff_old, n_ff_new;  /* FFN width before and after */
    int32_t n_added;             /* features added over all layers */
    char reencoded[256];         /* tensors whose type changed ("none", or e.g. "ffn_down iq2_xxs->f32") */
} mf_vindex_compile_result;
mf_status mf_vindex_compile_model(mf_vindex *v, const char *gguf_path, mf_vindex_compile_result *r);
mf_status mf_vindex_compile_vindex(mf_vindex *v, const char *dir, mf_vindex_compile_result *r);

/* LQL, the query language over a vindex (statements in the README):
 * mf_lql_run parses all of `text` first (a syntax error runs nothing), then
 * runs the statements in order and stops at the first failure. *out gets a
 * malloc'd string (free() it; also on failure, with what ran before) of
 * aligned tables, or one JSON object per statement and line with `json`.
 * Errors name the line and column: "line 2, column 5: expected ...".
 * WALK and INFER run the model, so need a vindex of level inference. */
typedef struct mf_lql mf_lql;
mf_status mf_lql_open(const char *dir, int32_t n_threads, mf_lql **out);
void      mf_lql_free(mf_lql *q);
/* The session's vindex (to set its KNN: mf_vindex_set_hnsw). */
mf_vindex *mf_lql_vindex(mf_lql *q);
mf_status mf_lql_run(mf_lql *q, const char *text, size_t len, bool json, char **out);

/* ==== end of vindex ===================================================== */

#ifdef __cplusplus
}
#endif
#endif /* MINFER_H */
