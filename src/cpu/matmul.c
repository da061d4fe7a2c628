/* matmul.c - out = x . W^T for a weight of any implemented type.
 *
 * The activation rows are converted once to the weight type's vec_dot_type
 * (f32 stays f32, f16 -> f16, q8_0 -> q8_0, ...), exactly how llama.cpp pairs
 * them, then every output element is one vec_dot. Output rows are split across
 * threads; each element is computed by exactly one thread with a fixed
 * reduction order, so results do not depend on the thread count. */
#include "cpu/cpu.h"

#include <string.h>

typedef struct matmul_task {
    const gguf_tensor *w;
    const mf_type_traits *tr;
    const float *x;
    const uint8_t *xq;     /* converted activations */
    size_t xq_row;         /* bytes per converted row */
    int rows;
    float *out;
} matmul_task;

static void convert_rows(void *arg, int ith, int nth) {
    matmul_task *t = arg;
    const mf_type_traits *vt = mf_type_traits_get(t->tr->vec_dot_type);
    long r0, r1;
    mf_split(t->rows, ith, nth, &r0, &r1);
    const int64_t n = t->w->ne[0];
    for (long r = r0; r < r1; r++) vt->from_float(t->x + r * n, (uint8_t *)t->xq + r * t->xq_row, n);
}

/* rows of W per inner block: keeps a few weight rows hot while sweeping tokens */
#define ROW_BLOCK 16

static void dot_rows(void *arg, int ith, int nth) {
    matmul_task *t = arg;
    const int64_t n_in = t->w->ne[0], n_out = t->w->ne[1];
    const size_t w_row = mf_row_size(t->w->type, n_in);
    const uint8_t *wd = t->w->data;
    long o0, o1;
    mf_split(n_out, ith, nth, &o0, &o1);
    for (long ob = o0; ob < o1; ob += ROW_BLOCK) {
        long oe = ob + ROW_BLOCK < o1 ? ob + ROW_BLOCK : o1;
        for (int r = 0; r < t->rows; r++) {
            const uint8_t *xr = t->xq + (size_t)r * t->xq_row;
            float *y = t->out + (size_t)r * n_out;
            for (long o = ob; o < oe; o++) t->tr->vec_dot((int)n_in, &y[o], wd + (size_t)o * w_row, xr);
        }
    }
}

void mf_cpu_matmul(mf_backend *be, mf_weight w, const float *x, int rows, float *out) {
    mf_cpu *cpu = (mf_cpu *)be;
    matmul_task t = {.w = w, .tr = mf_type_traits_get(w->type), .x = x, .rows = rows, .out = out};
    if (t.tr->vec_dot_type == MF_TYPE_F32) {
        t.xq = (const uint8_t *)x;
        t.xq_row = (size_t)w->ne[0] * sizeof(float);
    } else {
        t.xq_row = mf_row_size(t.tr->vec_dot_type, w->ne[0]);
        t.xq = cpu->act_buf; /* sized at creation for the widest row of the largest batch */
        mf_pool_run(cpu->pool, convert_rows, &t);
    }
    mf_pool_run(cpu->pool, dot_rows, &t);
}
