/* main.c - `minfer <subcommand> ...`: dispatches to one file per subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} g_cmds[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"info", cmd_info, "print a GGUF file's metadata and tensor table"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"logits", cmd_logits, "write the logits of every prompt position to a file"},
    {"template", cmd_template, "render a chat template over a conversation"},
    {"perplexity", cmd_perplexity, "perplexity of a model over a text file (llama-perplexity's method)"},
    {"embed", cmd_embed, "print the embedding of a text, pooled and normalized (llama-embedding style)"},
    {"serve", cmd_serve, "an OpenAI-compatible HTTP server with a chat page"},
    {"bench", cmd_bench, "measure prefill and decode speed (llama-bench style)"},
    {"quantize", cmd_quantize, "convert a model's weights to another type, as llama-quantize does"},
    {"synth", cmd_synth, "write a random-weight model of a real shape, for benchmarks"},
    {"lql", cmd_lql, "query a vindex with LQL (DESCRIBE, WALK, SELECT, INFER, SHOW); a REPL without -e / -f"},
    {"vindex", cmd_vindex, "build, verify or audit a vindex: a model's FFN as a queryable feature index"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: minfer <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++) fprintf(f, "  %-10s %s\n", g_cmds[i].name, g_cmds[i].help);
    fprintf(f, "\n`minfer <command> --help` shows a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof g_cmds / sizeof g_cmds[0]; i++)
        if (!strcmp(argv[1], g_cmds[i].name)) return g_cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "minfer: unknown command '%s' (see minfer --help)\n", argv[1]);
    return 2;
}
