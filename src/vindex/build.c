/* build.c - mf_vindex_build: one pass over a GGUF model's layers writing the
 * feature files (gate rows, the down projection transposed, the up rows, the
 * tokens each down vector writes), then the whole-file copies, then
 * index.json under a temporary name renamed into place. */
#include "vindex/vindex.h"
#include "vindex/sha256.h"
#include "vindex/topk.h"
#include "vindex/knn_kern.h"
#include "core/error.h"
#include "gguf/gguf_write.h"
#include "model/model.h"
#include "backends/registry.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

mf_vindex_build_params mf_vindex_default_build_params(void) {
    mf_vindex_build_params p = {0};
    p.level = MF_VINDEX_BROWSE;
    p.feature_type = "f32";
    p.down_top_k = 10;
    return p;
}

/* ---- an output file that hashes what it writes ---- */

typedef struct vx_out {
    FILE *f;
    char *path;
    mf_sha256 h;
    uint64_t size;
} vx_out;

static mf_status out_open(vx_out *o, const char *dir, const char *name) {
    memset(o, 0, sizeof *o);
    o->path = vx_path(dir, name);
    if (!o->path) return mf_err(MF_ERR_NOMEM, "out of memory");
    o->f = fopen(o->path, "wb");
    if (!o->f) return mf_err(MF_ERR_IO, "%s: %s", o->path, strerror(errno));
    mf_sha256_init(&o->h);
    return MF_OK;
}

static mf_status out_write(vx_out *o, const void *p, size_t n) {
    if (n && fwrite(p, 1, n, o->f) != n) return mf_err(MF_ERR_IO, "%s: write failed: %s", o->path, strerror(errno));
    mf_sha256_update(&o->h, p, n);
    o->size += n;
    return MF_OK;
}

static mf_status out_align(vx_out *o) {
    static const uint8_t zero[VX_ALIGN];
    const size_t r = (size_t)(o->size % VX_ALIGN);
    return r ? out_write(o, zero, VX_ALIGN - r) : MF_OK;
}

static mf_status out_close(vx_out *o, vx_fileinfo *fi) {
    mf_status s = MF_OK;
    if (o->f && fclose(o->f) != 0) s = mf_err(MF_ERR_IO, "%s: close failed: %s", o->path, strerror(errno));
    o->f = NULL;
    if (!s && fi) {
        fi->present = true;
        fi->size = o->size;
        mf_sha256_final_hex(&o->h, fi->sha256);
    }
    free(o->path);
    o->path = NULL;
    return s;
}

/* ---- decoding and encoding rows ---- */

static void rows_f32(const mf_tensor *t, int64_t row0, int64_t n, float *dst) {
    const size_t rb = mf_row_size(t->type, t->ne[0]);
    const mf_type_traits *tr = mf_type_traits_ref(t->type);
    for (int64_t r = 0; r < n; r++)
        tr->to_float((const uint8_t *)t->data + (size_t)(row0 + r) * rb, dst + (size_t)r * t->ne[0], t->ne[0]);
}

/* Rows [row0, row0+n) of t in the feature type: the file's bytes when the
 * types agree (so extraction round-trips), else decoded and re-encoded. */
static mf_status emit_rows(vx_out *o, const mf_tensor *t, int64_t row0, int64_t n, mf_type ft, float *tmp,
                           uint8_t *enc) {
    const int64_t E = t->ne[0];
    if (t->type == ft) return out_write(o, (const uint8_t *)t->data + (size_t)row0 * mf_row_size(ft, E),
                                        (size_t)n * mf_row_size(ft, E));
    const mf_type_traits *tr = mf_type_traits_ref(ft);
    for (int64_t r = 0; r < n; r++) {
        rows_f32(t, row0 + r, 1, tmp);
        tr->from_float_ref(tmp, enc, E);
        mf_status s = out_write(o, enc, mf_row_size(ft, E));
        if (s) return s;
    }
    return MF_OK;
}

/* ---- down_meta: each down vector through the output norm and the head ----
 * The head product is the model's own, on the CPU backend: its GEMM over the
 * head in the file's encoding, with the activations rounded as the forward
 * rounds them, so a feature's labels are the tokens the model's head ranks
 * first for its direction. Rows of normalised down vectors go in batches of
 * up to 512. (An f32 dot per feature and token took 37 s per layer of a 0.5B
 * model with a 152k vocabulary: the head's 136M weights read per 8 features.) */

