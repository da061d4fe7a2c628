/* serve.c - `minfer serve`: the OpenAI-compatible HTTP server (src/server/).
 * Listens first (GET /health answers 503 while the model loads), then loads
 * the model and starts the scheduler; SIGINT/SIGTERM stop it gracefully. */
#include <errno.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "server/http.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer serve -m model.gguf [options]\n"
            "  An OpenAI-compatible server: /v1/chat/completions, /v1/completions, /v1/embeddings,\n"
            "  /v1/models, /tokenize, /detokenize, /apply-template, /health, /props, /slots, /metrics,\n"
            "  and a chat page at /.\n\n"
            "  -m, --model FILE          the GGUF model\n"
            "  --host ADDR               address to bind (default 127.0.0.1; 0.0.0.0 for every interface)\n"
            "  --port N                  port (default 8080; 0 picks a free one)\n"
            "  -np, --parallel N         requests decoded together, one KV sequence each (default 4)\n"
            "  -c, --ctx-size N          KV positions of all slots together (default: each slot gets the\n"
            "                            model's training context, at most 4096)\n"
            "  -b, --batch-size N        tokens per forward pass: decode tokens plus prompt chunks (default 512)\n"
            "  -t, --threads N           worker threads (default: all CPUs)\n"
            "  --cache-type T            KV cache type: f32, f16 (default) or q8_0\n"
            "  --api-key KEY             require \"Authorization: Bearer KEY\" (all but /health and /)\n"
            "  --api-key-file F          the same, the key read from the first line of F\n"
            "  --alias NAME              the model name /v1/models reports (default: the file name)\n"
            "  --timeout S               close connections idle for S seconds (default 600)\n"
            "  --chat-template FILE      a Jinja chat template instead of the model's\n"
            "  --pooling P               embeddings: mean, cls or last (default: the model's; mean if none)\n"
            "  --reasoning-format F      deepseek: <think> text goes to reasoning_content (default);\n"
            "                            none: it stays in content\n"
            "  --max-queue N             requests waiting for a slot before 503 (default 64)\n"
            "  --max-connections N       open connections (default 256)\n"
            "  --max-body N              bytes of a request body before 413 (default 8388608)\n"
            "  --shutdown-timeout S      on SIGINT/SIGTERM, let running requests finish for S seconds (default 5)\n"
            "  --backend NAME            cpu (default), cpu-ref or cuda\n"
            "  -ngl, --gpu-layers N|all|auto  llama.cpp's layer offload: the last N layers on the GPU (cuda), all, or as many as fit\n"
            "  -md, --draft-model F      speculative decoding: F (same vocabulary) drafts for every request\n"
            "  --lookup                  speculative decoding by prompt lookup (no second model)\n"
            "  --draft-max N             tokens per draft at most (default 16; --lookup: 8; at most 64)\n"
            "  --draft-min N             drafts shorter than N are not tried (default 0)\n"
            "  --draft-p-min P           the draft model stops below this top probability (default 0.75)\n"
            "                            (a request's \"speculative\": {type, n_max, n_min, p_min} overrides them)\n"
            "  -v, --verbose             log the engine's choices and HTTP errors\n");
}

static char *read_key_file(const char *path) {
    char *s = cli_read_file(path, NULL);
    if (!s) return NULL;
    s[strcspn(s, "\r\n")] = 0;
    return s;
}

/* The template's end-of-turn text, found by rendering a reply whose content
 * is a sentinel and taking what follows it ("<|im_end|>", "<|eot_id|>"). */
static void find_turn_end(srv_state *st) {
    mf_chat_params p = mf_chat_default_params();
    p.bos_token = st->bos_text;
    p.eos_token = st->eos_text;
    char end[64];
    if (mf_chat_turn_end(st->tmpl, &p, end, sizeof end)) st->tmpl_stops[st->n_tmpl_stops++] = strdup(end);
    if (st->eos_text && *st->eos_text && (!st->n_tmpl_stops || strcmp(st->tmpl_stops[0], st->eos_text)))
        st->tmpl_stops[st->n_tmpl_stops++] = strdup(st->eos_text);
}

