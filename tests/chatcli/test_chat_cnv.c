/* test_chat_cnv.c - `minfer run --cnv` end to end on stories260K with a real
 * chat template (Qwen2.5's, ChatML-style) and greedy decoding.
 *
 * On a pseudo-terminal, like a user: three turns with /regen and /clear - turn
 * 2 prefills only its new tokens (the whole of turn 1, prompt and reply, is
 * reused from the KV cache), /regen prefills one token and gives the same
 * greedy reply, after /clear the first reply comes back exactly; Ctrl-C stops
 * a reply and the session goes on; Ctrl-C twice at the prompt exits cleanly.
 * Over a pipe: the ChatML fallback says so, commands, -sys, --think, a stop
 * string from the template's end marker, /regen with sampling, and --session: a conversation saved after two turns and
 * resumed in a new process prefills nothing of its history and gives the
 * uninterrupted run's third reply; damaged or foreign session files are
 * refused and left as they were. */
#include "pty.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MODEL "../shared/models/stories260K.gguf"
#define TMPL "../shared/chat/templates/Qwen-Qwen2.5-7B-Instruct.jinja"
#define T 60.0 /* seconds any one step may take (ASan builds are slow) */

/* "[turn K: prefill N new tokens, R reused from the cache" after offset `from` */
static bool turn_line(const char *s, int k, int *n_new, int *reused) {
    char key[32];
    snprintf(key, sizeof key, "[turn %d: prefill ", k);
    const char *p = strstr(s, key);
    return p && sscanf(p + strlen(key), "%d new tokens, %d reused", n_new, reused) == 2;
}

/* The text between two markers of the transcript (malloc'd). */
static char *between(const char *s, size_t from, size_t to) {
    char *r = malloc(to - from + 1);
    memcpy(r, s + from, to - from);
    r[to - from] = 0;
    return r;
}

static void terminal_turns(void) {
    char *argv[] = {(char *)test_minfer_bin(), "run", "-m", MODEL, "--chat-template", TMPL, "--cnv", "--temp", "0",
                    "-n", "16", "-t", "1", "--verbose", NULL};
    pty_proc p;
    CHECK(pty_spawn(&p, argv), "spawn");
    CHECK(pty_expect(&p, "minfer chat:", T) >= 0, "no banner: %s", p.out);
    CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt: %s", p.out);

    /* turn 1 */
    pty_send(&p, "Hello there\r");
    long a = pty_expect(&p, "Hello there\n", T);
    long b = pty_expect(&p, "\n[turn 1: prefill", T);
    CHECK(a >= 0 && b >= 0, "turn 1 missing: %s", p.out);
    if (a < 0 || b < 0) { pty_finish(&p, 5); return; }
    char *reply1 = between(p.out, (size_t)a + 12, (size_t)b);
    int n1 = -1, r1 = -1;
    CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt after turn 1");
    CHECK(turn_line(p.out + b, 1, &n1, &r1) && r1 == 0 && n1 > 20, "turn 1 line: %s", p.out + b);
    CHECK(strlen(reply1) > 0, "empty first reply");

    /* turn 2: the cache already holds turn 1's prompt and the 15 reply tokens
     * that were decoded (the 16th was sampled, never decoded) */
    pty_send(&p, "Tell me a story\r");
    a = pty_expect(&p, "Tell me a story\n", T);
    b = pty_expect(&p, "\n[turn 2: prefill", T);
    CHECK(a >= 0 && b >= 0, "turn 2 missing: %s", p.out);
    if (a < 0 || b < 0) { pty_finish(&p, 5); return; }
    char *reply2 = between(p.out, (size_t)a + 16, (size_t)b);
    int n2 = -1, r2 = -1;
    CHECK(turn_line(p.out + b, 2, &n2, &r2), "turn 2 line: %s", p.out + b);
    CHECK(r2 == n1 + 15, "turn 2 reused %d tokens; turn 1 left %d + 15 in the cache", r2, n1);
    CHECK(n2 > 0 && n2 < n1, "turn 2 prefilled %d tokens (turn 1's prompt alone was %d): not only the new ones", n2, n1);
    CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt after turn 2");

    /* /regen: the prompt is all cached; one token is decoded again for fresh logits */
    pty_send(&p, "/regen\r");
    a = pty_expect(&p, "/regen\n", T);
    b = pty_expect(&p, "\n[turn 2: prefill", T);
    CHECK(a >= 0 && b >= 0, "regen missing: %s", p.out);
    if (a < 0 || b < 0) { pty_finish(&p, 5); return; }
    char *regen = between(p.out, (size_t)a + 7, (size_t)b);
    int n3 = -1, r3 = -1;
    CHECK(turn_line(p.out + b, 2, &n3, &r3) && n3 == 1 && r3 == n2 + r2 - 1,
          "regen should prefill 1 token and reuse %d: %s", n2 + r2 - 1, p.out + b);
    CHECK(!strcmp(regen, reply2), "greedy /regen differs:\n'%s'\n'%s'", regen, reply2);
    CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt after /regen");

    /* /clear, then turn 1 again: everything prefilled anew, the same reply */
    pty_send(&p, "/clear\r");
    CHECK(pty_expect(&p, "[conversation cleared]\n", T) >= 0, "no /clear notice: %s", p.out + p.mark);
    CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt after /clear");
    pty_send(&p, "Hello there\r");
    a = pty_expect(&p, "Hello there\n", T);
    b = pty_expect(&p, "\n[turn 1: prefill", T);
    CHECK(a >= 0 && b >= 0, "turn after /clear missing: %s", p.out);
    if (a >= 0 && b >= 0) {
        char *again = between(p.out, (size_t)a + 12, (size_t)b);
        int n4 = -1, r4 = -1;
        CHECK(turn_line(p.out + b, 1, &n4, &r4) && n4 == n1 && r4 == 0, "after /clear: %s", p.out + b);
        CHECK(!strcmp(again, reply1), "after /clear the first reply differs:\n'%s'\n'%s'", again, reply1);
        free(again);
    }
    CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt");
    pty_send(&p, "/help\r");
    CHECK(pty_expect(&p, "/regen", T) >= 0 && pty_expect(&p, "> ", T) >= 0, "no /help");
    pty_send(&p, "/exit\r");
    int rc = pty_finish(&p, T);
    CHECK(rc == 0, "/exit: status %d", rc);
    fprintf(stderr, "terminal: reply 1 '%s'\n          reply 2 '%s'\n          prefill %d, then %d new + %d reused\n",
            reply1, reply2, n1, n2, r2);
    free(reply1);
    free(reply2);
    free(regen);
}

