/* quantize.c - mf_quantize(): plans every tensor's type (mixture.c), checks
 * that each conversion is possible before anything is written, then streams
 * the tensors into the GGUF writer in input order, converting rows in
 * parallel on a thread pool with the reference quantizers (whose bytes equal
 * llama-quantize's), one chunk of rows in memory at a time. */
#include "minfer.h"
#include "core/log.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "gguf/gguf.h"
#include "gguf/gguf_write.h"
#include "quant/types.h"
#include "quantize/mixture.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

/* Input bytes converted per chunk: bounds the memory held for one tensor
 * (its output chunk) however large the tensor is, while keeping chunks big
 * enough that the pool's hand-off cost does not matter. */
#define CHUNK_BYTES ((size_t)16 << 20)

#define QUANT_VERSION 2 /* ggml's GGML_QNT_VERSION, which llama-quantize records */

/* llama-quantize targets minfer has no quantizer for, to tell "unsupported"
 * apart from "unknown". */
static const char *const g_llama_only[] = {"Q1_0",   "Q2_0",  "MXFP4_MOE", "IQ2_XXS", "IQ2_XS", "IQ2_S",
                                           "IQ2_M",  "IQ1_S", "IQ1_M",     "TQ1_0",   "TQ2_0",  "Q2_K_S",
                                           "IQ3_XXS", "IQ3_S", "IQ3_M",    "IQ3_XS",  "COPY"};

mf_quantize_params mf_quantize_default_params(void) {
    mf_quantize_params p;
    memset(&p, 0, sizeof p);
    p.type = "Q8_0";
    return p;
}

const char *mf_quantize_type_names(void) { return qz_ftype_names(); }

/* ---- the conversion ---- */

typedef struct run {
    const gguf_file *f;
    const char *out_path;
    const mf_quantize_params *p;
    const qz_choice *choices;
    mf_pool *pool;
    int nth;
    float *scratch;   /* nth rows of floats, for inputs that are not f32 */
    uint8_t *buf;     /* one converted chunk */
    size_t buf_cap;
    uint64_t done_in, total_in;
} run;

/* Rows [r0, r0 + nrows) of one tensor, converted into run.buf. */
typedef struct chunk {
    run *r;
    const gguf_tensor *t;
    mf_type to;
    int64_t r0, nrows;
} chunk;

static void convert_rows(void *arg, int ith, int nth) {
    const chunk *c = arg;
    long b, e;
    mf_split((long)c->nrows, ith, nth, &b, &e);
    const int64_t n = c->t->ne[0];
    const size_t in_row = mf_row_size(c->t->type, n), out_row = mf_row_size(c->to, n);
    const mf_type_traits *src = mf_type_traits_ref(c->t->type), *dst = mf_type_traits_ref(c->to);
    float *tmp = c->r->scratch ? c->r->scratch + (size_t)ith * (size_t)n : NULL;
    for (long i = b; i < e; i++) {
        const uint8_t *in = (const uint8_t *)c->t->data + (size_t)(c->r0 + i) * in_row;
        const float *x = (const float *)in; /* the reader guarantees f32 data is 4-aligned */
        if (c->t->type != MF_TYPE_F32) {
            src->to_float(in, tmp, n);
            x = tmp;
        }
        dst->from_float_ref(x, c->r->buf + (size_t)i * out_row, n);
    }
}

static mf_status report(run *r, const gguf_tensor *t, int64_t index, mf_type to, bool done) {
    if (!r->p->progress) return MF_OK;
    mf_quantize_progress ev = {
        .event = MF_QUANTIZE_CHUNK, .index = index, .n_tensors = (int64_t)r->f->n_tensors, .name = t->name,
        .type_in = mf_type_name(t->type), .type_out = mf_type_name(to), .tensor_done = done,
        .done_in = r->done_in, .total_in = r->total_in,
    };
    if (!r->p->progress(&ev, r->p->progress_ud))
        return mf_err(MF_ERR_INVALID_ARG, "%s: cancelled by the progress callback", r->out_path);
    return MF_OK;
}

/* Writer callback: produces tensor wt->index (the writer holds the tensors
 * in input order). */
