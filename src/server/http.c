/* http.c - the HTTP/1.1 side of `minfer serve` on libmicrohttpd: one thread
 * per connection (bounded), keep-alive, chunked Server-Sent Events, limits on
 * headers (the connection memory limit), bodies (413) and idle time, the API
 * key, routing with 404/405, and the client-gone check that cancels work. */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

struct srv_http {
    struct MHD_Daemon *d;
    srv_state *st;
};

/* ---- replies ---------------------------------------------------------------- */

static const char *error_type(int status) {
    switch (status) {
    case 401: return "authentication_error";
    case 404: return "not_found_error";
    case 503: return "unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

void srv_json(srv_reply *r, int status, json_t *v) {
    r->status = status;
    r->body = v ? json_dumps(v, JSON_COMPACT) : NULL;
    r->len = r->body ? strlen(r->body) : 0;
    r->ctype = "application/json";
    json_decref(v);
    if (v && !r->body) {
        r->status = 500;
        r->body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
        r->len = r->body ? strlen(r->body) : 0;
    }
}

void srv_error(srv_reply *r, int status, const char *param, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:{s:s%,s:s,s:o,s:o}}", "error", "message", msg, strlen(msg), "type", error_type(status),
                          "param", param ? json_string(param) : json_null(), "code",
                          status == 401 ? json_string("invalid_api_key") : json_null());
    srv_json(r, status, e);
}

/* ---- the client ----------------------------------------------------------------- */

bool srv_client_gone(int fd) {
    if (fd < 0) return false;
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return false;
}

bool srv_wait_jobs(srv_job **jobs, int n, int fd) {
    for (int i = 0; i < n; i++) {
        srv_job *j = jobs[i];
        pthread_mutex_lock(&j->mu);
        while (j->finish == SRV_FIN_NONE) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&j->cv, &j->mu, &ts);
            if (j->finish == SRV_FIN_NONE && srv_client_gone(fd)) {
                pthread_mutex_unlock(&j->mu);
                for (int k = 0; k < n; k++) atomic_store(&jobs[k]->cancel, true);
                return false;
            }
        }
        pthread_mutex_unlock(&j->mu);
    }
    return true;
}

/* ---- streams ---------------------------------------------------------------------- */

