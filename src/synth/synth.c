/* synth.c - mf_synth(): a preset's tensors get their types from the
 * quantizer's planner (the same llama-quantize rules mf_quantize applies,
 * fed a stand-in of the f32 model that has the preset's names, shapes and
 * metadata), then each tensor is generated and converted chunk by chunk on a
 * thread pool while the GGUF writer streams it to disk. */
#include "minfer.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "quant/types.h"
#include "quantize/mixture.h"
#include "synth/synth.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Weights generated and converted per chunk: bounds the memory held for one
 * tensor however large it is, while keeping chunks big enough that the
 * pool's hand-off cost does not matter. */
#define CHUNK_WEIGHTS ((int64_t)4 << 20)

#define MAX_EXTRA_LAYERS 1024

#define QUANT_VERSION 2 /* ggml's GGML_QNT_VERSION, which llama-quantize records */

mf_synth_params mf_synth_default_params(void) {
    mf_synth_params p;
    memset(&p, 0, sizeof p);
    p.type = "Q4_K_M";
    p.seed = 1;
    p.extra_scale = 1.0f;
    return p;
}

/* ---- the plan: llama-quantize's rules on a stand-in of the f32 model ---- */

/* The planner reads general.architecture, <arch>.block_count,
 * attention.head_count(_kv) and expert_count from the metadata, and each
 * tensor's name, shape and type; nothing else. */
typedef struct standin {
    gguf_file f;
    gguf_kv kv[4];
    char keys[3][96];
} standin;

static mf_status make_standin(const synth_preset *p, uint32_t n_layer, const synth_tensor *ts, int64_t n, const char *path,
                              standin *st) {
    memset(st, 0, sizeof *st);
    st->f.path = path;
    st->f.tensors = calloc((size_t)n, sizeof *st->f.tensors);
    if (!st->f.tensors) return mf_err(MF_ERR_NOMEM, "synth: out of memory");
    st->f.n_tensors = (uint64_t)n;
    for (int64_t i = 0; i < n; i++) {
        gguf_tensor *t = &st->f.tensors[i];
        t->name = (char *)ts[i].name;
        t->n_dims = ts[i].n_dims;
        t->ne[0] = ts[i].ne[0];
        t->ne[1] = ts[i].ne[1];
        t->ne[2] = t->ne[3] = 1;
        t->type = MF_TYPE_F32;
        t->n_elements = t->ne[0] * t->ne[1];
        t->nbytes = (size_t)t->n_elements * sizeof(float);
    }
    st->kv[0] = (gguf_kv){.key = "general.architecture",
                          .v = {.type = GGUF_STR, .s = {p->arch, (uint64_t)strlen(p->arch)}}};
    const char *suffix[3] = {"block_count", "attention.head_count", "attention.head_count_kv"};
    const uint32_t val[3] = {n_layer, p->n_head, p->n_head_kv};
    for (int k = 0; k < 3; k++) {
        snprintf(st->keys[k], sizeof st->keys[k], "%s.%s", p->arch, suffix[k]);
        st->kv[1 + k] = (gguf_kv){.key = st->keys[k], .v = {.type = GGUF_U32, .u = val[k]}};
    }
    st->f.kv = st->kv;
    st->f.n_kv = 4;
    return MF_OK;
}

/* ---- writing ---- */

typedef struct run {
    const synth_preset *p;
    const synth_tensor *ts;
    const qz_choice *ch;
    const mf_synth_params *prm;
    int64_t n_tensors;
    mf_pool *pool;
    float *scratch;    /* one row of floats per thread */
    int64_t max_row;
    uint8_t *buf;      /* one converted chunk */
    size_t buf_cap;
    uint64_t done, total;
} run;

typedef struct chunk {
    run *r;
    int64_t index, r0, nrows;
} chunk;

static void make_rows(void *arg, int ith, int nth) {
    const chunk *c = arg;
    const run *r = c->r;
    const synth_tensor *t = &r->ts[c->index];
    const mf_type to = r->ch[c->index].type;
    const int64_t n = t->ne[0];
    const size_t out_row = mf_row_size(to, n);
    const mf_type_traits *tr = mf_type_traits_ref(to);
    float *row = r->scratch + (size_t)ith * (size_t)r->max_row;
    long b, e;
    mf_split((long)c->nrows, ith, nth, &b, &e);
    for (long i = b; i < e; i++) {
        synth_fill_row(r->p, t, r->prm->seed, c->r0 + i, row);
        tr->from_float_ref(row, r->buf + (size_t)i * out_row, n);
    }
}

static bool emit(const mf_synth_params *prm, const mf_synth_progress *ev) {
    return !prm->progress || prm->progress(ev, prm->progress_ud);
}

