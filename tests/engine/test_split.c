/* test_split.c - which side of a split model reads each tensor
 * (model/split.c), checked without a device: with the first n layers on the
 * CPU, a layer's tensors belong to exactly one side by its index; the output
 * head and its norm only to the device; the token lookup (and positions) to
 * the CPU, and a tied embedding to both; other globals (RoPE factors) to
 * both. Unsplit, the device reads everything and the CPU nothing. Models
 * with and without a tied head, and with positional embeddings (gpt2). */
#include "testutil.h"
#include "model/model.h"

#include <stdio.h>
#include <string.h>

static void check_model(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "  skip %s: not present\n", path);
        return;
    }
    fclose(f);
    mf_model_params p = mf_model_default_params();
    mf_model *m = NULL;
    if (mf_model_open(path, &p, &m)) {
        CHECK(0, "%s: %s", path, mf_last_error());
        return;
    }
    const uint32_t L = m->hp.n_layer;
    for (uint32_t n_cpu = 0; n_cpu < L; n_cpu += (L > 2 ? L / 2 : 1)) {
        m->n_cpu_layers = n_cpu;
        for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
            const mf_tensor *t = &m->tensors[i];
            const bool dev = mf_split_on_device(m, t), host = mf_split_on_host(m, t);
            const int l = mf_tensor_layer(t);
            if (!n_cpu) {
                CHECK(dev && !host, "%s unsplit: %s dev %d host %d", path, t->name, dev, host);
            } else if (l >= 0) {
                CHECK(dev == ((uint32_t)l >= n_cpu) && host == !dev, "%s, %u on the CPU: %s (layer %d) dev %d host %d",
                      path, n_cpu, t->name, l, dev, host);
            } else if (t == m->output || t == m->output_norm || t == m->output_norm_b) {
                const bool tied = t == m->token_embd;
                CHECK(dev && host == tied, "%s, %u on the CPU: head %s dev %d host %d (tied %d)", path, n_cpu, t->name,
                      dev, host, tied);
            } else if (t == m->token_embd || t == m->pos_embd) {
                CHECK(host && !dev, "%s, %u on the CPU: lookup table %s dev %d host %d", path, n_cpu, t->name, dev, host);
            } else {
                CHECK(host && dev, "%s, %u on the CPU: shared %s dev %d host %d", path, n_cpu, t->name, dev, host);
            }
        }
    }
    /* names: "blk.N." only */
    mf_tensor t = {0};
    const char *names[] = {"blk.7.attn_q.weight", "blk.x.attn_q.weight", "blk.7", "blk..attn", "token_embd.weight"};
    const int want[] = {7, -1, -1, -1, -1};
    for (int i = 0; i < 5; i++) {
        t.name = names[i];
        CHECK(mf_tensor_layer(&t) == want[i], "layer of %s: %d", names[i], mf_tensor_layer(&t));
    }
    m->n_cpu_layers = 0;
    mf_model_free(m);
}

int main(void) {
    check_model("../shared/models/stories260K.gguf");
    check_model("../shared/models/zoo/qwen2.gguf");
    check_model("../shared/models/zoo/gemma2.gguf");
    check_model("../shared/models/zoo/gpt2.gguf");
    check_model("../shared/models/zoo/phi3.gguf");
    /* a layer split asked of a host backend is refused, not ignored */
    mf_model_params p = mf_model_default_params();
    p.gpu_layers = 2;
    mf_model *m = NULL;
    CHECK(mf_model_load("../shared/models/stories260K.gguf", &p, &m) != MF_OK &&
              strstr(mf_last_error(), "gpu_layers 2 needs a device backend"),
          "gpu_layers on the cpu backend: %s", m ? "loaded" : mf_last_error());
    if (m) mf_model_free(m);
    return test_summary("test_split");
}
