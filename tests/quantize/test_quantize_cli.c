/* test_quantize_cli.c - `minfer quantize` as a user runs it: exit codes, the
 * summary line (sizes and bits per weight as llama-quantize reports them for
 * the same conversion), one stderr line per fallback and no progress bar when
 * stderr is not a terminal, and one clear error line (no output file) for
 * each refusal. */
#include "testutil.h"

#include "gguf/gguf.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static int count_lines(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* `minfer quantize <args>` must exit with want_rc, print exactly one stderr
 * line containing `want`, and create no output file. */
static void expect_error(const char *args, int want_rc, const char *want) {
    char cmd[2048], out[8192], dst[512];
    snprintf(dst, sizeof dst, "%s/refused.gguf", g_dir);
    snprintf(cmd, sizeof cmd, "%s quantize %s 2>&1 >/dev/null", test_minfer_bin(), args);
    int rc = test_run(cmd, out, sizeof out);
    CHECK(rc == want_rc, "`quantize %s`: exit %d, want %d (stderr: %s)", args, rc, want_rc, out);
    CHECK(count_lines(out, "\n") == 1, "`quantize %s`: %d stderr lines, want 1: %s", args, count_lines(out, "\n"), out);
    CHECK(strstr(out, want) != NULL, "`quantize %s`: stderr lacks '%s': %s", args, want, out);
    CHECK(!exists(dst), "`quantize %s`: refused, yet %s exists", args, dst);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/minfer-quantize-cli-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    const char *M = "../shared/models", *Q = "../shared/golden/quant";
    char cmd[2048], out[16384], dst[512], args[1024];

    /* the conversion llama-quantize reports as 1.12 MiB (32.00 BPW) -> 0.28 MiB (7.92 BPW),
     * "36 of 48 tensor(s) required fallback quantization" */
    snprintf(dst, sizeof dst, "%s/stories-q4_k_m.gguf", g_dir);
    snprintf(cmd, sizeof cmd, "%s quantize -t 2 %s/stories260K.gguf %s Q4_K_M 2>/dev/null", test_minfer_bin(), M, dst);
    int rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "quantize stories260K Q4_K_M: exit %d: %s", rc, out);
    CHECK(count_lines(out, "\n") == 1, "summary: %d stdout lines, want 1: %s", count_lines(out, "\n"), out);
    CHECK(strstr(out, "as Q4_K_M: 1.12 MiB -> 0.28 MiB (32.00 -> 7.92 bits per weight), 48 tensors, 37 converted, "
                      "36 fallbacks, ") != NULL,
          "summary line: %s", out);
    gguf_file *f = NULL;
    CHECK(gguf_open(dst, &f) == MF_OK, "output does not open: %s", mf_last_error());
    if (f) {
        uint32_t ft = 0;
        CHECK(gguf_get_u32(f, "general.file_type", true, &ft) == MF_OK && ft == 15, "general.file_type %u, want 15", ft);
        gguf_close(f);
    }

    /* stderr, not a terminal: one line per fallback, no progress bar */
    unlink(dst);
    snprintf(cmd, sizeof cmd, "%s quantize %s/stories260K.gguf %s q4_k_m 2>&1 >/dev/null", test_minfer_bin(), M, dst);
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "quantize (stderr): exit %d", rc);
    CHECK(count_lines(out, "falling back to") == 36 && count_lines(out, "\n") == 36,
          "want 36 fallback lines on stderr, got %d lines: %s", count_lines(out, "\n"), out);
    CHECK(strstr(out, "minfer quantize: blk.4.ffn_down.weight: rows of 172 are not a multiple of 256 (q6_K) nor of 32 "
                      "(q8_0) -> falling back to f16\n") != NULL,
          "fallback line for blk.4.ffn_down.weight missing: %s", out);
    CHECK(!strchr(out, '\r') && !strchr(out, '\033'), "progress bar drawn on a non-terminal");
    unlink(dst);

    /* --help */
    snprintf(cmd, sizeof cmd, "%s quantize --help", test_minfer_bin());
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "--allow-requantize") && strstr(out, "Q4_K_M"), "--help: exit %d: %s", rc, out);

    /* refusals: one line, non-zero exit, no file */
    snprintf(args, sizeof args, "%s/stories260K.gguf %s/refused.gguf Q9_K", M, g_dir);
    expect_error(args, 1, "minfer quantize: unknown quantization type 'Q9_K' (valid: Q4_0, Q4_1, Q5_0");
    snprintf(args, sizeof args, "%s/quant-q4_0.gguf %s/refused.gguf Q4_K_M", Q, g_dir);
    expect_error(args, 1, "is already quantized (q4_0); converting it to q4_K requires --allow-requantize");
    snprintf(args, sizeof args, "%s/stories260K.gguf %s/refused.gguf Q8_0", M, g_dir);
    expect_error(args, 1, "rows of 172 values are not a multiple of 32 (the q8_0 block) and q8_0 has no fallback type");
    snprintf(args, sizeof args, "/nonexistent/in.gguf %s/refused.gguf Q4_K_M", g_dir);
    expect_error(args, 1, "No such file");
    snprintf(args, sizeof args, "--output-tensor-type q7 %s/stories260K.gguf %s/refused.gguf Q4_K_M", M, g_dir);
    expect_error(args, 1, "minfer quantize: output tensor type: unknown or unsupported tensor type 'q7' (valid: f32, f16");
    snprintf(args, sizeof args, "%s/stories260K.gguf %s/refused.gguf", M, g_dir);
    expect_error(args, 2, "expected in.gguf out.gguf TYPE");
    snprintf(args, sizeof args, "-t zero %s/stories260K.gguf %s/refused.gguf Q4_K_M", M, g_dir);
    expect_error(args, 2, "-t expects an integer");
    snprintf(args, sizeof args, "--frobnicate %s/stories260K.gguf %s/refused.gguf Q4_K_M", M, g_dir);
    expect_error(args, 2, "unknown option");

    rmdir(g_dir);
    CHECK(!exists(g_dir), "files left in %s", g_dir);
    return test_summary("quantize_cli");
}
