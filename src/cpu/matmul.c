/* matmul.c - out = x . W^T for weights of any implemented type.
 *
 * Two paths, with bitwise-equal results (gemm.h says how):
 * - vec_dot: the activation rows are converted once to the weight type's
 *   vec_dot_type (f32 stays f32, f16 -> f16, q8_0 -> q8_0, K-quants -> q8_K
 *   ...), exactly how llama.cpp pairs them, then every output element is one
 *   vec_dot. Decode (one row) and types without a GEMM take it.
 * - GEMM: for batches of at least the kind's min_rows rows, the activations are
 *   converted the same way into token tiles, and each thread packs a range of
 *   weight panels (decoding each weight block once per call instead of once
 *   per token) and runs the register-blocked kernel over every tile.
 *
 * Several weights that read the same input (Q/K/V, gate/up) go through one
 * call: the input is converted once per distinct activation layout, and the
 * outputs of all of them are split across threads in a single dispatch. Each
 * output element is computed by exactly one thread with a fixed reduction
 * order, so results do not depend on the thread count or the split. */
#include "cpu/cpu.h"
#include "core/alloc.h"
#include "core/log.h"
#include "cpu/kern/gemm/gemm.h"
#include "quant/interleave.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define MAX_W 4


typedef struct tileset {
    mf_gemm_act act;
    int nt, ntiles;
    size_t bytes; /* of one tile */
    uint8_t *base;
} tileset;

typedef struct matmul_task {
    const mf_cpu *cpu;
    int nw;
    const mf_tensor *w[MAX_W];
    const mf_type_traits *tr[MAX_W];
    float *out[MAX_W];
    /* epilogue: out[i] += bias[i] per row (NULL: none), then res += out[0] */
    const float *bias[MAX_W];
    float *res;
    bool epilogue;
    const float *x;
    int n_in, rows;
    /* vec_dot path: converted activations for weight i (one row of
     * xq_row bytes per token), and its units in the shared unit space */
    const uint8_t *xq[MAX_W];
    size_t xq_row[MAX_W];
    long vunit0[MAX_W + 1]; /* prefix sums of vec_dot units (VD_UNIT rows) per weight */
    long min_units;         /* smallest run claimed (about VD_MIN_BYTES of weights) */
    int n_conv;
    mf_type conv_type[MAX_W];
    uint8_t *conv_dst[MAX_W];
    size_t conv_row[MAX_W];
    /* conv_span != 0: each thread converts the rows itself; thread ith > 0
     * into conv_copies + (ith - 1) * conv_span (the same offsets as thread
     * 0's conv_dst[] from conv_dst[0]) */
    size_t conv_span;
    uint8_t *conv_copies;
    bool xq_conv[MAX_W]; /* weight i reads a conversion (not x itself) */
    /* GEMM path: kind and tile set of weight i (NULL: vec_dot), the units
     * (groups of rows_per_call rows) it owns in the unit split */
    const mf_gemm_kind *g[MAX_W];
    int ts_of[MAX_W];
    long unit0[MAX_W + 1];
    int n_ts;
    tileset ts[MAX_W];
    uint8_t *scratch;   /* per thread: one converted row, then the panels of a chunk */
    size_t scratch_per_thread, tmp_bytes;
    size_t unpack_off;  /* in a thread's panel area: room for one panel of rows unpacked from x16 */
    long chunk_groups;  /* panel groups per chunk */
    long chunk0[MAX_W + 1]; /* prefix sums of chunks per weight */
    /* work handed out by counters, not by a fixed split: the cores of a
     * shared machine are not equally fast, and a fixed split waits for the
     * slowest (every output element is computed the same way whichever
     * thread takes its chunk, so results do not change) */
    atomic_long next_tile, next_chunk, next_unit;
} matmul_task;

/* vec_dot work is handed out in units of this many rows: a group of an
 * interleaved weight (MF_X16), or ROW_BLOCK plain rows */
