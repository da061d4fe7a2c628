/* test_cli_errors.c - `minfer run` on bad input exits non-zero with exactly one
 * clear line on stderr: missing file, unknown architecture, GGUF v1, a Q8_0
 * tensor whose rows are not a multiple of 32, and malformed options. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Runs `minfer <args>` and checks: exit code `want_rc`, stderr is one line
 * containing `want`. */
static void expect_error(const char *args, int want_rc, const char *want) {
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1 >/dev/null", test_minfer_bin(), args);
    int rc = test_run(cmd, out, sizeof out);
    int lines = 0;
    for (const char *p = out; *p; p++) lines += *p == '\n';
    CHECK(rc == want_rc, "`minfer %s`: exit %d, want %d (stderr: %s)", args, rc, want_rc, out);
    CHECK(lines == 1, "`minfer %s`: %d lines on stderr, want 1: %s", args, lines, out);
    CHECK(strstr(out, want) != NULL, "`minfer %s`: stderr lacks '%s': %s", args, want, out);
}

/* A copy of stories260K.gguf whose general.architecture says "llamb". */
static void write_unknown_arch(const char *path) {
    size_t n;
    unsigned char *b = test_read_file("../shared/models/stories260K.gguf", &n);
    if (!b) return;
    const char key[] = "general.architecture";
    unsigned char *p = memmem(b, n, key, sizeof key - 1);
    CHECK(p != NULL, "stories260K.gguf has no general.architecture key");
    if (p) {
        /* key, then u32 type (8 = string), u64 length 5, "llama" */
        unsigned char *v = p + sizeof key - 1 + 4 + 8;
        CHECK(!memcmp(v, "llama", 5), "unexpected architecture value layout");
        v[4] = 'b';
    }
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, n, f);
    fclose(f);
    free(b);
}

int main(void) {
    const char *S = "../shared/models";
    char args[1024];
    expect_error("run -m /nonexistent/model.gguf -p hi", 1, "No such file");
    snprintf(args, sizeof args, "run -m %s/tinyllamas-stories-260k-f32-header.gguf -p hi", S);
    expect_error(args, 1, "GGUF version 1");
    snprintf(args, sizeof args, "run -m %s/tinyllamas-stories-260k-q8_0.gguf -p hi", S);
    expect_error(args, 1, "not a multiple of the q8_0 block size");

    char tmp[] = "/tmp/minfer-arch-XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        close(fd);
        write_unknown_arch(tmp);
        snprintf(args, sizeof args, "run -m %s -p hi", tmp);
        expect_error(args, 1, "unknown architecture 'llamb'");
        unlink(tmp);
    }
    snprintf(args, sizeof args, "run -m %s/stories260K.gguf -n abc", S);
    expect_error(args, 2, "-n expects an integer");
    expect_error("run -p hi", 2, "no model given");
    snprintf(args, sizeof args, "run -m %s/stories260K.gguf --bogus", S);
    expect_error(args, 2, "unknown option '--bogus'");
    expect_error("frobnicate", 2, "unknown command 'frobnicate'");
    /* -ngl: its values, and a placement the backend contradicts */
    snprintf(args, sizeof args, "run -m %s/stories260K.gguf -ngl -3 -p hi", S);
    expect_error(args, 2, "-ngl expects an integer in [0, 1048576], got '-3'");
    snprintf(args, sizeof args, "run -m %s/stories260K.gguf -ngl auto --backend cpu -p hi", S);
    expect_error(args, 1, "-ngl auto contradicts --backend cpu");
    snprintf(args, sizeof args, "bench -m %s/stories260K.gguf -ngl 2 --backend cpu-ref", S);
    expect_error(args, 2, "-ngl 2 contradicts --backend cpu-ref");
    snprintf(args, sizeof args, "logits -m %s/stories260K.gguf --ids \"1 2\" -o /dev/null -ngl 2 --backend cpu", S);
    expect_error(args, 2, "minfer logits: -ngl 2 contradicts --backend cpu");
    return test_summary("test_cli_errors");
}
