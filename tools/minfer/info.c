/* info.c - placeholder until the subcommand lands. */
#include <stdio.h>
#include "cli.h"

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "minfer info: not implemented yet\n");
    return 1;
}