#define VD_UNIT 16
#define VD_MIN_BYTES (32 * 1024)
/* batches of at most this many rows skip the separate conversion job */
#define CONV_EACH_ROWS 4
_Static_assert(VD_UNIT == MF_X16, "a vec_dot unit is one interleaved group");

static void convert_rows(void *arg, int ith, int nth) {
    matmul_task *t = arg;
    /* tiles: split (tile set, tile) pairs */
    long nt_all = 0;
    for (int s = 0; s < t->n_ts; s++) nt_all += t->ts[s].ntiles;
    long j0, j1;
    uint8_t *tmp = t->scratch + (size_t)ith * t->scratch_per_thread;
    for (long j; (j = atomic_fetch_add_explicit(&t->next_tile, 1, memory_order_relaxed)) < nt_all;) {
        int s = 0;
        long i = j;
        while (i >= t->ts[s].ntiles) i -= t->ts[s++].ntiles;
        const tileset *ts = &t->ts[s];
        const int tok0 = (int)i * ts->nt;
        const int ntok = t->rows - tok0 < ts->nt ? t->rows - tok0 : ts->nt;
        mf_gemm_tile_build(ts->act, ts->nt, t->x + (size_t)tok0 * t->n_in, (size_t)t->n_in, ntok, t->n_in,
                           mf_cpu_traits(t->cpu, mf_gemm_act_type(ts->act))->from_float, tmp, ts->base + (size_t)i * ts->bytes);
    }
    /* rows for the vec_dot path: split (conversion, row) pairs so a
     * single-row decode still spreads */
    mf_split((long)t->n_conv * t->rows, ith, nth, &j0, &j1);
    for (long j = j0; j < j1; j++) {
        const int c = (int)(j / t->rows), r = (int)(j % t->rows);
        mf_cpu_traits(t->cpu, t->conv_type[c])->from_float(t->x + (size_t)r * t->n_in,
                                                           t->conv_dst[c] + (size_t)r * t->conv_row[c], t->n_in);
    }
}

/* rows of W per inner block: keeps a few weight rows hot while sweeping tokens */
#define ROW_BLOCK VD_UNIT

/* Weight bytes a thread packs before sweeping the tiles over them: a tile
 * is then read from cache by every panel group of the chunk instead of
 * from memory by each (F16 tiles are large: 2 bytes per token and column).
 * Chunks are also the unit of work handed to threads, so a call is cut into
 * at least MF_GEMM_CHUNKS_PER_THREAD per thread for balance. */
#define MF_GEMM_CHUNK_BYTES (256 * 1024)
#define MF_GEMM_CHUNKS_PER_THREAD 4

/* MINFER_GEMM_CHUNK_KB=N overrides the chunk size, for A/B. */
static size_t gemm_chunk_bytes(void) {
    static atomic_long v; /* 0: not read yet */
    long n = atomic_load(&v);
    if (!n) {
        const char *e = getenv("MINFER_GEMM_CHUNK_KB");
        n = e && atol(e) > 0 ? atol(e) * 1024 : MF_GEMM_CHUNK_BYTES;
        atomic_store(&v, n);
    }
    return (size_t)n;
}

/* One chunk: pack up to chunk_groups panel groups of weight wi, then sweep
 * every tile over them. */
