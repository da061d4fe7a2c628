/* chat.c - `minfer run --cnv`: multi-turn chat in the terminal (or over a
 * pipe), rendered with the model's chat template, with the KV cache reused
 * across turns and, with --session, saved and restored across processes.
 *
 * Each turn renders the whole conversation and tokenizes it; the tokens that
 * agree with what the cache already holds (longest common prefix) are kept
 * and only the rest is prefilled. That one rule covers every case - a new
 * message, /regen, a template that rewrites earlier turns, a reply whose
 * re-tokenization differs from the sampled tokens - without special paths. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "core/timer.h"
#include "minfer.h"
#include "run.h"

#define SESSION_FORMAT "minfer-chat"
#define MAX_STOPS 4

/* Ctrl-C sets g_sigint, read by the generation loop and the prompt. SIGTERM
 * and SIGHUP (the terminal closed) also set g_quit: the reply stops and the
 * chat ends the normal way, so --session still saves the conversation. */
static volatile sig_atomic_t g_sigint, g_quit;
static void on_signal(int sig) {
    g_sigint = 1;
    if (sig != SIGINT) g_quit = 1;
}

typedef struct msg {
    char *role, *content;
} msg;

typedef struct chat {
    const run_opts *o;
    mf_model *model;
    mf_context *ctx;
    char *tmpl;
    const char *bos_text, *eos_text;
    char *kwargs;              /* {"enable_thinking": ...} or NULL */
    char *stops[MAX_STOPS];    /* text that ends a reply (the template's end-of-turn marker) */
    int n_stops;
    size_t max_stop;
    msg *msgs;
    int n_msgs, cap_msgs;
    mf_token *cache;           /* the token ids the KV cache holds, n_cache == n_past */
    uint32_t n_cache;
    uint64_t n_replies;        /* replies generated in this conversation: seeds the sampler */
    bool interactive;
} chat;

/* ---- small helpers ------------------------------------------------------ */

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Copies s[0..n) replacing bytes that are not valid UTF-8 with U+FFFD: a reply
 * cut inside a character, or odd input bytes, must still go into the JSON the
 * template engine reads. */
static char *utf8_clean(const char *s, size_t n) {
    char *d = malloc(n * 3 + 1), *o = d;
    if (!d) return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = len && i + len <= n;
        for (size_t k = 1; ok && k < len; k++) ok = (u[i + k] & 0xC0) == 0x80;
        if (ok && len == 3) ok = !(c == 0xE0 && u[i + 1] < 0xA0) && !(c == 0xED && u[i + 1] >= 0xA0);
        if (ok && len == 4) ok = !(c == 0xF0 && u[i + 1] < 0x90) && !(c == 0xF4 && u[i + 1] >= 0x90);
        if (ok && c == 0) ok = false; /* NUL would end the C string early */
        if (ok) {
            memcpy(o, u + i, len);
            o += len;
            i += len;
        } else {
            memcpy(o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        }
    }
    *o = 0;
    return d;
}

static bool add_msg(chat *c, const char *role, const char *content, size_t len) {
    if (c->n_msgs == c->cap_msgs) {
        int cap = c->cap_msgs ? c->cap_msgs * 2 : 16;
        msg *nm = realloc(c->msgs, sizeof *nm * (size_t)cap);
        if (!nm) return false;
        c->msgs = nm;
        c->cap_msgs = cap;
    }
    msg *m = &c->msgs[c->n_msgs];
    m->role = xstrdup(role);
    m->content = utf8_clean(content, len);
    if (!m->role || !m->content) {
        free(m->role);
        free(m->content);
        return false;
    }
    c->n_msgs++;
    return true;
}

static void pop_msg(chat *c) {
    if (!c->n_msgs) return;
    c->n_msgs--;
    free(c->msgs[c->n_msgs].role);
    free(c->msgs[c->n_msgs].content);
}

static json_t *msgs_json(const chat *c) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < c->n_msgs; i++)
        json_array_append_new(arr, json_pack("{s:s,s:s}", "role", c->msgs[i].role, "content", c->msgs[i].content));
    return arr;
}

