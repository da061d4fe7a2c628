/* vindex.c - `minfer vindex build|verify|info|audit|hnsw`: make a vindex from a
 * GGUF model, check one, describe one, measure the walk FFN against the
 * dense one (audit.c), save its HNSW graphs (vindex_hnsw.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer vindex build model.gguf -o DIR [--level browse|inference|all] [--gate f32|f16|q8_0]\n"
            "                         [--down-top-k K] [-t N]\n"
            "       minfer vindex verify DIR\n"
            "       minfer vindex info DIR\n"
            "       minfer vindex hnsw DIR [--hnsw-m M] [--hnsw-efc N] [-t N] [-o FILE]\n"
            "       minfer vindex audit DIR [-f prompts.txt | -p TEXT] --walk-k K[,K...|%%] [-t N]\n"
            "                         [--hnsw [--hnsw-m M] [--hnsw-ef EF] [--hnsw-efc N] [--hnsw-no-cache]]\n"
            "  build   write the FFN of every layer as features: gate rows, the down projection feature-major,\n"
            "          the tokens each down vector writes (top K, default 10; 0 = none), embeddings, tokenizer;\n"
            "          --level inference (or all) adds the up rows and the model's weights so DIR runs the model\n"
            "          (minfer run -m DIR). --gate is the type of the gate/up/down copies (default f32).\n"
            "  verify  check index.json and every file's size and sha256, and every HNSW cache (hnsw_*.bin)\n"
            "  info    print what the vindex holds, with each HNSW cache's parameters, size and whether it is\n"
            "          for the current gate_vectors.bin (from its header; verify checks it whole)\n"
            "  audit   per layer, cosine and relative L2 of the walk FFN's output against the dense FFN's,\n"
            "          and top-1 / top-5 agreement of the final logits, for each K (a count or N%% of features)\n"
            "  hnsw    build every layer's HNSW gate graph (M links per node, default 16; build beam N, default\n"
            "          128; -t threads, one layer each) and save them in DIR/hnsw_m<M>_efc<N>.bin (or FILE), which\n"
            "          --hnsw with the same M and N then maps instead of building; the file is tied to the gate\n"
            "          vectors it indexes and refused for others, damaged, or of other parameters\n"
            CLI_HNSW_USAGE);
}

static bool g_tty;

static void on_progress(int layer, int n_layer, const char *what, void *ud) {
    (void)ud;
    if (!g_tty) return;
    if (layer >= 0) fprintf(stderr, "\rvindex: layer %d/%d ", layer + 1, n_layer);
    else fprintf(stderr, "\rvindex: %-40s", what);
    fflush(stderr);
}

static int cmd_vbuild(int argc, char **argv) {
    mf_vindex_build_params p = mf_vindex_default_build_params();
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if ((!strcmp(a, "-o") || !strcmp(a, "--output")) && v) out = v, i++;
        else if (!strcmp(a, "--level") && v) {
            i++;
            if (!strcmp(v, "browse")) p.level = MF_VINDEX_BROWSE;
            else if (!strcmp(v, "inference")) p.level = MF_VINDEX_INFERENCE;
            else if (!strcmp(v, "all")) p.level = MF_VINDEX_ALL;
            else {
                fprintf(stderr, "minfer vindex build: --level must be browse, inference or all (got '%s')\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--gate") && v) {
            i++;
            if (strcmp(v, "f32") && strcmp(v, "f16") && strcmp(v, "q8_0")) {
                fprintf(stderr, "minfer vindex build: --gate must be f32, f16 or q8_0 (got '%s')\n", v);
                return 2;
            }
            p.feature_type = v;
        } else if (!strcmp(a, "--down-top-k") && v) {
            if (!cli_int("vindex build", a, v, 0, 1024, &n)) return 2;
            p.down_top_k = (int32_t)n, i++;
        } else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && v) {
            if (!cli_int("vindex build", a, v, 0, 512, &n)) return 2;
            p.n_threads = (int32_t)n, i++;
        } else if (a[0] == '-' || in) {
            fprintf(stderr, "minfer vindex build: unexpected argument '%s' (see minfer vindex --help)\n", a);
            return 2;
        } else in = a;
    }
    if (!in || !out) {
        fprintf(stderr, "minfer vindex build: needs model.gguf and -o DIR\n");
        return 2;
    }
    g_tty = isatty(2);
    p.progress = on_progress;
    mf_status s = mf_vindex_build(in, out, &p);
    if (g_tty) fprintf(stderr, "\r%60s\r", "");
    if (s) {
        fprintf(stderr, "minfer vindex build: %s\n", mf_last_error());
        return 1;
    }
    mf_vindex *v;
    if (mf_vindex_open(out, &v)) {
        fprintf(stderr, "minfer vindex build: %s\n", mf_last_error());
        return 1;
    }
    mf_vindex_info info;
    mf_vindex_get_info(v, &info);
    fprintf(stderr, "vindex: %s -> %s: %d layers x %d features (%s), level %s, %.2f MiB\n", in, out, info.n_layer,
            info.n_features, info.feature_type,
            info.level == MF_VINDEX_BROWSE ? "browse" : info.level == MF_VINDEX_INFERENCE ? "inference" : "all",
            (double)info.bytes / (1 << 20));
    mf_vindex_free(v);
    return 0;
}

static int cmd_vverify(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "minfer vindex verify: needs one directory\n");
        return 2;
    }
    g_tty = isatty(2);
    mf_status s = mf_vindex_verify(argv[1], on_progress, NULL);
    if (g_tty) fprintf(stderr, "\r%60s\r", "");
    if (s) {
        fprintf(stderr, "minfer vindex verify: %s\n", mf_last_error());
        return 1;
    }
    printf("%s: ok\n", argv[1]);
    return 0;
}

static int cmd_vinfo(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "minfer vindex info: needs one directory\n");
        return 2;
    }
    mf_vindex *v;
    if (mf_vindex_open(argv[1], &v)) {
        fprintf(stderr, "minfer vindex info: %s\n", mf_last_error());
        return 1;
    }
    mf_vindex_info i;
    mf_vindex_get_info(v, &i);
    printf("source      %s (sha256 %s)\n", i.source_file, i.source_sha256);
    printf("model       %s, %d layers, n_embd %d, vocab %d\n", i.arch, i.n_layer, i.n_embd, i.n_vocab);
    if (i.n_expert) printf("features    %d per layer (%d experts x %d), %s\n", i.n_features, i.n_expert, i.n_ff_expert, i.feature_type);
    else printf("features    %d per layer (%s FFN), %s\n", i.n_features, i.gated ? "gated" : "non-gated", i.feature_type);
    printf("level       %s\n", i.level == MF_VINDEX_BROWSE ? "browse" : i.level == MF_VINDEX_INFERENCE ? "inference" : "all");
    printf("down top-k  %d\n", i.down_top_k);
    printf("size        %.2f MiB\n", (double)i.bytes / (1 << 20));
    /* the HNSW graph caches, from their headers (verify checks them whole):
     * a stale one is refused by --hnsw, so say so before a run finds out */
    mf_vindex_hnsw_cache *c;
    int32_t n;
    if (mf_vindex_hnsw_caches(v, &c, &n)) {
        fprintf(stderr, "minfer vindex info: %s\n", mf_last_error());
        mf_vindex_free(v);
        return 1;
    }
    if (!n) printf("hnsw cache  none (minfer vindex hnsw DIR saves one)\n");
    for (int32_t k = 0; k < n; k++) {
        char line[512];
        mf_vindex_hnsw_cache_text(&c[k], line, sizeof line);
        printf("hnsw cache  %s\n", line);
    }
    free(c);
    mf_vindex_free(v);
    return 0;
}

int cmd_vindex_audit(int argc, char **argv);
int cmd_vindex_hnsw(int argc, char **argv);

int cmd_vindex(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (int i = 2; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    if (!strcmp(argv[1], "build")) return cmd_vbuild(argc - 1, argv + 1);
    if (!strcmp(argv[1], "verify")) return cmd_vverify(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info")) return cmd_vinfo(argc - 1, argv + 1);
    if (!strcmp(argv[1], "audit")) return cmd_vindex_audit(argc - 1, argv + 1);
    if (!strcmp(argv[1], "hnsw")) return cmd_vindex_hnsw(argc - 1, argv + 1);
    fprintf(stderr, "minfer vindex: unknown subcommand '%s' (build, verify, info, audit, hnsw)\n", argv[1]);
    return 2;
}