static mf_status write_tensor(void *ud, const gguf_wtensor *wt, gguf_sink *out) {
    run *r = ud;
    const gguf_tensor *t = &r->f->tensors[wt->index];
    const mf_type to = r->choices[wt->index].type;
    const int64_t n = t->ne[0], rows = t->n_elements / n;
    const size_t in_row = mf_row_size(t->type, n), out_row = mf_row_size(to, n);
    int64_t per = (int64_t)(CHUNK_BYTES / (in_row > out_row ? in_row : out_row));
    if (per < 1) per = 1;
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t nr = rows - r0 < per ? rows - r0 : per;
        mf_status s;
        if (to == t->type) { /* kept as it is */
            s = gguf_sink_write(out, (const uint8_t *)t->data + (size_t)r0 * in_row, (size_t)nr * in_row);
        } else {
            size_t need = (size_t)nr * out_row;
            if (need > r->buf_cap) {
                uint8_t *nb = realloc(r->buf, need);
                if (!nb) return mf_err(MF_ERR_NOMEM, "%s: tensor '%s': out of memory", r->out_path, t->name);
                r->buf = nb;
                r->buf_cap = need;
            }
            chunk c = {r, t, to, r0, nr};
            mf_pool_run(r->pool, convert_rows, &c);
            s = gguf_sink_write(out, r->buf, need);
        }
        if (s) return s;
        r->done_in += (uint64_t)nr * in_row;
        if ((s = report(r, t, (int64_t)wt->index, to, r0 + nr == rows))) return s;
    }
    return MF_OK;
}

/* ---- checks before writing ---- */

static mf_status parse_params(const mf_quantize_params *p, qz_options *o) {
    if (!p->type || !p->type[0]) return mf_err(MF_ERR_INVALID_ARG, "no quantization type given (valid: %s)", qz_ftype_names());
    o->ft = qz_ftype_find(p->type);
    if (!o->ft) {
        for (size_t i = 0; i < sizeof g_llama_only / sizeof g_llama_only[0]; i++) {
            if (!strcasecmp(g_llama_only[i], p->type))
                return mf_err(MF_ERR_UNSUPPORTED, "quantization type '%s' is not supported by minfer (valid: %s)", p->type,
                              qz_ftype_names());
        }
        return mf_err(MF_ERR_INVALID_ARG, "unknown quantization type '%s' (valid: %s)", p->type, qz_ftype_names());
    }
    o->pure = p->pure;
    o->out_override = o->embd_override = -1;
    mf_type t;
    if (p->output_tensor_type) {
        mf_status s = qz_parse_tensor_type(p->output_tensor_type, "output tensor type", &t);
        if (s) return s;
        o->out_override = (int)t;
    }
    if (p->token_embedding_type) {
        mf_status s = qz_parse_tensor_type(p->token_embedding_type, "token embedding type", &t);
        if (s) return s;
        o->embd_override = (int)t;
    }
    return MF_OK;
}

static bool same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Every tensor whose type changes must be readable as floats and writable
 * in its new type; an already-quantized one only with allow_requantize. */
static mf_status check_conversions(const gguf_file *f, const qz_choice *ch, bool allow_requantize, int64_t *max_row) {
    *max_row = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (ch[i].type == t->type) continue;
        const mf_type_traits *dst = mf_type_traits_ref(ch[i].type), *src = mf_type_traits_ref(t->type);
        if (!dst || !dst->from_float_ref)
            return mf_err(MF_ERR_UNSUPPORTED, "%s: tensor '%s': minfer cannot write type %s", f->path, t->name,
                          mf_type_name(ch[i].type));
        if (t->type == MF_TYPE_F32) continue;
        if (qz_type_is_quantized(t->type) && !allow_requantize)
            return mf_err(MF_ERR_INVALID_ARG,
                          "%s: tensor '%s' is already quantized (%s); converting it to %s requires --allow-requantize",
                          f->path, t->name, mf_type_name(t->type), mf_type_name(ch[i].type));
        if (!src || !src->to_float ||
            !(qz_type_is_quantized(t->type) || t->type == MF_TYPE_F16 || t->type == MF_TYPE_BF16))
            return mf_err(MF_ERR_UNSUPPORTED, "%s: tensor '%s': cannot convert type %s to %s", f->path, t->name,
                          mf_type_name(t->type), mf_type_name(ch[i].type));
        if (t->ne[0] > *max_row) *max_row = t->ne[0];
    }
    return MF_OK;
}

static mf_status set_metadata(gguf_writer *w, const gguf_file *f, int32_t file_type) {
    mf_status s = gguf_writer_copy_kv(w, f, NULL, NULL);
    /* removed first so that, as in llama-quantize's output, both keys come last */
    gguf_writer_remove(w, "general.quantization_version");
    gguf_writer_remove(w, "general.file_type");
    if (!s) s = gguf_writer_set_u32(w, "general.quantization_version", QUANT_VERSION);
    if (!s) s = gguf_writer_set_u32(w, "general.file_type", (uint32_t)file_type);
    /* a one-file model: no split bookkeeping */
    gguf_writer_remove(w, "split.no");
    gguf_writer_remove(w, "split.count");
    gguf_writer_remove(w, "split.tensors.count");
    return s;
}

