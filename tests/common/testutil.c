/* testutil.c - see testutil.h. */
#include "testutil.h"

#include <stdlib.h>
#include <sys/wait.h>

int g_test_failures;
int g_test_checks;

int test_summary(const char *name) {
    if (g_test_failures)
        fprintf(stderr, "%s: %d of %d checks FAILED\n", name, g_test_failures, g_test_checks);
    else
        fprintf(stderr, "%s: all %d checks passed\n", name, g_test_checks);
    return g_test_failures ? 1 : 0;
}

void *test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "FAIL: required test file missing: %s\n", path);
        g_test_failures++;
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        fprintf(stderr, "FAIL: cannot read %s\n", path);
        g_test_failures++;
        return NULL;
    }
    buf[n] = 0;
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}

int test_run(const char *cmd, char *out, size_t cap) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    size_t n = 0;
    if (out && cap) {
        size_t r;
        while (n + 1 < cap && (r = fread(out + n, 1, cap - 1 - n, p)) > 0) n += r;
        out[n] = 0;
    }
    char sink[4096];
    while (fread(sink, 1, sizeof sink, p) > 0) {}
    int st = pclose(p);
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

const char *test_minfer_bin(void) {
    const char *b = getenv("MINFER_BIN");
    return b ? b : "build/bin/minfer";
}
