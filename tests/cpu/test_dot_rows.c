/* test_dot_rows.c - the multi-row dots (traits vec_dot_rows) of every SIMD
 * level the CPU supports, bitwise (memcmp) against vec_dot of each row at the
 * same level and against the scalar reference:
 *   - every type with a vec_dot_rows at some level (F32, F16, Q4_0, Q5_0,
 *     Q8_0, IQ4_NL, Q4_K, Q5_K, Q6_K ...);
 *   - rows of 32 to 8192 elements: one block, every partial 8-block group,
 *     odd block counts, 896 and 4864 (Qwen2.5-0.5B's widths), 8192; float
 *     rows of every residue of the 64-lane step;
 *   - nr = 0 .. NR_MAX rows (whole tiles of 4 / 8 plus every remainder);
 *   - rows packed back to back and rows with a gap between them, at
 *     misaligned (but C-aligned) addresses;
 *   - weights quantized from random data at ordinary / tiny / huge scales,
 *     and raw random block bytes with finite scales;
 *   - every buffer is allocated to its exact size (the ASan build catches a
 *     kernel reading past the last row or the activation row), and the
 *     output slots after s[nr - 1] must stay untouched.
 * Also: the scalar table has no vec_dot_rows and mf_vec_dot_rows falls back
 * to vec_dot per row. And the columns kernels (vec_dot_cols: one weight row,
 * up to MF_DOT_COLS activation rows) the same way. A level the CPU lacks is skipped with a note. */
#include "testutil.h"
#include "../quant/qrand.h"

#include "cpu/kern/features.h"
#include "quant/blocks.h"
#include "quant/types.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mf_type k_types[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q4_0,   MF_TYPE_Q4_1,  MF_TYPE_Q5_0,
                                  MF_TYPE_Q5_1, MF_TYPE_Q8_0, MF_TYPE_Q2_K, MF_TYPE_Q3_K,   MF_TYPE_Q4_K,  MF_TYPE_Q5_K,
                                  MF_TYPE_Q6_K, MF_TYPE_Q8_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
#define N_TYPES (sizeof k_types / sizeof k_types[0])
static const mf_cpu_level k_levels[] = {MF_CPU_SCALAR, MF_CPU_AVX2, MF_CPU_AVX512, MF_CPU_AVX512_VNNI};
#define N_LEVELS 4
#define NR_MAX 19

static int g_checked[MF_TYPE_COUNT][N_LEVELS];

/* ---------------- data ---------------- */

/* A finite f16 of either sign with magnitude about 2^[lo, hi]. */
static mf_fp16 rand_f16(qrand *r, int lo, int hi) {
    const double e = lo + qrand_uniform(r) * (hi - lo);
    const double v = ldexp(1.0 + qrand_uniform(r), (int)floor(e)) * (qrand_uniform(r) < 0.5 ? -1 : 1);
    return mf_fp32_to_fp16((float)v);
}

/* Random bytes for a row of type t, with the f16 scales (the fields at the
 * offsets below) made finite. Float rows get finite random elements. */