/* Renders the conversation with the template; NULL (message printed) on failure. */
static char *render(chat *c, json_t *messages, bool gen_prompt, size_t *len) {
    json_t *root = json_pack("{s:O}", "messages", messages);
    char *conv = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!conv) {
        fprintf(stderr, "minfer run: out of memory\n");
        return NULL;
    }
    mf_chat_params p = mf_chat_default_params();
    p.add_generation_prompt = gen_prompt;
    p.bos_token = c->bos_text;
    p.eos_token = c->eos_text;
    p.kwargs_json = c->kwargs;
    char *out = NULL;
    mf_status st = mf_chat_render(c->tmpl, conv, &p, &out, len);
    free(conv);
    if (st) return NULL;
    return out;
}

/* A reply ends at the template's end-of-turn marker (mf_chat_turn_end) and
 * at the EOS text; templates without a marker rely on EOG tokens. */
static void find_stops(chat *c) {
    mf_chat_params p = mf_chat_default_params();
    p.bos_token = c->bos_text;
    p.eos_token = c->eos_text;
    p.kwargs_json = c->kwargs;
    char end[64];
    if (mf_chat_turn_end(c->tmpl, &p, end, sizeof end)) c->stops[c->n_stops++] = xstrdup(end);
    if (c->eos_text && *c->eos_text && (!c->n_stops || strcmp(c->stops[0], c->eos_text)))
        c->stops[c->n_stops++] = xstrdup(c->eos_text);
    for (int i = 0; i < c->n_stops; i++) {
        if (!c->stops[i]) {
            c->stops[i--] = c->stops[--c->n_stops];
            continue;
        }
        size_t n = strlen(c->stops[i]);
        if (n > c->max_stop) c->max_stop = n;
    }
}

/* Tokens of the rendered prompt (BOS prepended when the model wants it and
 * the template did not write it already); NULL on failure. */
static mf_token *tokenize(chat *c, const char *text, size_t len, int32_t *n_out) {
    const bool bos = mf_model_add_bos(c->model) && !c->o->no_bos && mf_token_bos(c->model) >= 0 &&
                     !(c->bos_text && *c->bos_text && !strncmp(text, c->bos_text, strlen(c->bos_text)));
    int32_t n = mf_tokenize(c->model, text, len, NULL, 0, false, true);
    if (n == INT32_MIN) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        return NULL;
    }
    int32_t need = (n < 0 ? -n : n) + 1;
    mf_token *t = malloc(sizeof *t * (size_t)need);
    if (!t) return NULL;
    int32_t off = bos ? 1 : 0;
    if (bos) t[0] = mf_token_bos(c->model);
    n = mf_tokenize(c->model, text, len, t + off, need - off, false, true);
    if (n < 0) {
        fprintf(stderr, "minfer run: %s\n", n == INT32_MIN ? mf_last_error() : "tokenizer size changed");
        free(t);
        return NULL;
    }
    *n_out = n + off;
    return t;
}

/* ---- one reply ---------------------------------------------------------- */

/* Where the text of a reply may be shown up to: not past a full stop string
 * (*stop_at gets its offset) nor into a tail that could still become one, and
 * only whole UTF-8 characters. */
static size_t safe_end(const chat *c, const char *r, size_t emitted, size_t len, size_t *stop_at) {
    *stop_at = SIZE_MAX;
    for (int i = 0; i < c->n_stops; i++) {
        const char *hit = memmem(r + emitted, len - emitted, c->stops[i], strlen(c->stops[i]));
        if (hit && (size_t)(hit - r) < *stop_at) *stop_at = (size_t)(hit - r);
    }
    if (*stop_at != SIZE_MAX) return *stop_at;
    size_t end = len;
    size_t q = len > c->max_stop ? len - c->max_stop + 1 : 0;
    if (q < emitted) q = emitted;
    for (; q < len && end == len; q++)
        for (int i = 0; i < c->n_stops; i++)
            if (len - q < strlen(c->stops[i]) && !memcmp(r + q, c->stops[i], len - q)) {
                end = q;
                break;
            }
    return emitted + mf_utf8_complete(r + emitted, end - emitted);
}

