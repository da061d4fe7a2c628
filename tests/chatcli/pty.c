/* pty.c - see pty.h. */
#include "pty.h"

#include <errno.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool pty_spawn(pty_proc *p, char *const argv[]) {
    memset(p, 0, sizeof *p);
    p->cap = 1 << 16;
    p->out = calloc(p->cap, 1);
    if (!p->out) return false;
    p->pid = forkpty(&p->fd, NULL, NULL, NULL);
    if (p->pid < 0) return false;
    if (p->pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    return true;
}

bool pty_send(pty_proc *p, const char *s) {
    size_t n = strlen(s);
    return write(p->fd, s, n) == (ssize_t)n;
}

/* One read with a deadline; false when nothing more will come. */
static bool pump(pty_proc *p, double deadline) {
    double left = deadline - now_s();
    if (left <= 0 || p->eof) return false;
    struct pollfd pf = {p->fd, POLLIN, 0};
    int r = poll(&pf, 1, (int)(left * 1000) + 1);
    if (r <= 0) return r == 0 || errno == EINTR;
    char buf[4096];
    ssize_t n = read(p->fd, buf, sizeof buf);
    if (n <= 0) {
        p->eof = true; /* EIO once the program has exited and closed the terminal */
        return false;
    }
    for (ssize_t i = 0; i < n; i++) {
        if (buf[i] == '\r') continue;
        if (p->len + 2 > p->cap) {
            char *nb = realloc(p->out, p->cap * 2);
            if (!nb) return false;
            p->out = nb;
            p->cap *= 2;
        }
        p->out[p->len++] = buf[i];
    }
    p->out[p->len] = 0;
    return true;
}

long pty_expect(pty_proc *p, const char *s, double timeout_s) {
    const double deadline = now_s() + timeout_s;
    for (;;) {
        const char *hit = strstr(p->out + p->mark, s);
        if (hit) {
            long at = hit - p->out;
            p->mark = (size_t)at + strlen(s);
            return at;
        }
        if (!pump(p, deadline) && (p->eof || now_s() >= deadline)) return -1;
    }
}

bool pty_wait_bytes(pty_proc *p, size_t n, double timeout_s) {
    const double deadline = now_s() + timeout_s;
    while (p->len < p->mark + n)
        if (!pump(p, deadline) && (p->eof || now_s() >= deadline)) return false;
    return true;
}

int pty_finish(pty_proc *p, double timeout_s) {
    const double deadline = now_s() + timeout_s;
    int st = 0;
    for (;;) {
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == p->pid) break;
        if (now_s() >= deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            st = -1;
            break;
        }
        if (!pump(p, now_s() + 0.05)) usleep(10000);
    }
    close(p->fd);
    free(p->out);
    p->out = NULL;
    if (st == -1) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}
