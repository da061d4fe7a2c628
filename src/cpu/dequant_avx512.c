/* dequant_avx512.c - placeholder. */
#include "cpu/kernels.h"
void mf_cpu_reg_dequant_avx512(mf_type_traits *tab) { (void)tab; }