/* Tells the caller (or stderr) about the fallbacks; false = cancelled. */
static bool announce(const gguf_file *f, const qz_choice *ch, const mf_quantize_params *p, uint64_t total_in) {
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        if (!ch[i].note) continue;
        if (!p->progress) {
            mf_log(MF_LOG_WARN, "quantize: %s\n", ch[i].note);
            continue;
        }
        const gguf_tensor *t = &f->tensors[i];
        mf_quantize_progress ev = {
            .event = MF_QUANTIZE_NOTE, .index = (int64_t)i, .n_tensors = (int64_t)f->n_tensors, .name = t->name,
            .type_in = mf_type_name(t->type), .type_out = mf_type_name(ch[i].type), .total_in = total_in,
            .message = ch[i].note,
        };
        if (!p->progress(&ev, p->progress_ud)) return false;
    }
    return true;
}

mf_status mf_quantize(const char *in, const char *out, const mf_quantize_params *params, mf_quantize_result *result) {
    const double t0 = mf_now();
    mf_quantize_params dflt = mf_quantize_default_params();
    const mf_quantize_params *p = params ? params : &dflt;
    if (!in || !out) return mf_err(MF_ERR_INVALID_ARG, "quantize: input and output paths are required");
    qz_options o;
    mf_status s = parse_params(p, &o);
    if (s) return s;
    if (same_file(in, out))
        return mf_err(MF_ERR_INVALID_ARG, "%s: the output would overwrite the input", out);

    gguf_file *f = NULL;
    if ((s = gguf_open(in, &f))) return s;
    gguf_writer *w = NULL;
    qz_choice *ch = NULL;
    run r = {.f = f, .out_path = out, .p = p};
    int64_t max_row = 0;
    mf_quantize_result res = {.file_type = o.ft->file_type, .file_size_in = f->size};

    uint32_t n_split = 1;
    if ((s = gguf_get_u32(f, "split.count", false, &n_split))) goto done;
    if (n_split > 1) {
        s = mf_err(MF_ERR_UNSUPPORTED, "%s: one part of a model split into %u files; merge the parts first", in, n_split);
        goto done;
    }
    ch = calloc(f->n_tensors ? f->n_tensors : 1, sizeof *ch);
    if (!ch) {
        s = mf_err(MF_ERR_NOMEM, "%s: out of memory", in);
        goto done;
    }
    if ((s = qz_plan(f, &o, ch))) goto done;
    r.choices = ch;
    if ((s = check_conversions(f, ch, p->allow_requantize, &max_row))) goto done;

    res.n_tensors = (int64_t)f->n_tensors;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        res.n_elements += (uint64_t)t->n_elements;
        res.bytes_in += t->nbytes;
        res.bytes_out += mf_row_size(ch[i].type, t->ne[0]) * (size_t)(t->n_elements / t->ne[0]);
        res.n_converted += ch[i].type != t->type;
        res.n_fallback += ch[i].fallback;
    }
    r.total_in = res.bytes_in;

    if ((s = gguf_writer_new(&w))) goto done;
    if ((s = set_metadata(w, f, o.ft->file_type))) goto done;
    for (uint64_t i = 0; i < f->n_tensors && !s; i++) {
        const gguf_tensor *t = &f->tensors[i];
        /* shapes are written as ggml holds them, without trailing 1s
         * ([256, 1] becomes [256]), as llama-quantize writes them */
        uint32_t nd = t->n_dims;
        while (nd > 1 && t->ne[nd - 1] == 1) nd--;
        s = gguf_writer_add_tensor_fn(w, t->name, ch[i].type, nd, t->ne, write_tensor, &r);
    }
    if (s) goto done;

    if (!announce(f, ch, p, r.total_in)) {
        s = mf_err(MF_ERR_INVALID_ARG, "%s: cancelled by the progress callback", out);
        goto done;
    }
    r.pool = mf_pool_new(p->n_threads);
    if (!r.pool) {
        s = mf_err(MF_ERR_NOMEM, "cannot start %d threads", (int)p->n_threads);
        goto done;
    }
    r.nth = mf_pool_size(r.pool);
    if (max_row > 0) {
        r.scratch = malloc((size_t)r.nth * (size_t)max_row * sizeof(float));
        if (!r.scratch) {
            s = mf_err(MF_ERR_NOMEM, "%s: out of memory", in);
            goto done;
        }
    }
    if ((s = gguf_writer_write_file(w, out))) goto done;

    res.file_size_out = gguf_writer_size(w);
    res.seconds = mf_now() - t0;
    if (result) *result = res;

done:
    if (r.pool) mf_pool_free(r.pool);
    free(r.scratch);
    free(r.buf);
    gguf_writer_free(w);
    if (ch) qz_choices_free(ch, f->n_tensors);
    free(ch);
    gguf_close(f);
    return s;
}
