/* run.h - what `minfer run` (run.c) and its chat mode (--cnv, chat.c) share:
 * the parsed options and the model/context setup. */
#ifndef MF_RUN_H
#define MF_RUN_H

#include <stdbool.h>

#include "cli.h"
#include "minfer.h"

typedef struct run_opts {
    const char *model_path;
    bool no_mmap;           /* --no-mmap: read the file into memory */
    bool no_repack;         /* --no-repack: no x16 interleave of the weights */
    cli_dev dev;            /* --backend / -ngl */
    const char *prompt;     /* one-shot: the prompt; chat: the first user message */
    long n_predict;         /* tokens per generation (-1 = until EOS / context full) */
    bool n_predict_set;     /* given on the command line (chat's default is -1) */
    long n_threads, n_ctx, n_batch;
    bool ignore_eos, no_bos, verbose;
    mf_sampler_params sp;
    mf_kv_type kv;
    /* --ffn walk: the FFN read sparsely from a vindex */
    bool walk;
    const char *vindex;     /* --vindex DIR (default: -m when it is a vindex) */
    long walk_k;            /* features per row; 0 = all */
    bool walk_k_pct;        /* walk_k is a percentage of the features */
    const char *patch;      /* --patch FILE.vlp applied to the walk's vindex */
    cli_hnsw hnsw;          /* --hnsw ...: the walk's top-K through HNSW graphs */
    /* chat mode */
    bool cnv;
    const char *system;        /* -sys: system message */
    const char *chat_template; /* file overriding the GGUF's template */
    const char *session;       /* --session: conversation + KV cache saved on exit, restored on start */
    int think;                 /* -1: not given; 0/1: enable_thinking for the template */
    /* constrained output (one of them) */
    const char *grammar;       /* --grammar TEXT */
    const char *grammar_file;  /* --grammar-file F */
    bool json;                 /* --json: the built-in JSON grammar */
    const char *json_schema;   /* --json-schema F */
    /* speculative decoding (one of them) */
    const char *draft_model;   /* --draft-model F */
    bool lookup;               /* --lookup: drafts from n-grams of the context */
    long draft_max, draft_min; /* tokens per draft: at most, and fewer than min are not tried */
    float draft_p_min;         /* the draft model stops below this top probability */
    long lookup_ngram_min, lookup_ngram_max;
} run_opts;

/* Loads the model and creates its context as the options say; on failure
 * prints "minfer run: <why>" and returns false (nothing to free). */
bool run_open(const run_opts *o, mf_model **model, mf_context **ctx);

/* "f16" -> MF_KV_F16 ...; false for an unknown name. */

/* run_grammar.c: compiles the grammar the options ask for into *out.
 * Returns -1 when none is asked for, 0 on success, else the exit status
 * (2, after printing why: line and column for a grammar error). */
int run_grammar_load(const run_opts *o, mf_grammar **out);

/* The thread pool run_open made for target and draft (NULL without a draft). */
mf_threadpool *run_pool(void);

/* run_spec.c: the drafter of --draft-model / --lookup. run_spec_open
 * returns -1 when neither is asked for, 0 with *out set, else the exit
 * status (after printing why: a missing file, a different vocabulary). */
typedef struct run_spec run_spec;
int     run_spec_open(const run_opts *o, const mf_model *target, const mf_context *ctx, run_spec **out);
void    run_spec_free(run_spec *s);
/* The draft model's prompt prefill (nothing for --lookup); 1 on error. */
int     run_spec_prefill(run_spec *s, const mf_token *hist, int32_t n_hist);
/* The draft after hist[0 .. n_hist), at most room tokens; -1 on error. */
int32_t run_spec_draft(run_spec *s, const mf_token *hist, int32_t n_hist, int32_t room, mf_token *out);
void    run_spec_accepted(run_spec *s, int32_t n);
void    run_spec_report(const run_spec *s); /* one line to stderr */

/* chat.c: the --cnv loop. Returns the process exit status. */
int run_chat(const run_opts *o);

#endif
