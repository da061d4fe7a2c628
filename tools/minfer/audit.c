/* audit.c - `minfer vindex audit` (placeholder until the walk FFN lands). */
#include <stdio.h>
#include "cli.h"
int cmd_vindex_audit(int argc, char **argv) {
    (void)argc, (void)argv;
    fprintf(stderr, "minfer vindex audit: not available yet\n");
    return 2;
}