static void gemm_chunk(matmul_task *t, int wi, long c0, long c1, uint8_t *panels) {
    const mf_gemm_kind *g = t->g[wi];
    const mf_tensor *w = t->w[wi];
    const int64_t k = w->ne[0], n_out = w->ne[1];
    const size_t w_row = mf_row_size(w->type, k), pb = g->panel_bytes(k);
    const int npan = g->rows_per_call / g->panel_rows;
    const size_t group = pb * (size_t)npan;
    const tileset *ts = &t->ts[t->ts_of[wi]];
    for (long u = c0; u < c1; u++) {
        const long r0 = u * g->rows_per_call;
        const int nrows = (int)(n_out - r0 < g->rows_per_call ? n_out - r0 : g->rows_per_call);
        for (int p = 0; p < npan; p++) {
            int n = nrows - p * g->panel_rows;
            n = n < 0 ? 0 : n > g->panel_rows ? g->panel_rows : n;
            const long pr0 = r0 + (long)p * g->panel_rows;
            const uint8_t *src = (const uint8_t *)w->data + (size_t)pr0 * w_row * (n > 0);
            if (mf_cpu_x16(w) && g->pack_x16) {
                g->pack_x16(mf_cpu_x16(w), pr0, n, k, panels + (size_t)(u - c0) * group + (size_t)p * pb);
                continue;
            }
            if (mf_cpu_x16(w) && n > 0) {
                /* interleaved weights: the panel's rows back in the file's layout first */
                uint8_t *tmp = panels + t->unpack_off;
                for (int i = 0; i < n; i++) {
                    const long row = pr0 + i;
                    mf_x16_unpack_row(w->type, (const uint8_t *)mf_cpu_x16(w) + (size_t)(row / MF_X16) * w_row * MF_X16,
                                      (int)(row % MF_X16), k, tmp + (size_t)i * w_row);
                }
                src = tmp;
            }
            g->pack(src, w_row, n, k, panels + (size_t)(u - c0) * group + (size_t)p * pb);
        }
    }
    if (g->kernel_tiles) {
        /* tile blocks outside, groups inside: the block's activations stay in
         * L2 across the chunk's groups, and within a call each weight tile
         * is loaded once for all the block's tokens (gemm_amx_kq.h) */
        const int tpc = g->tiles_per_call > 0 ? g->tiles_per_call : 1;
        for (int i0 = 0; i0 < ts->ntiles; i0 += tpc) {
            const int n = ts->ntiles - i0 < tpc ? ts->ntiles - i0 : tpc;
            const int tok0 = i0 * ts->nt;
            const int ntok = t->rows - tok0 < n * ts->nt ? t->rows - tok0 : n * ts->nt;
            for (long u = c0; u < c1; u++) {
                const long r0 = u * g->rows_per_call;
                const int nrows = (int)(n_out - r0 < g->rows_per_call ? n_out - r0 : g->rows_per_call);
                g->kernel_tiles(panels + (size_t)(u - c0) * group, pb, ts->base + (size_t)i0 * ts->bytes, ts->bytes, n,
                                k, t->out[wi] + (size_t)tok0 * n_out + r0, (size_t)n_out, nrows, ntok);
            }
        }
        return;
    }
    for (int i = 0; i < ts->ntiles; i++) {
        const int tok0 = i * ts->nt;
        const int ntok = t->rows - tok0 < ts->nt ? t->rows - tok0 : ts->nt;
        for (long u = c0; u < c1; u++) {
            const long r0 = u * g->rows_per_call;
            const int nrows = (int)(n_out - r0 < g->rows_per_call ? n_out - r0 : g->rows_per_call);
            g->kernel(panels + (size_t)(u - c0) * group, pb, ts->base + (size_t)i * ts->bytes, k,
                      t->out[wi] + (size_t)tok0 * n_out + r0, (size_t)n_out, nrows, ntok);
        }
    }
}

static void gemm_units(matmul_task *t, int ith) {
    uint8_t *panels = t->scratch + (size_t)ith * t->scratch_per_thread + t->tmp_bytes;
    for (long c; (c = atomic_fetch_add_explicit(&t->next_chunk, 1, memory_order_relaxed)) < t->chunk0[t->nw];) {
        int wi = 0;
        while (c >= t->chunk0[wi + 1]) wi++;
        const long u0 = (c - t->chunk0[wi]) * t->chunk_groups, groups = t->unit0[wi + 1] - t->unit0[wi];
        gemm_chunk(t, wi, u0, u0 + t->chunk_groups < groups ? u0 + t->chunk_groups : groups, panels);
    }
}

/* Outputs [o0, o1) of token row r of weight wi: the bias, then the residual
 * add, each one float add per element as the separate ops did them. */
