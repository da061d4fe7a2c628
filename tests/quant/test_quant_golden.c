/* test_quant_golden.c - byte identity with llama-quantize: every quantized
 * (or F16/BF16) tensor in the golden files must equal what minfer's reference
 * quantizer makes from the same-named F32 tensor of the source model.
 *
 * Goldens: ../shared/golden/quant/quant-*.gguf (from source-f32.gguf, every
 * mixture plus --pure for the K families), and the stories260K F16 / BF16 /
 * Q4_K_M files (from stories260K.gguf). On a mismatch the message names the
 * file, the tensor, the first differing block and byte. */
#include "testutil.h"

#include "gguf/gguf.h"
#include "quant/types.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define QDIR "../shared/golden/quant/"
#define MDIR "../shared/models/"

typedef struct {
    const char *golden;
    const char *source;
} pair;

static const pair k_pairs[] = {
    {QDIR "quant-q4_0.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q4_1.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q5_0.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q5_1.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q8_0.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q2_k.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q2_k-pure.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q3_k_s.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q3_k_s-pure.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q3_k_m.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q3_k_l.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q4_k_s.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q4_k_m.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q4_k_m-pure.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q5_k_s.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q5_k_s-pure.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q5_k_m.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-q6_k.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-iq4_nl.gguf", QDIR "source-f32.gguf"},
    {QDIR "quant-iq4_xs.gguf", QDIR "source-f32.gguf"},
    {MDIR "stories260K-f16.gguf", MDIR "stories260K.gguf"},
    {MDIR "stories260K-bf16.gguf", MDIR "stories260K.gguf"},
    {MDIR "stories260K-q4_k_m.gguf", MDIR "stories260K.gguf"},
};

/* per-type tallies over all files: [type] = {identical, compared} */
static int g_same[MF_TYPE_COUNT], g_total[MF_TYPE_COUNT];

/* Quantizes src (F32) to t's type row by row and compares with t's bytes.
 * Returns 1 when identical. */
static int compare_tensor(const char *file, const gguf_tensor *t, const gguf_tensor *src) {
    const mf_type_traits *tr = mf_type_traits_ref(t->type);
    const mf_type_geom *g = mf_type_geom_get(t->type);
    CHECK(tr && tr->from_float_ref, "%s: tensor %s has type %s, which has no reference quantizer", file, t->name,
          mf_type_name(t->type));
    if (!tr || !tr->from_float_ref) return 0;
    CHECK(src->type == MF_TYPE_F32, "%s: source tensor %s is %s, not f32", file, src->name, mf_type_name(src->type));
    int same_shape = src->n_dims == t->n_dims;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) same_shape &= src->ne[d] == t->ne[d];
    CHECK(same_shape, "%s: tensor %s has a different shape in the source", file, t->name);
    if (src->type != MF_TYPE_F32 || !same_shape) return 0;

    const int64_t row_len = t->ne[0];
    const int64_t nrows = t->ne[1] * t->ne[2] * t->ne[3];
    const size_t row_bytes = mf_row_size(t->type, row_len);
    CHECK(row_len % g->blck == 0 && row_bytes * (size_t)nrows == t->nbytes,
          "%s: tensor %s: %" PRId64 " x %" PRId64 " %s does not fill %zu bytes", file, t->name, row_len, nrows,
          g->name, t->nbytes);
    if (row_len % g->blck || row_bytes * (size_t)nrows != t->nbytes) return 0;

    uint8_t *buf = malloc(t->nbytes);
    /* the mapping is only byte-aligned in general; copy rows to aligned memory */
    float *row = malloc((size_t)row_len * sizeof(float));
    const uint8_t *srcb = src->data;
    for (int64_t r = 0; r < nrows; r++) {
        memcpy(row, srcb + (size_t)r * (size_t)row_len * sizeof(float), (size_t)row_len * sizeof(float));
        tr->from_float_ref(row, buf + (size_t)r * row_bytes, row_len);
    }
    const uint8_t *want = t->data;
    size_t first = t->nbytes;
    for (size_t i = 0; i < t->nbytes; i++)
        if (buf[i] != want[i]) {
            first = i;
            break;
        }
    int ok = first == t->nbytes;
    if (!ok) {
        size_t nbad = 0;
        for (size_t i = first; i < t->nbytes; i++) nbad += buf[i] != want[i];
        const size_t r = first / row_bytes, in_row = first % row_bytes;
        CHECK(0,
              "%s: tensor %s (%s): first difference in row %zu, block %zu, byte %zu of the block "
              "(file offset in tensor %zu): llama-quantize 0x%02x, minfer 0x%02x; %zu of %zu bytes differ",
              file, t->name, g->name, r, in_row / (size_t)g->size, in_row % (size_t)g->size, first, want[first],
              buf[first], nbad, t->nbytes);
    }
    free(row);
    free(buf);
    return ok;
}

static void compare_file(const pair *p) {
    gguf_file *gf = NULL, *sf = NULL;
    mf_status st = gguf_open(p->golden, &gf);
    CHECK(st == MF_OK, "cannot open golden %s", p->golden);
    if (st != MF_OK) return;
    st = gguf_open(p->source, &sf);
    CHECK(st == MF_OK, "cannot open source %s", p->source);
    if (st != MF_OK) {
        gguf_close(gf);
        return;
    }
    int compared = 0, same = 0, f32 = 0;
    for (uint64_t i = 0; i < gf->n_tensors; i++) {
        const gguf_tensor *t = &gf->tensors[i];
        const gguf_tensor *src = gguf_find_tensor(sf, t->name);
        CHECK(src != NULL, "%s: tensor %s is not in %s", p->golden, t->name, p->source);
        if (!src) continue;
        if (t->type == MF_TYPE_F32) {
            /* kept as is by llama-quantize (norms): must be the source bytes */
            CHECK(src->nbytes == t->nbytes && !memcmp(src->data, t->data, t->nbytes),
                  "%s: f32 tensor %s differs from the source", p->golden, t->name);
            f32++;
            continue;
        }
        compared++;
        g_total[t->type]++;
        if (compare_tensor(p->golden, t, src)) {
            same++;
            g_same[t->type]++;
        }
    }
    CHECK(compared > 0, "%s: no quantized tensor to compare", p->golden);
    fprintf(stderr, "%-40s %2d/%2d tensors byte-identical (%d f32 kept)\n", strrchr(p->golden, '/') + 1, same,
            compared, f32);
    gguf_close(sf);
    gguf_close(gf);
}

int main(void) {
    for (size_t i = 0; i < sizeof k_pairs / sizeof k_pairs[0]; i++) compare_file(&k_pairs[i]);
    int all_same = 0, all = 0;
    for (int t = 0; t < MF_TYPE_COUNT; t++) {
        if (!g_total[t]) continue;
        fprintf(stderr, "  %-7s %3d/%3d identical\n", mf_type_name(t), g_same[t], g_total[t]);
        all_same += g_same[t];
        all += g_total[t];
    }
    fprintf(stderr, "  total   %3d/%3d identical\n", all_same, all);
    /* every type of the issue must have been exercised by some golden */
    static const mf_type must[] = {MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0, MF_TYPE_Q5_1, MF_TYPE_Q8_0,
                                   MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K,
                                   MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS, MF_TYPE_F16, MF_TYPE_BF16};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        CHECK(g_total[must[i]] > 0, "no golden tensor of type %s was compared", mf_type_name(must[i]));
    return test_summary("quant_golden");
}
