/* ops.c - elementwise and row ops of the CPU backend: embedding lookup,
 * RMS/Layer norm, residual add, scale, RoPE, gated activations.
 * Reductions follow ggml's order (sums of squares in double) so results stay
 * close to llama.cpp's; every row is processed by exactly one thread. */
#include "cpu/cpu.h"
#include "cpu/kern/attn/attn_kernels.h"
#include "quant/interleave.h"

#include "quant/fp16.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- embedding rows ---- */

typedef struct rows_task {
    mf_weight w;
    const mf_token *ids;
    int n;
    float *out;
    const mf_cpu *cpu;
} rows_task;

static void get_rows_fn(void *arg, int ith, int nth) {
    rows_task *t = arg;
    const mf_type_traits *tr = mf_cpu_traits(t->cpu, t->w->type);
    const int64_t n_in = t->w->ne[0];
    const size_t row = mf_row_size(t->w->type, n_in);
    long i0, i1;
    mf_split(t->n, ith, nth, &i0, &i1);
    if (mf_cpu_x16(t->w)) {
        /* an interleaved (tied) output head: each row back in the file's
         * layout, a few blocks at a time through a stack buffer (a block
         * group's blocks are at 16 * block bytes apart, so a run of blocks
         * unpacks on its own) */
        const mf_type_geom *g = mf_type_geom_get(t->w->type);
        uint8_t tmp[4096];
        const int64_t nb = n_in / g->blck, per = (int64_t)(sizeof tmp / (size_t)g->size);
        for (long i = i0; i < i1; i++) {
            const size_t id = (size_t)t->ids[i];
            const uint8_t *grp = (const uint8_t *)mf_cpu_x16(t->w) + id / MF_X16 * row * MF_X16;
            for (int64_t b0 = 0; b0 < nb; b0 += per) {
                const int64_t cnt = nb - b0 < per ? nb - b0 : per;
                mf_x16_unpack_row(t->w->type, grp + (size_t)b0 * MF_X16 * (size_t)g->size, (int)(id % MF_X16),
                                  cnt * g->blck, tmp);
                tr->to_float(tmp, t->out + i * n_in + b0 * g->blck, cnt * g->blck);
            }
        }
        return;
    }
    for (long i = i0; i < i1; i++)
        tr->to_float((const uint8_t *)t->w->data + (size_t)t->ids[i] * row, t->out + i * n_in, n_in);
}

void mf_cpu_get_rows(mf_backend *be, mf_weight w, const mf_token *ids, int n, float *out) {
    rows_task t = {w, ids, n, out, (const mf_cpu *)be};
    mf_cpu_run((mf_cpu *)be, get_rows_fn, &t, (size_t)n * (size_t)w->ne[0]);
}

/* ---- norms ---- */

typedef struct norm_task {
    mf_norm_type type;
    const float *x;
    const float *w, *b;
    int rows, n;
    float eps;
    float *out;
} norm_task;

/* y = ((x - mean) * scale) * w + b, each step rounded to float, for rows that
 * do not overlap (restrict lets the compiler vectorise it) */
static void norm_apply(const float *restrict x, float mean, float scale, const float *restrict w,
                       const float *restrict b, int n, float *restrict y) {
    if (w)
        for (int i = 0; i < n; i++) y[i] = ((x[i] - mean) * scale) * w[i];
    else
        for (int i = 0; i < n; i++) y[i] = (x[i] - mean) * scale;
    if (b)
        for (int i = 0; i < n; i++) y[i] += b[i];
}

/* One row (y may be x: Gemma's post-norms, Qwen3's q/k norms). The sums run
 * in double, one term after another, in ggml's order. RMS norm is the
 * mean = 0 case: x - 0 is x exactly. */
