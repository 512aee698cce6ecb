/* `--seed S` or `--seed fresh`: a seed given, or one drawn from the operating system so that a
 * candidate cannot be tuned to the inputs of a fixed seed. The drawn seed is printed and written
 * into the reports; `--seed S` with it reproduces the run byte for byte.
 * Deliberately not here: what a seed drives (every generator takes it as a plain uint64). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "cli.h"

/* 48 bits: 2.8e14 choices, and below 1e15, so the seed survives JSON exactly (cJSON writes
 * numbers with 15 significant digits; a double holds integers to 2^53). */
#define FRESH_SEED_BITS 48

int cli_fresh_seed(uint64_t *out)
{
    uint64_t r = 0;
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t n = getrandom((char *)&r + got, sizeof r - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            FILE *f = fopen("/dev/urandom", "rb"); /* a kernel without getrandom(2) */
            if (!f || fread(&r, sizeof r, 1, f) != 1) {
                if (f) fclose(f);
                return -1;
            }
            fclose(f);
            break;
        }
        got += (size_t)n;
    }
    *out = r & ((UINT64_C(1) << FRESH_SEED_BITS) - 1);
    return 0;
}

int cli_parse_seed(const char *s, uint64_t *out, int *fresh)
{
    if (fresh) *fresh = 0;
    if (s && strcmp(s, "fresh") == 0) {
        if (cli_fresh_seed(out) != 0) return -1;
        if (fresh) *fresh = 1;
        return 0;
    }
    return cli_parse_u64(s, out);
}

/* Here with the seed parsing it wraps (cli.c holds the other option values). */
int cli_opt_seed(const char *cmd, const char *opt, const char *val, uint64_t *out, int *fresh)
{
    int ok = fresh ? cli_parse_seed(val, out, fresh) : cli_parse_u64(val, out);
    if (ok == 0) return 0;
    char hint[64];
    snprintf(hint, sizeof hint, fresh ? "%s 1 or %s fresh" : "%s 1", opt, opt);
    return cli_usage_error(cmd, hint, "%s wants a non-negative decimal integer%s, got '%s'", opt,
                           fresh ? " or 'fresh'" : "", val ? val : "");
}