/* Writer callback for tensor wt->index (tensors were added in list order). */
static mf_status write_tensor(void *ud, const gguf_wtensor *wt, gguf_sink *out) {
    run *r = ud;
    const int64_t idx = (int64_t)wt->index;
    const synth_tensor *t = &r->ts[idx];
    const mf_type to = r->ch[idx].type;
    const int64_t n = t->ne[0], rows = t->ne[1];
    const size_t out_row = mf_row_size(to, n);
    int64_t per = CHUNK_WEIGHTS / n;
    if (per < 1) per = 1;
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        const size_t need = (size_t)nr * out_row;
        if (need > r->buf_cap) {
            uint8_t *nb = realloc(r->buf, need);
            if (!nb) return mf_err(MF_ERR_NOMEM, "synth: tensor '%s': out of memory", t->name);
            r->buf = nb;
            r->buf_cap = need;
        }
        chunk c = {r, idx, r0, nr};
        mf_pool_run(r->pool, make_rows, &c);
        mf_status s = gguf_sink_write(out, r->buf, need);
        if (s) return s;
        r->done += (uint64_t)(nr * n);
        mf_synth_progress ev = {
            .event = MF_SYNTH_CHUNK, .index = idx, .n_tensors = r->n_tensors, .name = t->name, .type = mf_type_name(to),
            .n_dims = t->n_dims, .ne = {t->ne[0], t->ne[1], 1, 1}, .tensor_done = r0 + nr == rows,
            .done = r->done, .total = r->total,
        };
        if (!emit(r->prm, &ev)) return mf_err(MF_ERR_INVALID_ARG, "synth: cancelled by the progress callback");
    }
    return MF_OK;
}

/* general.* and <arch>.* keys: what llama.cpp's converter writes for the
 * preset's config, which is what both loaders read. */
static mf_status set_model_keys(gguf_writer *w, const synth_preset *p, const mf_synth_params *prm, int32_t file_type) {
    char name[96], desc[320], key[128];
    const uint32_t n_layer = p->n_layer + (uint32_t)prm->extra_layers;
    snprintf(name, sizeof name, "%s (synthetic)", p->name);
    int o = snprintf(desc, sizeof desc, "random weights written by minfer synth: preset %s, type %s, seed %" PRIu64,
                     p->name, prm->type, prm->seed);
    if (prm->extra_layers > 0)
        snprintf(desc + o, sizeof desc - (size_t)o, ", %d extra layers scaled by %g", (int)prm->extra_layers,
                 (double)prm->extra_scale);
    mf_status s = gguf_writer_set_str(w, "general.architecture", p->arch);
    if (!s) s = gguf_writer_set_str(w, "general.type", "model");
    if (!s) s = gguf_writer_set_str(w, "general.name", name);
    if (!s) s = gguf_writer_set_str(w, "general.description", desc);
#define AKEY(suffix) (snprintf(key, sizeof key, "%s.%s", p->arch, suffix), key)
    if (!s) s = gguf_writer_set_u32(w, AKEY("block_count"), n_layer);
    if (!s) s = gguf_writer_set_u32(w, AKEY("context_length"), p->n_ctx);
    if (!s) s = gguf_writer_set_u32(w, AKEY("embedding_length"), p->n_embd);
    if (!s) s = gguf_writer_set_u32(w, AKEY("feed_forward_length"), p->n_ff);
    if (!s) s = gguf_writer_set_u32(w, AKEY("attention.head_count"), p->n_head);
    if (!s) s = gguf_writer_set_u32(w, AKEY("attention.head_count_kv"), p->n_head_kv);
    if (!s) s = gguf_writer_set_f32(w, AKEY("rope.freq_base"), p->rope_base);
    if (!s) s = gguf_writer_set_f32(w, AKEY("attention.layer_norm_rms_epsilon"), p->norm_eps);
    if (p->write_head_dim) {
        if (!s) s = gguf_writer_set_u32(w, AKEY("attention.key_length"), p->head_dim);
        if (!s) s = gguf_writer_set_u32(w, AKEY("attention.value_length"), p->head_dim);
    }
    if (!s) s = gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type);
    if (p->llama_keys) {
        if (!s) s = gguf_writer_set_u32(w, AKEY("vocab_size"), p->n_vocab);
        if (!s) s = gguf_writer_set_u32(w, AKEY("rope.dimension_count"), p->head_dim);
    }
#undef AKEY
    return s;
}

/* With extra layers, the preset's own tensors take the types planned for
 * the preset alone: llama-quantize's mixtures depend on a layer's position
 * among n_layer, and the draft (the preset) and the target must share those
 * tensors byte for byte. Names are unique, and the preset's list is a prefix
 * of the longer one in everything but the tensors after the layers, so the
 * match is by name. */
