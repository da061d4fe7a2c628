/* vindex.h - the opened vindex and the on-disk format shared by build.c,
 * format.c (index.json), open.c, verify.c, knn.c and walk.c.
 *
 * Directory layout (all integers little-endian):
 *   index.json         what follows, with every file's size and sha256
 *   tokenizer.gguf     the source's metadata (tokenizer included), no tensors
 *   gate_vectors.bin   per layer: n_features rows of n_embd in the feature type
 *   down_features.bin  per layer: the down projection transposed, same shape
 *   up_features.bin    per layer: the up rows (level inference, gated FFNs)
 *   down_meta.bin      per layer: per feature down_top_k {int32 token, f32 score}
 *   embeddings.bin     token_embd.weight, the GGUF's bytes
 *   header.bin         the source GGUF up to its data section (level inference)
 *   weights.bin        the source GGUF's data section, byte for byte
 * Every per-layer section starts at a multiple of 64 bytes. */
#ifndef MF_VINDEX_H
#define MF_VINDEX_H

#include <stdbool.h>
#include <stdint.h>

#include "minfer.h"
#include "core/mapfile.h"
#include "core/threadpool.h"
#include "quant/types.h"
#include "model/arch.h"

#define VX_FORMAT "minfer-vindex"
#define VX_VERSION 1
#define VX_ALIGN 64
/* LQL: a filtered NEAREST ranks this many features at most */
#define VX_MAX_K 4096

typedef enum vx_file {
    VX_GATE = 0,
    VX_DOWN,
    VX_UP,
    VX_META,   /* the four with per-layer sections come first */
    VX_EMBD,
    VX_TOKENIZER,
    VX_HEADER,
    VX_WEIGHTS,
    VX_NFILES,
} vx_file;
#define VX_NSECT 4

extern const char *const vx_file_names[VX_NFILES];

typedef struct vx_section {
    uint64_t off, bytes;
} vx_section;

typedef struct vx_fileinfo {
    bool present;
    uint64_t size;
    char sha256[65];
} vx_fileinfo;

/* The edit overlay (overlay.c), in memory: a log of operations grouped in
 * patches (what SAVE PATCH writes) and the state they add up to. Inserted
 * features of a layer are numbered n_features, n_features + 1, ... in the
 * order they were inserted; they are f32 vectors. */
typedef enum vx_opkind { VX_OP_DELETE = 0, VX_OP_INSERT, VX_OP_UPDATE } vx_opkind;

typedef struct vx_feat {
    float *gate, *up, *down; /* [n_embd] each; up is NULL for a non-gated FFN (gate is the up row there) */
    float bias;              /* non-gated: the activation's bias */
    bool dead;               /* deleted after it was inserted */
} vx_feat;

typedef struct vx_op {
    vx_opkind kind;
    int32_t layer, feature;
    int32_t patch;           /* index into vx_overlay.patch */
    float *gate, *up, *down; /* insert: all three (up NULL when non-gated); update: down; owned */
    float bias;
    char *note;              /* insert: JSON object text (entity, relation, target, strength); owned */
} vx_op;

typedef struct vx_patchrec {
    char *name;              /* BEGIN PATCH's name, or the file's "name" */
    char *file;              /* the file it was applied from, NULL for one made here */
} vx_patchrec;

typedef struct vx_overlay {
    vx_op *op;
    int32_t n_op, cap_op;
    vx_patchrec *patch;
    int32_t n_patch, cap_patch;
    int32_t open;            /* the patch new edits go to (-1: none yet; the first edit opens one) */
    vx_feat **ins;           /* [n_layer] inserted features */
    int32_t *n_ins, *cap_ins;
    float **upd;             /* [n_layer][n_features] a rewritten down vector, or NULL; NULL = none */
    int32_t *n_edit;         /* [n_layer] live edits touching the layer (0: the dense FFN as it is) */
} vx_overlay;

