/* bench_hnsw_cache.c - what the HNSW graph cache saves: the time to build
 * every layer's graph against the time to map it back from the file
 * (src/vindex/hnsw_file.c), on a vindex of random gate rows. Built, never
 * run by ctest (bench/hnsw_cache.sh drives it):
 *   build/tests/bench_hnsw_cache [-f FEATURES] [-e N_EMBD] [-l LAYERS] [--type f32|f16|q8_0]
 *                                [-m M] [--efc N] [--ef EF] [-q QUERIES] [-t THREADS] [-r LOADS]
 * Prints one markdown row: build (all layers, layers one thread each when
 * there are several), file size and write time, the median map-and-check
 * time over LOADS fresh opens (page cache warm: the file was just written),
 * the first query after a load, and whether the loaded graphs answered
 * QUERIES Gaussian queries per layer exactly as the built ones (ids and
 * scores). */
#include "minfer.h"
#include "rand_vindex.h"
#include "core/timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int fail(const char *what) {
    fprintf(stderr, "bench_hnsw_cache: %s: %s\n", what, mf_last_error());
    return 1;
}

int main(int argc, char **argv) {
    int F = 65536, E = 512, L = 1, M = 16, efc = 128, ef = 64, nq = 50, nth = 2, loads = 7;
    const char *type = "f16";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "bench_hnsw_cache: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "-f")) F = atoi(v);
        else if (!strcmp(a, "-e")) E = atoi(v);
        else if (!strcmp(a, "-l")) L = atoi(v);
        else if (!strcmp(a, "--type")) type = v;
        else if (!strcmp(a, "-m")) M = atoi(v);
        else if (!strcmp(a, "--efc")) efc = atoi(v);
        else if (!strcmp(a, "--ef")) ef = atoi(v);
        else if (!strcmp(a, "-q")) nq = atoi(v);
        else if (!strcmp(a, "-t")) nth = atoi(v);
        else if (!strcmp(a, "-r")) loads = atoi(v);
        else {
            fprintf(stderr, "bench_hnsw_cache: unknown option %s\n", a);
            return 2;
        }
        i++;
    }
    if (F < 1 || E < 1 || L < 1 || nq < 1 || loads < 1) {
        fprintf(stderr, "bench_hnsw_cache: -f, -e, -l, -q and -r must be positive\n");
        return 2;
    }
    char dir[128], cmd[160];
    snprintf(dir, sizeof dir, "/tmp/bench_hnsw_cache.%d", (int)getpid());
    if (rand_vindex_write(dir, L, F, E, type, 1, 0.5)) {
        fprintf(stderr, "bench_hnsw_cache: cannot write %s\n", dir);
        return 1;
    }
    mf_vindex_hnsw_params p = mf_vindex_default_hnsw_params();
    p.m = M, p.ef = ef, p.ef_construction = efc;
    mf_vindex *v;
    if (mf_vindex_open(dir, &v) || mf_vindex_set_threads(v, nth) || mf_vindex_set_hnsw(v, &p)) return fail("open");
    double t0 = mf_now();
    if (mf_vindex_hnsw_build(v, 0, L - 1)) return fail("build");
    const double build_s = mf_now() - t0;
    float *x = malloc((size_t)nq * E * sizeof *x);
    const size_t na = (size_t)L * nq * 10;
    int32_t *fa = malloc(na * sizeof *fa), *fb = malloc(na * sizeof *fb);
    float *sa = malloc(na * sizeof *sa), *sb = malloc(na * sizeof *sb);
    uint64_t s = 3;
    for (int i = 0; i < nq * E; i++)
        x[i] = (float)(sqrt(-2 * log(rv_uniform(&s) + 1e-300)) * cos(6.283185307179586 * rv_uniform(&s)));
    for (int l = 0; l < L; l++)
        for (int q = 0; q < nq; q++)
            if (mf_vindex_knn(v, l, x + (size_t)q * E, 1, 10, fa + ((size_t)l * nq + q) * 10, sa + ((size_t)l * nq + q) * 10))
                return fail("knn");
    t0 = mf_now();
    if (mf_vindex_hnsw_save(v, NULL)) return fail("save");
    const double save_ms = (mf_now() - t0) * 1e3;
    char *path = mf_vindex_hnsw_cache_path(v, NULL);
    FILE *f = fopen(path, "rb");
    long size = 0;
    if (f && !fseek(f, 0, SEEK_END)) size = ftell(f);
    if (f) fclose(f);
    mf_vindex_free(v);

    double *lt = malloc((size_t)loads * sizeof *lt), first_ms = 0;
    bool same = true;
    for (int r = 0; r < loads; r++) {
        mf_vindex *w;
        bool loaded = false;
        if (mf_vindex_open(dir, &w) || mf_vindex_set_threads(w, nth) || mf_vindex_set_hnsw(w, &p)) return fail("reopen");
        t0 = mf_now();
        if (mf_vindex_hnsw_load(w, NULL, &loaded) || !loaded) return fail("load");
        lt[r] = (mf_now() - t0) * 1e3;
        t0 = mf_now();
        if (mf_vindex_knn(w, 0, x, 1, 10, fb, sb)) return fail("knn after load");
        first_ms += (mf_now() - t0) * 1e3 / loads;
        if (r == loads - 1)
            for (int l = 0; l < L; l++)
                for (int q = 0; q < nq; q++)
                    if (mf_vindex_knn(w, l, x + (size_t)q * E, 1, 10, fb + ((size_t)l * nq + q) * 10, sb + ((size_t)l * nq + q) * 10))
                        return fail("knn");
        mf_vindex_free(w);
    }
    same = !memcmp(fa, fb, na * sizeof *fa) && !memcmp(sa, sb, na * sizeof *sa);
    qsort(lt, (size_t)loads, sizeof *lt, cmpd);
    printf("| %d x %d %s, %d layer%s, M %d efc %d | %.1f s | %.1f MiB | %.0f ms | %.2f ms (%.2f-%.2f) | %.2f ms | %.0fx | %s |\n",
           F, E, type, L, L > 1 ? "s" : "", M, efc, build_s, (double)size / (1 << 20), save_ms, lt[loads / 2], lt[0],
           lt[loads - 1], first_ms, build_s * 1e3 / lt[loads / 2], same ? "identical" : "DIFFERENT");
    free(path), free(lt), free(x), free(fa), free(fb), free(sa), free(sb);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    return same ? 0 : 1;
}