/* Renders the conversation (which ends with a user message), prefills what
 * the cache lacks, streams the reply and appends it as the assistant message.
 * Returns false when no reply could be made (message printed; the caller
 * drops the user message). */
static bool respond(chat *c) {
    const run_opts *o = c->o;
    size_t len = 0;
    json_t *m = msgs_json(c);
    char *text = m ? render(c, m, true, &len) : NULL;
    json_decref(m);
    if (!text) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        return false;
    }
    int32_t n = 0;
    mf_token *toks = tokenize(c, text, len, &n);
    free(text);
    if (!toks) return false;
    const uint32_t n_ctx = mf_context_n_ctx(c->ctx);
    if (n <= 0 || (uint32_t)n >= n_ctx) {
        fprintf(stderr, "minfer run: the conversation is %d tokens; the context holds %u (/clear starts over, -c raises it)\n",
                n, n_ctx);
        free(toks);
        return false;
    }
    /* the library keeps the longest common prefix (at least one token is
     * decoded so the reply starts from fresh logits) */
    const uint32_t keep = (uint32_t)mf_kv_seq_reuse_prefix(c->ctx, 0, c->cache, (int32_t)c->n_cache, toks, n);
    c->n_cache = keep;
    g_sigint = 0;
    double t0 = mf_now();
    if (mf_decode(c->ctx, toks + keep, n - (int32_t)keep, false)) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        /* a failed decode leaves the cache as it was: the kept prefix */
        free(toks);
        return false;
    }
    double t_prefill = mf_now() - t0;
    memcpy(c->cache + keep, toks + keep, sizeof *toks * (size_t)(n - (int32_t)keep));
    c->n_cache = (uint32_t)n;
    int turn = 0; /* the conversation's turn: its user messages */
    for (int i = 0; i < c->n_msgs; i++) turn += !strcmp(c->msgs[i].role, "user");

    mf_sampler_params sp = o->sp;
    sp.seed += c->n_replies++; /* /regen draws anew; a resumed session continues the sequence */
    mf_sampler *smp = NULL;
    if (mf_sampler_new(&sp, mf_model_n_vocab(c->model), &smp)) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        free(toks);
        return false;
    }
    for (int32_t i = 0; i < n; i++) mf_sampler_accept(smp, toks[i]);
    free(toks);

    const long limit = o->n_predict_set ? o->n_predict : -1;
    size_t cap = 1024, rlen = 0, emitted = 0, stop_at = SIZE_MAX;
    char *reply = malloc(cap);
    long n_gen = 0;
    const char *why = NULL;
    bool ok = reply != NULL;
    double t1 = mf_now();
    while (ok) {
        if (g_sigint) { why = "interrupted"; break; }
        if (limit >= 0 && n_gen >= limit) break;
        if (mf_context_n_past(c->ctx) >= n_ctx) { why = "context full"; break; }
        mf_token t = mf_sampler_sample(smp, mf_get_logits(c->ctx, -1));
        if (!o->ignore_eos && mf_token_is_eog(c->model, t)) break;
        mf_sampler_accept(smp, t);
        n_gen++;
        char piece[256];
        int32_t pl = mf_token_to_piece(c->model, t, piece, sizeof piece, false);
        if (pl < 0) pl = 0;
        if (pl == 0) {
            /* a control token whose text is the end marker ends the turn even
             * when the vocabulary does not flag it as end-of-generation */
            const char *tt = mf_token_text(c->model, t);
            bool is_stop = false;
            for (int i = 0; tt && i < c->n_stops; i++) is_stop |= !strcmp(tt, c->stops[i]);
            if (is_stop && !o->ignore_eos) break;
        }
        if (rlen + (size_t)pl + 1 > cap) {
            while (rlen + (size_t)pl + 1 > cap) cap *= 2;
            char *nr = realloc(reply, cap);
            if (!nr) {
                fprintf(stderr, "\nminfer run: out of memory\n");
                ok = false;
                break;
            }
            reply = nr;
        }
        memcpy(reply + rlen, piece, (size_t)pl);
        rlen += (size_t)pl;
        size_t end = safe_end(c, reply, emitted, rlen, &stop_at);
        if (end > emitted) {
            fwrite(reply + emitted, 1, end - emitted, stdout);
            fflush(stdout);
            emitted = end;
        }
        if (stop_at != SIZE_MAX) { rlen = stop_at; break; }
        if (limit >= 0 && n_gen >= limit) break; /* its logits would go unused */
        if (mf_context_n_past(c->ctx) >= n_ctx) { why = "context full"; break; }
        if (mf_decode(c->ctx, &t, 1, false)) {
            fprintf(stderr, "\nminfer run: %s\n", mf_last_error());
            ok = false;
            break;
        }
        c->cache[c->n_cache++] = t;
    }
    double t_gen = mf_now() - t1;
    mf_sampler_free(smp);
    if (!ok) {
        if (!reply) fprintf(stderr, "minfer run: out of memory\n");
        free(reply);
        return false;
    }
    /* what was held back as a possible stop string is shown now */
    if (rlen > emitted) fwrite(reply + emitted, 1, rlen - emitted, stdout);
    fputc('\n', stdout);
    if (why) printf("[%s]\n", why);
    fflush(stdout);
    if (o->verbose)
        fprintf(stderr, "[turn %d: prefill %d new tokens, %u reused from the cache, %.1f ms; reply %ld tokens, %.1f tok/s]\n",
                turn, n - (int32_t)keep, keep, t_prefill * 1e3, n_gen, n_gen / (t_gen > 0 ? t_gen : 1e-9));
    bool added = add_msg(c, "assistant", reply, rlen);
    free(reply);
    if (!added) fprintf(stderr, "minfer run: out of memory\n");
    return added;
}