static void raw_row(qrand *r, int t, uint8_t *row, int64_t n) {
    const mf_type_geom *g = mf_type_geom_get(t);
    const int64_t nb = n / g->blck;
    for (size_t i = 0; i < (size_t)(nb * g->size); i++) row[i] = (uint8_t)(qrand_uniform(r) * 256);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = row + b * g->size;
        mf_fp16 h[2] = {rand_f16(r, -14, 4), rand_f16(r, -14, 4)};
        switch (t) {
        case MF_TYPE_F32: {
            const float v = mf_fp16_to_fp32(rand_f16(r, -8, 8));
            memcpy(p, &v, 4);
            break;
        }
        case MF_TYPE_F16: h[0] = rand_f16(r, -8, 8); memcpy(p, h, 2); break;
        case MF_TYPE_BF16: {
            const mf_bf16 v = mf_fp32_to_bf16(mf_fp16_to_fp32(rand_f16(r, -8, 8)));
            memcpy(p, &v, 2);
            break;
        }
        /* d (and m / s / dmin) first */
        case MF_TYPE_Q4_0: case MF_TYPE_Q5_0: case MF_TYPE_Q8_0: case MF_TYPE_IQ4_NL: case MF_TYPE_IQ4_XS:
            memcpy(p, h, 2);
            break;
        case MF_TYPE_Q4_1: case MF_TYPE_Q5_1: case MF_TYPE_Q8_1: case MF_TYPE_Q4_K: case MF_TYPE_Q5_K:
            memcpy(p, h, 4);
            break;
        case MF_TYPE_Q2_K: memcpy(&((block_q2_K *)p)->d, h, 4); break;
        case MF_TYPE_Q3_K: memcpy(&((block_q3_K *)p)->d, h, 2); break;
        case MF_TYPE_Q6_K: memcpy(&((block_q6_K *)p)->d, h, 2); break;
        case MF_TYPE_Q8_K: {
            block_q8_K *q = (block_q8_K *)p;
            q->d = mf_fp16_to_fp32(h[0]);
            break;
        }
        default: break;
        }
    }
}

/* Activation quants in [-127, 127] (the quantizers never write -128) and
 * Q8_K bsums equal to their quants' sums, as the quantizer guarantees. */
static void fix_acts(int vt, uint8_t *row, int64_t n) {
    const int64_t nb = n / mf_type_geom_get(vt)->blck;
    for (int64_t b = 0; b < nb; b++) {
        int8_t *qs;
        int len;
        if (vt == MF_TYPE_Q8_0) qs = ((block_q8_0 *)row)[b].qs, len = 32;
        else if (vt == MF_TYPE_Q8_1) qs = ((block_q8_1 *)row)[b].qs, len = 32;
        else if (vt == MF_TYPE_Q8_K) qs = ((block_q8_K *)row)[b].qs, len = QK_K;
        else return;
        for (int j = 0; j < len; j++)
            if (qs[j] == -128) qs[j] = 127;
        if (vt == MF_TYPE_Q8_K) {
            block_q8_K *q = &((block_q8_K *)row)[b];
            for (int j = 0; j < QK_K / 16; j++) {
                int s = 0;
                for (int i = 0; i < 16; i++) s += q->qs[16 * j + i];
                q->bsums[j] = (int16_t)s;
            }
        }
    }
}

/* ---------------- checks ---------------- */

static const uint32_t k_canary = 0x7fc0dead;

/* rows: NR_MAX rows of type t, `stride` bytes apart; y: the activation row.
 * Runs every level's vec_dot_rows for nr = 0..NR_MAX on exact-size copies. */
