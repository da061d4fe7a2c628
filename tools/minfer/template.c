/* template.c - placeholder until the subcommand lands. */
#include <stdio.h>
#include "cli.h"

int cmd_template(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "minfer template: not implemented yet\n");
    return 1;
}
