/* lql.c - `minfer lql DIR [-e 'stmt; ...'] [-f file.lql] [--json]`: run LQL
 * statements against a vindex, or read them from stdin (a REPL when stdin
 * is a terminal; each line, or lines up to one ending in ';', is run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "minfer.h"

static void usage(FILE *f) {
    fprintf(f, "usage: minfer lql DIR [-e 'STATEMENT; ...'] [-f FILE.lql] [--json] [-t N]\n"
               "                 [--hnsw [--hnsw-m M] [--hnsw-ef EF] [--hnsw-efc N] [--hnsw-no-cache]]\n"
               CLI_HNSW_USAGE
               "  statements (keywords in any case; ';' separates them; -- comments):\n"
               "    DESCRIBE \"entity\" [AT LAYER n | LAYERS a-b] [TOP k]   features the entity's embedding activates\n"
               "    WALK \"prompt\" [LAYERS a-b] [TOP k]                    per layer the top features of the last position\n"
               "    SELECT * FROM FEATURES [WHERE layer = n AND feature = f AND token = \"x\"]\n"
               "                           [NEAREST TO \"x\" AT LAYER n] [LIMIT k]\n"
               "    INFER \"prompt\" [TOP k] [WALK k | DENSE | COMPARE [k]]   next-token distribution\n"
               "    SHOW LAYERS | FEATURES [AT LAYER n] [LIMIT k] | STATS | PATCHES\n"
               "    DELETE FROM FEATURES WHERE layer = n AND feature = f     drop a feature (in memory)\n"
               "    EXPLAIN INFER \"prompt\" [TOP k]                          the features that carried the top token\n"
               "    INSERT INTO EDGES [(entity, relation, target)] VALUES (\"e\", \"r\", \"t\") [AT LAYER n] [ALPHA a]\n"
               "                           a new feature: the prompt (r with {} = e, else \"e r\") continues with t\n"
               "    UPDATE FEATURES SET down = \"token\" [ALPHA a] WHERE layer = n AND feature = f\n"
               "    BEGIN PATCH \"name\" | SAVE PATCH [\"file.vlp\"] | APPLY PATCH \"file.vlp\"\n"
               "                           the edits as a patch naming its base model (in memory until saved)\n"
               "    COMPILE INTO MODEL \"file.gguf\" | COMPILE INTO VINDEX \"dir\"  the edits baked into a wider FFN\n"
               "  without -e or -f, statements are read from stdin (a prompt when it is a terminal)\n");
}

static int run_text(mf_lql *q, const char *text, bool json) {
    char *out = NULL;
    mf_status s = mf_lql_run(q, text, strlen(text), json, &out);
    if (out) fputs(out, stdout);
    free(out);
    fflush(stdout);
    if (s) {
        fprintf(stderr, "minfer lql: %s\n", mf_last_error());
        return 1;
    }
    return 0;
}

int cmd_lql(int argc, char **argv) {
    const char *dir = NULL, *expr = NULL, *file = NULL;
    bool json = false;
    long threads = 0;
    cli_hnsw hn = CLI_HNSW_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int h = cli_hnsw_opt("lql", a, v, &hn);
        if (h < 0) return 2;
        if (h) {
            i += h - 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-e") && v) expr = v, i++;
        else if (!strcmp(a, "-f") && v) file = v, i++;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "-t") && v) {
            if (!cli_int("lql", a, v, 0, 512, &threads)) return 2;
            i++;
        } else if (a[0] != '-' && !dir) dir = a;
        else {
            fprintf(stderr, "minfer lql: unexpected argument '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }
    if (!cli_hnsw_check("lql", &hn)) return 2;
    mf_lql *q;
    if (mf_lql_open(dir, (int32_t)threads, &q)) {
        fprintf(stderr, "minfer lql: %s\n", mf_last_error());
        return 1;
    }
    if (!cli_hnsw_apply("lql", &hn, mf_lql_vindex(q))) {
        mf_lql_free(q);
        return 2;
    }
    int rc = 0;
    if (expr || file) {
        if (file) {
            char *t = cli_read_file(file, NULL);
            if (!t) {
                fprintf(stderr, "minfer lql: cannot read %s\n", file);
                rc = 1;
            } else {
                rc = run_text(q, t, json);
                free(t);
            }
        }
        if (!rc && expr) rc = run_text(q, expr, json);
    } else {
        const bool tty = isatty(0);
        char line[8192];
        size_t cap = 0, n = 0;
        char *acc = NULL;
        for (;;) {
            if (tty) fputs(n ? "  ...> " : "lql> ", stdout), fflush(stdout);
            if (!fgets(line, sizeof line, stdin)) break;
            size_t l = strlen(line);
            if (n + l + 1 > cap) {
                cap = (n + l + 1) * 2;
                char *na = realloc(acc, cap);
                if (!na) break;
                acc = na;
            }
            memcpy(acc + n, line, l + 1);
            n += l;
            /* a statement runs when its line ends with ';' (or, at a terminal, at any line end) */
            size_t e = n;
            while (e && (acc[e - 1] == '\n' || acc[e - 1] == ' ' || acc[e - 1] == '\r')) e--;
            if (e == 0) {
                n = 0;
                continue;
            }
            if (acc[e - 1] != ';' && !tty) continue;
            int r = run_text(q, acc, json);
            if (!tty && r) rc = r;
            n = 0;
        }
        if (n) {
            int r = run_text(q, acc, json);
            if (r) rc = r;
        }
        free(acc);
    }
    mf_lql_free(q);
    return rc;
}