/* ---- sessions ----------------------------------------------------------- */

/* Blob saved with the KV cache: the conversation the cache belongs to. */
static char *session_blob(const chat *c) {
    json_t *root = json_pack("{s:s,s:i,s:I,s:o}", "format", SESSION_FORMAT, "version", 1, "replies",
                             (json_int_t)c->n_replies, "messages", msgs_json(c));
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return s;
}

static bool session_restore(chat *c, const char *path, const char *blob, size_t len) {
    json_error_t err;
    json_t *root = json_loadb(blob, len, 0, &err);
    json_t *msgs = root ? json_object_get(root, "messages") : NULL;
    json_t *fmt = root ? json_object_get(root, "format") : NULL;
    json_t *rep = root ? json_object_get(root, "replies") : NULL;
    if (!json_is_array(msgs) || !json_is_string(fmt) || strcmp(json_string_value(fmt), SESSION_FORMAT) ||
        !json_is_integer(rep)) {
        fprintf(stderr, "minfer run: session file %s: the saved conversation is not minfer chat's\n", path);
        json_decref(root);
        return false;
    }
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        json_t *r = json_object_get(m, "role"), *t = json_object_get(m, "content");
        if (!json_is_string(r) || !json_is_string(t)) {
            fprintf(stderr, "minfer run: session file %s: message %zu has no role/content\n", path, i);
            json_decref(root);
            return false;
        }
        if (!add_msg(c, json_string_value(r), json_string_value(t), json_string_length(t))) {
            json_decref(root);
            return false;
        }
    }
    c->n_replies = (uint64_t)json_integer_value(rep);
    json_decref(root);
    return true;
}