#define META_LOGITS (64u << 20) /* logits per batch: 256 MiB (the head's panels are packed once per batch) */

static void norm_vec(const mf_model *m, const float *d, const float *nw, const float *nb, int E, float *y) {
    const bool layer_norm = m->arch->norm == MF_NORM_LAYER;
    double mean = 0, ss = 0;
    if (layer_norm) {
        for (int e = 0; e < E; e++) mean += d[e];
        mean /= E;
    }
    for (int e = 0; e < E; e++) ss += (d[e] - mean) * (d[e] - mean);
    const float inv = (float)(1.0 / sqrt(ss / E + m->hp.norm_eps));
    for (int e = 0; e < E; e++) y[e] = (float)(d[e] - mean) * inv * (nw ? nw[e] : 1.0f) + (nb ? nb[e] : 0.0f);
}

typedef struct meta_job {
    const float *logits; /* [nr][V] */
    int nr, V, k;
    float *score; /* [nr][k] */
    int32_t *tok;
} meta_job;

static void meta_topk_task(void *arg, int ith, int nth) {
    const meta_job *j = arg;
    long r0, r1;
    mf_split(j->nr, ith, nth, &r0, &r1);
    for (long r = r0; r < r1; r++) {
        mf_topk h;
        mf_topk_reset(&h, j->k, j->score + (size_t)r * j->k, j->tok + (size_t)r * j->k);
        const float *lg = j->logits + (size_t)r * j->V;
        for (int v = 0; v < j->V; v++) mf_topk_push(&h, lg[v], v);
        mf_topk_sort(&h);
        for (int i = h.n; i < j->k; i++) h.score[i] = 0, h.id[i] = -1;
    }
}

/* ---- the layer's FFN as features ---- */

typedef struct layer_src {
    const mf_tensor *gate; int64_t gate_row0; /* F rows of E */
    const mf_tensor *up;   int64_t up_row0;   /* NULL when not gated */
    const mf_tensor *down;                    /* E rows of F (per expert: X stacked blocks) */
    int n_blocks, block_f;                    /* experts and features per expert (1, F for dense) */
} layer_src;

static layer_src layer_source(const mf_model *m, int il) {
    const mf_layer *L = &m->layers[il];
    layer_src s = {0};
    const bool gelu = m->arch->ffn == MF_FFN_GELU;
    if (m->hp.n_expert) {
        s.gate = gelu ? L->ffn_up_exps : L->ffn_gate_exps;
        s.up = gelu ? NULL : L->ffn_up_exps;
        s.down = L->ffn_down_exps;
        s.n_blocks = (int)m->hp.n_expert, s.block_f = (int)m->hp.n_ff_exp;
    } else {
        if (gelu) s.gate = L->ffn_up;
        else if (L->ffn_gate_up) s.gate = s.up = L->ffn_gate_up, s.up_row0 = m->hp.n_ff; /* [gate ; up] */
        else s.gate = L->ffn_gate, s.up = L->ffn_up;
        s.down = L->ffn_down;
        s.n_blocks = 1, s.block_f = (int)m->hp.n_ff;
    }
    return s;
}

typedef struct build {
    const char *dir;
    const mf_vindex_build_params *p;
    mf_model *m;
    mf_pool *pool;
    mf_backend *be; /* the head product of the labels (on the pool) */
    vx_index ix;
    vx_out out[VX_NSECT];
    float *tmp, *cols, *down, *nw, *nb, *meta_s;
    float *meta_x, *meta_lg; /* a batch of normalised down vectors, and their logits */
    int meta_b;              /* rows per batch */
    int32_t *meta_t;
    uint8_t *enc;
} build;