static void check_rows(int t, int64_t n, const uint8_t *rows, size_t stride, const uint8_t *y, const char *what) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    const size_t rb = mf_row_size(t, n), yb = mf_row_size(ref->vec_dot_type, n);
    float want[NR_MAX];
    for (int r = 0; r < NR_MAX; r++) ref->vec_dot((int)n, &want[r], rows + (size_t)r * stride, y);
    /* the activation at an exact-size, off-vector-alignment address */
    uint8_t *ybuf = malloc(yb + 4);
    memcpy(ybuf + 4, y, yb);
    const uint8_t *yc = ybuf + 4;
    for (int li = 0; li < N_LEVELS; li++) {
        const mf_type_traits *tr = mf_cpu_traits_for_level(t, k_levels[li]);
        if (!tr || !tr->vec_dot_rows) continue;
        float lvl[NR_MAX];
        for (int r = 0; r < NR_MAX; r++) tr->vec_dot((int)n, &lvl[r], rows + (size_t)r * stride, y);
        for (int nr = 0; nr <= NR_MAX; nr++) {
            /* exactly nr rows: (nr - 1) strides + one row, off vector alignment
             * but on the blocks' C alignment (4 bytes for floats) */
            const size_t bytes = nr ? (size_t)(nr - 1) * stride + rb : 0;
            const size_t mis = (t == MF_TYPE_F32 || t == MF_TYPE_Q8_K) ? 4 : 2;
            uint8_t *xbuf = malloc(bytes + mis);
            uint8_t *xc = xbuf + mis;
            if (bytes) memcpy(xc, rows, bytes);
            float s[NR_MAX + 4];
            for (int k = 0; k < NR_MAX + 4; k++) memcpy(&s[k], &k_canary, 4);
            tr->vec_dot_rows((int)n, s, xc, stride, yc, nr);
            for (int r = 0; r < nr; r++) {
                CHECK(!memcmp(&s[r], &lvl[r], 4) && !memcmp(&s[r], &want[r], 4),
                      "%s %s n=%lld nr=%d row %d (%s, stride %zu): vec_dot_rows %.9g, vec_dot %.9g, reference %.9g",
                      mf_cpu_level_name(k_levels[li]), mf_type_name(t), (long long)n, nr, r, what, stride, s[r], lvl[r],
                      want[r]);
            }
            for (int k = nr; k < NR_MAX + 4; k++)
                CHECK(!memcmp(&s[k], &k_canary, 4), "%s %s n=%lld nr=%d: wrote s[%d]", mf_cpu_level_name(k_levels[li]),
                      mf_type_name(t), (long long)n, nr, k);
            g_checked[t][li]++;
            free(xbuf);
        }
    }
    /* the generic helper on the scalar table: vec_dot per row */
    float s[NR_MAX];
    mf_vec_dot_rows(ref, (int)n, s, rows, stride, y, NR_MAX);
    CHECK(!memcmp(s, want, sizeof want), "%s n=%lld: mf_vec_dot_rows on the reference table != vec_dot per row",
          mf_type_name(t), (long long)n);
    free(ybuf);
}

/* vec_dot_cols: one weight row against nc = 1..MF_DOT_COLS activation rows
 * (ys, y_stride apart) at every level that has it, bitwise against vec_dot
 * per column and the reference; the output slots between the strided
 * results stay untouched. */
static int g_cols_checked[MF_TYPE_COUNT][N_LEVELS];
static void check_cols(int t, int64_t n, const uint8_t *x, const uint8_t *ys, size_t y_stride, const char *what) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    float want[MF_DOT_COLS];
    for (int c = 0; c < MF_DOT_COLS; c++) ref->vec_dot((int)n, &want[c], x, ys + (size_t)c * y_stride);
    for (int li = 0; li < N_LEVELS; li++) {
        const mf_type_traits *tr = mf_cpu_traits_for_level(t, k_levels[li]);
        if (!tr || !tr->vec_dot_cols) continue;
        for (int nc = 1; nc <= MF_DOT_COLS; nc++) {
            float s[3 * MF_DOT_COLS];
            for (int k = 0; k < 3 * MF_DOT_COLS; k++) memcpy(&s[k], &k_canary, 4);
            tr->vec_dot_cols((int)n, s, 3, x, ys, y_stride, nc);
            for (int c = 0; c < nc; c++) {
                float lvl;
                tr->vec_dot((int)n, &lvl, x, ys + (size_t)c * y_stride);
                CHECK(!memcmp(&s[3 * c], &lvl, 4) && !memcmp(&s[3 * c], &want[c], 4),
                      "%s %s n=%lld nc=%d column %d (%s): vec_dot_cols %.9g, vec_dot %.9g, reference %.9g",
                      mf_cpu_level_name(k_levels[li]), mf_type_name(t), (long long)n, nc, c, what, s[3 * c], lvl, want[c]);
            }
            for (int k = 0; k < 3 * MF_DOT_COLS; k++)
                if (k % 3 || k / 3 >= nc)
                    CHECK(!memcmp(&s[k], &k_canary, 4), "%s %s nc=%d: vec_dot_cols wrote s[%d]",
                          mf_cpu_level_name(k_levels[li]), mf_type_name(t), nc, k);
            g_cols_checked[t][li]++;
        }
    }
}