static void epilogue(const matmul_task *t, int wi, int r, long o0, long o1) {
    const size_t n_out = (size_t)t->w[wi]->ne[1];
    float *y = t->out[wi] + (size_t)r * n_out;
    const float *b = t->bias[wi];
    if (b)
        for (long o = o0; o < o1; o++) y[o] += b[o];
    if (wi == 0 && t->res) {
        float *z = t->res + (size_t)r * n_out;
        for (long o = o0; o < o1; o++) z[o] += y[o];
    }
}

/* The epilogue as its own job, after a GEMM (split by token rows). */
static void epilogue_rows(void *arg, int ith, int nth) {
    const matmul_task *t = arg;
    long r0, r1;
    mf_split(t->rows, ith, nth, &r0, &r1);
    for (int wi = 0; wi < t->nw; wi++)
        for (long r = r0; r < r1; r++) epilogue(t, wi, (int)r, 0, t->w[wi]->ne[1]);
}

/* See x16_gemm_min. */
#define X16_GEMM_MIN 64

/* How far ahead of the row being read a one-token decode prefetches. */
#define PF_BYTES 4096

/* The vec_dot rows [a, b) of weight wi (whole groups of 16 for interleaved
 * weights, whose row counts are multiples of 16). */
static void dot_range(matmul_task *t, int wi, const uint8_t *xq, long a, long b) {
    const mf_tensor *w = t->w[wi];
    const int64_t n_in = w->ne[0], n_out = w->ne[1];
    const size_t w_row = mf_row_size(w->type, n_in);
    if (mf_cpu_x16(w)) {
        const mf_vec_dot_x16_fn dot16 = t->tr[wi]->vec_dot_x16;
        const size_t grp = w_row * MF_X16;
        for (long g = a / MF_X16; g < b / MF_X16; g++)
            for (int r = 0; r < t->rows; r++) {
                dot16((int)n_in, t->out[wi] + (size_t)r * n_out + (size_t)g * MF_X16,
                      (const uint8_t *)mf_cpu_x16(w) + (size_t)g * grp, xq + (size_t)r * t->xq_row[wi]);
                if (t->epilogue) epilogue(t, wi, r, g * MF_X16, (g + 1) * MF_X16);
            }
        return;
    }
    const uint8_t *wd = w->data;
    /* one vec_dot per row: a decode streams the weights from memory, and
     * row after row is one sequential stream. (vec_dot_rows, 8 rows at
     * once, measured 10-15% slower here on weights that do not fit the
     * caches, though faster on cached ones.) */
    const mf_vec_dot_fn dot = t->tr[wi]->vec_dot;
    const long pf_rows = w_row >= PF_BYTES ? 1 : (long)(PF_BYTES / w_row);
    /* several tokens (a batched decode): each weight row against up to
     * MF_DOT_COLS of them at once, its blocks decoded once (same bits) */
    const mf_vec_dot_cols_fn cols = t->rows > 1 ? t->tr[wi]->vec_dot_cols : NULL;
    for (long ob = a; ob < b; ob += ROW_BLOCK) {
        long oe = ob + ROW_BLOCK < b ? ob + ROW_BLOCK : b;
        if (cols) {
            for (long o = ob; o < oe; o++)
                for (int r = 0; r < t->rows; r += MF_DOT_COLS) {
                    const int nc = t->rows - r < MF_DOT_COLS ? t->rows - r : MF_DOT_COLS;
                    cols((int)n_in, t->out[wi] + (size_t)r * n_out + (size_t)o, (size_t)n_out, wd + (size_t)o * w_row,
                         xq + (size_t)r * t->xq_row[wi], t->xq_row[wi], nc);
                }
            if (t->epilogue)
                for (int r = 0; r < t->rows; r++) epilogue(t, wi, r, ob, oe);
            continue;
        }
        for (int r = 0; r < t->rows; r++) {
            const uint8_t *xr = xq + (size_t)r * t->xq_row[wi];
            float *y = t->out[wi] + (size_t)r * n_out;
            for (long o = ob; o < oe; o++) {
                /* the hardware prefetchers alone leave a core's stream well
                 * below the memory's speed (AVX2, plain layout: 1 thread read
                 * 5 GB/s); ask for a few KiB ahead. The batched columns path
                 * above measured no gain from it: it does 4x the work per byte */
                if (o + pf_rows < b) {
                    const uint8_t *ahead = wd + (size_t)(o + pf_rows) * w_row;
                    for (size_t l = 0; l < w_row; l += 64) __builtin_prefetch(ahead + l, 0, 0);
                }
                dot((int)n_in, &y[o], wd + (size_t)o * w_row, xr);
            }
            if (t->epilogue) epilogue(t, wi, r, ob, oe);
        }
    }
}

