/* test_lql.c - LQL on a stories260K vindex: syntax errors name their line
 * and column and run nothing; statements return what the index and the
 * model say (DESCRIBE's TOP k rows per layer and sorted scores, SELECT's
 * filters, INFER DENSE's top token = the model's argmax, INFER COMPARE with
 * every feature agreeing with dense, SHOW STATS); INSERT / UPDATE / COMPILE
 * / EXPLAIN syntax and value errors with their positions; a named patch
 * (BEGIN, INSERT, SAVE, EXPLAIN, SHOW PATCHES, APPLY in a fresh session);
 * tables and JSON; random and mutated statements (edits too) never crash
 * (also under ASan). */
#include "testutil.h"
#include "minfer.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static mf_lql *g_q;

/* runs text as JSON; returns the rows of statement i (a new reference) */
static json_t *rows_of(const char *text, int i) {
    char *out = NULL;
    mf_status s = mf_lql_run(g_q, text, strlen(text), true, &out);
    CHECK(s == MF_OK, "'%s': %s", text, mf_last_error());
    json_t *r = NULL;
    char *line = out;
    for (int k = 0; line && k < i; k++) line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
    if (!s && line) {
        json_t *o = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
        r = json_incref(json_object_get(o, "rows"));
        json_decref(o);
    }
    free(out);
    return r;
}

/* runs text once as JSON; stmt[i] = the rows of statement i (new references) */
static void run_all(const char *text, json_t **stmt, int n) {
    char *out = NULL;
    mf_status s = mf_lql_run(g_q, text, strlen(text), true, &out);
    CHECK(s == MF_OK, "'%s': %s", text, mf_last_error());
    char *line = out;
    for (int k = 0; k < n; k++) {
        stmt[k] = NULL;
        if (!line || !*line) continue;
        json_t *o = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
        stmt[k] = json_incref(json_object_get(o, "rows"));
        json_decref(o);
        line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
    }
    free(out);
}

static void expect_error(const char *text, const char *want) {
    char *out = NULL;
    mf_status s = mf_lql_run(g_q, text, strlen(text), false, &out);
    CHECK(s != MF_OK, "'%s' accepted", text);
    if (s) CHECK(strstr(mf_last_error(), want) != NULL, "'%s': message '%s' lacks '%s'", text, mf_last_error(), want);
    CHECK(!out || !out[0] || strstr(text, "\n"), "'%s': a syntax error ran statements", text);
    free(out);
}