int cmd_serve(int argc, char **argv) {
    srv_config cfg = {
        .host = "127.0.0.1", .port = 8080, .parallel = 4, .n_batch = 512, .timeout_s = 600, .max_queue = 64,
        .max_connections = 256, .max_body = 8u << 20, .kv_type = MF_KV_F16, .pooling = MF_POOLING_UNSPECIFIED,
        .shutdown_grace_s = 5, .draft_max = -1, .draft_p_min = 0.75f,
    };
    const char *draft_path = NULL;
    long total_ctx = 0;
    const char *tmpl_file = NULL, *key_file = NULL;
    cli_dev dev = CLI_DEV_INIT;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long x;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            cfg.verbose = true;
            continue;
        }
        if (!strcmp(a, "--lookup")) {
            cfg.lookup = true;
            continue;
        }
        const int d = cli_dev_opt("serve", a, v, &dev);
        if (d < 0) return 2;
        if (d > 0) {
            i++;
            continue;
        }
        static const char *const WITH_VALUE[] = {
            "-m", "--model", "--host", "--port", "-np", "--parallel", "-c", "--ctx-size", "-b", "--batch-size", "-t",
            "--threads", "--cache-type", "--api-key", "--api-key-file", "--alias", "--timeout", "--chat-template",
            "--max-queue", "--max-connections", "--max-body", "--shutdown-timeout", "--pooling", "--reasoning-format",
            "-md", "--draft-model", "--model-draft", "--draft-max", "--draft-min", "--draft-p-min"};
        bool known = false;
        for (size_t k = 0; k < sizeof WITH_VALUE / sizeof WITH_VALUE[0]; k++) known |= !strcmp(a, WITH_VALUE[k]);
        if (!known) {
            fprintf(stderr, "minfer serve: unknown option %s (see --help)\n", a);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "minfer serve: option %s needs a value (see --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) cfg.model_path = v;
        else if (!strcmp(a, "-md") || !strcmp(a, "--draft-model") || !strcmp(a, "--model-draft")) draft_path = v;
        else if (!strcmp(a, "--draft-max")) { if (!cli_int("serve", a, v, 1, SRV_MAX_DRAFT, &x)) return 2; cfg.draft_max = (int)x; }
        else if (!strcmp(a, "--draft-min")) { if (!cli_int("serve", a, v, 0, SRV_MAX_DRAFT, &x)) return 2; cfg.draft_min = (int)x; }
        else if (!strcmp(a, "--draft-p-min")) {
            double p;
            if (!cli_float("serve", a, v, &p)) return 2;
            if (!(p >= 0 && p <= 1)) { fprintf(stderr, "minfer serve: --draft-p-min must be in [0, 1]\n"); return 2; }
            cfg.draft_p_min = (float)p;
        }
        else if (!strcmp(a, "--host")) cfg.host = v;
        else if (!strcmp(a, "--port")) { if (!cli_int("serve", a, v, 0, 65535, &x)) return 2; cfg.port = (int)x; }
        else if (!strcmp(a, "-np") || !strcmp(a, "--parallel")) { if (!cli_int("serve", a, v, 1, 256, &x)) return 2; cfg.parallel = (int)x; }
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) { if (!cli_int("serve", a, v, 0, 1 << 24, &total_ctx)) return 2; }
        else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) { if (!cli_int("serve", a, v, 1, 1 << 16, &x)) return 2; cfg.n_batch = (int)x; }
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) { if (!cli_int("serve", a, v, 0, 1024, &x)) return 2; cfg.n_threads = (int)x; }
        else if (!strcmp(a, "--cache-type")) { if (!cli_kv_type("serve", v, &cfg.kv_type)) return 2; }
        else if (!strcmp(a, "--api-key")) cfg.api_key = v;
        else if (!strcmp(a, "--api-key-file")) key_file = v;
        else if (!strcmp(a, "--alias")) cfg.alias = v;
        else if (!strcmp(a, "--timeout")) { if (!cli_int("serve", a, v, 1, 86400, &x)) return 2; cfg.timeout_s = (int)x; }
        else if (!strcmp(a, "--chat-template")) tmpl_file = v;
        else if (!strcmp(a, "--max-queue")) { if (!cli_int("serve", a, v, 1, 1 << 20, &x)) return 2; cfg.max_queue = (int)x; }
        else if (!strcmp(a, "--max-connections")) { if (!cli_int("serve", a, v, 1, 65536, &x)) return 2; cfg.max_connections = (int)x; }
        else if (!strcmp(a, "--max-body")) { if (!cli_int("serve", a, v, 1024, 1L << 30, &x)) return 2; cfg.max_body = (size_t)x; }
        else if (!strcmp(a, "--shutdown-timeout")) { if (!cli_int("serve", a, v, 0, 3600, &x)) return 2; cfg.shutdown_grace_s = (int)x; }
        else if (!strcmp(a, "--pooling")) {
            if (!strcmp(v, "mean")) cfg.pooling = MF_POOLING_MEAN;
            else if (!strcmp(v, "cls")) cfg.pooling = MF_POOLING_CLS;
            else if (!strcmp(v, "last")) cfg.pooling = MF_POOLING_LAST;
            else { fprintf(stderr, "minfer serve: unknown --pooling '%s' (mean, cls, last)\n", v); return 2; }
        } else if (!strcmp(a, "--reasoning-format")) {
            if (!strcmp(v, "none")) cfg.reasoning_inline = true;
            else if (!strcmp(v, "deepseek")) cfg.reasoning_inline = false;
            else { fprintf(stderr, "minfer serve: unknown --reasoning-format '%s' (deepseek, none)\n", v); return 2; }
        }
    }
    if (!cfg.model_path) {
        fprintf(stderr, "minfer serve: -m model.gguf is required (see --help)\n");
        return 2;
    }
    char *key_buf = NULL;
    if (key_file) {
        if (!(key_buf = read_key_file(key_file)) || !*key_buf) {
            fprintf(stderr, "minfer serve: cannot read an API key from %s: %s\n", key_file, key_buf ? "empty" : strerror(errno));
            free(key_buf);
            return 2;
        }
        cfg.api_key = key_buf;
    }
    if (draft_path && cfg.lookup) {
        fprintf(stderr, "minfer serve: --draft-model and --lookup exclude each other\n");
        return 2;
    }
    if (cfg.draft_max < 0) cfg.draft_max = cfg.lookup ? 8 : 16;
    if (cfg.draft_min > cfg.draft_max) {
        fprintf(stderr, "minfer serve: --draft-min %d exceeds --draft-max %d\n", cfg.draft_min, cfg.draft_max);
        return 2;
    }
    if (total_ctx > 0) cfg.n_ctx = (int)(total_ctx / cfg.parallel);
    if (total_ctx > 0 && cfg.n_ctx < 8) {
        fprintf(stderr, "minfer serve: -c %ld leaves fewer than 8 positions to each of %d slots\n", total_ctx, cfg.parallel);
        return 2;
    }

    /* Signals go to sigwait below, not to whichever thread runs; a client
     * closing its socket must not kill the process. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    srv_state st = {.cfg = cfg, .created = time(NULL)};
    atomic_init(&st.ready, false);
    atomic_init(&st.next_id, 1);
    const char *base = strrchr(cfg.model_path, '/');
    st.model_id = strdup(cfg.alias ? cfg.alias : base ? base + 1 : cfg.model_path);
    int rc = 1;
    mf_model *draft = NULL;
    srv_http *http = srv_http_start(&st);
    if (!http) goto out;
    if (!cfg.api_key && strcmp(cfg.host, "127.0.0.1") && strcmp(cfg.host, "localhost") && strcmp(cfg.host, "::1"))
        fprintf(stderr, "minfer serve: warning: listening on %s without --api-key: anyone who can reach this "
                        "address can use the model\n", cfg.host);

    mf_model_params mp = mf_model_default_params();
    mp.verbose = cfg.verbose;
    if (!cli_dev_backend("serve", &dev, &mp)) goto out;
    /* MINFER_SERVE_LOAD_DELAY_MS: a slow load, for the test of /health's 503 */
    const char *ld = getenv("MINFER_SERVE_LOAD_DELAY_MS");
    if (ld && atoi(ld) > 0) usleep((useconds_t)atoi(ld) * 1000);
    if (mf_model_load(cfg.model_path, &mp, &st.model)) {
        fprintf(stderr, "minfer serve: %s\n", mf_last_error());
        goto out;
    }
    if (draft_path) {
        mp.gpu_layers = 0; /* a draft is small: all of it on the device, whatever -ngl split the target */
        if (mf_model_load(draft_path, &mp, &draft) || mf_vocab_check_same(draft, st.model)) {
            fprintf(stderr, "minfer serve: --draft-model %s: %s\n", draft_path, mf_last_error());
            goto out;
        }
        st.cfg.draft_model = draft;
        if (cfg.verbose) fprintf(stderr, "minfer serve: draft %s\n", mf_model_desc(draft));
    }
    const char *warning = NULL;
    if (tmpl_file) {
        st.tmpl = cli_read_file(tmpl_file, NULL);
        st.tmpl_source = tmpl_file;
        if (!st.tmpl) {
            fprintf(stderr, "minfer serve: cannot read the chat template %s: %s\n", tmpl_file, strerror(errno));
            goto out;
        }
    } else if (mf_chat_template_from_gguf(cfg.model_path, &st.tmpl, &warning)) {
        fprintf(stderr, "minfer serve: %s\n", mf_last_error());
        goto out;
    } else {
        st.tmpl_source = warning ? "ChatML (fallback)" : "the model's";
        if (warning) fprintf(stderr, "minfer serve: warning: %s\n", warning);
    }
    if (mf_chat_check(st.tmpl)) {
        fprintf(stderr, "minfer serve: chat template (%s): %s\n", st.tmpl_source, mf_last_error());
        goto out;
    }
    st.bos_text = mf_token_bos(st.model) >= 0 ? mf_token_text(st.model, mf_token_bos(st.model)) : NULL;
    st.eos_text = mf_token_eos(st.model) >= 0 ? mf_token_text(st.model, mf_token_eos(st.model)) : NULL;
    find_turn_end(&st);
    st.tmpl_thinks = strstr(st.tmpl, "<think>") != NULL;
    if (srv_sched_new(st.model, &st.cfg, &st.sched) || srv_sched_start(st.sched)) {
        fprintf(stderr, "minfer serve: %s\n", mf_last_error());
        goto out;
    }
    atomic_store(&st.ready, true);
    fprintf(stderr, "minfer serve: %s ready: %d slots of %d positions, model '%s'\n", mf_model_desc(st.model),
            srv_sched_n_slots(st.sched), srv_sched_slot_ctx(st.sched), st.model_id);

    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "minfer serve: %s: stopping (running requests get %d s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
            cfg.shutdown_grace_s);
    srv_http_quiesce(http);
    srv_sched_stop(st.sched, cfg.shutdown_grace_s);
    rc = 0;
out:
    srv_http_stop(http);
    srv_sched_free(st.sched);
    mf_model_free(st.model);
    mf_model_free(draft);
    for (int i = 0; i < st.n_tmpl_stops; i++) free(st.tmpl_stops[i]);
    free(st.tmpl);
    free(st.model_id);
    free(key_buf);
    return rc;
}
