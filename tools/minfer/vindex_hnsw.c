/* vindex_hnsw.c - `minfer vindex hnsw DIR`: build every layer's HNSW gate
 * graph and save them in the vindex (src/vindex/hnsw_file.c), so that
 * --hnsw maps them in milliseconds instead of building them on each run.
 * Saving is only ever this explicit step: a run that builds graphs lazily
 * may have built only some layers, and a vindex directory may be shared or
 * read-only, so runs never write into it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "core/timer.h"
#include "minfer.h"

int cmd_vindex_hnsw(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    mf_vindex_hnsw_params p = mf_vindex_default_hnsw_params();
    long nth = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "--hnsw-m") && v) {
            if (!cli_int("vindex hnsw", a, v, 2, 128, &n)) return 2;
            p.m = (int32_t)n, i++;
        } else if (!strcmp(a, "--hnsw-efc") && v) {
            if (!cli_int("vindex hnsw", a, v, 1, 4096, &n)) return 2;
            p.ef_construction = (int32_t)n, i++;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            if (!cli_int("vindex hnsw", a, v, 0, 512, &nth)) return 2;
            i++;
        } else if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) {
            out = v, i++;
        } else if (a[0] == '-' || dir) {
            fprintf(stderr, "minfer vindex hnsw: unexpected argument '%s' (see minfer vindex --help)\n", a);
            return 2;
        } else dir = a;
    }
    if (!dir) {
        fprintf(stderr, "minfer vindex hnsw: needs a vindex directory\n");
        return 2;
    }
    mf_vindex *v;
    if (mf_vindex_open(dir, &v)) {
        fprintf(stderr, "minfer vindex hnsw: %s\n", mf_last_error());
        return 1;
    }
    int rc = 1;
    char *path = NULL;
    if ((nth && mf_vindex_set_threads(v, (int32_t)nth)) || mf_vindex_set_hnsw(v, &p)) {
        /* a parameter out of range is the caller's: exit 2 like the other bad options */
        fprintf(stderr, "minfer vindex hnsw: %s\n", mf_last_error());
        rc = 2;
        goto done;
    }
    mf_vindex_info vi;
    mf_vindex_get_info(v, &vi);
    const int threads = nth ? (int)nth : (int)sysconf(_SC_NPROCESSORS_ONLN);
    const bool tty = isatty(2);
    const double t0 = mf_now();
    /* as many layers at a time as threads (one thread each, the graphs are
     * the same however they are split), with a progress line between */
    const int step = threads > 0 ? threads : 1;
    for (int l0 = 0; l0 < vi.n_layer; l0 += step) {
        const int l1 = l0 + step - 1 < vi.n_layer - 1 ? l0 + step - 1 : vi.n_layer - 1;
        if (tty) fprintf(stderr, "\rvindex hnsw: layers %d-%d of %d ", l0 + 1, l1 + 1, vi.n_layer), fflush(stderr);
        if (mf_vindex_hnsw_build(v, l0, l1)) {
            if (tty) fprintf(stderr, "\n");
            fprintf(stderr, "minfer vindex hnsw: %s\n", mf_last_error());
            goto done;
        }
    }
    if (tty) fprintf(stderr, "\r%60s\r", "");
    const double t_build = mf_now() - t0;
    path = out ? strdup(out) : mf_vindex_hnsw_cache_path(v, NULL);
    if (!path || mf_vindex_hnsw_save(v, path)) {
        fprintf(stderr, "minfer vindex hnsw: %s\n", path ? mf_last_error() : "out of memory");
        goto done;
    }
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (f) fclose(f);
    fprintf(stderr, "vindex hnsw: %s: %d layers x %d features, M %d, efc %d: built in %.1f s, saved %s (%.2f MiB)\n", dir,
            vi.n_layer, vi.n_features, p.m, p.ef_construction, t_build, path, (double)size / (1 << 20));
    rc = 0;
done:
    free(path);
    mf_vindex_free(v);
    return rc;
}
