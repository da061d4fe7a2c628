/* logits.c - placeholder until the subcommand lands. */
#include <stdio.h>
#include "cli.h"

int cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "minfer logits: not implemented yet\n");
    return 1;
}
