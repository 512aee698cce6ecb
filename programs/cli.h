/* Shared helpers of the `parity` CLI: the subcommand table, usage errors, option parsing.
 * Each subcommand lives in programs/cmd_<name>.c and is listed once in programs/commands.def. */
#ifndef PARITY_CLI_H
#define PARITY_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "parity/op.h"
#include "parity/status.h"

/* A subcommand: `run` gets argv with argv[0] = the command name; returns an exit code.
 * `help` prints the full help text to `out` (stdout for --help, exit 0). */
typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
    void (*help)(FILE *out);
} parity_cli_command_t;

#define PARITY_COMMAND(name, summary) \
    int parity_cmd_##name(int argc, char **argv); \
    void parity_help_##name(FILE *out);
#include "commands.def"
#undef PARITY_COMMAND
/* `parity power --op-plugin`: the power self-test of a declared op (programs/cmd_power_declared.c). */
int parity_cmd_power_declared(int argc, char **argv);

/* Usage error: prints "parity CMD: <message>" and a hint line to stderr, returns exit code 2. */
int cli_usage_error(const char *cmd, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Input error (exit 3): prints "parity CMD: <message>". */
int cli_input_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse helpers: return 0 on success, -1 if the text is not a complete number in range.
 * Every command parses its numbers through these (and shapes through cli_parse_shape), so the
 * rules are one: integers are plain decimal digits (cli_parse_long: an optional leading '-'),
 * with no blank, '+', trailing character or empty text, and no hex or octal: "010" is ten and
 * "0x10" is refused (a seed or size typed with a leading zero means what it reads as).
 * cli_parse_double takes what strtod reads (decimal, hex float, inf, nan; callers bound the
 * value) but no leading blank and nothing after the number. */
int cli_parse_u64(const char *s, uint64_t *out);
int cli_parse_long(const char *s, long min, long max, long *out);
int cli_parse_double(const char *s, double *out);
/* Comma-separated lists ("1,2,4,8", "0.001,0.01"): at most cap items, each as above, no empty
 * item (no leading, trailing or doubled comma). *n receives the count. */
int cli_parse_long_list(const char *s, long min, long max, long *out, int cap, int *n);
int cli_parse_double_list(const char *s, double *out, int cap, int *n);
/* A shape NxD or NxDxV (min_dims..max_dims sizes; parity_shape_parse in op.h is the parser):
 * the count of sizes, or -1 with the reason in why (may be NULL). */
int cli_parse_shape(const char *s, int64_t *dims, int min_dims, int max_dims, parity_diag_t *why);
/* A seed: a non-negative integer, or "fresh" for one drawn from the OS (cli_seed.c; *fresh = 1,
 * 48 bits so that JSON keeps it exactly). -1 on bad text or when the OS gives no randomness. */
int cli_parse_seed(const char *s, uint64_t *out, int *fresh);
int cli_fresh_seed(uint64_t *out);

/* Option values that end the command on bad text: 0 when parsed, else the usage error's exit
 * code (2) after "parity CMD: OPT wants ..., got 'VAL'" on stderr. */
int cli_opt_long(const char *cmd, const char *opt, const char *val, long min, long max, long *out);
int cli_opt_seed(const char *cmd, const char *opt, const char *val, uint64_t *out, int *fresh);
/* A workload of op: a preset or NAME@NxD[xV] (parity_op_workload_ex). An unknown preset or a
 * malformed shape is a usage error naming opt and the text; out may be NULL. */
int cli_opt_workload(const char *cmd, const char *opt, const parity_op_t *op, const char *val,
                     parity_workload_t *out);

/* A progress callback (parity_check_opts_t.progress and the like): one line to stderr. */
void cli_progress_stderr(void *ctx, const char *msg);

/* True when argv[i] is "--help" or "-h". */
int cli_is_help(const char *arg);

#endif