static mf_status build_layer(build *b, int il) {
    const mf_model *m = b->m;
    const int E = (int)m->hp.n_embd, F = b->ix.n_features;
    const mf_type ft = b->ix.ftype;
    const layer_src src = layer_source(m, il);
    mf_status s;
    vx_section *sect = &b->ix.sect[(size_t)il * VX_NSECT];

    sect[VX_GATE].off = b->out[VX_GATE].size;
    if ((s = emit_rows(&b->out[VX_GATE], src.gate, src.gate_row0, F, ft, b->tmp, b->enc))) return s;
    if (b->ix.files[VX_UP].present) {
        sect[VX_UP].off = b->out[VX_UP].size;
        if ((s = emit_rows(&b->out[VX_UP], src.up, src.up_row0, F, ft, b->tmp, b->enc))) return s;
    }
    /* down: each block is E rows of block_f; feature (x, f) is column f of block x */
    const int BF = src.block_f;
    for (int x = 0; x < src.n_blocks; x++) {
        rows_f32(src.down, (int64_t)x * E, E, b->down);
        for (int f = 0; f < BF; f++)
            for (int e = 0; e < E; e++) b->cols[((size_t)x * BF + f) * E + e] = b->down[(size_t)e * BF + f];
    }
    sect[VX_DOWN].off = b->out[VX_DOWN].size;
    const mf_type_traits *tr = mf_type_traits_ref(ft);
    for (int f = 0; f < F; f++) {
        tr->from_float_ref(b->cols + (size_t)f * E, b->enc, E);
        if ((s = out_write(&b->out[VX_DOWN], b->enc, mf_row_size(ft, E)))) return s;
    }
    if (b->ix.down_top_k) {
        const int V = (int)m->hp.n_vocab, k = b->ix.down_top_k;
        for (int f0 = 0; f0 < F; f0 += b->meta_b) {
            const int nr = F - f0 < b->meta_b ? F - f0 : b->meta_b;
            for (int r = 0; r < nr; r++)
                norm_vec(m, b->cols + (size_t)(f0 + r) * E, b->nw, b->nb, E, b->meta_x + (size_t)r * E);
            b->be->ops->matmul(b->be, m->output, b->meta_x, nr, b->meta_lg);
            meta_job j = {b->meta_lg, nr, V, k, b->meta_s + (size_t)f0 * k, b->meta_t + (size_t)f0 * k};
            mf_pool_run(b->pool, meta_topk_task, &j);
        }
        sect[VX_META].off = b->out[VX_META].size;
        for (int f = 0; f < F; f++)
            for (int i = 0; i < k; i++) {
                uint8_t rec[8];
                const int32_t t = b->meta_t[(size_t)f * k + i];
                const float sc = b->meta_s[(size_t)f * k + i];
                memcpy(rec, &t, 4), memcpy(rec + 4, &sc, 4); /* little-endian hosts only (x86-64) */
                if ((s = out_write(&b->out[VX_META], rec, 8))) return s;
            }
    }
    for (int f = 0; f < VX_NSECT; f++) {
        if (!b->ix.files[f].present) continue;
        sect[f].bytes = b->out[f].size - sect[f].off;
        if ((s = out_align(&b->out[f]))) return s;
    }
    return MF_OK;
}

static mf_status copy_bytes(const char *dir, vx_file f, const void *p, size_t n, vx_fileinfo *fi) {
    vx_out o;
    mf_status s = out_open(&o, dir, vx_file_names[f]);
    if (!s) s = out_write(&o, p, n);
    mf_status c = out_close(&o, fi);
    return s ? s : c;
}

static mf_status write_tokenizer(const build *b) {
    gguf_writer *w;
    mf_status s = gguf_writer_new(&w);
    if (s) return s;
    char *path = vx_path(b->dir, vx_file_names[VX_TOKENIZER]);
    if (!path) s = mf_err(MF_ERR_NOMEM, "out of memory");
    if (!s) s = gguf_writer_copy_kv(w, b->m->gguf, NULL, NULL);
    if (!s) s = gguf_writer_write_file(w, path);
    gguf_writer_free(w);
    vx_fileinfo *fi = (vx_fileinfo *)&b->ix.files[VX_TOKENIZER];
    if (!s) s = mf_sha256_file(path, fi->sha256, &fi->size);
    if (!s) fi->present = true;
    free(path);
    return s;
}

static void progress(const build *b, int layer, const char *what) {
    if (b->p->progress) b->p->progress(layer, b->ix.n_layer, what, b->p->progress_ud);
}

