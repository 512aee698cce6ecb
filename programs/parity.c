/* The `parity` CLI entry point: dispatches to subcommands, prints help and the version.
 * Help goes to stdout with exit 0; usage errors go to stderr with exit 2 (docs/plugins.md:
 * exit status). */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parity/version.h"

static const parity_cli_command_t COMMANDS[] = {
#define PARITY_COMMAND(n, s) {#n, s, parity_cmd_##n, parity_help_##n},
#include "commands.def"
#undef PARITY_COMMAND
};
static const size_t N_COMMANDS = sizeof COMMANDS / sizeof COMMANDS[0];

static const parity_cli_command_t *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(COMMANDS[i].name, name) == 0) return &COMMANDS[i];
    return NULL;
}

static void main_help(FILE *out)
{
    fprintf(out,
            "parity %s: does this optimized code compute what the training math says,\n"
            "under the workloads we actually run?\n\n"
            "usage: parity COMMAND [OPTIONS]\n"
            "       parity help COMMAND      full help for one command\n"
            "       parity --version\n\n"
            "commands:\n",
            PARITY_VERSION_STRING);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    const char *dirs[3];
    parity_data_dirs(dirs);
    fprintf(out,
            "\nexit codes: 0 all faithful / within floor, 1 a verdict failed, 2 usage error,\n"
            "            3 input or I/O error.\n"
            "numbers: sizes, counts and seeds are decimal digits (no sign, blank, hex or octal:\n"
            "      010 is ten); shapes are NxD or NxDxV (--shape, --workload NAME@NxD); anything\n"
            "      else, trailing characters included, is a usage error naming the option.\n"
            "data: the real text, tokenizers and stories260K model that parity ships are looked\n"
            "      up file by file in\n"
            "        1. $PARITY_DATA               %s\n"
            "        2. the installed data folder  %s\n"
            "        3. the source tree's data/    %s\n"
            "      a file in none of them is exit 3, naming the file and the three places.\n"
            "start here: parity check embedding_rmsnorm_bwd --kernel builtin:all --baselines\n",
            dirs[0] ? dirs[0] : "(unset)", dirs[1], dirs[2]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        main_help(stderr);
        return PARITY_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (cli_is_help(cmd)) {
        main_help(stdout);
        return PARITY_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("parity %s\n", PARITY_VERSION_STRING);
        return PARITY_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        if (argc < 3) {
            main_help(stdout);
            return PARITY_EXIT_OK;
        }
        const parity_cli_command_t *c = find_command(argv[2]);
        if (!c) {
            fprintf(stderr, "parity help: no command '%s'\n  try: parity --help (lists the commands)\n",
                    argv[2]);
            return PARITY_EXIT_USAGE;
        }
        c->help(stdout);
        return PARITY_EXIT_OK;
    }
    const parity_cli_command_t *c = find_command(cmd);
    if (!c) {
        fprintf(stderr, "parity: no command '%s'\n  try: parity --help (lists the commands)\n", cmd);
        return PARITY_EXIT_USAGE;
    }
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) break;
        if (cli_is_help(argv[i])) {
            c->help(stdout);
            return PARITY_EXIT_OK;
        }
    }
    return c->run(argc - 1, argv + 1);
}
