/* pty.h - a tiny expect(1): run a program on a pseudo-terminal, type into
 * it, wait for text in what it prints. Carriage returns are dropped from the
 * transcript, so "\n" matches line ends whatever the terminal does. */
#ifndef MF_TEST_PTY_H
#define MF_TEST_PTY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct pty_proc {
    pid_t pid;
    int fd;
    char *out;    /* transcript so far, NUL-terminated */
    size_t len, cap;
    size_t mark;  /* pty_expect searches from here; moves past each match */
    bool eof;
} pty_proc;

bool pty_spawn(pty_proc *p, char *const argv[]);
bool pty_send(pty_proc *p, const char *s);
/* Waits until `s` appears at or after the mark; returns its offset in p->out
 * (and moves the mark past it) or -1 on timeout or end of output. */
long pty_expect(pty_proc *p, const char *s, double timeout_s);
/* Reads until at least n more bytes arrived after the mark (or timeout). */
bool pty_wait_bytes(pty_proc *p, size_t n, double timeout_s);
/* Waits for the exit status (-1 and a kill on timeout); frees the transcript. */
int pty_finish(pty_proc *p, double timeout_s);

#endif
