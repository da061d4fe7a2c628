/* bench_knn.c - gate KNN speed at a real model's shape: writes a one-layer
 * vindex of random gate rows (default Gemma-3-4B: 10,240 features x 2,560)
 * for each gate type, opens it, and times top-10 queries of one position and
 * of 8 positions at once against the machine's read bandwidth. Built, never
 * run by ctest:
 *   build/tests/bench_knn [-f FEATURES] [-e N_EMBD] [-t THREADS] [-r REPEATS] [f32] [f16] [q8_0] */
#include "minfer.h"
#include "vindex/vindex.h"
#include "core/timer.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_file(const char *dir, const char *name, const void *data, size_t n, size_t sparse) {
    char *p = vx_path(dir, name);
    FILE *f = fopen(p, "wb");
    if (!f) exit(1);
    if (n) fwrite(data, 1, n, f);
    fclose(f);
    if (sparse && truncate(p, (off_t)sparse) != 0) exit(1);
    free(p);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    int F = 10240, E = 2560, nth = 2, reps = 50;
    const char *types[3];
    int nt = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f") && i + 1 < argc) F = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc) E = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) nth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (nt < 3) types[nt++] = argv[i];
    }
    if (!nt) types[nt++] = "f16", types[nt++] = "q8_0";
    const double bw = mf_read_bandwidth(nth, (size_t)1 << 30);
    printf("gate KNN, %d features x %d, top-10, %d threads; read bandwidth %.1f GB/s\n", F, E, nth, bw);
    printf("%-5s %10s %10s %12s %10s %14s %10s\n", "type", "MiB", "open ms", "ms/layer", "GB/s", "% of ceiling", "8 pos ms");
    float *w = malloc((size_t)E * sizeof *w), *x = malloc((size_t)8 * E * sizeof *x);
    uint64_t rng = 1;
    for (int ti = 0; ti < nt; ti++) {
        char dir[128];
        snprintf(dir, sizeof dir, "/tmp/bench_knn.%d.%s", (int)getpid(), types[ti]);
        mkdir(dir, 0777);
        vx_index ix = {0};
        ix.level = MF_VINDEX_BROWSE;
        snprintf(ix.source_file, sizeof ix.source_file, "random");
        memset(ix.source_sha256, '0', 64);
        snprintf(ix.arch, sizeof ix.arch, "gemma3");
        snprintf(ix.ffn, sizeof ix.ffn, "geglu");
        ix.gated = true;
        ix.n_layer = 1, ix.n_embd = E, ix.n_vocab = 1, ix.n_ff = F, ix.n_features = F;
        ix.ftype = !strcmp(types[ti], "f32") ? MF_TYPE_F32 : !strcmp(types[ti], "f16") ? MF_TYPE_F16 : MF_TYPE_Q8_0;
        ix.embd_type = MF_TYPE_F32;
        const size_t rb = mf_row_size(ix.ftype, E), bytes = rb * (size_t)F;
        uint8_t *g = malloc(bytes);
        for (int f = 0; f < F; f++) {
            for (int e = 0; e < E; e++) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                w[e] = (float)((double)(rng >> 11) / 9007199254740992.0 - 0.5);
            }
            mf_type_traits_ref(ix.ftype)->from_float_ref(w, g + (size_t)f * rb, E);
        }
        ix.sect = calloc(VX_NSECT, sizeof *ix.sect);
        ix.sect[VX_GATE] = ix.sect[VX_DOWN] = (vx_section){0, bytes};
        static const vx_file listed[] = {VX_GATE, VX_DOWN, VX_EMBD, VX_TOKENIZER};
        const size_t sizes[] = {bytes, bytes, (size_t)E * 4, 0};
        for (int i = 0; i < 4; i++) {
            ix.files[listed[i]].present = true;
            ix.files[listed[i]].size = sizes[i];
            memset(ix.files[listed[i]].sha256, '0', 64);
        }
        write_file(dir, "gate_vectors.bin", g, bytes, 0);
        write_file(dir, "down_features.bin", NULL, 0, bytes);
        write_file(dir, "embeddings.bin", NULL, 0, (size_t)E * 4);
        write_file(dir, "tokenizer.gguf", NULL, 0, 0);
        char *js = vx_index_dump(&ix);
        write_file(dir, "index.json", js, strlen(js), 0);
        free(js), free(g);
        vx_index_free(&ix);

        mf_vindex *v;
        double t0 = mf_now();
        if (mf_vindex_open(dir, &v)) {
            fprintf(stderr, "%s\n", mf_last_error());
            return 1;
        }
        const double t_open = (mf_now() - t0) * 1e3;
        mf_vindex_set_threads(v, nth);
        int32_t feat[80];
        float sc[80];
        double *t = malloc((size_t)reps * sizeof *t), t8[9];
        for (int i = 0; i < 8 * E; i++) x[i] = (float)sin(0.37 * i);
        for (int i = 0; i < 3; i++) mf_vindex_knn(v, 0, x, 1, 10, feat, sc); /* warm the page cache and the pool */
        for (int r = 0; r < reps; r++) {
            t0 = mf_now();
            mf_vindex_knn(v, 0, x + (size_t)(r % 8) * E, 1, 10, feat, sc);
            t[r] = (mf_now() - t0) * 1e3;
        }
        for (int r = 0; r < 9; r++) {
            t0 = mf_now();
            mf_vindex_knn(v, 0, x, 8, 10, feat, sc);
            t8[r] = (mf_now() - t0) * 1e3;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp);
        qsort(t8, 9, sizeof *t8, cmp);
        const double med = t[reps / 2], gbs = (double)bytes / (med * 1e-3) / 1e9;
        printf("%-5s %10.1f %10.2f %12.3f %10.1f %13.0f%% %10.3f\n", types[ti], (double)bytes / (1 << 20), t_open, med, gbs,
               100 * gbs / bw, t8[4]);
        free(t);
        mf_vindex_free(v);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) return 1;
    }
    free(w), free(x);
    return 0;
}