/* Ctrl-C during a reply stops it, the conversation goes on; twice at the prompt exits. */
static void terminal_ctrl_c(void) {
    /* --ignore-eos and no -n: a reply runs until the context is full (seconds), so there is time to stop it */
    char *argv[] = {(char *)test_minfer_bin(), "run", "-m", MODEL, "--chat-template", TMPL, "--cnv", "--temp", "0",
                    "--ignore-eos", "-c", "2048", "-t", "1", NULL};
    pty_proc p;
    CHECK(pty_spawn(&p, argv), "spawn");
    CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt: %s", p.out);
    const char *msgs[] = {"Tell me a story\r", "Hi\r"};
    for (int i = 0; i < 2; i++) {
        pty_send(&p, msgs[i]);
        CHECK(pty_expect(&p, i ? "Hi\n" : "Tell me a story\n", T) >= 0, "no echo");
        CHECK(pty_wait_bytes(&p, 40, T), "reply %d did not start", i + 1);
        pty_send(&p, "\x03");
        CHECK(pty_expect(&p, "[interrupted]\n", T) >= 0, "Ctrl-C did not stop reply %d: %s", i + 1, p.out + p.mark);
        CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt after Ctrl-C");
    }
    pty_send(&p, "\x03");
    CHECK(pty_expect(&p, "Ctrl-C again to exit", T) >= 0, "first Ctrl-C at the prompt: %s", p.out + p.mark);
    CHECK(pty_expect(&p, "> ", T) >= 0, "no prompt after the first Ctrl-C");
    pty_send(&p, "\x03");
    int rc = pty_finish(&p, T);
    CHECK(rc == 0, "second Ctrl-C at the prompt: status %d", rc);
}

/* ---- piped ------------------------------------------------------------- */

static char g_out[1 << 14], g_dir[64];

static int chat(const char *input, const char *args, const char *errfile) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "printf '%s' | %s run -m " MODEL " --cnv -t 1 %s 2>%s/%s", input, test_minfer_bin(), args,
             g_dir, errfile ? errfile : "err.txt");
    return test_run(cmd, g_out, sizeof g_out);
}

static char *err_text(const char *errfile) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", g_dir, errfile ? errfile : "err.txt");
    return test_read_file(p, NULL);
}