static void type_cases(int t, qrand *r) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    const int vt = ref->vec_dot_type;
    const int blck = mf_type_geom_get(t)->blck;
    /* lengths in blocks (32-element types): every partial group size, odd counts, 896 = 28, 4864 = 152, 8192 = 256 */
    static const int64_t nb32[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 23, 28, 31, 33, 63, 65, 133, 152, 256, 512, 513};
    static const int64_t nb256[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 19, 32};
    static const int64_t nfl[] = {1,  5,  15, 16,  17,  31,  32,  33,  48,  63,   64,   65,   96,  111,
                                  127, 128, 129, 200, 896, 1000, 4101, 4864, 8191, 8192};
    const int64_t *lens = blck == 32 ? nb32 : blck == 256 ? nb256 : nfl;
    const int nlens = blck == 32 ? (int)(sizeof nb32 / sizeof nb32[0])
                      : blck == 256 ? (int)(sizeof nb256 / sizeof nb256[0])
                                    : (int)(sizeof nfl / sizeof nfl[0]);
    static const double sx[] = {1.0, 2e-6, 4e5};
    static const double sy[] = {0.3, 1.0, 1e-5};
    for (int li = 0; li < nlens; li++) {
        const int64_t n = lens[li] * (blck > 1 ? blck : 1);
        const size_t rb = mf_row_size(t, n), yb = mf_row_size(vt, n);
        /* back to back, and with a gap of 6 (or 8 for 4-byte types) bytes */
        const size_t gap = (t == MF_TYPE_F32 || t == MF_TYPE_Q8_K) ? 8 : 6;
        for (int sg = 0; sg < 2; sg++) {
            const size_t stride = rb + (sg ? gap : 0);
            uint8_t *rows = calloc(NR_MAX, stride), *y = malloc(yb);
            float *xf = malloc((size_t)n * sizeof(float)), *yf = malloc((size_t)n * sizeof(float));
            char what[64];
            for (int c = 0; c < 3; c++) {
                for (int k = 0; k < NR_MAX; k++) {
                    qrand_fill(r, xf, n, (qdata)((c + k) % QDATA_COUNT), sx[c]);
                    ref->from_float_ref(xf, rows + (size_t)k * stride, n);
                }
                qrand_fill(r, yf, n, (qdata)((c + 1) % QDATA_COUNT), sy[c]);
                mf_type_traits_ref(vt)->from_float(yf, y, n);
                snprintf(what, sizeof what, "quantized, scales %g / %g", sx[c], sy[c]);
                check_rows(t, n, rows, stride, y, what);
                /* columns: MF_DOT_COLS activation rows with a gap between them (kept on the
                 * activation blocks' C alignment: 4 bytes for Q8_K and floats), against row 0 */
                const size_t ygap = (vt == MF_TYPE_F32 || vt == MF_TYPE_Q8_K) ? 8 : 6;
                uint8_t *ys = malloc((yb + ygap) * MF_DOT_COLS);
                for (int k = 0; k < MF_DOT_COLS; k++) {
                    qrand_fill(r, yf, n, (qdata)((c + k + 1) % QDATA_COUNT), sy[(c + k) % 3]);
                    mf_type_traits_ref(vt)->from_float(yf, ys + (size_t)k * (yb + ygap), n);
                }
                check_cols(t, n, rows, ys, yb + ygap, what);
                free(ys);
            }
            for (int k = 0; k < NR_MAX; k++) raw_row(r, t, rows + (size_t)k * stride, n);
            raw_row(r, vt, y, n);
            fix_acts(vt, y, n);
            check_rows(t, n, rows, stride, y, "random block bytes");
            free(rows);
            free(y);
            free(xf);
            free(yf);
        }
    }
}