static void norm_row(mf_norm_type type, const float *x, const float *w, const float *b, int n, float eps, float *y) {
    float mean = 0.0f, scale;
    if (type == MF_NORM_RMS) {
        double sum = 0;
        for (int i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
        scale = 1.0f / sqrtf((float)(sum / n) + eps);
    } else {
        double sum = 0;
        for (int i = 0; i < n; i++) sum += (double)x[i];
        mean = (float)(sum / n);
        double var = 0;
        for (int i = 0; i < n; i++) {
            const float d = x[i] - mean;
            var += (double)(d * d);
        }
        scale = 1.0f / sqrtf((float)(var / n) + eps);
    }
    if (x != y) {
        norm_apply(x, mean, scale, w, b, n, y);
        return;
    }
    /* in place: through a small copy, so the vectorised pass sees no overlap */
    float tmp[256];
    for (int i0 = 0; i0 < n; i0 += 256) {
        const int m = n - i0 < 256 ? n - i0 : 256;
        memcpy(tmp, x + i0, sizeof(float) * (size_t)m);
        norm_apply(tmp, mean, scale, w ? w + i0 : NULL, b ? b + i0 : NULL, m, y + i0);
    }
}

static void norm_fn(void *arg, int ith, int nth) {
    norm_task *t = arg;
    long r0, r1;
    mf_split(t->rows, ith, nth, &r0, &r1);
    for (long r = r0; r < r1; r++) {
        const float *x = t->x + r * t->n;
        norm_row(t->type, x, t->w, t->b, t->n, t->eps, t->out + r * t->n);
    }
}

void mf_cpu_norm(mf_backend *be, mf_norm_type type, const float *x, mf_weight w, mf_weight b, int rows, int n,
                 float eps, float *out) {
    norm_task t = {type, x, w ? (const float *)w->data : NULL, b ? (const float *)b->data : NULL, rows, n, eps, out};
    mf_cpu_run((mf_cpu *)be, norm_fn, &t, (size_t)rows * (size_t)n);
}

/* ---- elementwise ---- */

typedef struct ew_task {
    float *a;
    const float *b;
    float s;
    size_t n;
} ew_task;

static void add_fn(void *arg, int ith, int nth) {
    ew_task *t = arg;
    long i0, i1;
    mf_split((long)t->n, ith, nth, &i0, &i1);
    for (long i = i0; i < i1; i++) t->a[i] += t->b[i];
}

void mf_cpu_add(mf_backend *be, float *a, const float *b, size_t n) {
    ew_task t = {a, b, 0, n};
    mf_cpu_run((mf_cpu *)be, add_fn, &t, n);
}

static void scale_fn(void *arg, int ith, int nth) {
    ew_task *t = arg;
    long i0, i1;
    mf_split((long)t->n, ith, nth, &i0, &i1);
    for (long i = i0; i < i1; i++) t->a[i] *= t->s;
}

void mf_cpu_scale(mf_backend *be, float *x, float s, size_t n) {
    ew_task t = {x, NULL, s, n};
    mf_cpu_run((mf_cpu *)be, scale_fn, &t, n);
}

/* ---- RoPE ---- */

typedef struct rope_task {
    float *x;
    int n_tok, n_head, head_dim;
    const int32_t *pos;
    const mf_rope_params *p;
} rope_task;

static void rope_fn(void *arg, int ith, int nth) {
    rope_task *t = arg;
    const int n_rot = t->p->n_rot;
    /* theta_i = pos * base^(-2i/n_rot), built by repeated multiplication in
     * float as ggml does, so angles match llama.cpp's bit for bit */
    const float theta_scale = powf(t->p->base, -2.0f / (float)n_rot);
    float cs[4096]; /* n_rot <= head dim <= 4096, checked at load */
    long t0, t1;
    mf_split(t->n_tok, ith, nth, &t0, &t1);
    for (long ti = t0; ti < t1; ti++) {
        float theta = (float)t->pos[ti];
        const float *ff = t->p->freq_factors ? (const float *)t->p->freq_factors->data : NULL;
        const mf_rope_params *rp = t->p;
        for (int i = 0; i < n_rot; i += 2) {
            /* ggml's rope_yarn: the extrapolated angle, its interpolation by
             * freq_scale, and (YaRN) a ramp between them across dimensions */
            const float th_ext = ff ? theta / ff[i / 2] : theta;
            const float th_int = rp->freq_scale * th_ext;
            float th = th_int, mscale = rp->attn_factor;
            if (rp->ext_factor != 0.0f) {
                float y = ((float)(i / 2) - rp->corr_dims[0]) / fmaxf(0.001f, rp->corr_dims[1] - rp->corr_dims[0]);
                const float ramp = (1 - fminf(1, fmaxf(0, y))) * rp->ext_factor;
                th = th_int * (1 - ramp) + th_ext * ramp;
                mscale *= 1.0f + 0.1f * logf(1.0f / rp->freq_scale);
            }
            cs[i] = cosf(th) * mscale;
            cs[i + 1] = sinf(th) * mscale;
            theta *= theta_scale;
        }
        for (int h = 0; h < t->n_head; h++) {
            float *v = t->x + ((size_t)ti * t->n_head + h) * t->head_dim;
            if (t->p->type == MF_ROPE_NEOX) {
                const int half = n_rot / 2;
                for (int i = 0; i < n_rot; i += 2) {
                    const float c = cs[i], s = cs[i + 1];
                    const float x0 = v[i / 2], x1 = v[i / 2 + half];
                    v[i / 2] = x0 * c - x1 * s;
                    v[i / 2 + half] = x0 * s + x1 * c;
                }
            } else {
                for (int i = 0; i < n_rot; i += 2) {
                    const float c = cs[i], s = cs[i + 1];
                    const float x0 = v[i], x1 = v[i + 1];
                    v[i] = x0 * c - x1 * s;
                    v[i + 1] = x0 * s + x1 * c;
                }
            }
        }
    }
}

void mf_cpu_rope(mf_backend *be, float *x, int n_tok, int n_head, int head_dim, const int32_t *pos,
                 const mf_rope_params *p) {
    rope_task t = {x, n_tok, n_head, head_dim, pos, p};
    mf_cpu_run((mf_cpu *)be, rope_fn, &t, (size_t)n_tok * (size_t)n_head * (size_t)head_dim);
}

/* ---- gated activations ---- */

typedef struct glu_task {
    mf_ffn_type act;
    const float *gate, *up;
    size_t n;
    float *out;
    int simd; /* SwiGLU through mf_cpu_swiglu_avx2 (same bits as mf_silu_ref) */
} glu_task;

/* silu(x) = x * sigmoid(x), sigmoid from t = exp(-|x|) <= 1 (so the exp
 * never overflows): 1 / (1 + t) for x >= 0, t / (1 + t) below. The exp is
 * mf_attn_expf, which act_avx2.c evaluates on 8 lanes with the same
 * operations: the two give the same bits. */
float mf_silu_ref(float x) {
    const float t = mf_attn_expf(0.0f - fabsf(x));
    return x * ((x >= 0.0f ? 1.0f : t) / (1.0f + t));
}

static inline float gelu_tanh(float x) {
    const float c = 0.797884560802865355f; /* sqrt(2/pi) */
    return 0.5f * x * (1.0f + tanhf(c * x * (1.0f + 0.044715f * x * x)));
}

/* GELU as llama.cpp evaluates it on the CPU: through a table indexed by the
 * f16 rounding of x, with f16 results, for |x| < 10. Matching this keeps the
 * GELU families within the goldens' tight tolerance (plain f32 GELU differs
 * by up to 0.05 in the logits of a soft-capped model). */
static mf_fp16 g_gelu_table[1 << 16];
static pthread_once_t g_gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void) {
    for (uint32_t i = 0; i < (1u << 16); i++) g_gelu_table[i] = mf_fp32_to_fp16(gelu_tanh(mf_fp16_to_fp32((mf_fp16)i)));
}

