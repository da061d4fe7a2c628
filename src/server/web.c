/* web.c - GET /: the chat page (web/index.html), compiled into the binary
 * so the server needs no files beside it and the page makes no request
 * outside this server. */
#include "http.h"

#include <stdlib.h>
#include <string.h>

/* generated at build time from web/index.html (cmake/embed.cmake) */
extern const unsigned char srv_web_index[];
extern const size_t srv_web_index_len;

void srv_h_page(srv_state *st, const srv_request *q, srv_reply *r) {
    (void)st;
    (void)q;
    r->body = malloc(srv_web_index_len + 1);
    if (!r->body) {
        srv_error(r, 500, NULL, "out of memory");
        return;
    }
    memcpy(r->body, srv_web_index, srv_web_index_len);
    r->len = srv_web_index_len;
    r->status = 200;
    r->ctype = "text/html; charset=utf-8";
}
