/* fuzz_chat.c - libFuzzer harness for the chat-template interpreter (clang
 * only; see tests/chat/CMakeLists.txt). The input is a template: checked,
 * then rendered over a fixed conversation with tools. Every refusal must
 * come with a message, and a render must return a NUL-terminated
 * string of the length it reports. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "minfer.h"

static void require(int cond) {
    if (!cond) abort(); /* the fuzzer reports the input */
}

/* a message, though not always one line: raise_exception() passes the
 * template's own text through */
static void has_error(void) {
    const char *msg = mf_last_error();
    require(msg && msg[0] != 0);
}

static const char conv[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Hi \\u00e9 <b>\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\", \"function\":"
    " {\"name\": \"f\", \"arguments\": {\"x\": [1, 2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"content\": \"42\"}, {\"role\": \"user\", \"content\": \"ok\"}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}]}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *tmpl = malloc(size + 1);
    if (!tmpl) return 0;
    memcpy(tmpl, data, size);
    tmpl[size] = 0;
    if (mf_chat_check(tmpl)) has_error();
    mf_chat_params p = mf_chat_default_params();
    char *out = NULL;
    size_t len = 0;
    if (mf_chat_render(tmpl, conv, &p, &out, &len)) {
        has_error();
    } else {
        require(out != NULL && out[len] == 0);
        free(out);
    }
    char end[64];
    require(mf_chat_turn_end(tmpl, &p, end, sizeof end) < sizeof end);
    free(tmpl);
    return 0;
}
