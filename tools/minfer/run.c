/* run.c - placeholder until the subcommand lands. */
#include <stdio.h>
#include "cli.h"

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "minfer run: not implemented yet\n");
    return 1;
}
