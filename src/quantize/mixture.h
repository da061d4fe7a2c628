/* mixture.h - which type each tensor of a model gets when quantizing: the
 * target types `quantize` offers and llama-quantize's per-tensor rules
 * (what is quantized at all, mixture promotions, row-length fallbacks).
 *
 * The rules follow llama.cpp's src/llama-quant.cpp (commit 3f545bec) so that
 * every tensor gets the type llama-quantize gives it; they are expressed here
 * as data (one row of clauses per target type and tensor role) rather than as
 * a chain of conditionals. */
#ifndef MF_QUANTIZE_MIXTURE_H
#define MF_QUANTIZE_MIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "quant/types.h"

/* A type condition of a clause: every bit set must hold. */
enum {
    QZ_ON = 1u << 0,         /* marks a used clause; alone it means "always" */
    QZ_GQA4 = 1u << 1,       /* n_head / n_head_kv >= 4 */
    QZ_FALCON = 1u << 2,
    QZ_NOT_FALCON = 1u << 3,
    QZ_MOE8 = 1u << 4,       /* exactly 8 experts */
    QZ_NOT_MOE8 = 1u << 5,
    QZ_FIRST2 = 1u << 6,     /* position i < 2 */
    QZ_FIRST4 = 1u << 7,     /* position i < 4 */
    QZ_EIGHTH = 1u << 8,     /* i < n/8 */
    QZ_SIXTEENTH = 1u << 9,  /* i < n/16 */
    QZ_MORE_BITS = 1u << 10, /* first and last eighth, and every third in between */
};

#define QZ_KEEP (-1) /* a clause outcome: stop, keep the type chosen so far */
#define QZ_MAX_CLAUSES 4

/* First clause whose condition holds decides; none holding keeps the type. */
typedef struct qz_clause {
    uint32_t when;
    int type; /* mf_type or QZ_KEEP */
} qz_clause;

typedef struct qz_ftype {
    const char *name;   /* "Q4_K_M" as llama-quantize spells it */
    int32_t file_type;  /* llama.cpp's LLAMA_FTYPE_* number (general.file_type) */
    mf_type base;       /* the type most tensors get */
    qz_clause attn_v[QZ_MAX_CLAUSES];   /* attn_v / attn_qkv / attn_kv_b, by position among them */
    qz_clause ffn_down[QZ_MAX_CLAUSES]; /* by layer */
    qz_clause attn_out[QZ_MAX_CLAUSES];
} qz_ftype;

/* The target named `name`: case-insensitive, llama-quantize's aliases
 * (Q4_K = Q4_K_M ...) and file-type numbers accepted. NULL if unknown. */
const qz_ftype *qz_ftype_find(const char *name);
/* "Q4_0, Q4_1, ..." */
const char *qz_ftype_names(void);

/* A single tensor type given by name ("q8_0", "Q4_K", "f16"), for the
 * output/token-embedding overrides; only types minfer can produce. `what`
 * names the option in the message. */
mf_status qz_parse_tensor_type(const char *name, const char *what, mf_type *out);
/* Whether t is a block-quantized type (not F32/F16/BF16/integers). */
bool qz_type_is_quantized(mf_type t);

typedef struct qz_options {
    const qz_ftype *ft;
    bool pure;
    int out_override;  /* mf_type, or -1 for none */
    int embd_override; /* mf_type, or -1 for none */
} qz_options;

/* The decision for one tensor. */
typedef struct qz_choice {
    mf_type type;   /* type to write */
    bool fallback;  /* `type` replaced a choice that did not fit the row length */
    char *note;     /* malloc'd one-line remark (the fallback), or NULL */
} qz_choice;

/* Decides every tensor of `f` (choices[i] for f->tensors[i]); visits tensors
 * in llama-quantize's order (layer, then name), which its position counters
 * depend on. Fails, naming `f->path` and the tensor, when a row length fits
 * no type of the fallback chain. Free the notes with qz_choices_free. */
mf_status qz_plan(const gguf_file *f, const qz_options *o, qz_choice *choices);
void qz_choices_free(qz_choice *choices, uint64_t n);

#endif
