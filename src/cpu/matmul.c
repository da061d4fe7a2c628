/* matmul.c - out = x . W^T for weights of any implemented type.
 *
 * The activation rows are converted once to the weight type's vec_dot_type
 * (f32 stays f32, f16 -> f16, q8_0 -> q8_0, K-quants -> q8_K ...), exactly how
 * llama.cpp pairs them, then every output element is one vec_dot.
 *
 * Several weights that read the same input (Q/K/V, gate/up) go through one
 * call: the input is converted once per distinct vec_dot_type and the output
 * rows of all of them are split across threads in a single dispatch. Each
 * output element is computed by exactly one thread with a fixed reduction
 * order, so results do not depend on the thread count. */
#include "cpu/cpu.h"

#include <string.h>

#define MAX_W 4

typedef struct matmul_task {
    int nw;
    const gguf_tensor *w[MAX_W];
    const mf_type_traits *tr[MAX_W];
    const uint8_t *xq[MAX_W];  /* converted activations for weight i */
    size_t xq_row[MAX_W];      /* bytes per converted row */
    float *out[MAX_W];
    long row0[MAX_W + 1];      /* prefix sums of output rows: weight i owns [row0[i], row0[i+1]) */
    /* conversions to run: input x to type conv_type[c] into conv_dst[c] */
    const float *x;
    int n_in, rows, n_conv;
    mf_type conv_type[MAX_W];
    uint8_t *conv_dst[MAX_W];
    size_t conv_row[MAX_W];
} matmul_task;

static void convert_rows(void *arg, int ith, int nth) {
    matmul_task *t = arg;
    /* split (conversion, row) pairs so a single-row decode still spreads */
    long n = (long)t->n_conv * t->rows, j0, j1;
    mf_split(n, ith, nth, &j0, &j1);
    for (long j = j0; j < j1; j++) {
        const int c = (int)(j / t->rows), r = (int)(j % t->rows);
        mf_type_traits_get(t->conv_type[c])->from_float(t->x + (size_t)r * t->n_in, t->conv_dst[c] + (size_t)r * t->conv_row[c],
                                                        t->n_in);
    }
}

/* rows of W per inner block: keeps a few weight rows hot while sweeping tokens */
#define ROW_BLOCK 16

static void dot_rows(void *arg, int ith, int nth) {
    matmul_task *t = arg;
    long o0, o1;
    mf_split(t->row0[t->nw], ith, nth, &o0, &o1);
    for (int wi = 0; wi < t->nw; wi++) {
        /* the part of this thread's range that falls in weight wi */
        long a = o0 > t->row0[wi] ? o0 : t->row0[wi], b = o1 < t->row0[wi + 1] ? o1 : t->row0[wi + 1];
        if (a >= b) continue;
        a -= t->row0[wi];
        b -= t->row0[wi];
        const gguf_tensor *w = t->w[wi];
        const int64_t n_in = w->ne[0], n_out = w->ne[1];
        const size_t w_row = mf_row_size(w->type, n_in);
        const uint8_t *wd = w->data;
        const mf_vec_dot_fn dot = t->tr[wi]->vec_dot;
        for (long ob = a; ob < b; ob += ROW_BLOCK) {
            long oe = ob + ROW_BLOCK < b ? ob + ROW_BLOCK : b;
            for (int r = 0; r < t->rows; r++) {
                const uint8_t *xr = t->xq[wi] + (size_t)r * t->xq_row[wi];
                float *y = t->out[wi] + (size_t)r * n_out;
                for (long o = ob; o < oe; o++) dot((int)n_in, &y[o], wd + (size_t)o * w_row, xr);
            }
        }
    }
}

void mf_cpu_matmul_n(mf_backend *be, const mf_weight *w, int nw, const float *x, int rows, float *const *out) {
    mf_cpu *cpu = (mf_cpu *)be;
    matmul_task t = {.nw = nw, .x = x, .n_in = (int)w[0]->ne[0], .rows = rows};
    t.row0[0] = 0;
    size_t used = 0;
    for (int i = 0; i < nw; i++) {
        t.w[i] = w[i];
        t.tr[i] = mf_type_traits_get(w[i]->type);
        t.out[i] = out[i];
        t.row0[i + 1] = t.row0[i] + w[i]->ne[1];
        const mf_type vt = t.tr[i]->vec_dot_type;
        if (vt == MF_TYPE_F32) {
            t.xq[i] = (const uint8_t *)x;
            t.xq_row[i] = (size_t)t.n_in * sizeof(float);
            continue;
        }
        int c = 0;
        while (c < t.n_conv && t.conv_type[c] != vt) c++;
        if (c == t.n_conv) {
            /* act_buf holds one converted copy of the widest batch per weight slot */
            t.conv_type[c] = vt;
            t.conv_row[c] = mf_row_size(vt, t.n_in);
            t.conv_dst[c] = cpu->act_buf + used;
            used += ((t.conv_row[c] * (size_t)rows) + 63) & ~(size_t)63;
            t.n_conv++;
        }
        t.xq[i] = t.conv_dst[c];
        t.xq_row[i] = t.conv_row[c];
    }
    if (used > cpu->act_cap) {
        /* more distinct conversions than the buffer holds: one weight at a time */
        for (int i = 0; i < nw; i++) mf_cpu_matmul_n(be, &w[i], 1, x, rows, &out[i]);
        return;
    }
    if (t.n_conv) mf_pool_run(cpu->pool, convert_rows, &t);
    mf_pool_run(cpu->pool, dot_rows, &t);
}

void mf_cpu_matmul(mf_backend *be, mf_weight w, const float *x, int rows, float *out) {
    mf_cpu_matmul_n(be, &w, 1, x, rows, &out);
}