/* Loads --session FILE if it exists. False: refused (message printed). */
static bool session_load(chat *c, const char *path) {
    struct stat st;
    if (stat(path, &st) && errno == ENOENT) {
        fprintf(stderr, "minfer run: session %s is new; it is written on exit\n", path);
        return true;
    }
    mf_token *toks = NULL;
    uint32_t n_toks = 0;
    void *blob = NULL;
    size_t blen = 0;
    if (mf_state_load(c->ctx, path, &toks, &n_toks, &blob, &blen)) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        fprintf(stderr, "minfer run: the session file was left as it is; use another --session FILE\n");
        return false;
    }
    bool ok = session_restore(c, path, blob, blen);
    free(blob);
    if (!ok) fprintf(stderr, "minfer run: the session file was left as it is; use another --session FILE\n");
    if (ok && n_toks != mf_context_n_past(c->ctx)) {
        /* a file written without token ids: its rows cannot be matched, start over */
        mf_kv_truncate(c->ctx, 0);
        n_toks = 0;
    }
    if (ok) {
        memcpy(c->cache, toks, sizeof *toks * n_toks);
        c->n_cache = n_toks;
        fprintf(stderr, "minfer run: session %s: restored %d messages and %u cached tokens (0 to prefill)\n", path,
                c->n_msgs, n_toks);
    }
    free(toks);
    return ok;
}

static bool session_save(chat *c, const char *path) {
    char *blob = session_blob(c);
    if (!blob) {
        fprintf(stderr, "minfer run: out of memory saving the session\n");
        return false;
    }
    /* the token mirror and the cache agree after every turn; after a failed
     * decode the cache may hold more than the mirror knows: drop that */
    if (mf_context_n_past(c->ctx) > c->n_cache) mf_kv_truncate(c->ctx, c->n_cache);
    if (c->n_cache > mf_context_n_past(c->ctx)) c->n_cache = mf_context_n_past(c->ctx);
    mf_status st = mf_state_save(c->ctx, path, c->cache, c->n_cache, blob, strlen(blob));
    free(blob);
    if (st) {
        fprintf(stderr, "minfer run: %s\n", mf_last_error());
        return false;
    }
    fprintf(stderr, "minfer run: session saved to %s (%d messages, %u cached tokens)\n", path, c->n_msgs, c->n_cache);
    return true;
}

/* ---- the loop ----------------------------------------------------------- */

static void help(void) {
    printf("commands:\n"
           "  /clear   forget the conversation (the system message stays) and the KV cache\n"
           "  /regen   drop the last reply and generate it again\n"
           "  /exit    leave (Ctrl-D too); --session saves first\n"
           "  /help    this list\n"
           "A line ending in \\ continues on the next line. Ctrl-C stops a reply; twice at the prompt exits.\n");
    fflush(stdout);
}

/* Input is read with read(2) into our own buffer rather than stdio, so we
 * know when no line is waiting and can sleep in ppoll() with SIGINT unblocked
 * atomically: a Ctrl-C that lands between printing the prompt and starting to
 * wait is then still seen (with a blocking getline() it would be lost until
 * the next Enter). */
typedef struct linebuf {
    char *buf;
    size_t len, cap;
    bool eof;
} linebuf;

/* 1: a line (malloc'd, without its newline) in *out; 0: end of input;
 * -1: Ctrl-C. */
static int read_line(linebuf *lb, char **out) {
    for (;;) {
        char *nl = lb->len ? memchr(lb->buf, '\n', lb->len) : NULL;
        if (nl || (lb->eof && lb->len)) {
            size_t n = nl ? (size_t)(nl - lb->buf) : lb->len;
            char *line = malloc(n + 1);
            if (!line) return 0;
            memcpy(line, lb->buf, n);
            line[n] = 0;
            size_t used = nl ? n + 1 : n;
            memmove(lb->buf, lb->buf + used, lb->len - used);
            lb->len -= used;
            *out = line;
            return 1;
        }
        if (lb->eof) return 0;
        if (lb->cap - lb->len < 4096) {
            size_t cap = lb->cap ? lb->cap * 2 : 8192;
            char *nb = realloc(lb->buf, cap);
            if (!nb) return 0;
            lb->buf = nb;
            lb->cap = cap;
        }
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGHUP);
        sigprocmask(SIG_BLOCK, &block, &old);
        if (g_sigint || g_quit) {
            sigprocmask(SIG_SETMASK, &old, NULL);
            return -1;
        }
        struct pollfd pf = {STDIN_FILENO, POLLIN, 0};
        int r = ppoll(&pf, 1, NULL, &old);
        int err = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
            if (err == EINTR && (g_sigint || g_quit)) return -1;
            if (err == EINTR) continue;
            lb->eof = true;
            continue;
        }
        ssize_t n = read(STDIN_FILENO, lb->buf + lb->len, lb->cap - lb->len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) lb->eof = true;
        else lb->len += (size_t)n;
    }
}

