/* testutil.h - tiny assertion framework shared by the C tests.
 * CHECK(cond, fmt, ...) records a failure with a message and continues;
 * a test's main() returns test_summary(), non-zero when anything failed. */
#ifndef MF_TESTUTIL_H
#define MF_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern int g_test_failures;
extern int g_test_checks;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        g_test_checks++;                                                          \
        if (!(cond)) {                                                            \
            g_test_failures++;                                                    \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                  \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

/* Returns 0 when every check passed (prints a one-line summary). */
int test_summary(const char *name);

/* Reads a whole file; NULL (with a message naming the path) if missing.
 * Shared data is required: a missing file is a failure, never a skip. */
void *test_read_file(const char *path, size_t *size);

/* Runs a shell command, captures stdout (up to cap-1 bytes, NUL-terminated);
 * returns the exit status (or -1). */
int test_run(const char *cmd, char *out, size_t cap);

/* Path of the CLI under test (env MINFER_BIN, set by ctest). */
const char *test_minfer_bin(void);

#endif