static mf_status run_build(build *b, const char *gguf_path) {
    mf_model *m = b->m;
    const mf_hparams *hp = &m->hp;
    const mf_vindex_build_params *p = b->p;
    vx_index *ix = &b->ix;
    mf_status s;
    const int E = (int)hp->n_embd;
    if (!strcmp(p->feature_type ? p->feature_type : "f32", "f32")) ix->ftype = MF_TYPE_F32;
    else if (!strcmp(p->feature_type, "f16")) ix->ftype = MF_TYPE_F16;
    else if (!strcmp(p->feature_type, "q8_0")) ix->ftype = MF_TYPE_Q8_0;
    else return mf_err(MF_ERR_INVALID_ARG, "feature type '%s' is not f32, f16 or q8_0", p->feature_type);
    if (ix->ftype == MF_TYPE_Q8_0 && E % 32)
        return mf_err(MF_ERR_INVALID_ARG, "%s: q8_0 features need n_embd to be a multiple of 32 (it is %d)", gguf_path, E);
    if (p->down_top_k < 0 || p->down_top_k > 1024 || (uint32_t)p->down_top_k > hp->n_vocab)
        return mf_err(MF_ERR_INVALID_ARG, "--down-top-k %d is out of range [0, min(1024, n_vocab)]", p->down_top_k);
    if ((unsigned)p->level > MF_VINDEX_ALL) return mf_err(MF_ERR_INVALID_ARG, "unknown vindex level %d", p->level);
    ix->level = p->level;
    const char *base = strrchr(gguf_path, '/');
    snprintf(ix->source_file, sizeof ix->source_file, "%s", base ? base + 1 : gguf_path);
    progress(b, -1, "hashing the source file");
    if ((s = mf_sha256_file(gguf_path, ix->source_sha256, &ix->source_size))) return s;
    snprintf(ix->arch, sizeof ix->arch, "%s", m->arch->name);
    const bool gelu = m->arch->ffn == MF_FFN_GELU;
    snprintf(ix->ffn, sizeof ix->ffn, "%s", gelu ? "gelu" : m->arch->ffn == MF_FFN_GEGLU ? "geglu" : "swiglu");
    ix->gated = !gelu;
    ix->n_layer = (int32_t)hp->n_layer, ix->n_embd = E, ix->n_vocab = (int32_t)hp->n_vocab;
    ix->n_ff = (int32_t)hp->n_ff, ix->n_expert = (int32_t)hp->n_expert, ix->n_expert_used = (int32_t)hp->n_expert_used;
    ix->n_ff_expert = hp->n_expert ? (int32_t)hp->n_ff_exp : 0;
    ix->n_features = hp->n_expert ? (int32_t)(hp->n_expert * hp->n_ff_exp) : (int32_t)hp->n_ff;
    ix->embd_type = m->token_embd->type;
    ix->down_top_k = p->down_top_k;
    for (int f = 0; f < VX_NSECT; f++) ix->files[f].present = true;
    ix->files[VX_UP].present = ix->gated && p->level >= MF_VINDEX_INFERENCE;
    ix->files[VX_META].present = p->down_top_k > 0;

    const size_t F = (size_t)ix->n_features, V = hp->n_vocab;
    const size_t down_elems = hp->n_expert ? (size_t)E * hp->n_ff_exp : (size_t)E * hp->n_ff;
    b->ix.sect = calloc((size_t)ix->n_layer * VX_NSECT, sizeof *b->ix.sect);
    b->tmp = malloc((size_t)E * sizeof(float));
    b->enc = malloc(mf_row_size(MF_TYPE_F32, E));
    b->cols = malloc(F * E * sizeof(float));
    b->down = malloc(down_elems * sizeof(float));
    if (!b->ix.sect || !b->tmp || !b->enc || !b->cols || !b->down)
        return mf_err(MF_ERR_NOMEM, "out of memory for a layer of %zu features", F);
    if (ix->down_top_k) {
        /* as many rows per head product as keep the logits near META_LOGITS */
        b->meta_b = (int)(META_LOGITS / V) / 16 * 16;
        b->meta_b = b->meta_b < 16 ? 16 : b->meta_b > 512 ? 512 : b->meta_b;
        /* (the backend grows its scratch for the GEMM's panels itself) */
        const mf_backend_config bc = {.pool = b->pool, .max_rows = b->meta_b, .max_width = E};
        if ((s = mf_backend_create(m->backend, &bc, &b->be))) return s;
        b->meta_x = b->be->ops->alloc(b->be, (size_t)b->meta_b * E);
        b->meta_lg = b->be->ops->alloc(b->be, (size_t)b->meta_b * V);
        b->meta_s = malloc(F * ix->down_top_k * sizeof(float));
        b->meta_t = malloc(F * ix->down_top_k * sizeof(int32_t));
        if (!b->meta_x || !b->meta_lg || !b->meta_s || !b->meta_t)
            return mf_err(MF_ERR_NOMEM, "out of memory for %d rows of %zu logits", b->meta_b, V);
        if (m->output_norm) {
            b->nw = malloc(E * sizeof(float));
            if (!b->nw) return mf_err(MF_ERR_NOMEM, "out of memory");
            rows_f32(m->output_norm, 0, 1, b->nw);
        }
        if (m->output_norm_b) {
            b->nb = malloc(E * sizeof(float));
            if (!b->nb) return mf_err(MF_ERR_NOMEM, "out of memory");
            rows_f32(m->output_norm_b, 0, 1, b->nb);
        }
    }
    for (int f = 0; f < VX_NSECT; f++)
        if (ix->files[f].present && (s = out_open(&b->out[f], b->dir, vx_file_names[f]))) return s;
    for (int il = 0; il < ix->n_layer; il++) {
        if ((s = build_layer(b, il))) return s;
        progress(b, il, "layers");
    }
    for (int f = 0; f < VX_NSECT; f++)
        if (ix->files[f].present && (s = out_close(&b->out[f], &ix->files[f]))) return s;

    progress(b, -1, vx_file_names[VX_EMBD]);
    if ((s = copy_bytes(b->dir, VX_EMBD, m->token_embd->data, m->token_embd->nbytes, &ix->files[VX_EMBD]))) return s;
    if ((s = write_tokenizer(b))) return s;
    if (p->level >= MF_VINDEX_INFERENCE) {
        const gguf_file *g = m->gguf;
        progress(b, -1, vx_file_names[VX_WEIGHTS]);
        if ((s = copy_bytes(b->dir, VX_HEADER, g->base, g->data_offset, &ix->files[VX_HEADER]))) return s;
        if ((s = copy_bytes(b->dir, VX_WEIGHTS, g->base + g->data_offset, g->size - g->data_offset,
                            &ix->files[VX_WEIGHTS])))
            return s;
    }
    char *json = vx_index_dump(ix);
    if (!json) return mf_err(MF_ERR_NOMEM, "out of memory");
    char *tmp = vx_path(b->dir, "index.json.tmp"), *fin = vx_path(b->dir, "index.json");
    s = !tmp || !fin ? mf_err(MF_ERR_NOMEM, "out of memory") : MF_OK;
    FILE *f = s ? NULL : fopen(tmp, "wb");
    if (!s && !f) s = mf_err(MF_ERR_IO, "%s: %s", tmp, strerror(errno));
    if (f) {
        const size_t n = strlen(json);
        if (fwrite(json, 1, n, f) != n || fputc('\n', f) == EOF) s = mf_err(MF_ERR_IO, "%s: write failed", tmp);
        if (fclose(f) != 0 && !s) s = mf_err(MF_ERR_IO, "%s: close failed", tmp);
        if (!s && rename(tmp, fin) != 0) s = mf_err(MF_ERR_IO, "%s: %s", fin, strerror(errno));
    }
    free(json);
    free(tmp);
    free(fin);
    return s;
}