typedef struct stream_hold {
    srv_stream *s;
    int fd;
    const char *p;
    size_t n;
} stream_hold;

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_hold *h = cls;
    for (;;) {
        if (h->n) {
            size_t k = h->n < max ? h->n : max;
            memcpy(buf, h->p, k);
            h->p += k;
            h->n -= k;
            return (ssize_t)k;
        }
        if (!srv_stream_pull(h->s, &h->p, &h->n)) return MHD_CONTENT_READER_END_OF_STREAM;
        if (!h->n && srv_client_gone(h->fd)) {
            srv_stream_cancel(h->s);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls) {
    stream_hold *h = cls;
    srv_stream_cancel(h->s); /* no-op when it had ended */
    srv_stream_free(h->s);
    free(h);
}

/* ---- requests -------------------------------------------------------------------- */

typedef struct conn_ctx {
    char *body;
    size_t len, cap;
    bool too_large;
} conn_ctx;

static enum MHD_Result send_reply(struct MHD_Connection *c, srv_reply *r, int fd) {
    struct MHD_Response *resp;
    if (r->stream) {
        stream_hold *h = calloc(1, sizeof *h);
        if (!h) {
            srv_stream_cancel(r->stream);
            srv_stream_free(r->stream);
            return MHD_NO;
        }
        h->s = r->stream;
        h->fd = fd;
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, h, stream_free);
        if (!resp) {
            stream_free(h);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
    } else {
        if (r->body) resp = MHD_create_response_from_buffer(r->len, r->body, MHD_RESPMEM_MUST_FREE);
        else resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (!resp) {
            free(r->body);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", r->ctype ? r->ctype : "application/json");
    }
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    if (r->allow) MHD_add_response_header(resp, "Allow", r->allow);
    if (r->retry_after > 0) {
        char ra[16];
        snprintf(ra, sizeof ra, "%d", r->retry_after);
        MHD_add_response_header(resp, "Retry-After", ra);
    }
    if (r->status == 204) {
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    }
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    srv_metrics_request(r->status);
    return ret;
}

/* Constant-time comparison, so the key cannot be found byte by byte from timings. */
static bool key_ok(const char *given, const char *key) {
    size_t n = strlen(key), m = strlen(given);
    unsigned char d = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++) d |= (unsigned char)(key[i] ^ given[i < m ? i : 0]);
    return d == 0;
}

static bool authorized(const srv_state *st, struct MHD_Connection *c, const char *path) {
    if (!st->cfg.api_key) return true;
    if (!strcmp(path, "/health") || !strcmp(path, "/") || !strcmp(path, "/index.html")) return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!a || strncasecmp(a, "Bearer ", 7)) return false;
    a += 7;
    while (*a == ' ') a++;
    return key_ok(a, st->cfg.api_key);
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    srv_http *h = cls;
    srv_state *st = h->st;
    conn_ctx *cc = *con_cls;
    srv_reply r = {0};
    if (!cc) {
        cc = calloc(1, sizeof *cc);
        if (!cc) return MHD_NO;
        *con_cls = cc;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(cl, &end, 10);
            if (errno || *end || v > st->cfg.max_body) {
                cc->too_large = true;
                srv_error(&r, 413, NULL, "the request body is larger than %zu bytes", st->cfg.max_body);
                return send_reply(c, &r, -1);
            }
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cc->too_large) {
            if (cc->len + *upload_size > st->cfg.max_body) {
                cc->too_large = true;
                free(cc->body);
                cc->body = NULL;
                srv_error(&r, 413, NULL, "the request body is larger than %zu bytes", st->cfg.max_body);
                *upload_size = 0;
                return send_reply(c, &r, -1);
            }
            if (cc->len + *upload_size + 1 > cc->cap) {
                size_t cap = cc->cap ? cc->cap : 4096;
                while (cap < cc->len + *upload_size + 1) cap *= 2;
                char *nb = realloc(cc->body, cap);
                if (!nb) return MHD_NO;
                cc->body = nb;
                cc->cap = cap;
            }
            memcpy(cc->body + cc->len, upload, *upload_size);
            cc->len += *upload_size;
            cc->body[cc->len] = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->too_large) return MHD_YES; /* the 413 is on its way */
    if (!strcmp(method, "OPTIONS")) {
        r.status = 204;
        return send_reply(c, &r, -1);
    }
    if (!authorized(st, c, url)) {
        srv_error(&r, 401, NULL, "invalid or missing API key (send \"Authorization: Bearer <key>\")");
        return send_reply(c, &r, -1);
    }
    srv_request q = {.method = method, .path = url, .body = cc->body ? cc->body : "", .body_len = cc->len,
                     .fd = conn_fd(c)};
    srv_route(st, &q, &r);
    if (!r.status) srv_error(&r, 500, NULL, "no reply");
    return send_reply(c, &r, q.fd);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    conn_ctx *cc = *con_cls;
    if (!cc) return;
    free(cc->body);
    free(cc);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    srv_state *st = cls;
    if (!st->cfg.verbose) return;
    vfprintf(stderr, fmt, ap);
}

srv_http *srv_http_start(srv_state *st) {
    srv_http *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->st = st;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", st->cfg.port);
    const char *host = st->cfg.host;
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    if (getaddrinfo(host, port, &hints, &ai) || !ai) {
        fprintf(stderr, "minfer serve: --host %s is not a numeric IPv4 or IPv6 address\n", st->cfg.host);
        free(h);
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)st->cfg.port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned)st->cfg.max_connections,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)st->cfg.timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024), MHD_OPTION_NOTIFY_COMPLETED,
                            on_completed, NULL, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, st, MHD_OPTION_LISTEN_BACKLOG_SIZE,
                            (unsigned)256, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        fprintf(stderr, "minfer serve: cannot listen on %s:%d: %s\n", st->cfg.host, st->cfg.port,
                errno ? strerror(errno) : "libmicrohttpd refused to start");
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = di ? di->port : st->cfg.port;
    st->cfg.port = bound;
    printf("minfer serve: listening on http://%s%s%s:%d\n", strchr(st->cfg.host, ':') ? "[" : "", st->cfg.host,
           strchr(st->cfg.host, ':') ? "]" : "", bound);
    fflush(stdout);
    return h;
}

void srv_http_quiesce(srv_http *h) {
    if (!h) return;
    MHD_socket s = MHD_quiesce_daemon(h->d);
    if (s != MHD_INVALID_SOCKET) close(s);
}

void srv_http_stop(srv_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    free(h);
}