int main(void) {
    const mf_cpu_level sup = mf_cpu_level_supported();
    for (int li = 1; li < N_LEVELS; li++)
        if (k_levels[li] > sup)
            fprintf(stderr, "note: this CPU lacks %s; its kernels are not tested here\n", mf_cpu_level_name(k_levels[li]));
    qrand r = {0x243f6a8885a308d3ull};
    for (size_t i = 0; i < N_TYPES; i++) {
        const int t = k_types[i];
        CHECK(mf_type_traits_ref(t)->vec_dot_rows == NULL, "%s: the reference table has a vec_dot_rows", mf_type_name(t));
        int any = 0;
        for (int li = 0; li < N_LEVELS; li++) {
            const mf_type_traits *tr = mf_cpu_traits_for_level(t, k_levels[li]);
            any |= tr && tr->vec_dot_rows;
        }
        if (any) type_cases(t, &r);
    }
    /* the types the decode path needs must have one at every SIMD level the CPU has */
    static const mf_type k_required[] = {MF_TYPE_F32,  MF_TYPE_F16,    MF_TYPE_Q4_0, MF_TYPE_Q5_0, MF_TYPE_Q8_0,
                                         MF_TYPE_IQ4_NL, MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof k_required / sizeof k_required[0]; i++)
        for (int li = 1; li < N_LEVELS; li++) {
            if (k_levels[li] > sup) continue;
            const mf_type_traits *tr = mf_cpu_traits_for_level(k_required[i], k_levels[li]);
            CHECK(tr && tr->vec_dot_rows, "%s: no vec_dot_rows at %s", mf_type_name(k_required[i]),
                  mf_cpu_level_name(k_levels[li]));
        }
    /* batched decode needs the columns kernels of the legacy types on AVX2 and above */
    static const mf_type k_cols[] = {MF_TYPE_Q4_0, MF_TYPE_Q5_0, MF_TYPE_Q8_0, MF_TYPE_IQ4_NL, MF_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof k_cols / sizeof k_cols[0]; i++)
        for (int li = 1; li < N_LEVELS; li++)
            if (k_levels[li] <= sup)
                CHECK(g_cols_checked[k_cols[i]][li] > 0, "%s: no vec_dot_cols checked at %s", mf_type_name(k_cols[i]),
                      mf_cpu_level_name(k_levels[li]));
    CHECK(mf_type_traits_ref(MF_TYPE_Q8_0)->vec_dot_cols == NULL, "the reference table has a vec_dot_cols");
    fprintf(stderr, "  type     vec_dot_rows calls checked per level (each: nr rows, bitwise vs vec_dot and reference)\n");
    for (size_t i = 0; i < N_TYPES; i++) {
        const int t = k_types[i];
        char line[200];
        int o = snprintf(line, sizeof line, "  %-7s", mf_type_name(t));
        int any = 0;
        for (int li = 1; li < N_LEVELS; li++) {
            if (k_levels[li] > sup) continue;
            o += snprintf(line + o, sizeof line - (size_t)o, " | %s %5d", mf_cpu_level_name(k_levels[li]), g_checked[t][li]);
            any |= g_checked[t][li];
        }
        if (any) fprintf(stderr, "%s\n", line);
    }
    for (size_t i = 0; i < N_TYPES; i++)
        for (int li = 1; li < N_LEVELS; li++)
            if (g_cols_checked[k_types[i]][li])
                fprintf(stderr, "  %-7s vec_dot_cols %s: %d calls (1-%d columns) bitwise\n", mf_type_name(k_types[i]),
                        mf_cpu_level_name(k_levels[li]), g_cols_checked[k_types[i]][li], MF_DOT_COLS);
    return test_summary("dot_rows");
}