static inline float gelu_f16(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return mf_fp16_to_fp32(g_gelu_table[mf_fp32_to_fp16(x)]);
}

static void glu_fn(void *arg, int ith, int nth) {
    glu_task *t = arg;
    long i0, i1;
    mf_split((long)t->n, ith, nth, &i0, &i1);
    if (t->act == MF_FFN_GEGLU)
        for (long i = i0; i < i1; i++) t->out[i] = gelu_f16(t->gate[i]) * t->up[i];
    else if (t->act == MF_FFN_GELU)
        for (long i = i0; i < i1; i++) t->out[i] = gelu_f16(t->gate[i]);
    else if (t->simd)
        mf_cpu_swiglu_avx2(t->gate + i0, t->up + i0, t->out + i0, i1 - i0);
    else
        for (long i = i0; i < i1; i++) t->out[i] = mf_silu_ref(t->gate[i]) * t->up[i];
}

void mf_cpu_glu(mf_backend *be, mf_ffn_type act, const float *gate, const float *up, size_t n, float *out) {
    if (act != MF_FFN_SWIGLU) pthread_once(&g_gelu_once, gelu_table_init);
    glu_task t = {act, gate, up, n, out, ((mf_cpu *)be)->swiglu_simd};
    mf_cpu_run((mf_cpu *)be, glu_fn, &t, n);
}

