/* test_info_traits.c - `minfer info` on each zoo model prints the traits the
 * forward pass honours for it (the "qwen3: QK-norm, decoupled head
 * dim" example and one or two distinguishing traits per family). */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

static void expect(const char *model, const char *w1, const char *w2) {
    char cmd[1024], out[1 << 16];
    snprintf(cmd, sizeof cmd, "%s info ../shared/models/zoo/%s.gguf 2>&1 | grep '^traits:'", test_minfer_bin(), model);
    int rc = test_run(cmd, out, sizeof out);
    CHECK(rc == 0, "%s: no traits line", model);
    CHECK(strstr(out, w1) != NULL, "%s: traits lack '%s': %s", model, w1, out);
    CHECK(!w2 || strstr(out, w2) != NULL, "%s: traits lack '%s': %s", model, w2, out);
}

int main(void) {
    expect("qwen3", "qwen3: ", "QK-norm");
    expect("qwen3", "decoupled head dim 32", NULL);
    expect("qwen2", "QKV bias", "RoPE NeoX");
    expect("llama", "RoPE normal", "separate output head");
    expect("gemma2", "attention soft-cap 50", "sliding window 8 on 2 of 3 layers");
    expect("gemma3", "sliding window 8 on 5 of 6 layers", "linear RoPE scaling x8");
    expect("phi3", "fused QKV", "fused gate-up");
    expect("granite", "residual scale 0.22", "logit scale 1/8");
    expect("gpt2", "learned absolute positions", "LayerNorm");
    expect("starcoder2", "LayerNorm", "output and FFN biases");
    expect("qwen3moe", "MoE 4 experts, top 2", "weights renormalised");
    expect("mixtral", "MoE 4 experts, top 2", "tied embeddings");
    return test_summary("test_info_traits");
}
