/* tools.h - tool calls in model replies (tools.c). */
#ifndef MF_SERVER_TOOLS_H
#define MF_SERVER_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

typedef enum srv_tool_fmt {
    SRV_TOOLS_GENERIC = 0,
    SRV_TOOLS_HERMES,
    SRV_TOOLS_MISTRAL,
    SRV_TOOLS_LLAMA3,
} srv_tool_fmt;

/* The calling convention a chat template teaches its model. */
srv_tool_fmt srv_tool_format(const char *tmpl);
const char *srv_tool_format_name(srv_tool_fmt f);

/* Splits a finished reply: *calls gets OpenAI tool_calls (NULL when the
 * reply has none) and *content_len the length of the leading text that is
 * content. Returns false when the reply starts a call it does not finish
 * readably (the caller then keeps it all as content). */
bool srv_tool_parse(srv_tool_fmt f, const char *text, size_t n, json_t **calls, size_t *content_len);

/* In an assistant message sent back (m, a copy the caller owns): each
 * tool_calls[].function.arguments that is a JSON string holding an object
 * becomes that object. OpenAI clients send arguments as a string, but the
 * real templates (Qwen, Hermes, Llama 3, Mistral) write them with `tojson`
 * and expect the object, which would otherwise reach the model quoted. */
void srv_tool_args_to_objects(json_t *m);

/* While streaming: how many leading bytes are content whatever follows. */
size_t srv_tool_safe(srv_tool_fmt f, const char *text, size_t n);

#endif