mf_status mf_vindex_build(const char *gguf_path, const char *dir, const mf_vindex_build_params *params) {
    const mf_vindex_build_params p = params ? *params : mf_vindex_default_build_params();
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) return mf_err(MF_ERR_IO, "%s: %s", dir, strerror(errno));
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return mf_err(MF_ERR_IO, "%s: not a directory", dir);
    /* an old index must not describe the new files while they are written */
    char *old = vx_path(dir, "index.json");
    if (old) remove(old);
    free(old);
    build b = {.dir = dir, .p = &p};
    mf_model_params mp = mf_model_default_params();
    mp.no_repack = true; /* the labels' head product is a GEMM: the file's layout serves it */
    mf_status s = mf_model_load(gguf_path, &mp, &b.m);
    if (!s && !(b.pool = mf_pool_new(p.n_threads))) s = mf_err(MF_ERR_NOMEM, "cannot start the thread pool");
    if (!s) s = run_build(&b, gguf_path);
    for (int f = 0; f < VX_NSECT; f++)
        if (b.out[f].f) {
            fclose(b.out[f].f);
            free(b.out[f].path);
        }
    free(b.tmp), free(b.enc), free(b.cols), free(b.down), free(b.nw), free(b.nb);
    free(b.meta_s), free(b.meta_t);
    if (b.be) b.be->ops->destroy(b.be); /* frees its buffers (meta_x, meta_lg) */
    vx_index_free(&b.ix);
    mf_pool_free(b.pool);
    mf_model_free(b.m);
    return s;
}