/* vec_dot units are handed out in two stages. Each thread first takes a
 * fixed contiguous share, STATIC_NUM/STATIC_DEN of an equal split, which it
 * streams as one sequential run; the rest is claimed from an atomic counter
 * in runs that shrink as it drains (guided scheduling), so the threads still
 * finish together when one core of a shared machine runs slower. */
#define STATIC_NUM 3
#define STATIC_DEN 4

static long static_share(const matmul_task *t, int nth) {
    return t->vunit0[t->nw] * STATIC_NUM / STATIC_DEN / nth;
}

static bool claim_units(matmul_task *t, int nth, long *u0, long *u1) {
    const long total = t->vunit0[t->nw];
    long cur = atomic_load_explicit(&t->next_unit, memory_order_relaxed);
    for (;;) {
        if (cur >= total) return false;
        long n = (total - cur) / (2L * nth);
        if (n < t->min_units) n = t->min_units;
        if (n > total - cur) n = total - cur;
        if (atomic_compare_exchange_weak_explicit(&t->next_unit, &cur, cur + n, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            *u0 = cur;
            *u1 = cur + n;
            return true;
        }
    }
}

/* vec_dot units [u0, u1) over the weights they fall in */
static void dot_units(matmul_task *t, const uint8_t *const *xq, long u0, long u1) {
    for (int wi = 0; wi < t->nw; wi++) {
        const long a = u0 > t->vunit0[wi] ? u0 : t->vunit0[wi], b = u1 < t->vunit0[wi + 1] ? u1 : t->vunit0[wi + 1];
        if (a >= b) continue;
        const long n_out = t->w[wi]->ne[1], r1 = (b - t->vunit0[wi]) * VD_UNIT;
        dot_range(t, wi, xq[wi], (a - t->vunit0[wi]) * VD_UNIT, r1 < n_out ? r1 : n_out);
    }
}

static void dot_rows(void *arg, int ith, int nth) {
    matmul_task *t = arg;
    if (t->unit0[t->nw]) {
        gemm_units(t, ith);
        mf_gemm_fence(); /* the kernels' non-temporal stores, before the pool's barrier */
    }
    /* this thread's converted activations */
    const uint8_t *xq[MAX_W];
    for (int wi = 0; wi < t->nw; wi++) xq[wi] = t->xq[wi];
    if (t->conv_span && ith > 0) {
        uint8_t *mine = t->conv_copies + (size_t)(ith - 1) * t->conv_span;
        for (int wi = 0; wi < t->nw; wi++)
            if (t->xq_conv[wi]) xq[wi] = mine + (t->xq[wi] - t->conv_dst[0]);
    }
    if (t->conv_span)
        for (int c = 0; c < t->n_conv; c++) {
            uint8_t *dst = ith ? t->conv_copies + (size_t)(ith - 1) * t->conv_span + (t->conv_dst[c] - t->conv_dst[0])
                               : t->conv_dst[c];
            for (int r = 0; r < t->rows; r++)
                mf_cpu_traits(t->cpu, t->conv_type[c])->from_float(t->x + (size_t)r * t->n_in,
                                                                   dst + (size_t)r * t->conv_row[c], t->n_in);
        }
    const long share = static_share(t, nth);
    dot_units(t, xq, (long)ith * share, (long)(ith + 1) * share);
    for (long u0, u1; claim_units(t, nth, &u0, &u1);) dot_units(t, xq, u0, u1);
}

static inline size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Interleaved (x16) weights below this many rows skip the GEMM: the x16
 * decode kernel keeps a 16-row group in cache while every row of the batch
 * reads it (one pass over memory), whereas a GEMM without an x16 packer
 * must unpack the rows first. The min_rows crossovers of the kinds were
 * measured on the file layout; on x16 Q8_0 weights (AVX-512 VNNI, 8 threads)
 * the decode kernel won at every batch from 2 to 32 rows, by 1.4-4.6x
 * (docs/PERFORMANCE.md). MINFER_X16_GEMM_MIN=N moves the line, for A/B. */
static int x16_gemm_min(void) {
    static atomic_int v; /* 0: not read yet */
    int n = atomic_load(&v);
    if (!n) {
        const char *e = getenv("MINFER_X16_GEMM_MIN");
        n = e && atoi(e) > 0 ? atoi(e) : X16_GEMM_MIN;
        atomic_store(&v, n);
    }
    return n;
}

/* --verbose: name each GEMM kind the first time a process uses it */
static atomic_int g_said[MF_TYPE_COUNT];
static atomic_int g_said_nomem;

/* types the AMX bf16 kind takes (gemm_amx.h) */
static bool bf16_kind_type(mf_type t) { return t == MF_TYPE_F16 || t == MF_TYPE_BF16; }

void mf_cpu_matmul_n(mf_backend *be, const mf_weight *w, const mf_weight *b, int nw, const float *x, int rows,
                     float *const *out, float *res) {
    mf_cpu *cpu = (mf_cpu *)be;
    matmul_task t = {.cpu = cpu, .nw = nw, .x = x, .n_in = (int)w[0]->ne[0], .rows = rows, .res = res};
    t.epilogue = t.res != NULL;
    for (int i = 0; i < nw; i++) {
        t.bias[i] = b && b[i] ? (const float *)b[i]->data : NULL;
        t.epilogue |= t.bias[i] != NULL;
        t.w[i] = w[i];
        t.tr[i] = mf_cpu_traits(cpu, w[i]->type);
        t.out[i] = out[i];
        /* each kind's own crossover with vec_dot (gemm.h): below it, decoding
         * a weight block per token is cheaper than packing the panels */
        const mf_gemm_kind *g = rows > 1 && !cpu->ref ? mf_gemm_pick(w[i]->type, rows) : NULL;
        if (g && (t.n_in % g->k_multiple || rows < g->min_rows)) g = NULL;
        if (g && !g->pack_x16 && mf_cpu_x16(w[i]) && rows < x16_gemm_min()) g = NULL;
        t.g[i] = g;
    }
    size_t used = 0;
    bool grown = false;
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0 plans the GEMM; if its buffers do not fit, pass 1 plans
         * everything on the vec_dot path */
        size_t tmp_bytes = 0, group_bytes = 0;
        used = 0;
        t.n_ts = t.n_conv = 0;
        t.vunit0[0] = t.unit0[0] = 0;
        size_t vd_bytes = 0, vd_units = 0;
        for (int i = 0; i < nw; i++) {
            const mf_gemm_kind *g = t.g[i];
            const long vu = g ? 0 : (long)((w[i]->ne[1] + VD_UNIT - 1) / VD_UNIT);
            t.vunit0[i + 1] = t.vunit0[i] + vu;
            vd_units += (size_t)vu;
            vd_bytes += g ? 0 : mf_row_size(w[i]->type, t.n_in) * (size_t)w[i]->ne[1];
            t.unit0[i + 1] = t.unit0[i] + (g ? (w[i]->ne[1] + g->rows_per_call - 1) / g->rows_per_call : 0);
            if (g) {
                int s = 0;
                while (s < t.n_ts && (t.ts[s].act != g->act || t.ts[s].nt != g->nt)) s++;
                if (s == t.n_ts) {
                    tileset *ts = &t.ts[t.n_ts++];
                    ts->act = g->act;
                    ts->nt = g->nt;
                    ts->ntiles = (rows + g->nt - 1) / g->nt;
                    ts->bytes = align64(mf_gemm_tile_bytes(g->act, g->nt, t.n_in));
                    ts->base = cpu->act_buf + used;
                    used += ts->bytes * (size_t)ts->ntiles;
                    const size_t tb = mf_gemm_tile_tmp_bytes(g->act, g->nt, t.n_in);
                    if (tb > tmp_bytes) tmp_bytes = tb;
                }
                t.ts_of[i] = s;
                const size_t pb = g->panel_bytes(t.n_in) * (size_t)(g->rows_per_call / g->panel_rows);
                if (pb > group_bytes) group_bytes = pb;
                continue;
            }
            const mf_type vt = t.tr[i]->vec_dot_type;
            if (vt == MF_TYPE_F32) {
                t.xq_conv[i] = false;
                t.xq[i] = (const uint8_t *)x;
                t.xq_row[i] = (size_t)t.n_in * sizeof(float);
                continue;
            }
            int c = 0;
            while (c < t.n_conv && t.conv_type[c] != vt) c++;
            if (c == t.n_conv) {
                t.conv_type[c] = vt;
                t.conv_row[c] = mf_row_size(vt, t.n_in);
                t.conv_dst[c] = cpu->act_buf + used;
                used += align64(t.conv_row[c] * (size_t)rows);
                t.n_conv++;
            }
            t.xq[i] = t.conv_dst[c];
            t.xq_row[i] = t.conv_row[c];
            t.xq_conv[i] = true;
        }
        t.min_units = vd_units ? (long)(VD_MIN_BYTES / (vd_bytes / vd_units + 1)) : 1;
        if (t.min_units < 1) t.min_units = 1;
        t.tmp_bytes = align64(tmp_bytes);
        t.chunk_groups = group_bytes ? (long)(gemm_chunk_bytes() / group_bytes) : 1;
        const long fair = (t.unit0[nw] + (long)MF_GEMM_CHUNKS_PER_THREAD * cpu->n_threads - 1) /
                          ((long)MF_GEMM_CHUNKS_PER_THREAD * cpu->n_threads);
        if (t.chunk_groups > fair) t.chunk_groups = fair;
        if (t.chunk_groups < 1) t.chunk_groups = 1;
        t.chunk0[0] = 0;
        for (int i = 0; i < nw; i++)
            t.chunk0[i + 1] = t.chunk0[i] + (t.unit0[i + 1] - t.unit0[i] + t.chunk_groups - 1) / t.chunk_groups;
        size_t unpack_bytes = 0;
        for (int i = 0; i < nw; i++)
            if (t.g[i] && mf_cpu_x16(w[i]) && !t.g[i]->pack_x16) { /* kinds that pack from x16 need no room */
                const size_t ub = mf_row_size(w[i]->type, t.n_in) * (size_t)t.g[i]->panel_rows;
                if (ub > unpack_bytes) unpack_bytes = ub;
            }
        t.unpack_off = align64(group_bytes * (size_t)t.chunk_groups);
        t.scratch_per_thread = t.tmp_bytes + t.unpack_off + align64(unpack_bytes);
        t.scratch = cpu->act_buf + used;
        used += t.scratch_per_thread * (size_t)cpu->n_threads;
        if (used <= cpu->act_cap) break;
        if (!grown) {
            /* the scratch grows (once per call, kept) rather than the GEMM
             * falling back to vec_dot: for the exact kinds that would only be
             * slower, but the AMX bf16 kinds differ from vec_dot in the last
             * bits, so their results would depend on the thread count and the
             * batch; and a caller need not guess the GEMM's panel sizes */
            uint8_t *nb = mf_alloc_aligned(used);
            if (nb) {
                free(cpu->act_buf);
                cpu->act_buf = nb;
                cpu->act_cap = used;
                grown = true;
                pass--;
                continue;
            }
        }
        int any = 0;
        for (int i = 0; i < nw; i++) any |= t.g[i] != NULL, t.g[i] = NULL;
        if (!any) {
            /* more distinct conversions than the buffer holds: one weight at a time */
            for (int i = 0; i < nw; i++) mf_cpu_matmul_n(be, &w[i], b ? &b[i] : NULL, 1, x, rows, &out[i], i ? NULL : res);
            return;
        }
        if (cpu->verbose && !atomic_exchange(&g_said_nomem, 1))
            mf_log(MF_LOG_INFO, "minfer: prefill GEMM off for a %d-row batch of width %d: its buffers exceed the "
                            "backend's scratch (%zu bytes); using vec_dot\n", rows, t.n_in, cpu->act_cap);
    }
    if (cpu->verbose)
        for (int i = 0; i < nw; i++) {
            if (t.g[i] && !atomic_exchange(&g_said[w[i]->type], 1))
                mf_log(MF_LOG_INFO, "minfer: prefill GEMM for %s weights: %s kernel, batches of >= %d rows%s%s\n",
                        mf_type_name(w[i]->type), t.g[i]->name, t.g[i]->min_rows,
                        bf16_kind_type(w[i]->type) && t.g[i]->act < MF_GEMM_ACT_BF16_AMX ? "; " : "",
                        bf16_kind_type(w[i]->type) && t.g[i]->act < MF_GEMM_ACT_BF16_AMX ? mf_amx_bf16_note() : "");
            else if (!t.g[i] && rows >= 16 && !cpu->ref && bf16_kind_type(w[i]->type) &&
                     !atomic_exchange(&g_said[w[i]->type], 1))
                /* BF16 has no GEMM but the AMX bf16 kind: say why it is not used */
                mf_log(MF_LOG_INFO, "minfer: prefill for %s weights: vec_dot (%s)\n", mf_type_name(w[i]->type),
                       mf_amx_bf16_note());
        }
    atomic_init(&t.next_tile, 0);
    atomic_init(&t.next_chunk, 0);
    atomic_init(&t.next_unit, static_share(&t, cpu->n_threads) * cpu->n_threads);
    /* A decode's few rows: every thread converts them into its own copy at
     * the start of the dot job, which costs less than a second pool round
     * trip (the conversion is deterministic, so the copies are equal). */
    if (t.n_conv && !t.n_ts && rows <= CONV_EACH_ROWS) {
        t.conv_span = (size_t)(t.conv_dst[t.n_conv - 1] - t.conv_dst[0]) +
                      align64(t.conv_row[t.n_conv - 1] * (size_t)rows);
        if (used + t.conv_span * (size_t)(cpu->n_threads - 1) <= cpu->act_cap) {
            t.conv_copies = cpu->act_buf + used;
            mf_pool_run(cpu->pool, dot_rows, &t);
            return; /* no GEMM here: the epilogue ran with the dots */
        }
        t.conv_span = 0;
    }
    if (t.n_conv || t.n_ts) mf_pool_run(cpu->pool, convert_rows, &t);
    mf_pool_run(cpu->pool, dot_rows, &t);
    if (t.epilogue && t.unit0[nw]) {
        /* GEMM outputs get theirs in a job of its own (the vec_dot rows
         * already had theirs: only GEMM weights are left) */
        for (int i = 0; i < nw; i++)
            if (!t.g[i]) t.bias[i] = NULL;
        if (t.g[0] == NULL) t.res = NULL;
        mf_cpu_run(cpu, epilogue_rows, &t, (size_t)rows * (size_t)w[0]->ne[1]);
    }
}

void mf_cpu_matmul(mf_backend *be, mf_weight w, const float *x, int rows, float *out) {
    mf_cpu_matmul_n(be, &w, NULL, 1, x, rows, &out, NULL);
}
