/* tokenize.c - placeholder until the subcommand lands. */
#include <stdio.h>
#include "cli.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "minfer tokenize: not implemented yet\n");
    return 1;
}