/* ---- row movement: column slices, gather / scatter, slot sums ---- */

typedef struct rowop_task {
    const float *src;
    float *dst;
    const int32_t *idx;
    const float *scale;
    int rows, n, src_width, col0, k;
    float cap;
} rowop_task;

void mf_cpu_copy_cols(mf_backend *be, const float *src, int src_width, int col0, int n, int rows, float *dst) {
    (void)be; /* a copy of a few KB: not worth waking the pool */
    for (int r = 0; r < rows; r++) memcpy(dst + (size_t)r * n, src + (size_t)r * src_width + col0, sizeof(float) * (size_t)n);
}

void mf_cpu_gather_rows(mf_backend *be, const float *src, const int32_t *idx, int count, int n, float *dst) {
    (void)be;
    for (int i = 0; i < count; i++) memcpy(dst + (size_t)i * n, src + (size_t)idx[i] * n, sizeof(float) * (size_t)n);
}

static void sum_slots_fn(void *arg, int ith, int nth) {
    rowop_task *t = arg;
    long r0, r1;
    mf_split(t->rows, ith, nth, &r0, &r1);
    for (long r = r0; r < r1; r++) {
        const float *a = t->src + (size_t)r * t->k * t->n;
        float *y = t->dst + (size_t)r * t->n;
        for (int j = 0; j < t->n; j++) y[j] = a[j];
        for (int k = 1; k < t->k; k++)
            for (int j = 0; j < t->n; j++) y[j] += a[(size_t)k * t->n + j];
    }
}

void mf_cpu_sum_slots(mf_backend *be, const float *src, int rows, int k, int n, float *out) {
    rowop_task t = {.src = src, .dst = out, .rows = rows, .k = k, .n = n};
    mf_cpu_run((mf_cpu *)be, sum_slots_fn, &t, (size_t)rows * (size_t)k * (size_t)n);
}

static void softcap_fn(void *arg, int ith, int nth) {
    rowop_task *t = arg;
    long i0, i1;
    mf_split(t->rows, ith, nth, &i0, &i1);
    for (long i = i0; i < i1; i++) t->dst[i] = tanhf(t->dst[i] * (1.0f / t->cap)) * t->cap;
}

void mf_cpu_softcap(mf_backend *be, float *x, float cap, size_t n) {
    rowop_task t = {.dst = x, .rows = (int)n, .cap = cap};
    mf_cpu_run((mf_cpu *)be, softcap_fn, &t, n);
}