/* What index.json says, validated (format.c). */
typedef struct vx_index {
    mf_vindex_level level;
    char source_file[256], source_sha256[65];
    uint64_t source_size;
    char arch[64];
    char ffn[16];        /* "swiglu", "geglu", "gelu" */
    bool gated;
    int32_t n_layer, n_embd, n_vocab, n_ff, n_expert, n_expert_used, n_ff_expert, n_features;
    mf_type ftype;       /* gate/up/down copies */
    mf_type embd_type;
    int32_t down_top_k;
    vx_fileinfo files[VX_NFILES];
    vx_section *sect;    /* [n_layer][VX_NSECT] */
} vx_index;

struct mf_vindex {
    char *dir;
    vx_index ix;
    mf_mapfile map[VX_NFILES]; /* mapped: the sections' files and embeddings */
    size_t row_bytes;          /* one feature row in ftype */
    mf_pool *pool;
    bool pool_owned;           /* false: a shared mf_threadpool's (mf_vindex_set_threadpool) */
    int n_threads;
    /* KNN scratch, sized with the thread count (knn.c): one query at a time per vindex */
    int kcap;                  /* features each heap holds: grown to the largest k asked */
    float *heap_s;
    int32_t *heap_i;
    struct mf_topk *heads;     /* [n_threads][VX_QROWS] heap descriptors */
    /* the q8_0 integer pre-scan (knn.c), allocated on first use for
     * (pre_nth threads, heaps of pre_kcap): per thread VX_QROWS lower-bound
     * heaps and an error tile; [VX_QROWS][n_features] upper bounds; the
     * quantized queries */
    int q8pre_mode;            /* 0: when it applies (MINFER_KNN_INT8=1), 1: never (the default), 2: always, the
                                * scalar twin where the CPU lacks VNNI (tests) */
    int pre_nth, pre_kcap;
    float *pre_lb, *pre_e, *pre_ub, *pre_dx, *pre_c;
    int32_t *pre_lbi;
    uint8_t *pre_u;
    /* the edit overlay (overlay.c): [n_layer][n_features], 1 = deleted; NULL = none */
    uint8_t *deleted;
    int32_t n_deleted;
    vx_overlay ov;
    /* HNSW (hnsw.c): on when hnsw_on; graphs built per layer on first use */
    bool hnsw_on;
    mf_vindex_hnsw_params hnsw_p;
    struct vx_hnsw **hnsw;     /* [n_layer], NULL until built */
    struct vx_hscratch *hscr;  /* [n_hscr] per-thread search scratch */
    int n_hscr;
    mf_mapfile hnsw_map;       /* the cache file the graphs were loaded from (hnsw_file.c), else empty */
    char *hnsw_file;           /* its path */
};

/* format.c */
mf_status vx_index_parse(const char *text, size_t len, const char *name, vx_index *out);
/* Serialises an index to a malloc'd NUL-terminated JSON string. */
char *vx_index_dump(const vx_index *ix);
void vx_index_free(vx_index *ix);
const char *vx_level_name(mf_vindex_level l);
/* Bytes of one layer's section of file f. */
uint64_t vx_section_bytes(const vx_index *ix, vx_file f);
/* Reads dir/index.json (capped) into a parsed index. */
mf_status vx_index_load(const char *dir, vx_index *out);
char *vx_path(const char *dir, const char *name);

/* gguf_view.c: the source GGUF again, header.bin + weights.bin. */
struct gguf_file;
mf_status vx_open_gguf(const char *dir, bool read_copy, struct gguf_file **out);

/* knn.c: what the KNN ranks by: the gate score (MIPS), or the magnitude of
 * the activation it feeds (the walk FFN: a feature whose activation is near
 * zero contributes nothing, whatever the sign of its score). */
typedef enum vx_rank { VX_RANK_DOT = 0, VX_RANK_SILU_ABS, VX_RANK_GELU_ABS } vx_rank;
float vx_rank_key(vx_rank r, float g);
/* mf_vindex_knn with a ranking; bias (may be NULL) is added to each score
 * before the key is taken; score[] then holds the keys. */
