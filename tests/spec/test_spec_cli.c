/* test_spec_cli.c - `minfer run` with speculative decoding: greedy text is
 * byte-identical to plain decoding with a draft model (a quantized copy of
 * the target, and the target itself as its own draft: every draft accepted)
 * and with prompt lookup, also under a grammar and a repeat penalty; the
 * statistics line counts what happened; bad pairings and flags are refused
 * with a message. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char g_plain[16384], g_spec[16384], g_err[4096];

/* stdout of `minfer run ARGS` into out; stderr into g_err */
static int run(const char *args, char *out, size_t cap) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s run %s 2>/tmp/minfer_spec_err_%d", test_minfer_bin(), args, (int)getpid());
    int rc = test_run(cmd, out, cap);
    char path[64];
    snprintf(path, sizeof path, "/tmp/minfer_spec_err_%d", (int)getpid());
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(g_err, 1, sizeof g_err - 1, f) : 0;
    g_err[n] = 0;
    if (f) fclose(f);
    remove(path);
    return rc;
}

/* the same text with and without `spec`; returns the accepted count */
static long same(const char *base, const char *spec, const char *what) {
    char args[2048];
    int rc = run(base, g_plain, sizeof g_plain);
    CHECK(rc == 0, "%s: plain run exited %d: %s", what, rc, g_err);
    snprintf(args, sizeof args, "%s %s", base, spec);
    rc = run(args, g_spec, sizeof g_spec);
    CHECK(rc == 0, "%s: speculative run exited %d: %s", what, rc, g_err);
    CHECK(strlen(g_plain) > 20, "%s: too little text to compare: '%s'", what, g_plain);
    CHECK(!strcmp(g_plain, g_spec), "%s: speculative text differs\nplain: %s\nspec:  %s", what, g_plain, g_spec);
    long steps = -1, drafted = -1, accepted = -1;
    const char *line = strstr(g_err, "speculative: ");
    CHECK(line && sscanf(line, "speculative: %ld steps, %ld drafted, %ld accepted", &steps, &drafted, &accepted) == 3,
          "%s: no statistics line: %s", what, g_err);
    CHECK(accepted >= 0 && accepted <= drafted && steps > 0, "%s: steps %ld drafted %ld accepted %ld", what, steps, drafted,
          accepted);
    return accepted;
}

int main(void) {
    const char *S = "../shared/models/stories260K.gguf", *L = "../shared/models/zoo/llama.gguf";
    char base[1024], spec[1024];

    /* a trained model and its quantized copy: a draft the target mostly agrees with */
    snprintf(base, sizeof base, "-m %s -p 'Once upon a time, there was a little girl named Lily.' -n 120 --temp 0 -t 2", S);
    snprintf(spec, sizeof spec, "-md ../shared/models/stories260K-q4_k_m.gguf --draft-p-min 0");
    long acc = same(base, spec, "stories260K, q4_k_m draft");
    CHECK(acc > 60, "stories260K with its q4_k_m copy accepted only %ld of 119 tokens", acc);
    /* the target as its own draft: everything is accepted */
    snprintf(spec, sizeof spec, "-md %s --draft-p-min 0 --draft-max 5", S);
    same(base, spec, "stories260K, its own draft");
    long steps = 0, drafted = 0, accepted = 0;
    sscanf(strstr(g_err, "speculative: "), "speculative: %ld steps, %ld drafted, %ld accepted", &steps, &drafted, &accepted);
    CHECK(drafted == accepted && accepted >= 100, "own draft: %ld drafted, %ld accepted", drafted, accepted);
    /* prompt lookup, and lookup with 1-grams and a grammar and a penalty */
    same(base, "--lookup", "stories260K, lookup");
    same(base, "--lookup --lookup-ngram 1,3 --draft-max 4", "stories260K, lookup 1-3");
    snprintf(base, sizeof base, "-m %s -p 'Once upon a time' -n 60 --temp 0 -t 2 --repeat-penalty 1.3", S);
    same(base, "--lookup --lookup-ngram 1,2", "stories260K, penalty, lookup");
    same(base, "-md ../shared/models/stories260K-q4_k_m.gguf --draft-p-min 0", "stories260K, penalty, draft");
    snprintf(base, sizeof base, "-m %s -p 'Once upon a time' -n 60 --temp 0 -t 2 --grammar 'root ::= [a-z ]+ \".\"'", S);
    same(base, "-md ../shared/models/stories260K-q4_k_m.gguf --draft-p-min 0", "stories260K, grammar, draft");
    /* a random-weight zoo model and its q8_0 copy; a batch size below the draft splits the forward */
    snprintf(base, sizeof base, "-m %s -p 'the quick brown fox' -n 64 --temp 0 -t 2 -b 3", L);
    same(base, "-md ../shared/models/zoo/llama-q8_0.gguf --draft-p-min 0 --draft-max 6", "zoo llama, q8_0 draft");
    /* a small context: drafts must stop at its end */
    snprintf(base, sizeof base, "-m %s -p 'Once upon a time' -n -1 -c 48 --temp 0 -t 2 --ignore-eos", S);
    same(base, "--lookup --lookup-ngram 1,2", "stories260K, full context, lookup");

    /* sampling with a seed is deterministic under speculation too */
    char a[8192], b[8192];
    snprintf(base, sizeof base, "-m %s -p 'Once upon a time' -n 60 --seed 3 -t 2 -md ../shared/models/stories260K-q4_k_m.gguf", S);
    CHECK(run(base, a, sizeof a) == 0 && run(base, b, sizeof b) == 0 && !strcmp(a, b) && strlen(a) > 20,
          "seeded speculative sampling is not deterministic:\n%s\n%s", a, b);

    /* refusals */
    snprintf(base, sizeof base, "-m %s -p hi -n 4 -md ../shared/models/zoo/qwen2.gguf", L);
    int rc = run(base, a, sizeof a);
    CHECK(rc == 1 && strstr(g_err, "--draft-model") && strstr(g_err, "token"), "qwen2 drafting for llama: rc %d, '%s'", rc, g_err);
    snprintf(base, sizeof base, "-m %s -p hi -n 4 -md /nonexistent.gguf", S);
    rc = run(base, a, sizeof a);
    CHECK(rc == 1 && strstr(g_err, "/nonexistent.gguf"), "missing draft: rc %d, '%s'", rc, g_err);
    snprintf(base, sizeof base, "-m %s -p hi --lookup -md %s", S, S);
    rc = run(base, a, sizeof a);
    CHECK(rc == 2 && strstr(g_err, "exclude"), "--lookup with -md: rc %d, '%s'", rc, g_err);
    snprintf(base, sizeof base, "-m %s -p hi --lookup --draft-min 9 --draft-max 4", S);
    rc = run(base, a, sizeof a);
    CHECK(rc == 2 && strstr(g_err, "--draft-min"), "draft-min > draft-max: rc %d, '%s'", rc, g_err);
    snprintf(base, sizeof base, "-m %s -p hi --lookup --lookup-ngram 3,1", S);
    rc = run(base, a, sizeof a);
    CHECK(rc == 2 && strstr(g_err, "--lookup-ngram"), "bad --lookup-ngram: rc %d, '%s'", rc, g_err);
    snprintf(base, sizeof base, "-m %s --cnv --lookup", S);
    rc = run(base, a, sizeof a);
    CHECK(rc == 2 && strstr(g_err, "--cnv"), "--lookup with --cnv: rc %d, '%s'", rc, g_err);
    return test_summary("test_spec_cli");
}