static mf_status keep_preset_types(const synth_preset *p, const qz_options *o, const char *label, const synth_tensor *ts,
                                   int64_t n, qz_choice *ch) {
    synth_tensor *bt = NULL;
    int64_t bn = 0;
    standin bst = {0};
    qz_choice *bch = NULL;
    mf_status s = synth_tensor_list(p, 0, 1.0f, &bt, &bn);
    if (!s) s = make_standin(p, p->n_layer, bt, bn, label, &bst);
    if (!s && !(bch = calloc((size_t)bn, sizeof *bch))) s = mf_err(MF_ERR_NOMEM, "synth: out of memory");
    if (!s) s = qz_plan(&bst.f, o, bch);
    for (int64_t i = 0; !s && i < bn; i++) {
        int64_t j = 0;
        while (j < n && strcmp(ts[j].name, bt[i].name)) j++;
        if (j == n) {
            s = mf_err(MF_ERR_INTERNAL, "synth: tensor '%s' missing with extra layers", bt[i].name);
            break;
        }
        ch[j].type = bch[i].type;
        ch[j].fallback = bch[i].fallback;
        free(ch[j].note);
        ch[j].note = bch[i].note;
        bch[i].note = NULL;
    }
    if (bch) qz_choices_free(bch, (uint64_t)bn);
    free(bch);
    free(bst.f.tensors);
    free(bt);
    return s;
}

static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static mf_status check_params(const mf_synth_params *prm, const char *out, const synth_preset **p, const qz_ftype **ft) {
    if (!prm->preset || !prm->preset[0])
        return mf_err(MF_ERR_INVALID_ARG, "synth: no preset given (presets: %s)", synth_preset_names());
    if (!(*p = synth_preset_find(prm->preset)))
        return mf_err(MF_ERR_INVALID_ARG, "synth: unknown preset '%s' (presets: %s)", prm->preset, synth_preset_names());
    if (!prm->type || !prm->type[0])
        return mf_err(MF_ERR_INVALID_ARG, "synth: no type given (valid: %s)", qz_ftype_names());
    if (!(*ft = qz_ftype_find(prm->type)))
        return mf_err(MF_ERR_INVALID_ARG, "synth: unknown type '%s' (valid: %s)", prm->type, qz_ftype_names());
    if (prm->extra_layers < 0 || prm->extra_layers > MAX_EXTRA_LAYERS)
        return mf_err(MF_ERR_INVALID_ARG, "synth: extra layers must be 0..%d, got %d", MAX_EXTRA_LAYERS,
                      (int)prm->extra_layers);
    if (!isfinite(prm->extra_scale) || prm->extra_scale < 0.0f)
        return mf_err(MF_ERR_INVALID_ARG, "synth: the extra layers' scale must be finite and >= 0, got %g",
                      (double)prm->extra_scale);
    if (!prm->dry_run && (!out || !out[0])) return mf_err(MF_ERR_INVALID_ARG, "synth: no output path given");
    if (!prm->dry_run && prm->vocab_path && same_file(prm->vocab_path, out))
        return mf_err(MF_ERR_INVALID_ARG, "%s: the output would overwrite the vocabulary file", out);
    return MF_OK;
}

