/* test_synth_cli.c - `minfer synth` as a user runs it: exit code, the
 * summary line, no progress bar when stderr is not a terminal, a model that
 * `minfer run` runs, --dry-run and --list output, and one clear error line
 * (non-zero exit, no output file) for each refusal. */
#include "testutil.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[256];

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* `minfer synth <args> -o DIR/refused.gguf` must exit non-zero, print exactly
 * one stderr line containing `want`, and create no output file. */
static void expect_error(const char *args, const char *want) {
    char cmd[2048], out[8192], dst[512];
    snprintf(dst, sizeof dst, "%s/refused.gguf", g_dir);
    snprintf(cmd, sizeof cmd, "%s synth %s -o %s 2>&1 >/dev/null", test_minfer_bin(), args, dst);
    int rc = test_run(cmd, out, sizeof out);
    CHECK(rc != 0, "`synth %s`: exit 0", args);
    CHECK(count(out, "\n") == 1, "`synth %s`: %d stderr lines, want 1: %s", args, count(out, "\n"), out);
    CHECK(strstr(out, want) != NULL, "`synth %s`: stderr lacks '%s': %s", args, want, out);
    CHECK(!exists(dst), "`synth %s`: refused, yet %s exists", args, dst);
}

int main(void) {
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/minfer-synth-cli-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "cannot create a temporary directory\n");
        return 1;
    }
    const char *bin = test_minfer_bin();
    char cmd[2048], out[16384], dst[512], err[512];
    snprintf(dst, sizeof dst, "%s/tiny.gguf", g_dir);
    snprintf(err, sizeof err, "%s/stderr.txt", g_dir);

    /* success: one summary line on stdout, nothing on stderr off a terminal */
    snprintf(cmd, sizeof cmd, "%s synth --preset tiny --type Q4_K_M --seed 3 -t 2 -o %s 2>%s", bin, dst, err);
    int rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "synth tiny Q4_K_M: exit %d: %s", rc, out);
    CHECK(count(out, "\n") == 1, "summary: %d stdout lines, want 1: %s", count(out, "\n"), out);
    char want[1024];
    snprintf(want, sizeof want,
             "wrote %s: tiny (llama) Q4_K_M, seed 3, 3.53M params, 39 tensors (0 fallbacks), 2.09 MiB (4.92 bits per "
             "weight), vocab 1000 generated, ",
             dst);
    CHECK(strstr(out, want) == out, "summary line: %s\nwant it to start: %s", out, want);
    size_t n_err = 0;
    char *e = test_read_file(err, &n_err);
    CHECK(e && n_err == 0, "stderr not empty: %s", e ? e : "");
    free(e);
    CHECK(exists(dst), "no output file");

    /* the file runs */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Hello world' -n 4 -t 2 2>&1", bin, dst);
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "run on the synth model: exit %d: %s", rc, out);

    /* --chat-template: the file's text becomes tokenizer.chat_template */
    char tdst[600];
    snprintf(tdst, sizeof tdst, "%s/tmpl.gguf", g_dir);
    snprintf(cmd, sizeof cmd, "%s synth --preset tiny --type Q8_0 -t 2 --chat-template "
             "../shared/chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja -o %s >/dev/null 2>&1 && %s info -m %s 2>&1", bin, tdst,
             bin, tdst);
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "tokenizer.chat_template                 string         \"{%- if tools %}"),
          "--chat-template: exit %d: %.2000s", rc, out);
    expect_error("--preset tiny --type Q8_0 --chat-template /nonexistent.jinja",
                 "cannot read the chat template /nonexistent.jinja");

    /* --dry-run: a table line per tensor and the summary, nothing written */
    snprintf(cmd, sizeof cmd, "%s synth --preset qwen2.5-0.5b --type Q4_K_M --dry-run 2>&1", bin);
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "dry run: exit %d: %s", rc, out);
    CHECK(count(out, "\n") == 291, "dry run: %d lines, want 290 tensors + summary", count(out, "\n"));
    CHECK(strstr(out, "token_embd.weight                q8_0   896 x 151936\n") != NULL, "dry run table: %.300s", out);
    CHECK(strstr(out, "dry run (nothing written): qwen2.5-0.5b (qwen2) Q4_K_M, seed 1, 494.03M params, 290 tensors "
                      "(144 fallbacks), ") != NULL,
          "dry run summary missing: %s", out + (strlen(out) > 300 ? strlen(out) - 300 : 0));

    /* --list: one line per preset, naming where the numbers come from */
    snprintf(cmd, sizeof cmd, "%s synth --list", bin);
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && count(out, "\n") == 10, "--list: exit %d, %d lines", rc, count(out, "\n"));
    CHECK(strstr(out, "llama-3.2-1b  llama, 16 layers, n_embd 2048") && strstr(out, "Meta-Llama-3-8B config.json") &&
              strstr(out, "wide-ffn      llama, 2 layers, n_embd 512, n_ff 65536") &&
              strstr(out, "gemma3-4b-ffn qwen3, 14 layers, n_embd 2560, n_ff 10240, 8/4 heads of 256"),
          "--list: %s", out);

    /* --extra-layers: the summary names them; the file runs */
    snprintf(cmd, sizeof cmd, "%s synth --preset tiny --type Q8_0 -t 2 --extra-layers 2 --extra-scale 0.1 -o %s 2>&1 && "
             "%s run -m %s -p 'Hello world' -n 4 -t 2 2>&1", bin, dst, bin, dst);
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "tiny + 2 extra layers scaled by 0.1 (llama) Q8_0, seed 1, "), "--extra-layers: exit %d: %s",
          rc, out);

    /* refusals */
    expect_error("--preset tiny --type Q8_0 --extra-layers 0", "--extra-layers expects an integer in [1, 1024], got '0'");
    expect_error("--preset tiny --type Q8_0 --extra-layers two", "--extra-layers expects an integer");
    expect_error("--preset tiny --type Q8_0 --extra-layers 2 --extra-scale -1", "--extra-scale expects a number from 0 to 1e6");
    expect_error("--preset tiny --type Q8_0 --extra-layers 2 --extra-scale inf", "--extra-scale expects a number from 0 to 1e6");
    expect_error("--preset tiny --type Q8_0 --extra-layers 2 --extra-scale x", "--extra-scale expects a number");
    expect_error("--preset tiny --type Q8_0 --extra-scale 0.5", "--extra-scale needs --extra-layers N");
    expect_error("--preset nope --type Q4_K_M", "unknown preset 'nope'");
    expect_error("--preset tiny --type Q7_K", "unknown type 'Q7_K'");
    expect_error("--type Q4_K_M", "--preset is required");
    expect_error("--preset tiny", "--type is required");
    expect_error("--preset tiny --type Q8_0 --seed x", "--seed expects");
    expect_error("--preset tiny --type Q8_0 --frobnicate", "unknown option");
    expect_error("--preset tiny --type Q8_0 --vocab ../shared/tokenizer/ggml-vocab-qwen2.gguf", "151936 tokens");
    snprintf(cmd, sizeof cmd, "%s synth --preset tiny --type Q8_0 2>&1 >/dev/null", bin);
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc != 0 && count(out, "\n") == 1 && strstr(out, "-o out.gguf is required"), "no -o: exit %d: %s", rc, out);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    test_run(cmd, NULL, 0);
    return test_summary("synth_cli");
}
