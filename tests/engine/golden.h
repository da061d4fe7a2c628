/* golden.h - loading llama.cpp golden cases (../shared/golden/README.md) and
 * checking minfer against them: prompt tokens, logits within a tolerance,
 * greedy continuation by the README's near-tie rule, teacher-forced argmax. */
#ifndef MF_TEST_GOLDEN_H
#define MF_TEST_GOLDEN_H

#include <stdbool.h>
#include <stdint.h>

#include "minfer.h"

typedef struct golden_case {
    char name[256];
    char model_path[512];
    char *prompt;          /* NULL when the ids were given directly */
    bool add_bos;
    mf_token *prompt_tokens;
    int n_prompt;
    mf_token *greedy;
    float *margins;
    int n_greedy;
    int n_vocab;
    float *logits;         /* [n_prompt][n_vocab] */
} golden_case;

/* json_path: .../NAME.json; model_dir: where its "model" file lives. */
bool golden_load(const char *json_path, const char *model_dir, golden_case *gc);
void golden_free(golden_case *gc);

typedef struct golden_opts {
    float tol;             /* max |logit - golden| */
    int n_threads;
    mf_kv_type kv_type;
    bool check_tokens;     /* tokenize the prompt and compare (text cases) */
    float near_tie;        /* golden margin below which steps are near-ties (0 = the README's 0.05) */
    int near_tie_rank;     /* at a near-tie the golden token must be in our top N (0 = 2) */
    float near_tie_gap;    /* > 0: at a near-tie the golden token's logit must instead be within this of our
                              best (2 x the logit tolerance: each of the two may be off by it), and the
                              free-running check ends there too when it differs */
    const char *backend;   /* mf_model_params.backend (NULL: the CPU) */
} golden_opts;

/* Runs every check; returns the max abs logit difference seen (or -1 when
 * the model could not run). Failures are recorded through CHECK. */
double golden_check(const golden_case *gc, const golden_opts *o);

/* Greedy tolerance from the weight types: 0.01 for float weights, 0.25 for quantized. */
float golden_default_tol(const char *model_path);

#endif