/* Reads one message (joining lines that end in a backslash). Returns NULL at
 * end of input; sets *intr when Ctrl-C interrupted the read. */
static char *read_message(chat *c, linebuf *lb, bool *intr) {
    *intr = false;
    char *msgbuf = NULL;
    size_t mlen = 0;
    for (;;) {
        if (c->interactive) {
            fputs(msgbuf ? ". " : "> ", stdout);
            fflush(stdout);
        }
        char *line = NULL;
        int r = read_line(lb, &line);
        if (r <= 0) {
            *intr = r < 0;
            free(msgbuf);
            return NULL;
        }
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r') line[--n] = 0;
        bool more = n && line[n - 1] == '\\';
        if (more) line[--n] = 0;
        char *nm = realloc(msgbuf, mlen + n + 2);
        if (!nm) {
            free(line);
            free(msgbuf);
            return NULL;
        }
        msgbuf = nm;
        memcpy(msgbuf + mlen, line, n);
        mlen += n;
        free(line);
        if (!more) break;
        msgbuf[mlen++] = '\n';
    }
    msgbuf[mlen] = 0;
    return msgbuf;
}

static void clear_conversation(chat *c) {
    while (c->n_msgs && !(c->n_msgs == 1 && !strcmp(c->msgs[0].role, "system"))) pop_msg(c);
    mf_kv_truncate(c->ctx, 0);
    c->n_cache = 0;
}

static void print_history(const chat *c) {
    for (int i = 0; i < c->n_msgs; i++) {
        const msg *m = &c->msgs[i];
        if (!strcmp(m->role, "user")) printf("> %s\n", m->content);
        else if (!strcmp(m->role, "assistant")) printf("%s\n", m->content);
        else printf("[%s] %s\n", m->role, m->content);
    }
    fflush(stdout);
}