static void piped(void) {
    /* no template in the GGUF: ChatML, and it says so */
    int rc = chat("Hi\\n", "--temp 0 -n 4", NULL);
    char *e = err_text(NULL);
    CHECK(rc == 0 && e && strstr(e, "no tokenizer.chat_template; using ChatML"), "fallback: rc %d, %s", rc, e);
    free(e);
    /* commands */
    rc = chat("/regen\\n/nope\\n/help\\n", "--temp 0 -n 4", NULL);
    CHECK(rc == 0 && strstr(g_out, "[nothing to regenerate]") && strstr(g_out, "[unknown command /nope") &&
              strstr(g_out, "/clear") && strstr(g_out, "/exit"),
          "commands: %s", g_out);
    rc = chat("", "--temp 0", NULL);
    CHECK(rc == 0 && !g_out[0], "empty input: rc %d, '%s'", rc, g_out);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s run -m " MODEL " -sys hi -p x 2>&1", test_minfer_bin());
    rc = test_run(cmd, g_out, sizeof g_out);
    CHECK(rc == 2 && strstr(g_out, "need --cnv"), "-sys without --cnv: rc %d %s", rc, g_out);

    /* -sys replaces the template's default system message (Qwen's own is longer) */
    int n_def = -1, n_sys = -1, r;
    chat("Hi\\n", "--chat-template " TMPL " --temp 0 -n 4 --verbose", NULL);
    e = err_text(NULL);
    CHECK(e && turn_line(e, 1, &n_def, &r), "no turn line: %s", e);
    free(e);
    chat("Hi\\n", "--chat-template " TMPL " --temp 0 -n 4 --verbose -sys 'Be brief.'", NULL);
    e = err_text(NULL);
    CHECK(e && turn_line(e, 1, &n_sys, &r) && n_sys < n_def, "-sys: %d tokens vs %d with the default", n_sys, n_def);
    free(e);
    /* --no-think makes Qwen3's template add an empty <think></think> block */
    int n_think = -1, n_nothink = -1;
    chat("Hi\\n", "--chat-template ../shared/chat/templates/Qwen-Qwen3-0.6B.jinja --temp 0 -n 4 --verbose --think", NULL);
    e = err_text(NULL);
    CHECK(e && turn_line(e, 1, &n_think, &r), "--think: %s", e);
    free(e);
    chat("Hi\\n", "--chat-template ../shared/chat/templates/Qwen-Qwen3-0.6B.jinja --temp 0 -n 4 --verbose --no-think", NULL);
    e = err_text(NULL);
    CHECK(e && turn_line(e, 1, &n_nothink, &r) && n_nothink > n_think, "--no-think: %d tokens, --think %d", n_nothink,
          n_think);
    free(e);
    /* the template's end-of-turn marker is a stop string: a template whose
     * assistant turns end in " said" stops the reply there, before -n, and
     * "said" is never shown (it is held back until it can be ruled out) */
    char tpath[128], targs[256];
    snprintf(tpath, sizeof tpath, "%s/said.jinja", g_dir);
    FILE *tf = fopen(tpath, "w");
    fputs("{%- for m in messages -%}{{ m.role }}: {{ m.content }}{% if m.role == 'assistant' %} said\n"
          "{% else %}\n{% endif %}{%- endfor -%}{% if add_generation_prompt %}assistant:{% endif %}", tf);
    fclose(tf);
    snprintf(targs, sizeof targs, "--chat-template %s --temp 0 -n 60 --verbose", tpath);
    rc = chat("Tell me a story\\nAnd?\\n", targs, NULL);
    e = err_text(NULL);
    int n_new = -1, n_reused = -1, n_gen = -1;
    const char *tl = e ? strstr(e, "[turn 1:") : NULL;
    CHECK(rc == 0 && e && strstr(e, "at \"said\""), "stop string not taken from the template: %s", e);
    CHECK(tl && sscanf(strstr(tl, "reply "), "reply %d tokens", &n_gen) == 1 && n_gen < 60,
          "reply did not stop at \"said\": %s", e);
    CHECK(g_out[0] && !strstr(g_out, "said"), "stop string shown: %s", g_out);
    CHECK(e && turn_line(e, 2, &n_new, &n_reused) && n_reused > 0, "turn after a stop string: %s", e);
    free(e);

    /* with sampling, /regen draws a different reply */
    char one[sizeof g_out];
    chat("Hello\\n", "--temp 1 --seed 3 -n 12", NULL);
    snprintf(one, sizeof one, "%s", g_out);
    chat("Hello\\n/regen\\n", "--temp 1 --seed 3 -n 12", NULL);
    CHECK(one[0] && !strncmp(g_out, one, strlen(one)) && strcmp(g_out + strlen(one), one),
          "/regen with sampling:\n'%s'\n'%s'", one, g_out);
}

