/* test_cli_run.c - `minfer run` end to end on stories260K: greedy output is the
 * golden continuation's text (only the continuation, not the prompt), the
 * speed lines go to stderr, and a prompt from stdin gives the same text. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    /* golden once.json: the greedy continuation of "Once upon a time" begins so */
    const char *want = ", there was a little girl named Lily. She loved to play outside in the park.";
    char cmd[1024], out[8192];
    snprintf(cmd, sizeof cmd, "%s run -m ../shared/models/stories260K.gguf -p 'Once upon a time' -n 30 --temp 0 -t 2 2>/dev/null",
             test_minfer_bin());
    int rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "run exited %d", rc);
    CHECK(!strncmp(out, want, strlen(want)), "greedy output differs: '%s'", out);

    snprintf(cmd, sizeof cmd, "echo -n 'Once upon a time' | %s run -m ../shared/models/stories260K.gguf -n 30 --temp 0 2>/dev/null",
             test_minfer_bin());
    char out2[8192];
    rc = test_run(cmd, out2, sizeof out2);
    CHECK(rc == 0 && !strcmp(out, out2), "prompt from stdin gives different output: '%s'", out2);

    snprintf(cmd, sizeof cmd, "%s run -m ../shared/models/stories260K.gguf -p 'Once upon a time' -n 8 --seed 7 2>&1 >/dev/null",
             test_minfer_bin());
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "prefill:") && strstr(out, "decode:") && strstr(out, "tok/s"),
          "speed report missing on stderr: '%s'", out);

    /* sampling is deterministic for a seed and differs across seeds */
    char a[4096], b[4096], c[4096];
    snprintf(cmd, sizeof cmd, "%s run -m ../shared/models/stories260K.gguf -p 'Once upon a time' -n 40 --seed 1 2>/dev/null", test_minfer_bin());
    test_run(cmd, a, sizeof a);
    test_run(cmd, b, sizeof b);
    snprintf(cmd, sizeof cmd, "%s run -m ../shared/models/stories260K.gguf -p 'Once upon a time' -n 40 --seed 2 2>/dev/null", test_minfer_bin());
    test_run(cmd, c, sizeof c);
    CHECK(!strcmp(a, b), "same seed, different text:\n%s\n%s", a, b);
    CHECK(strcmp(a, c) != 0, "seeds 1 and 2 gave the same 40 tokens: %s", a);
    /* bench --batch: llama-batched-bench's table, one row per level, with the counts it ran */
    snprintf(cmd, sizeof cmd, "%s bench -m ../shared/models/stories260K.gguf --batch 1,3 -p 8 -n 4 -r 1 -t 2 2>/dev/null",
             test_minfer_bin());
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "bench --batch exited %d", rc);
    CHECK(!strncmp(out, "| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |\n", 76),
          "bench --batch header: '%s'", out);
    int rows = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        int pp, tg, bb, nkv;
        double t_pp, s_pp, t_tg, s_tg;
        if (sscanf(line, "| %d | %d | %d | %d | %lf | %lf | %lf | %lf |", &pp, &tg, &bb, &nkv, &t_pp, &s_pp, &t_tg, &s_tg) != 8)
            continue;
        const int want_b = rows ? 3 : 1;
        CHECK(pp == 8 && tg == 4 && bb == want_b && nkv == want_b * 12 && s_pp > 0 && s_tg > 0,
              "bench --batch row %d: PP %d TG %d B %d N_KV %d S_PP %g S_TG %g", rows, pp, tg, bb, nkv, s_pp, s_tg);
        rows++;
    }
    CHECK(rows == 2, "bench --batch printed %d rows for 2 levels", rows);
    /* bench's ceiling line: one probe per timed run, the median fraction
     * inside the printed range of the runs' own fractions */
    snprintf(cmd, sizeof cmd, "%s bench -m ../shared/models/stories260K.gguf -p 0 -n 4 -r 2 -t 2 2>&1 >/dev/null",
             test_minfer_bin());
    rc = test_run(cmd, out, sizeof out);
    {
        const char *at = strstr(out, "ceiling: tg4 decode = ");
        double pct = -1, gbs = -1, lo = -1, hi = -1;
        int runs = 0;
        CHECK(rc == 0 && at &&
                  sscanf(at, "ceiling: tg4 decode = %lf%% of %lf GB/s measured read bandwidth (median of %d runs, each "
                             "against a probe just before it: %lf-%lf%%;", &pct, &gbs, &runs, &lo, &hi) == 5,
              "bench ceiling line: rc %d, '%s'", rc, out);
        CHECK(runs == 2 && gbs > 0 && lo > 0 && lo <= pct && pct <= hi, "bench ceiling: %g%% of %g GB/s, %d runs, %g-%g%%",
              pct, gbs, runs, lo, hi);
    }
    /* MINFER_OP_PROFILE=1: ops counted by step kind. stories260K has 5
     * layers; "Once upon a time" is one prompt step, then 7 decode steps
     * for 8 tokens */
    snprintf(cmd, sizeof cmd,
             "MINFER_OP_PROFILE=1 %s run -m ../shared/models/stories260K.gguf -p 'Once upon a time' -n 8 --temp 0 -t 2 "
             "2>&1 >/dev/null", test_minfer_bin());
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0 && strstr(out, "op profile (cpu backend): "), "op profile missing: rc %d, '%s'", rc, out);
    static const struct {
        const char *op;
        long count;
    } prof[] = {{"matmul attn_output (prompt)", 5}, {"matmul attn_output (decode)", 35}, {"matmul output (prompt)", 1},
                {"matmul output (decode)", 7},      {"attention (decode)", 35},          {"kv_store (prompt)", 5}};
    for (size_t i = 0; i < sizeof prof / sizeof prof[0]; i++) {
        const char *at = strstr(out, prof[i].op);
        long n = -1;
        if (at) sscanf(at + strlen(prof[i].op), "%ld", &n);
        CHECK(n == prof[i].count, "op profile: %s counted %ld, want %ld", prof[i].op, n, prof[i].count);
    }
    snprintf(cmd, sizeof cmd, "%s bench -m ../shared/models/stories260K.gguf --batch 1,x 2>&1", test_minfer_bin());
    rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 2 && strstr(out, "--batch wants a list of sequence counts"), "bad --batch: rc %d, '%s'", rc, out);
    return test_summary("test_cli_run");
}