mf_status mf_synth(const mf_synth_params *params, const char *out, mf_synth_result *result) {
    const double t0 = mf_now();
    if (!params) return mf_err(MF_ERR_INVALID_ARG, "synth: no parameters given");
    const mf_synth_params *prm = params;
    const synth_preset *p = NULL;
    const qz_ftype *ft = NULL;
    mf_status s = check_params(prm, out, &p, &ft);
    if (s) return s;

    synth_tensor *ts = NULL;
    int64_t n = 0;
    standin st = {0};
    qz_choice *ch = NULL;
    gguf_writer *w = NULL;
    run r = {.p = p, .prm = prm};
    mf_synth_result res = {.arch = p->arch, .file_type = ft->file_type, .n_vocab = (int32_t)p->n_vocab,
                           .n_vocab_source = (int32_t)p->n_vocab};

    const uint32_t n_extra = (uint32_t)prm->extra_layers;
    if ((s = synth_tensor_list(p, n_extra, prm->extra_scale, &ts, &n))) goto done;
    const char *label = out && out[0] ? out : p->name;
    if ((s = make_standin(p, p->n_layer + n_extra, ts, n, label, &st))) goto done;
    if (!(ch = calloc((size_t)n, sizeof *ch))) {
        s = mf_err(MF_ERR_NOMEM, "synth: out of memory");
        goto done;
    }
    qz_options o = {.ft = ft, .pure = false, .out_override = -1, .embd_override = -1};
    if ((s = qz_plan(&st.f, &o, ch))) goto done;
    if (n_extra > 0 && (s = keep_preset_types(p, &o, label, ts, n, ch))) goto done;
    r.ts = ts;
    r.ch = ch;
    r.n_tensors = n;

    /* every tensor's type must have a quantizer; the plan's tell the caller */
    for (int64_t i = 0; i < n; i++) {
        const mf_type_traits *tr = mf_type_traits_ref(ch[i].type);
        if (!tr || !tr->from_float_ref) {
            s = mf_err(MF_ERR_UNSUPPORTED, "synth: tensor '%s': minfer cannot write type %s", ts[i].name,
                       mf_type_name(ch[i].type));
            goto done;
        }
        const uint64_t ne = (uint64_t)(ts[i].ne[0] * ts[i].ne[1]);
        res.n_params += ne;
        res.bytes += mf_row_size(ch[i].type, ts[i].ne[0]) * (uint64_t)ts[i].ne[1];
        res.n_fallback += ch[i].fallback;
        if (ts[i].ne[0] > r.max_row) r.max_row = ts[i].ne[0];
    }
    res.n_tensors = n;
    r.total = res.n_params;
    for (int64_t i = 0; i < n; i++) {
        mf_synth_progress ev = {.event = MF_SYNTH_PLAN, .index = i, .n_tensors = n, .name = ts[i].name,
                                .type = mf_type_name(ch[i].type), .n_dims = ts[i].n_dims,
                                .ne = {ts[i].ne[0], ts[i].ne[1], 1, 1}, .total = r.total};
        if (!emit(prm, &ev)) goto cancelled;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!ch[i].note) continue;
        mf_synth_progress ev = {.event = MF_SYNTH_NOTE, .index = i, .n_tensors = n, .name = ts[i].name,
                                .type = mf_type_name(ch[i].type), .n_dims = ts[i].n_dims,
                                .ne = {ts[i].ne[0], ts[i].ne[1], 1, 1}, .total = r.total, .message = ch[i].note};
        if (!emit(prm, &ev)) goto cancelled;
    }

    if ((s = gguf_writer_new(&w))) goto done;
    if ((s = set_model_keys(w, p, prm, ft->file_type))) goto done;
    if (prm->vocab_path) {
        if ((s = synth_vocab_copy(w, prm->vocab_path, (int32_t)p->n_vocab, p->name, &res.n_vocab_source))) goto done;
        if (res.n_vocab_source < res.n_vocab) {
            char msg[512];
            snprintf(msg, sizeof msg, "vocabulary %s has %d tokens; padded to the preset's %d with unused [PADn] tokens",
                     prm->vocab_path, (int)res.n_vocab_source, (int)res.n_vocab);
            mf_synth_progress ev = {.event = MF_SYNTH_NOTE, .index = -1, .n_tensors = n, .total = r.total,
                                    .message = msg};
            if (!emit(prm, &ev)) goto cancelled;
        }
    } else if ((s = synth_vocab_generate(w, (int32_t)p->n_vocab))) {
        goto done;
    }
    if (prm->chat_template && (s = gguf_writer_set_str(w, "tokenizer.chat_template", prm->chat_template))) goto done;
    if ((s = gguf_writer_set_u32(w, "general.quantization_version", QUANT_VERSION))) goto done;
    for (int64_t i = 0; i < n && !s; i++)
        s = gguf_writer_add_tensor_fn(w, ts[i].name, ch[i].type, ts[i].n_dims, ts[i].ne, write_tensor, &r);
    if (s) goto done;
    res.file_size = gguf_writer_size(w);

    if (!prm->dry_run) {
        if (!(r.pool = mf_pool_new(prm->n_threads))) {
            s = mf_err(MF_ERR_NOMEM, "synth: cannot start %d threads", (int)prm->n_threads);
            goto done;
        }
        r.scratch = malloc((size_t)mf_pool_size(r.pool) * (size_t)r.max_row * sizeof(float));
        if (!r.scratch) {
            s = mf_err(MF_ERR_NOMEM, "synth: out of memory");
            goto done;
        }
        if ((s = gguf_writer_write_file(w, out))) goto done;
    }
    res.seconds = mf_now() - t0;
    if (result) *result = res;
    goto done;

cancelled:
    s = mf_err(MF_ERR_INVALID_ARG, "synth: cancelled by the progress callback");
done:
    if (r.pool) mf_pool_free(r.pool);
    free(r.scratch);
    free(r.buf);
    gguf_writer_free(w);
    if (ch) qz_choices_free(ch, (uint64_t)n);
    free(ch);
    free(st.f.tensors);
    free(ts);
    return s;
}