static void piped_session(void) {
    const char *args = "--chat-template " TMPL " --temp 0 -n 16 --verbose";
    char whole[sizeof g_out], first[sizeof g_out], sess[128], args2[512];
    int rc = chat("Hello there\\nTell me a story\\nAnd then?\\n", args, "whole.txt");
    snprintf(whole, sizeof whole, "%s", g_out);
    char *ew = err_text("whole.txt");
    int n3 = -1, r3 = -1;
    CHECK(rc == 0 && ew && turn_line(ew, 3, &n3, &r3), "uninterrupted run: rc %d %s", rc, ew);
    free(ew);

    snprintf(sess, sizeof sess, "%s/chat.session", g_dir);
    snprintf(args2, sizeof args2, "%s --session %s", args, sess);
    rc = chat("Hello there\\nTell me a story\\n", args2, "part1.txt");
    snprintf(first, sizeof first, "%s", g_out);
    char *e1 = err_text("part1.txt");
    CHECK(rc == 0 && e1 && strstr(e1, "is new") && strstr(e1, "session saved"), "part 1: rc %d %s", rc, e1);
    free(e1);
    rc = chat("And then?\\n", args2, "part2.txt");
    char *e2 = err_text("part2.txt");
    char want[128];
    snprintf(want, sizeof want, "restored 4 messages and %d cached tokens (0 to prefill)", r3);
    int n3b = -1, r3b = -1;
    CHECK(rc == 0 && e2 && strstr(e2, want), "resume should say '%s': %s", want, e2);
    CHECK(e2 && turn_line(e2, 3, &n3b, &r3b) && n3b == n3 && r3b == r3,
          "resumed turn 3: %d new + %d reused; uninterrupted %d + %d", n3b, r3b, n3, r3);
    size_t lf = strlen(first);
    CHECK(!strncmp(whole, first, lf) && !strcmp(whole + lf, g_out), "resumed transcript differs:\n%s---\n%s%s", whole,
          first, g_out);
    free(e2);
    fprintf(stderr, "session: resumed with %d cached tokens, turn 3 prefilled %d new tokens as the uninterrupted run did\n",
            r3, n3);

    /* refused files stay as they were; the message says why */
    size_t len = 0;
    unsigned char *good = test_read_file(sess, &len);
    if (!good) return;
    char bad[128];
    snprintf(bad, sizeof bad, "%s/bad.session", g_dir);
    struct { size_t at; const char *word; const char *extra; } cases[] = {
        {len / 2, "payload checksum", ""},
        {20, "header checksum", ""},
        {len, "truncated", ""},           /* cut in half below */
        {SIZE_MAX, "KV cache of type f16", "--cache-type f32"},
        {SIZE_MAX, "another model", "-m ../shared/models/stories260K-q4_k_m.gguf"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fopen(bad, "wb");
        size_t n = cases[i].at == len ? len / 2 : len;
        unsigned char *img = malloc(len);
        memcpy(img, good, len);
        if (cases[i].at < len) img[cases[i].at] ^= 0x20;
        fwrite(img, 1, n, f);
        fclose(f);
        snprintf(args2, sizeof args2, "%s --session %s %s", args, bad, cases[i].extra);
        rc = chat("Hi\\n", args2, NULL);
        char *e = err_text(NULL);
        CHECK(rc == 1 && e && strstr(e, cases[i].word) && strstr(e, "left as it is"), "case %zu: rc %d, %s", i, rc, e);
        CHECK(!g_out[0], "case %zu: a refused session still chatted: %s", i, g_out);
        size_t n2 = 0;
        unsigned char *after = test_read_file(bad, &n2);
        CHECK(after && n2 == n && !memcmp(after, img, n), "case %zu: the refused file was changed", i);
        free(after);
        free(img);
        free(e);
    }
    free(good);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/mf-cnv-XXXXXX");
    CHECK(mkdtemp(g_dir) != NULL, "mkdtemp");
    terminal_turns();
    terminal_ctrl_c();
    piped();
    piped_session();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    (void)!system(cmd);
    return test_summary("chat_cnv");
}
