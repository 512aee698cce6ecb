/* The shared helpers of the `parity` CLI (cli.h): usage and input errors, number, list and shape
 * parsing, option values. Below the subcommands (programs/cmd_*.c) and the entry point
 * (parity.c), which all call them; split from parity.c so that the subcommands it dispatches to do
 * not call back into it. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_progress_stderr(void *ctx, const char *msg)
{
    (void)ctx;
    fprintf(stderr, "%s\n", msg);
}

int cli_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int cli_usage_error(const char *cmd, const char *hint, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "parity %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (hint) fprintf(stderr, "  try: %s\n", hint);
    fprintf(stderr, "  (see: parity help %s)\n", cmd);
    return PARITY_EXIT_USAGE;
}

int cli_input_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "parity %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return PARITY_EXIT_INPUT;
}

/* Decimal digits only (the one integer grammar of the CLI, cli.h): no blank, sign, base
 * prefix or trailing character. -1 when s is not that, or when the value passes UINT64_MAX. */
static int parse_digits(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9') return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    uint64_t v;
    if (parse_digits(s, &v) != 0) return -1;
    *out = v;
    return 0;
}

int cli_parse_long(const char *s, long min, long max, long *out)
{
    uint64_t m;
    if (!s) return -1;
    int neg = s[0] == '-';
    if (parse_digits(s + neg, &m) != 0) return -1;
    /* |LONG_MIN| = LONG_MAX + 1 */
    if (m > (uint64_t)LONG_MAX + (uint64_t)neg) return -1;
    long v = neg ? (m == (uint64_t)LONG_MAX + 1 ? LONG_MIN : -(long)m) : (long)m;
    if (v < min || v > max) return -1;
    *out = v;
    return 0;
}

int cli_parse_double(const char *s, double *out)
{
    char *end;
    /* strtod would skip leading blanks; nothing else but the number is taken */
    if (!s || !*s || isspace((unsigned char)*s)) return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end) return -1;
    /* ERANGE on underflow still yields the correctly rounded subnormal/zero: accept it;
     * overflow yields +-HUGE_VAL, which is the correctly rounded infinity: accept it too. */
    *out = v;
    return 0;
}

/* Split s at commas into items of at most 63 characters; each goes to item(i, text). No empty
 * item, no more than cap. */
static int parse_list(const char *s, int cap, int *n, int (*item)(void *ctx, int i, const char *t),
                      void *ctx)
{
    *n = 0;
    if (!s || !*s) return -1;
    for (const char *p = s;;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        char buf[64];
        if (len == 0 || len >= sizeof buf || *n == cap) return -1;
        memcpy(buf, p, len);
        buf[len] = 0;
        if (item(ctx, *n, buf) != 0) return -1;
        (*n)++;
        if (!c) return 0;
        p = c + 1;
    }
}

typedef struct {
    long min, max, *out;
    double *dout;
} list_ctx_t;

static int long_item(void *ctx, int i, const char *t)
{
    list_ctx_t *c = ctx;
    return cli_parse_long(t, c->min, c->max, &c->out[i]);
}

static int double_item(void *ctx, int i, const char *t)
{
    list_ctx_t *c = ctx;
    return cli_parse_double(t, &c->dout[i]);
}

int cli_parse_long_list(const char *s, long min, long max, long *out, int cap, int *n)
{
    list_ctx_t c = {min, max, out, NULL};
    return parse_list(s, cap, n, long_item, &c);
}

int cli_parse_double_list(const char *s, double *out, int cap, int *n)
{
    list_ctx_t c = {0, 0, NULL, out};
    return parse_list(s, cap, n, double_item, &c);
}

int cli_parse_shape(const char *s, int64_t *dims, int min_dims, int max_dims, parity_diag_t *why)
{
    int n;
    if (parity_shape_parse(s, dims, min_dims, max_dims, &n, why) != PARITY_OK) return -1;
    return n;
}

int cli_opt_long(const char *cmd, const char *opt, const char *val, long min, long max, long *out)
{
    if (cli_parse_long(val, min, max, out) == 0) return 0;
    char hint[96];
    snprintf(hint, sizeof hint, "%s %ld", opt, min > 1 ? min : max < 1 ? max : 1);
    return cli_usage_error(cmd, hint, "%s wants an integer in %ld..%ld (decimal digits), got '%s'", opt,
                           min, max, val ? val : "");
}

int cli_opt_workload(const char *cmd, const char *opt, const parity_op_t *op, const char *val,
                     parity_workload_t *out)
{
    parity_workload_t tmp;
    parity_diag_t diag = {{0}};
    parity_status_t st = parity_op_workload_ex(op, val, out ? out : &tmp, &diag);
    if (st == PARITY_OK) return 0;
    char hint[160];
    if (st == PARITY_E_NOTFOUND)
        snprintf(hint, sizeof hint, "parity ops %s (lists its workloads; NAME@NxD picks another shape)",
                 op->name);
    else
        snprintf(hint, sizeof hint, "%s %s@%lldx%lld (NAME@NxD or NAME@NxDxV)", opt, op->presets[0].name,
                 (long long)op->presets[0].n, (long long)op->presets[0].d);
    return cli_usage_error(cmd, hint, "%s: %s", opt, diag.msg);
}
