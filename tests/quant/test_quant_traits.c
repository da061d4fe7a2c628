/* test_quant_traits.c - the traits table: every implemented type has its
 * kernels, pairs with llama.cpp's activation type, and its geometry matches
 * the block struct the kernels use. */
#include "testutil.h"

#include "quant/blocks.h"
#include "quant/types.h"

typedef struct {
    mf_type t;
    mf_type act;
    int blck;
    size_t size;
} want;

static const want k_want[] = {
    {MF_TYPE_Q4_0, MF_TYPE_Q8_0, QK4_0, sizeof(block_q4_0)},
    {MF_TYPE_Q4_1, MF_TYPE_Q8_1, QK4_1, sizeof(block_q4_1)},
    {MF_TYPE_Q5_0, MF_TYPE_Q8_0, QK5_0, sizeof(block_q5_0)},
    {MF_TYPE_Q5_1, MF_TYPE_Q8_1, QK5_1, sizeof(block_q5_1)},
    {MF_TYPE_Q8_0, MF_TYPE_Q8_0, QK8_0, sizeof(block_q8_0)},
    {MF_TYPE_Q8_1, MF_TYPE_Q8_1, QK8_1, sizeof(block_q8_1)},
    {MF_TYPE_Q2_K, MF_TYPE_Q8_K, QK_K, sizeof(block_q2_K)},
    {MF_TYPE_Q3_K, MF_TYPE_Q8_K, QK_K, sizeof(block_q3_K)},
    {MF_TYPE_Q4_K, MF_TYPE_Q8_K, QK_K, sizeof(block_q4_K)},
    {MF_TYPE_Q5_K, MF_TYPE_Q8_K, QK_K, sizeof(block_q5_K)},
    {MF_TYPE_Q6_K, MF_TYPE_Q8_K, QK_K, sizeof(block_q6_K)},
    {MF_TYPE_Q8_K, MF_TYPE_Q8_K, QK_K, sizeof(block_q8_K)},
    {MF_TYPE_IQ4_NL, MF_TYPE_Q8_0, QK4_NL, sizeof(block_iq4_nl)},
    {MF_TYPE_IQ4_XS, MF_TYPE_Q8_K, QK_K, sizeof(block_iq4_xs)},
};

int main(void) {
    for (size_t i = 0; i < sizeof k_want / sizeof k_want[0]; i++) {
        const want *w = &k_want[i];
        const char *name = mf_type_name(w->t);
        const mf_type_geom *g = mf_type_geom_get(w->t);
        CHECK(g && g->blck == w->blck && (size_t)g->size == w->size,
              "%s: geometry %d elements / %d bytes, block struct %d / %zu", name, g ? g->blck : -1,
              g ? g->size : -1, w->blck, w->size);
        const mf_type_traits *ref = mf_type_traits_ref(w->t), *live = mf_type_traits_get(w->t);
        CHECK(ref && live, "%s: not in the traits table", name);
        if (!ref || !live) continue;
        CHECK(ref->to_float && ref->from_float_ref && ref->from_float && ref->vec_dot, "%s: a reference kernel is missing",
              name);
        CHECK(ref->vec_dot_type == w->act, "%s: pairs with %s, llama.cpp pairs it with %s", name,
              mf_type_name(ref->vec_dot_type), mf_type_name(w->act));
        /* the matmul quantizes activations through the pair's own traits */
        const mf_type_traits *act = mf_type_traits_get(ref->vec_dot_type);
        CHECK(act && act->from_float, "%s: activation type %s has no live quantizer", name, mf_type_name(w->act));
    }
    return test_summary("quant_traits");
}
