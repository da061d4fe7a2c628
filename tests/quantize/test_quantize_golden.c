/* test_quantize_golden.c - mf_quantize() against llama-quantize's own output:
 * for every ../shared/golden/quant/quant-TYPE[-pure].gguf, quantizing
 * source-f32.gguf to TYPE (with --pure for the -pure files) must give every
 * tensor the same type, shape and bytes, and the same general.file_type; the
 * same for stories260K.gguf -> F16 / BF16 / Q4_K_M (the last one needs the
 * row-length fallbacks). Also the refusals (unknown type, requantizing
 * without permission, rows no fallback can hold, output = input), that a
 * cancelled run leaves no file behind, requantizing with permission, and that
 * the thread count does not change a byte. */
#include "testutil.h"

#include "gguf/gguf.h"
#include "quant/types.h"
#include "minfer.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define QDIR "../shared/golden/quant/"
#define MDIR "../shared/models/"

static char g_tmp[256]; /* scratch directory for outputs */

static void tmp_path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_tmp, name); }

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static mf_status quantize(const char *in, const char *out, const char *type, bool pure, int nth) {
    mf_quantize_params p = mf_quantize_default_params();
    p.type = type;
    p.pure = pure;
    p.n_threads = nth;
    p.progress = NULL;
    unlink(out);
    return mf_quantize(in, out, &p, NULL);
}

/* general.file_type of a parsed file, -1 if absent */
static int64_t file_type(const gguf_file *f) {
    uint32_t v;
    if (gguf_find_key(f, "general.file_type") < 0 || gguf_get_u32(f, "general.file_type", true, &v)) return -1;
    return v;
}

/* Every tensor of `want` must be in `got` with the same type, shape and
 * bytes; `got` must hold no others, in the order of `src` (the input). Returns
 * the number of identical tensors. */
