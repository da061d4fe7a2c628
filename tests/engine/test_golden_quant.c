/* test_golden_quant.c - forward goldens of every llama-quantize output in
 * ../shared/golden/quant/ (each quant type and mixture, plus the F32 source):
 * logits within 0.25 of llama.cpp's (activations quantized the way llama.cpp
 * pairs them: Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for Q4_1/Q5_1, Q8_K for the
 * K-quants and IQ4_XS) and greedy tokens by the README's near-tie rule. */
#include "golden.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    const char *dir = "../shared/golden/quant";
    DIR *d = opendir(dir);
    CHECK(d != NULL, "missing %s", dir);
    if (!d) return test_summary("test_golden_quant");
    char *names[128];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 128) {
        size_t L = strlen(e->d_name);
        if (L > 12 && !strcmp(e->d_name + L - 12, ".golden.json")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECK(n >= 20, "expected >= 20 quant goldens, found %d", n);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        golden_case gc;
        if (golden_load(p, dir, &gc)) {
            golden_opts o = {.tol = golden_default_tol(gc.model_path), .n_threads = 2, .kv_type = MF_KV_F32, .check_tokens = true};
            double md = golden_check(&gc, &o);
            if (md > worst) worst = md;
            golden_free(&gc);
        }
        free(names[i]);
    }
    fprintf(stderr, "worst max|dlogit| over %d quant goldens: %.3g\n", n, worst);
    return test_summary("test_golden_quant");
}
