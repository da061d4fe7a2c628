/* test_golden_zoo.c - one tiny random-weight model per architecture family
 * (../shared/models/zoo/, goldens in ../shared/golden/zoo/): prompt tokens
 * identical, logits within 0.01 of llama.cpp's for float weights (activations
 * rounded to f16 before f16 matmuls and GELU through an f16 table, as llama.cpp
 * does on the CPU) or 0.25 for Q8_0 (activations quantized to Q8_0),
 * teacher-forced and free-running greedy tokens per the README's rule.
 * An optional argument restricts the run to goldens whose name starts with it. */
#include "golden.h"
#include "testutil.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    const char *dir = "../shared/golden/zoo";
    const char *only = argc > 1 ? argv[1] : NULL;
    DIR *d = opendir(dir);
    CHECK(d != NULL, "missing %s", dir);
    if (!d) return test_summary("test_golden_zoo");
    char *names[128];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 128) {
        size_t L = strlen(e->d_name);
        if (L > 5 && !strcmp(e->d_name + L - 5, ".json") && strcmp(e->d_name, "zoo_manifest.json") &&
            (!only || !strncmp(e->d_name, only, strlen(only))))
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECK(only || n >= 20, "expected >= 20 zoo goldens, found %d", n);
    double worst = 0;
    for (int i = 0; i < n; i++) {
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        golden_case gc;
        if (golden_load(p, "../shared/models/zoo", &gc)) {
            golden_opts o = {.tol = golden_default_tol(gc.model_path), .n_threads = 2, .kv_type = MF_KV_F32, .check_tokens = true};
            double md = golden_check(&gc, &o);
            if (md > worst) worst = md;
            golden_free(&gc);
        }
        free(names[i]);
    }
    fprintf(stderr, "worst max|dlogit| over %d zoo goldens: %.3g\n", n, worst);
    return test_summary("test_golden_zoo");
}