int run_chat(const run_opts *o) {
    chat c = {.o = o};
    linebuf lb = {0};
    int rc = 1;
    bool session_ok = true;
    if (!run_open(o, &c.model, &c.ctx)) return 1;
    c.cache = malloc(sizeof *c.cache * (mf_context_n_ctx(c.ctx) + 1));
    if (!c.cache) goto done;

    const char *source = "the model's";
    if (o->chat_template) {
        c.tmpl = cli_read_file(o->chat_template, NULL);
        if (!c.tmpl) {
            fprintf(stderr, "minfer run: cannot read the chat template %s: %s\n", o->chat_template, strerror(errno));
            goto done;
        }
        source = o->chat_template;
    } else {
        const char *warning = NULL;
        if (mf_chat_template_from_gguf(o->model_path, &c.tmpl, &warning)) {
            fprintf(stderr, "minfer run: %s\n", mf_last_error());
            goto done;
        }
        if (warning) {
            fprintf(stderr, "minfer run: warning: %s: %s\n", o->model_path, warning);
            source = "ChatML (fallback)";
        }
    }
    if (mf_chat_check(c.tmpl)) {
        fprintf(stderr, "minfer run: chat template (%s): %s\n", source, mf_last_error());
        goto done;
    }
    c.bos_text = mf_token_bos(c.model) >= 0 ? mf_token_text(c.model, mf_token_bos(c.model)) : NULL;
    c.eos_text = mf_token_eos(c.model) >= 0 ? mf_token_text(c.model, mf_token_eos(c.model)) : NULL;
    if (o->think >= 0) c.kwargs = xstrdup(o->think ? "{\"enable_thinking\": true}" : "{\"enable_thinking\": false}");
    find_stops(&c);
    c.interactive = isatty(STDIN_FILENO);
    if (o->verbose) {
        fprintf(stderr, "minfer: chat template: %s; reply ends at EOG tokens", source);
        for (int i = 0; i < c.n_stops; i++) fprintf(stderr, "%s\"%s\"", i ? ", " : " and at ", c.stops[i]);
        fprintf(stderr, "\n");
    }

    if (o->session && !(session_ok = session_load(&c, o->session))) goto done;
    if (o->system) {
        if (c.n_msgs && !strcmp(c.msgs[0].role, "system")) {
            if (strcmp(c.msgs[0].content, o->system)) {
                free(c.msgs[0].content);
                c.msgs[0].content = utf8_clean(o->system, strlen(o->system));
                if (!c.msgs[0].content) goto done;
                fprintf(stderr, "minfer run: the system message of the session was replaced by -sys\n");
            }
        } else {
            /* put it first: append, then rotate into place */
            if (!add_msg(&c, "system", o->system, strlen(o->system))) goto done;
            msg s = c.msgs[c.n_msgs - 1];
            memmove(c.msgs + 1, c.msgs, sizeof *c.msgs * (size_t)(c.n_msgs - 1));
            c.msgs[0] = s;
        }
    }
    if (c.interactive) {
        fprintf(stderr, "minfer chat: %s, template %s. /help lists commands; Ctrl-C stops a reply.\n",
                mf_model_desc(c.model), source);
        if (c.n_msgs) print_history(&c);
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: a signal must wake a blocked wait at the prompt */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    bool first = o->prompt != NULL;
    int prompt_intr = 0;
    for (;;) {
        char *line;
        bool intr = false;
        if (g_quit) break;
        if (first) {
            line = xstrdup(o->prompt);
            first = false;
        } else {
            g_sigint = 0;
            line = read_message(&c, &lb, &intr);
        }
        if (g_quit) {
            free(line);
            break;
        }
        if (!line) {
            if (intr) {
                if (++prompt_intr >= 2) {
                    fputc('\n', stdout);
                    break;
                }
                printf("\n(Ctrl-C again to exit, /help for commands)\n");
                fflush(stdout);
                continue;
            }
            if (c.interactive) fputc('\n', stdout);
            break; /* end of input */
        }
        prompt_intr = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) {
            free(line);
            break;
        } else if (!strcmp(line, "/help")) {
            help();
        } else if (!strcmp(line, "/clear")) {
            clear_conversation(&c);
            printf("[conversation cleared]\n");
            fflush(stdout);
        } else if (!strcmp(line, "/regen")) {
            if (c.n_msgs && !strcmp(c.msgs[c.n_msgs - 1].role, "assistant")) {
                pop_msg(&c);
                respond(&c);
            } else {
                printf("[nothing to regenerate]\n");
                fflush(stdout);
            }
        } else if (line[0] == '/' && line[1] && !strchr(line, ' ') && !strchr(line, '\n')) {
            printf("[unknown command %s; /help lists them]\n", line);
            fflush(stdout);
        } else if (line[0]) {
            if (!add_msg(&c, "user", line, strlen(line))) {
                free(line);
                fprintf(stderr, "minfer run: out of memory\n");
                goto done;
            }
            if (!respond(&c)) pop_msg(&c);
        }
        free(line);
    }
    rc = 0;
done:
    if (o->session && session_ok && c.ctx && rc == 0 && !session_save(&c, o->session)) rc = 1;
    free(lb.buf);
    while (c.n_msgs) pop_msg(&c);
    free(c.msgs);
    for (int i = 0; i < c.n_stops; i++) free(c.stops[i]);
    free(c.kwargs);
    free(c.tmpl);
    free(c.cache);
    mf_context_free(c.ctx);
    mf_model_free(c.model);
    return rc;
}