mf_status vx_knn(mf_vindex *v, int layer, const float *x, int n_rows, int k, vx_rank rank, const float *bias,
                 int32_t *feat, float *score);
/* vx_knn that also writes every row's raw gate score (the dot, before bias
 * and key: what the walk would compute again) to g [n_rows][n_features] and
 * sets *g_set, when the answer comes from the float scan; through HNSW or
 * the integer pre-scan g is not written and *g_set is false. */
mf_status vx_knn_g(mf_vindex *v, int layer, const float *x, int n_rows, int k, vx_rank rank, const float *bias,
                   int32_t *feat, float *score, float *g, bool *g_set);
/* hnsw.c: vx_knn through the layer's graph (built first if need be). */
typedef struct vx_hnsw vx_hnsw;
typedef struct vx_hscratch vx_hscratch;
mf_status vx_hnsw_knn(mf_vindex *v, int layer, const float *x, int n_rows, int k, vx_rank rank, const float *bias,
                      int32_t *feat, float *score);
/* Frees every graph and the scratch. */
void vx_hnsw_release(mf_vindex *v);
/* hnsw_file.c: checks a cache file against this vindex and its own
 * parameters (what `vindex verify` runs on each hnsw_*.bin). */
mf_status vx_hnsw_file_check(const mf_vindex *v, const char *path);
/* The names of the cache files in dir (hnsw_*.bin), sorted; *names malloc'd
 * (vx_free_names). */
mf_status vx_hnsw_cache_names(const char *dir, char ***names, size_t *n);
void vx_free_names(char **names, size_t n);
/* overlay.c */
void vx_overlay_free(mf_vindex *v);
/* Appends an operation (taking ownership of its vectors and note) to the open
 * patch and applies it to the state; on error the op's memory is freed. */
mf_status vx_overlay_push(mf_vindex *v, vx_op *op);
/* Starts a patch (new edits go to it); file NULL for BEGIN PATCH. */
mf_status vx_overlay_begin(mf_vindex *v, const char *name, const char *file);
/* Drops the last operation (an INSERT's trial feature), which must be an insert. */
void vx_overlay_pop_insert(mf_vindex *v);
/* Validates a (layer, feature) an op names: base or live inserted feature. */
mf_status vx_overlay_check(const mf_vindex *v, int32_t layer, int32_t feature);
/* The live down vector of an updated base feature, or NULL. */
const float *vx_overlay_down(const mf_vindex *v, int layer, int feature);

/* patch.c: an insert's note (JSON text, malloc'd; strings may be NULL). */
char *vx_insert_note(const char *entity, const char *relation, const char *target, double strength);

/* insert.c: the unit vector in the residual stream that raises token t's
 * logit against the others (its output row minus the mean row, times the
 * output norm's weight). */
mf_status vx_target_dir(const mf_vindex *v, const struct mf_model *m, mf_token t, float *dir);
/* The raw logit direction: token t's output row times the output norm's weight. */
mf_status vx_logit_dir(const mf_vindex *v, const struct mf_model *m, mf_token t, float *dir);

/* insert_gate.c: the gate direction of an inserted feature, from the
 * prompt's residual xe and N reference residuals ref[N][E] at the layer. */
mf_status vx_insert_gate(const float *xe, const float *ref, int N, int E, float *d);

/* walk.c: the activation an inserted feature feeds its down vector with. */
float vx_feat_act(const mf_vindex *v, mf_ffn_type act, const vx_feat *f, const float *x);

/* walk.c: per feature of `layer` (base, then inserted) on row x: the
 * activation and activation * (down . dir); deleted ones 0. act and contrib
 * hold n_features + the inserted count; returns that count. */
int32_t vx_layer_contrib(mf_walk *w, int layer, const float *x, const float *dir, float *act, float *contrib);

/* A layer's rows of one sectioned file (NULL when absent). */
const void *vx_layer_rows(const mf_vindex *v, vx_file f, int layer);

#endif
