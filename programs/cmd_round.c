#include "cli.h"
int parity_cmd_round(int argc, char **argv) { (void)argc; (void)argv; return 2; }
void parity_help_round(FILE *out) { fprintf(out, "todo\n"); }