int main(void) {
    char dir[256], cmd[600];
    snprintf(dir, sizeof dir, "/tmp/test_lql.%d", (int)getpid());
    mf_vindex_build_params bp = mf_vindex_default_build_params();
    bp.level = MF_VINDEX_INFERENCE, bp.n_threads = 2;
    if (mf_vindex_build("../shared/models/stories260K.gguf", dir, &bp) || mf_lql_open(dir, 2, &g_q)) {
        CHECK(0, "%s: %s", dir, mf_last_error());
        return test_summary("test_lql");
    }
    /* syntax errors: position, and nothing runs */
    expect_error("SHOW STATS; DESCRIBE \"x\" TOPP 3", "line 1, column 26");
    expect_error("SHOW STATS;\n  WALK 12", "line 2, column 8: expected a quoted string");
    expect_error("SELECT name FROM FEATURES", "line 1, column 8: expected '*'");
    expect_error("DESCRIBE \"unterminated", "unterminated string");
    expect_error("INFER \"a\" TOP 0", "out of range");
    expect_error("DESCRIBE \"a\" LAYERS 3-1", "ends before it starts");
    expect_error("FROB", "unknown statement");
    expect_error("SHOW TABLES", "expected LAYERS, FEATURES, STATS or PATCHES");
    expect_error("SELECT * FROM FEATURES WHERE colour = 1", "expected layer, feature or token");
    expect_error("DESCRIBE \"a\" @", "unexpected character");
    /* runtime errors name the statement's position */
    expect_error("SHOW LAYERS;\nDESCRIBE \"girl\" AT LAYER 9", "line 2, column 1: DESCRIBE: layer 9 is out of range");
    expect_error("SELECT * FROM FEATURES WHERE feature = 9999", "feature 9999 is out of range");

    json_t *r = rows_of("show stats", 0);
    int found = 0;
    size_t i;
    json_t *row;
    json_array_foreach(r, i, row) if (!strcmp(json_string_value(json_object_get(row, "key")), "layers")) found =
        !strcmp(json_string_value(json_object_get(row, "value")), "5");
    CHECK(found, "SHOW STATS: layers is not 5");
    json_decref(r);

    r = rows_of("DESCRIBE \"girl\" LAYERS 1-3 TOP 4", 0);
    CHECK(r && json_array_size(r) == 12, "DESCRIBE LAYERS 1-3 TOP 4: %zu rows", json_array_size(r));
    json_array_foreach(r, i, row) {
        CHECK(json_integer_value(json_object_get(row, "layer")) == 1 + (json_int_t)(i / 4), "DESCRIBE row %zu: layer", i);
        if (i % 4) {
            const double prev = json_real_value(json_object_get(json_array_get(r, i - 1), "score"));
            CHECK(json_real_value(json_object_get(row, "score")) <= prev, "DESCRIBE: scores not sorted");
        }
    }
    json_decref(r);

    r = rows_of("SELECT * FROM FEATURES WHERE layer = 1 AND feature = 3", 0);
    CHECK(r && json_array_size(r) == 1 && json_integer_value(json_object_get(json_array_get(r, 0), "feature")) == 3,
          "SELECT layer 1 feature 3");
    json_decref(r);
    r = rows_of("SELECT * FROM FEATURES WHERE token = \"Lily\" LIMIT 7", 0);
    CHECK(r && json_array_size(r) == 7, "SELECT token = Lily LIMIT 7: %zu rows", json_array_size(r));
    json_array_foreach(r, i, row) {
        size_t j;
        json_t *lb;
        int hit = 0;
        json_array_foreach(json_object_get(row, "labels"), j, lb) hit |= !strcmp(json_string_value(lb), " Lily");
        CHECK(hit, "SELECT token = Lily: row %zu has no Lily label", i);
    }
    json_decref(r);
    r = rows_of("WALK \"Once upon a time\" TOP 3", 0);
    CHECK(r && json_array_size(r) == 15, "WALK TOP 3 over 5 layers: %zu rows", json_array_size(r));
    json_decref(r);

    /* INFER: the model's argmax */
    mf_model *m;
    mf_model_params mp = mf_model_default_params();
    mf_context *c;
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64;
    mf_token t[64];
    if (!mf_model_load(dir, &mp, &m) && !mf_context_new(m, &cp, &c)) {
        int n = mf_tokenize(m, "Once upon a time", 16, t, 64, true, false);
        CHECK(!mf_decode(c, t, n, false), "decode");
        const float *lg = mf_get_logits(c, -1);
        int best = 0;
        for (int v = 1; v < mf_model_n_vocab(m); v++) best = lg[v] > lg[best] ? v : best;
        char piece[64];
        int pn = mf_token_to_piece(m, best, piece, 63, true);
        piece[pn > 0 ? pn : 0] = '\0';
        r = rows_of("INFER \"Once upon a time\" TOP 3 DENSE", 0);
        CHECK(r && json_array_size(r) == 3 && !strcmp(json_string_value(json_object_get(json_array_get(r, 0), "dense")), piece),
              "INFER DENSE top-1 is not the model's argmax '%s'", piece);
        json_decref(r);
        r = rows_of("INFER \"Once upon a time\" TOP 5 COMPARE 172", 0);
        json_array_foreach(r, i, row) CHECK(!strcmp(json_string_value(json_object_get(row, "dense")),
                                                    json_string_value(json_object_get(row, "walk"))),
                                            "INFER COMPARE with every feature: rank %zu differs", i + 1);
        json_decref(r);
        mf_context_free(c);
        mf_model_free(m);
    } else CHECK(0, "%s", mf_last_error());

    /* DELETE hides a feature from DESCRIBE (and the walk); SHOW PATCHES lists it */
    expect_error("DELETE FROM FEATURES WHERE layer = 1", "needs both");
    expect_error("APPLY PATCH \"/nonexistent.vlp\"", "line 1, column 1: APPLY PATCH");
    r = rows_of("DESCRIBE \"girl\" AT LAYER 0 TOP 1", 0);
    const json_int_t f0 = json_integer_value(json_object_get(json_array_get(r, 0), "feature"));
    json_decref(r);
    char del[160];
    snprintf(del, sizeof del, "DELETE FROM FEATURES WHERE layer = 0 AND feature = %lld; SHOW PATCHES", (long long)f0);
    r = rows_of(del, 1);
    CHECK(r && json_array_size(r) == 1 && json_integer_value(json_object_get(json_array_get(r, 0), "feature")) == f0,
          "SHOW PATCHES after DELETE");
    json_decref(r);
    r = rows_of("DESCRIBE \"girl\" AT LAYER 0 TOP 1", 0);
    CHECK(r && json_integer_value(json_object_get(json_array_get(r, 0), "feature")) != f0, "a deleted feature is still described");
    json_decref(r);

    /* a table: header, rule, rows */
    char *out = NULL;
    CHECK(mf_lql_run(g_q, "SHOW LAYERS", 11, false, &out) == MF_OK && out && !strncmp(out, "layer  features", 15) &&
              strstr(out, "\n-----  --------"),
          "SHOW LAYERS table: %s", out ? out : "(null)");
    free(out);

    /* edits: malformed INSERT / UPDATE / COMPILE name their position; bad
     * values are refused at run time with the statement's position */
    expect_error("INSERT INTO EDGES VALUES (\"a\", \"b\")", "line 1, column 35: expected ','");
    expect_error("INSERT INTO EDGES (entity, target, relation) VALUES (\"a\",\"b\",\"c\")",
                 "line 1, column 28: expected the column relation");
    expect_error("INSERT INTO EDGES VALUES (\"Tim\", \"was a\", \"happy\") ALPHA 0", "column 58: ALPHA 0 is out of range");
    expect_error("INSERT INTO EDGES VALUES (\"Tim\", \"was a\", \"happy\") AT LAYER 1.5", "column 61: expected a whole number");
    expect_error("INSERT INTO EDGES VALUES (\"\", \"was a\", \"happy\")", "must not be empty");
    expect_error("INSERT INTO EDGES VALUES (\"Tim\", \"was a\", \"moon\")", "line 1, column 1: INSERT: the target \"moon\" is 3 tokens");
    expect_error("INSERT INTO EDGES VALUES (\"Tim\", \"was a\", \"happy\") AT LAYER 9", "layer 9 is out of range");
    expect_error("UPDATE FEATURES SET down = \"happy\" WHERE layer = 1", "column 51: UPDATE needs both");
    expect_error("UPDATE FEATURES SET down = \"happy\" WHERE layer = 1 AND feature = 999", "feature 999 of layer 1 is out of range");
    expect_error("COMPILE INTO FILE \"x\"", "line 1, column 14: expected VINDEX or MODEL");
    expect_error("EXPLAIN \"x\"", "line 1, column 9: expected INFER");
    expect_error("SAVE PATCH", "needs a file name");

    /* a named patch: INSERT makes "Tim was a" continue with " happy", EXPLAIN
     * names the inserted feature first, SAVE PATCH writes just that edit to
     * its name, and a fresh session applying the file says happy too */
    {
        /* in a session of its own: the DELETE above would be part of what
         * the insert was tuned with, but not of the patch */
        mf_lql *keep = g_q;
        CHECK(mf_lql_open(dir, 2, &g_q) == MF_OK, "open: %s", mf_last_error());
        char text[1024], vlp[300];
        snprintf(vlp, sizeof vlp, "%s.tim.vlp", dir);
        snprintf(text, sizeof text,
                 "BEGIN PATCH \"%s.tim\"; INSERT INTO EDGES (entity, relation, target) VALUES (\"Tim\", \"{} was a\", \"happy\"); "
                 "SAVE PATCH; INFER \"Tim was a\" TOP 1; EXPLAIN INFER \"Tim was a\" TOP 3; SHOW PATCHES",
                 dir);
        json_t *st[6];
        run_all(text, st, 6);
        r = st[1];
        json_t *row = json_array_get(r, 0);
        CHECK(row && json_integer_value(json_object_get(row, "layer")) == 4 &&
                  json_integer_value(json_object_get(row, "feature")) == 172 &&
                  !strcmp(json_string_value(json_object_get(row, "prompt")), "Tim was a") &&
                  !strcmp(json_string_value(json_object_get(row, "target")), " happy"),
              "INSERT row");
        json_decref(r);
        r = st[2];
        CHECK(r && json_integer_value(json_object_get(json_array_get(r, 0), "ops")) == 1 &&
                  !strcmp(json_string_value(json_object_get(json_array_get(r, 0), "saved")), vlp),
              "SAVE PATCH wrote %s with one op", vlp);
        json_decref(r);
        r = st[3];
        CHECK(r && !strcmp(json_string_value(json_object_get(json_array_get(r, 0), "dense")), " happy"), "INFER after INSERT");
        json_decref(r);
        r = st[4];
        row = json_array_get(r, 0);
        CHECK(r && json_array_size(r) == 3 && !strcmp(json_string_value(json_object_get(row, "kind")), "inserted") &&
                  json_integer_value(json_object_get(row, "feature")) == 172 &&
                  json_real_value(json_object_get(row, "logit")) > json_real_value(json_object_get(json_array_get(r, 1), "logit")),
              "EXPLAIN INFER: the inserted feature first");
        json_decref(r);
        r = st[5];
        CHECK(r && json_array_size(r) == 1 && !strcmp(json_string_value(json_object_get(json_array_get(r, 0), "op")), "insert") &&
                  !strncmp(json_string_value(json_object_get(json_array_get(r, 0), "patch")), vlp, strlen(vlp) - 4),
              "SHOW PATCHES lists the insert in its patch");
        json_decref(r);
        json_decref(st[0]);
        r = rows_of("SHOW STATS", 0);
        bool edits = false;
        size_t ri;
        json_array_foreach(r, ri, row) edits |= !strcmp(json_string_value(json_object_get(row, "key")), "edits") &&
                                                !strcmp(json_string_value(json_object_get(row, "value")),
                                                        "1 (1 inserted, 0 deleted features)");
        CHECK(edits, "SHOW STATS does not count the insert");
        json_decref(r);
        mf_lql *q2;
        char ap[400];
        snprintf(ap, sizeof ap, "APPLY PATCH \"%s\"; INFER \"Tim was a\" TOP 1", vlp);
        char *o2 = NULL;
        CHECK(mf_lql_open(dir, 2, &q2) == MF_OK && mf_lql_run(q2, ap, strlen(ap), true, &o2) == MF_OK && o2 &&
                  strstr(o2, "\"dense\":\" happy\""),
              "the saved patch in a fresh session: %s", o2 ? o2 : mf_last_error());
        free(o2);
        mf_lql_free(q2);
        unlink(vlp);
        mf_lql_free(g_q);
        g_q = keep;
    }

    /* mutations of valid statements and random bytes: refused or run, never a crash */
    static const char *seeds[] = {"DESCRIBE \"girl\" AT LAYER 2 TOP 3", "SELECT * FROM FEATURES WHERE layer = 1 LIMIT 2",
                                  "SHOW FEATURES AT LAYER 0 LIMIT 2", "SHOW STATS; SHOW LAYERS",
                                  "INSERT INTO EDGES VALUES (\"Tim\", \"was\", \"big\") AT LAYER 3 ALPHA 1.5",
                                  "UPDATE FEATURES SET down = \"big\" ALPHA 2 WHERE layer = 1 AND feature = 3"};
    uint64_t rng = 99;
    for (int it = 0; it < 600; it++) {
        char buf[160];
        const char *sd = seeds[it % 6];
        size_t n = strlen(sd);
        memcpy(buf, sd, n + 1);
        for (int k = 0; k < 1 + it % 3; k++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            buf[(rng >> 33) % n] = it % 2 ? (char)(rng >> 24) : " \"-;*=0123AT"[(rng >> 24) % 12];
        }
        out = NULL;
        if (mf_lql_run(g_q, buf, n, it % 2, &out) != MF_OK) CHECK(strstr(mf_last_error(), "line") != NULL, "no position: %s", mf_last_error());
        free(out);
    }
    mf_lql_free(g_q);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) CHECK(0, "rm");
    return test_summary("test_lql");
}
