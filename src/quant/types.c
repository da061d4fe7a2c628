/* types.c - geometry of every GGUF type id, and the compute traits table. */
#include "quant/types.h"
#include "quant/ref.h"

#include <stdint.h>

static const mf_type_geom g_geom[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = {"f32", 1, 4},
    [MF_TYPE_F16] = {"f16", 1, 2},
    [MF_TYPE_Q4_0] = {"q4_0", 32, 18},
    [MF_TYPE_Q4_1] = {"q4_1", 32, 20},
    [MF_TYPE_Q5_0] = {"q5_0", 32, 22},
    [MF_TYPE_Q5_1] = {"q5_1", 32, 24},
    [MF_TYPE_Q8_0] = {"q8_0", 32, 34},
    [MF_TYPE_Q8_1] = {"q8_1", 32, 36},
    [MF_TYPE_Q2_K] = {"q2_K", 256, 84},
    [MF_TYPE_Q3_K] = {"q3_K", 256, 110},
    [MF_TYPE_Q4_K] = {"q4_K", 256, 144},
    [MF_TYPE_Q5_K] = {"q5_K", 256, 176},
    [MF_TYPE_Q6_K] = {"q6_K", 256, 210},
    [MF_TYPE_Q8_K] = {"q8_K", 256, 292},
    [MF_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [MF_TYPE_IQ2_XS] = {"iq2_xs", 256, 74},
    [MF_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [MF_TYPE_IQ1_S] = {"iq1_s", 256, 50},
    [MF_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [MF_TYPE_IQ3_S] = {"iq3_s", 256, 110},
    [MF_TYPE_IQ2_S] = {"iq2_s", 256, 82},
    [MF_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [MF_TYPE_I8] = {"i8", 1, 1},
    [MF_TYPE_I16] = {"i16", 1, 2},
    [MF_TYPE_I32] = {"i32", 1, 4},
    [MF_TYPE_I64] = {"i64", 1, 8},
    [MF_TYPE_F64] = {"f64", 1, 8},
    [MF_TYPE_IQ1_M] = {"iq1_m", 256, 56},
    [MF_TYPE_BF16] = {"bf16", 1, 2},
    [MF_TYPE_TQ1_0] = {"tq1_0", 256, 54},
    [MF_TYPE_TQ2_0] = {"tq2_0", 256, 66},
    [MF_TYPE_MXFP4] = {"mxfp4", 32, 17},
    [MF_TYPE_NVFP4] = {"nvfp4", 64, 36},
    [MF_TYPE_Q1_0] = {"q1_0", 128, 18},
    [MF_TYPE_Q2_0] = {"q2_0", 64, 18},
};

const mf_type_geom *mf_type_geom_get(int t) {
    if (t < 0 || t >= MF_TYPE_COUNT || !g_geom[t].name) return NULL;
    return &g_geom[t];
}

const char *mf_type_name(int t) {
    const mf_type_geom *g = mf_type_geom_get(t);
    return g ? g->name : "?";
}

size_t mf_row_size(mf_type t, int64_t n) {
    const mf_type_geom *g = mf_type_geom_get(t);
    return g ? (size_t)(n / g->blck) * (size_t)g->size : 0;
}

/* Reference kernels. Entries are added here as types are implemented. */
static const mf_type_traits g_ref[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = {mf_ref_to_float_f32, mf_ref_from_float_f32, mf_ref_from_float_f32, mf_ref_vec_dot_f32, MF_TYPE_F32},
    [MF_TYPE_F16] = {mf_ref_to_float_f16, mf_ref_from_float_f16, mf_ref_from_float_f16, mf_ref_vec_dot_f16, MF_TYPE_F16},
    [MF_TYPE_BF16] = {mf_ref_to_float_bf16, mf_ref_from_float_bf16, mf_ref_from_float_bf16, mf_ref_vec_dot_bf16, MF_TYPE_BF16},
    [MF_TYPE_Q4_0] = {mf_ref_to_float_q4_0, mf_ref_from_float_q4_0, mf_ref_from_float_q4_0, mf_ref_vec_dot_q4_0_q8_0, MF_TYPE_Q8_0},
    [MF_TYPE_Q4_1] = {mf_ref_to_float_q4_1, mf_ref_from_float_q4_1, mf_ref_from_float_q4_1, mf_ref_vec_dot_q4_1_q8_1, MF_TYPE_Q8_1},
    [MF_TYPE_Q5_0] = {mf_ref_to_float_q5_0, mf_ref_from_float_q5_0, mf_ref_from_float_q5_0, mf_ref_vec_dot_q5_0_q8_0, MF_TYPE_Q8_0},
    [MF_TYPE_Q5_1] = {mf_ref_to_float_q5_1, mf_ref_from_float_q5_1, mf_ref_from_float_q5_1, mf_ref_vec_dot_q5_1_q8_1, MF_TYPE_Q8_1},
    [MF_TYPE_Q8_0] = {mf_ref_to_float_q8_0, mf_ref_from_float_q8_0, mf_ref_from_float_q8_0, mf_ref_vec_dot_q8_0_q8_0, MF_TYPE_Q8_0},
    /* activation-only in llama.cpp; the self-dots keep them lookup-able like any type */
    [MF_TYPE_Q8_1] = {mf_ref_to_float_q8_1, mf_ref_from_float_q8_1, mf_ref_from_float_q8_1, mf_ref_vec_dot_q8_1_q8_1, MF_TYPE_Q8_1},
    [MF_TYPE_Q8_K] = {mf_ref_to_float_q8_k, mf_ref_from_float_q8_k, mf_ref_from_float_q8_k, mf_ref_vec_dot_q8_k_q8_k, MF_TYPE_Q8_K},
    [MF_TYPE_Q2_K] = {mf_ref_to_float_q2_k, mf_ref_from_float_q2_k, mf_ref_from_float_q2_k, mf_ref_vec_dot_q2_k_q8_k, MF_TYPE_Q8_K},
    [MF_TYPE_Q3_K] = {mf_ref_to_float_q3_k, mf_ref_from_float_q3_k, mf_ref_from_float_q3_k, mf_ref_vec_dot_q3_k_q8_k, MF_TYPE_Q8_K},
    [MF_TYPE_Q4_K] = {mf_ref_to_float_q4_k, mf_ref_from_float_q4_k, mf_ref_from_float_q4_k, mf_ref_vec_dot_q4_k_q8_k, MF_TYPE_Q8_K},
    [MF_TYPE_Q5_K] = {mf_ref_to_float_q5_k, mf_ref_from_float_q5_k, mf_ref_from_float_q5_k, mf_ref_vec_dot_q5_k_q8_k, MF_TYPE_Q8_K},
    [MF_TYPE_Q6_K] = {mf_ref_to_float_q6_k, mf_ref_from_float_q6_k, mf_ref_from_float_q6_k, mf_ref_vec_dot_q6_k_q8_k, MF_TYPE_Q8_K},
    [MF_TYPE_IQ4_NL] = {mf_ref_to_float_iq4_nl, mf_ref_from_float_iq4_nl, mf_ref_from_float_iq4_nl, mf_ref_vec_dot_iq4_nl_q8_0, MF_TYPE_Q8_0},
    [MF_TYPE_IQ4_XS] = {mf_ref_to_float_iq4_xs, mf_ref_from_float_iq4_xs, mf_ref_from_float_iq4_xs, mf_ref_vec_dot_iq4_xs_q8_k, MF_TYPE_Q8_K},
};

const mf_type_traits *mf_type_traits_ref(int t) {
    if (t < 0 || t >= MF_TYPE_COUNT || !g_ref[t].vec_dot) return NULL;
    return &g_ref[t];
}

/* the one table: nothing changes it at run time (the CPU backend keeps its
 * own per-level tables, cpu/kern/dispatch.c) */
const mf_type_traits *mf_type_traits_get(int t) { return mf_type_traits_ref(t); }
