/* routes_embed.c - POST /v1/embeddings: each input (a string, an array of
 * token ids, or an array of those) becomes one embedding job; vectors are
 * pooled as the model says (mean when it says nothing, or --pooling) and
 * L2-normalized, as OpenAI's are. encoding_format "base64" sends the
 * little-endian float32 bytes, which is what the openai clients ask for. */
#include "params.h"

#include <stdlib.h>
#include <string.h>

#define MAX_INPUTS 256

static char *base64(const float *v, int n) {
    static const char T[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = (const unsigned char *)v; /* x86-64 and arm64 are little-endian */
    size_t len = (size_t)n * 4, o = 0;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t x = (uint32_t)b[i] << 16 | (i + 1 < len ? (uint32_t)b[i + 1] << 8 : 0) | (i + 2 < len ? b[i + 2] : 0);
        out[o++] = T[x >> 18 & 63];
        out[o++] = T[x >> 12 & 63];
        out[o++] = i + 1 < len ? T[x >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? T[x & 63] : '=';
    }
    out[o] = 0;
    return out;
}

void srv_h_embeddings(srv_state *st, const srv_request *q, json_t *body, srv_reply *r) {
    json_t *in = json_object_get(body, "input");
    if (!in) in = json_object_get(body, "content"); /* llama-server's name */
    json_t *list[MAX_INPUTS];
    const int n = srv_prompt_list(in, "input", false, list, MAX_INPUTS,
                                  "must be a non-empty string, an array of token ids, or an array of those", r);
    if (n < 0) return;
    json_t *fmt = json_object_get(body, "encoding_format");
    bool b64 = false;
    if (fmt && !json_is_null(fmt)) {
        if (!json_is_string(fmt) || (strcmp(json_string_value(fmt), "float") && strcmp(json_string_value(fmt), "base64"))) {
            srv_error(r, 400, "encoding_format", "encoding_format: must be \"float\" or \"base64\"");
            return;
        }
        b64 = !strcmp(json_string_value(fmt), "base64");
    }
    srv_job *jobs[MAX_INPUTS];
    int n_jobs = 0;
    const int32_t ctx = srv_sched_slot_ctx(st->sched);
    for (int i = 0; i < n; i++) {
        int32_t nt = 0;
        mf_token *t = srv_prompt_tokens(st, list[i], "input", i, &nt, r);
        if (t && (nt <= 0 || nt > ctx)) {
            if (nt <= 0) srv_error(r, 400, "input", "input[%d]: empty", i);
            else srv_error(r, 400, "input", "input[%d]: has %d tokens, the context holds %d", i, nt, ctx);
            free(t);
            t = NULL;
        }
        srv_job *j = t ? srv_job_new(SRV_JOB_EMBED) : NULL;
        if (!j) {
            free(t);
            if (!r->status) srv_error(r, 500, NULL, "out of memory");
            goto done;
        }
        j->prompt = t;
        j->n_prompt = nt;
        j->index = i;
        jobs[n_jobs++] = j;
    }
    for (int i = 0; i < n_jobs; i++)
        if (!srv_sched_submit(st->sched, jobs[i])) {
            for (int k = 0; k < i; k++) atomic_store(&jobs[k]->cancel, true);
            srv_error(r, 503, NULL, "the server is busy; try again");
            r->retry_after = 1;
            goto done;
        }
    if (!srv_wait_jobs(jobs, n_jobs, q->fd)) {
        srv_error(r, 499, NULL, "the client closed the connection");
        goto done;
    }
    json_t *data = json_array();
    json_int_t total = 0;
    for (int i = 0; i < n_jobs; i++) {
        srv_job *j = jobs[i];
        if (j->finish != SRV_FIN_STOP || !j->embedding) {
            json_decref(data);
            srv_error(r, j->error_status >= 400 ? j->error_status : 500, NULL, "%s", j->error[0] ? j->error : "embedding failed");
            goto done;
        }
        json_t *e;
        if (b64) {
            char *s = base64(j->embedding, j->n_embd);
            e = s ? json_string(s) : json_string("");
            free(s);
        } else {
            e = json_array();
            for (int k = 0; k < j->n_embd; k++) json_array_append_new(e, json_real(j->embedding[k]));
        }
        json_array_append_new(data, json_pack("{s:s,s:i,s:o}", "object", "embedding", "index", i, "embedding", e));
        total += j->n_prompt;
    }
    srv_json(r, 200, json_pack("{s:s,s:o,s:s,s:{s:I,s:I}}", "object", "list", "data", data, "model", st->model_id,
                               "usage", "prompt_tokens", total, "total_tokens", total));
done:
    for (int i = 0; i < n_jobs; i++) srv_job_unref(jobs[i]);
}