static int compare_files(const char *label, const char *want_path, const char *got_path, const char *src_path) {
    gguf_file *want = NULL, *got = NULL, *src = NULL;
    int same = 0;
    CHECK(gguf_open(want_path, &want) == MF_OK, "%s: cannot open golden %s: %s", label, want_path, mf_last_error());
    CHECK(gguf_open(got_path, &got) == MF_OK, "%s: cannot open output %s: %s", label, got_path, mf_last_error());
    CHECK(gguf_open(src_path, &src) == MF_OK, "%s: cannot open source %s: %s", label, src_path, mf_last_error());
    if (!want || !got || !src) goto done;
    CHECK(got->n_tensors == want->n_tensors, "%s: %" PRIu64 " tensors, golden has %" PRIu64, label, got->n_tensors,
          want->n_tensors);
    CHECK(file_type(got) == file_type(want), "%s: general.file_type %" PRId64 ", golden %" PRId64, label,
          file_type(got), file_type(want));
    uint32_t qv = 0;
    CHECK(gguf_get_u32(got, "general.quantization_version", true, &qv) == MF_OK && qv == 2,
          "%s: general.quantization_version is not 2", label);
    CHECK(got->alignment == src->alignment, "%s: alignment %" PRIu64 ", input has %" PRIu64, label, got->alignment,
          src->alignment);
    for (uint64_t i = 0; i < got->n_tensors && i < src->n_tensors; i++)
        CHECK(!strcmp(got->tensors[i].name, src->tensors[i].name), "%s: tensor %" PRIu64 " is %s, input order has %s",
              label, i, got->tensors[i].name, src->tensors[i].name);
    for (uint64_t i = 0; i < want->n_tensors; i++) {
        const gguf_tensor *w = &want->tensors[i];
        const gguf_tensor *g = gguf_find_tensor(got, w->name);
        CHECK(g != NULL, "%s: tensor %s missing from the output", label, w->name);
        if (!g) continue;
        CHECK(g->type == w->type, "%s: tensor %s is %s, llama-quantize made %s", label, w->name, mf_type_name(g->type),
              mf_type_name(w->type));
        bool shape = g->n_dims == w->n_dims;
        for (int d = 0; d < GGUF_MAX_DIMS; d++) shape &= g->ne[d] == w->ne[d];
        CHECK(shape, "%s: tensor %s has a different shape", label, w->name);
        if (g->type != w->type || !shape || g->nbytes != w->nbytes) continue;
        if (!memcmp(g->data, w->data, w->nbytes)) {
            same++;
            continue;
        }
        const uint8_t *a = g->data, *b = w->data;
        size_t k = 0;
        while (a[k] == b[k]) k++;
        const size_t row = mf_row_size(w->type, w->ne[0]);
        const mf_type_geom *geo = mf_type_geom_get(w->type);
        CHECK(0, "%s: tensor %s (%s) differs first in row %zu, block %zu (byte %zu): llama-quantize 0x%02x, minfer 0x%02x",
              label, w->name, geo->name, k / row, (k % row) / (size_t)geo->size, k, b[k], a[k]);
    }
done:
    gguf_close(want);
    gguf_close(got);
    gguf_close(src);
    return same;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* quant-q4_k_m-pure.gguf -> type "q4_k_m", pure */
static void golden_files(void) {
    DIR *d = opendir(QDIR);
    CHECK(d != NULL, "cannot list %s", QDIR);
    if (!d) return;
    char *names[64];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        size_t l = strlen(e->d_name);
        if (!strncmp(e->d_name, "quant-", 6) && l > 11 && !strcmp(e->d_name + l - 5, ".gguf")) names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    /* 15 mixtures and 5 pure K files are documented; a smaller count means missing data */
    CHECK(n >= 20, "only %d golden quant files in %s", n, QDIR);
    int files_ok = 0;
    for (int i = 0; i < n; i++) {
        char type[64], want[512], out[512];
        snprintf(type, sizeof type, "%.*s", (int)(strlen(names[i]) - 11), names[i] + 6);
        bool pure = strlen(type) > 5 && !strcmp(type + strlen(type) - 5, "-pure");
        if (pure) type[strlen(type) - 5] = 0;
        snprintf(want, sizeof want, QDIR "%s", names[i]);
        tmp_path(out, sizeof out, "golden.gguf");
        mf_status s = quantize(QDIR "source-f32.gguf", out, type, pure, 2);
        CHECK(s == MF_OK, "%s: quantize %s%s failed: %s", names[i], type, pure ? " --pure" : "", mf_last_error());
        if (s) continue;
        int before = g_test_failures;
        int same = compare_files(names[i], want, out, QDIR "source-f32.gguf");
        fprintf(stderr, "%-26s %-7s%s %2d tensors byte-identical\n", names[i], type, pure ? " pure" : "     ", same);
        files_ok += before == g_test_failures;
        free(names[i]);
    }
    fprintf(stderr, "golden quant files matching llama-quantize: %d/%d\n", files_ok, n);
}

/* Collects the fallback notes instead of printing them. */
typedef struct notes {
    int n;
    char text[64][160];
} notes;

static bool collect(const mf_quantize_progress *p, void *ud) {
    notes *ns = ud;
    if (p->event == MF_QUANTIZE_NOTE && ns->n < 64) snprintf(ns->text[ns->n++], sizeof ns->text[0], "%s", p->message);
    return true;
}

static bool has_note(const notes *ns, const char *s) {
    for (int i = 0; i < ns->n; i++)
        if (strstr(ns->text[i], s)) return true;
    return false;
}

static void stories(void) {
    static const struct {
        const char *type, *golden;
    } cases[] = {{"F16", MDIR "stories260K-f16.gguf"}, {"bf16", MDIR "stories260K-bf16.gguf"},
                 {"Q4_K_M", MDIR "stories260K-q4_k_m.gguf"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[512];
        tmp_path(out, sizeof out, "stories.gguf");
        notes ns = {0};
        mf_quantize_params p = mf_quantize_default_params();
        p.type = cases[i].type;
        p.n_threads = 2;
        p.progress = collect;
        p.progress_ud = &ns;
        mf_quantize_result r;
        mf_status s = mf_quantize(MDIR "stories260K.gguf", out, &p, &r);
        CHECK(s == MF_OK, "stories260K -> %s failed: %s", cases[i].type, mf_last_error());
        if (!s && !strcmp(cases[i].type, "Q4_K_M")) {
            /* llama-quantize: "36 of 48 tensor(s) required fallback quantization" */
            CHECK(r.n_fallback == 36 && ns.n == 36, "stories260K Q4_K_M: %" PRId64 " fallbacks, %d notes, want 36",
                  r.n_fallback, ns.n);
            CHECK(has_note(&ns, "token_embd.weight: rows of 64 are not a multiple of 256 (q4_K) -> falling back to q5_0"),
                  "stories260K Q4_K_M: no note for token_embd.weight");
            CHECK(has_note(&ns, "blk.2.attn_v.weight: rows of 64 are not a multiple of 256 (q6_K) -> falling back to q8_0"),
                  "stories260K Q4_K_M: no note for blk.2.attn_v.weight");
            CHECK(has_note(&ns, "blk.0.ffn_down.weight: rows of 172 are not a multiple of 256 (q4_K) nor of 32 (q5_0) "
                                "-> falling back to f16"),
                  "stories260K Q4_K_M: no note for blk.0.ffn_down.weight");
            CHECK(r.n_tensors == 48 && r.file_type == 15 && r.n_elements == 292800 && r.bytes_in == 292800 * 4,
                  "stories260K Q4_K_M: result %" PRId64 " tensors, file type %d, %" PRIu64 " bytes in", r.n_tensors,
                  (int)r.file_type, r.bytes_in);
        } else if (!s) {
            CHECK(ns.n == 0 && r.n_fallback == 0, "stories260K %s: %d notes", cases[i].type, ns.n);
        }
        if (s) continue;
        int same = compare_files(cases[i].golden, cases[i].golden, out, MDIR "stories260K.gguf");
        fprintf(stderr, "%-26s %-7s       %2d tensors byte-identical\n", strrchr(cases[i].golden, '/') + 1,
                cases[i].type, same);
    }
}

/* Expects failure `want` with `needle` in the message and no output file. */
static void expect_refusal(const char *in, const char *type, bool allow_requantize, mf_status want, const char *needle) {
    char out[512];
    tmp_path(out, sizeof out, "refused.gguf");
    unlink(out);
    mf_quantize_params p = mf_quantize_default_params();
    p.type = type;
    p.allow_requantize = allow_requantize;
    mf_status s = mf_quantize(in, out, &p, NULL);
    CHECK(s == want, "%s -> %s: status %s, want %s (%s)", in, type, mf_status_name(s), mf_status_name(want),
          mf_last_error());
    CHECK(strstr(mf_last_error(), needle) != NULL, "%s -> %s: message lacks '%s': %s", in, type, needle, mf_last_error());
    CHECK(!strchr(mf_last_error(), '\n'), "%s -> %s: message spans lines", in, type);
    CHECK(!exists(out), "%s -> %s: refused, yet %s was written", in, type, out);
}

static void refusals(void) {
    expect_refusal(QDIR "source-f32.gguf", "Q4_K_X", false, MF_ERR_INVALID_ARG, "unknown quantization type 'Q4_K_X' (valid: Q4_0, Q4_1");
    expect_refusal(QDIR "source-f32.gguf", "iq2_xxs", false, MF_ERR_UNSUPPORTED, "not supported by minfer");
    expect_refusal(QDIR "quant-q4_0.gguf", "Q4_K_M", false, MF_ERR_INVALID_ARG, "already quantized (q4_0)");
    expect_refusal(QDIR "quant-q4_0.gguf", "Q4_K_M", false, MF_ERR_INVALID_ARG, "--allow-requantize");
    /* llama-quantize cannot make these from stories260K either: ffn_down rows
     * of 172 are not a multiple of 32 and the legacy types have no fallback */
    expect_refusal(MDIR "stories260K.gguf", "Q8_0", false, MF_ERR_UNSUPPORTED, "'blk.0.ffn_down.weight': rows of 172");
    expect_refusal(MDIR "stories260K.gguf", "Q4_0", false, MF_ERR_UNSUPPORTED, "q4_0 has no fallback");
    expect_refusal(MDIR "stories260K.gguf", "Q5_1", false, MF_ERR_UNSUPPORTED, "not a multiple of 32");
    expect_refusal(MDIR "tinyllamas-stories-260k-f32-header.gguf", "Q4_K_M", false, MF_ERR_UNSUPPORTED, "version 1");

    mf_quantize_params p = mf_quantize_default_params();
    p.type = "Q4_K_M";
    p.output_tensor_type = "q9_9";
    char out[512];
    tmp_path(out, sizeof out, "refused.gguf");
    CHECK(mf_quantize(MDIR "stories260K.gguf", out, &p, NULL) == MF_ERR_INVALID_ARG &&
              strstr(mf_last_error(), "'q9_9' (valid: f32, f16, q4_0"),
          "unknown output tensor type: %s", mf_last_error());
    /* an explicit type is taken as is, without fallback, so it must fit */
    p.output_tensor_type = "q4_K";
    CHECK(mf_quantize(MDIR "stories260K.gguf", out, &p, NULL) == MF_ERR_INVALID_ARG &&
              strstr(mf_last_error(), "'output.weight': rows of 64 values do not fit q4_K"),
          "output tensor type that does not fit: %s", mf_last_error());
    CHECK(!exists(out), "refused, yet %s was written", out);

    /* output = input: refused before anything is opened for writing */
    char copy[512];
    tmp_path(copy, sizeof copy, "self.gguf");
    size_t n;
    void *b = test_read_file(MDIR "stories260K.gguf", &n);
    FILE *fp = b ? fopen(copy, "wb") : NULL;
    if (fp) {
        fwrite(b, 1, n, fp);
        fclose(fp);
        p.output_tensor_type = NULL;
        CHECK(mf_quantize(copy, copy, &p, NULL) == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "overwrite the input"),
              "output = input: %s", mf_last_error());
        size_t n2;
        void *b2 = test_read_file(copy, &n2);
        CHECK(b2 && n2 == n && !memcmp(b, b2, n), "output = input: the input changed");
        free(b2);
        unlink(copy);
    }
    free(b);
}

/* The dequantize path: requantizing Q8_0 to Q4_0 must equal quantizing the
 * dequantized values; tensors already in the target type are copied. */
static void requantize(void) {
    char out[512];
    tmp_path(out, sizeof out, "requant.gguf");
    mf_quantize_params p = mf_quantize_default_params();
    p.type = "Q4_0";
    p.allow_requantize = true;
    mf_quantize_result r;
    mf_status s = mf_quantize(QDIR "quant-q8_0.gguf", out, &p, &r);
    CHECK(s == MF_OK, "requantize q8_0 -> Q4_0: %s", mf_last_error());
    if (s) return;
    gguf_file *in = NULL, *got = NULL;
    gguf_open(QDIR "quant-q8_0.gguf", &in);
    gguf_open(out, &got);
    CHECK(in && got, "cannot open requantize files");
    int converted = 0;
    for (uint64_t i = 0; in && got && i < in->n_tensors; i++) {
        const gguf_tensor *a = &in->tensors[i], *g = gguf_find_tensor(got, a->name);
        if (!g) {
            CHECK(0, "requantize: %s missing", a->name);
            continue;
        }
        if (a->type != MF_TYPE_Q8_0) { /* the f32 norms are copied */
            CHECK(g->type == a->type && g->nbytes == a->nbytes && !memcmp(g->data, a->data, a->nbytes),
                  "requantize: %s changed", a->name);
            continue;
        }
        const int64_t ne0 = a->ne[0], rows = a->n_elements / ne0;
        float *row = malloc((size_t)ne0 * sizeof *row);
        uint8_t *q = malloc(mf_row_size(g->type, ne0));
        bool same = true;
        for (int64_t rr = 0; rr < rows && same; rr++) {
            mf_type_traits_ref(MF_TYPE_Q8_0)->to_float((const uint8_t *)a->data + rr * mf_row_size(a->type, ne0), row, ne0);
            mf_type_traits_ref(g->type)->from_float_ref(row, q, ne0);
            same = !memcmp(q, (const uint8_t *)g->data + rr * mf_row_size(g->type, ne0), mf_row_size(g->type, ne0));
        }
        CHECK(same, "requantize: %s (q8_0 -> %s) is not quantize(dequantize(x))", a->name, mf_type_name(g->type));
        converted++;
        free(row);
        free(q);
    }
    CHECK(converted > 10, "requantize: only %d tensors converted", converted);
    CHECK(r.n_converted == converted, "requantize: result says %" PRId64 " converted, counted %d", r.n_converted, converted);
    gguf_close(in);
    gguf_close(got);
}

/* A progress callback that gives up after the first chunk: the run must
 * fail and leave nothing in the directory. */
static int g_calls;
static bool cancel_after_one(const mf_quantize_progress *p, void *ud) {
    (void)ud;
    if (p->event != MF_QUANTIZE_CHUNK) return true;
    return g_calls++ < 1;
}

static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void cancel(void) {
    char dir[512], out[600];
    tmp_path(dir, sizeof dir, "cancel");
    mkdir(dir, 0700);
    snprintf(out, sizeof out, "%s/out.gguf", dir);
    mf_quantize_params p = mf_quantize_default_params();
    p.type = "Q6_K";
    p.progress = cancel_after_one;
    mf_status s = mf_quantize(QDIR "source-f32.gguf", out, &p, NULL);
    CHECK(s != MF_OK && strstr(mf_last_error(), "cancelled"), "cancelled run: status %s: %s", mf_status_name(s),
          mf_last_error());
    CHECK(g_calls == 2, "cancelled run: callback called %d times", g_calls);
    CHECK(count_entries(dir) == 0, "cancelled run left %d files in its directory", count_entries(dir));
    rmdir(dir);
}

/* Rows are split among threads, never changing a byte. */
static void threads(void) {
    char a[512], b[512];
    tmp_path(a, sizeof a, "t1.gguf");
    tmp_path(b, sizeof b, "t3.gguf");
    CHECK(quantize(QDIR "source-f32.gguf", a, "Q3_K_M", false, 1) == MF_OK, "1 thread: %s", mf_last_error());
    CHECK(quantize(QDIR "source-f32.gguf", b, "Q3_K_M", false, 3) == MF_OK, "3 threads: %s", mf_last_error());
    size_t na, nb;
    void *da = test_read_file(a, &na), *db = test_read_file(b, &nb);
    CHECK(da && db && na == nb && !memcmp(da, db, na), "1 and 3 threads give different files");
    free(da);
    free(db);
    unlink(a);
    unlink(b);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(g_tmp, sizeof g_tmp, "%s/minfer-quantize-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_tmp)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    golden_files();
    stories();
    refusals();
    requantize();
    cancel();
    threads();
    char p[512];
    tmp_path(p, sizeof p, "golden.gguf");
    unlink(p);
    tmp_path(p, sizeof p, "stories.gguf");
    unlink(p);
    tmp_path(p, sizeof p, "requant.gguf");
    unlink(p);
    CHECK(count_entries(g_tmp) == 0, "%d files left in %s", count_entries(g_tmp), g_tmp);
    rmdir(g_tmp);
    return test_summary("quantize_golden");
}
