/* `parity round`: what values become in a number format, with the bit pattern and the rounding
 * error in ulps of the format. A thin shell over parity_format_*; it does no rounding itself. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parity/format.h"

void parity_help_round(FILE *out)
{
    fprintf(out,
            "usage: parity round --format F [--rounding nearest|zero|stochastic] [--seed S]\n"
            "                    [--saturate] VALUE...\n"
            "\n"
            "Shows what each VALUE becomes in format F: the value it rounds to, that value's bit\n"
            "pattern in hex, and the rounding error (result - value) in ulps of F at VALUE.\n"
            "The value is rounded once, directly from its double (no double rounding via fp32).\n"
            "\n"
            "formats:   fp32, tf32, bf16, fp16, e4m3fn, e5m2, custom:m=T,e=W\n"
            "           (T fraction bits 1..23, W exponent bits 2..8; custom:m=10,e=5 is fp16)\n"
            "rounding:  nearest     round to nearest, ties to even (default)\n"
            "           zero        toward zero (truncate); overflow gives the largest finite\n"
            "           stochastic  up with probability (x - down)/(up - down), from --seed\n"
            "--seed S   seed for stochastic rounding (default 0, decimal digits); same seed, same\n"
            "           results\n"
            "--saturate values beyond the range, and +-inf, become +-max finite (as CUDA's\n"
            "           __NV_SATFINITE). Default: overflow to inf, or to NaN in e4m3fn, which\n"
            "           has no inf (as ml_dtypes astype and PyTorch .to()).\n"
            "VALUE      decimal (0.1, -3e-5), hex float (0x1.8p-3), inf, -inf, nan.\n"
            "           Put -- before the values if the first one starts with '-'.\n"
            "\n"
            "examples:\n"
            "  parity round --format bf16 0.1        0.1 becomes 0.10009765625 (0x3dcd), +0.2 ulp\n"
            "  parity round --format e4m3fn 464 465 --saturate\n"
            "                                        464 ties to the even 448 (0x7e); 465 would be\n"
            "                                        NaN (0x7f) without --saturate, 448 with it\n"
            "  parity round --format fp16 65520     overflows to inf (0x7c00): 65504 is the max\n"
            "  parity round --format bf16 --rounding stochastic --seed 7 1.001 1.001 1.001\n"
            "                                        each copy goes to 1 or 1.0078125\n"
            "  parity round --format custom:m=3,e=4 -- -0.3\n"
            "\n"
            "exit codes: 0 printed, 2 usage error (unknown format, bad number, no values).\n");
}

static const char *rounding_name(parity_rounding_t r)
{
    return r == PARITY_ROUND_TOWARD_ZERO ? "toward zero"
           : r == PARITY_ROUND_STOCHASTIC ? "stochastic"
                                          : "nearest-even";
}

/* A value is an option-looking argument only if it starts with "--" or is "-h"; "-1.5",
 * "-inf" and "-0x1p3" are numbers. */
static int looks_like_option(const char *a)
{
    return a[0] == '-' && a[1] == '-';
}

int parity_cmd_round(int argc, char **argv)
{
    const char *cmd = "round";
    const char *fname = NULL;
    parity_rounding_t rounding = PARITY_ROUND_NEAREST_EVEN;
    uint64_t seed = 0;
    int saturate = 0, nvals = 0;
    char **vals = calloc((size_t)argc + 1, sizeof *vals);
    if (!vals) return cli_input_error(cmd, "out of memory");
    int rc = PARITY_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            while (++i < argc) vals[nvals++] = argv[i];
            break;
        }
        if (!looks_like_option(a)) {
            vals[nvals++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t klen = eq ? (size_t)(eq - a) : strlen(a);
        const char *arg = eq ? eq + 1 : NULL;
        int takes = (klen == 8 && !strncmp(a, "--format", 8)) || (klen == 10 && !strncmp(a, "--rounding", 10)) ||
                    (klen == 6 && !strncmp(a, "--seed", 6));
        if (takes && !arg) {
            if (i + 1 >= argc) {
                rc = cli_usage_error(cmd, "parity round --format bf16 0.1", "%.*s needs a value",
                                     (int)klen, a);
                goto done;
            }
            arg = argv[++i];
        }
        if (klen == 8 && !strncmp(a, "--format", 8)) {
            fname = arg;
        } else if (klen == 10 && !strncmp(a, "--rounding", 10)) {
            if (!strcmp(arg, "nearest") || !strcmp(arg, "nearest-even") || !strcmp(arg, "rne"))
                rounding = PARITY_ROUND_NEAREST_EVEN;
            else if (!strcmp(arg, "zero") || !strcmp(arg, "toward-zero") || !strcmp(arg, "rtz"))
                rounding = PARITY_ROUND_TOWARD_ZERO;
            else if (!strcmp(arg, "stochastic") || !strcmp(arg, "sr"))
                rounding = PARITY_ROUND_STOCHASTIC;
            else {
                rc = cli_usage_error(cmd, "--rounding nearest, --rounding zero or --rounding stochastic",
                                     "unknown rounding '%s'", arg);
                goto done;
            }
        } else if (klen == 6 && !strncmp(a, "--seed", 6)) {
            if ((rc = cli_opt_seed(cmd, "--seed", arg, &seed, NULL)) != 0) goto done;
        } else if (!strcmp(a, "--saturate")) {
            saturate = 1;
        } else {
            rc = cli_usage_error(cmd, "parity round --format bf16 0.1 (negative values: -- -0.1)",
                                 "unknown option '%s'", a);
            goto done;
        }
    }
    if (!fname) {
        rc = cli_usage_error(cmd, "parity round --format bf16 0.1", "missing --format");
        goto done;
    }
    parity_format_t f;
    parity_diag_t diag;
    parity_status_t st = parity_format_get(fname, &f, &diag);
    if (st != PARITY_OK) {
        rc = cli_usage_error(cmd, "--format bf16 (or fp32, tf32, fp16, e4m3fn, e5m2, custom:m=10,e=5)",
                             "%s", diag.msg);
        goto done;
    }
    if (nvals == 0) {
        rc = cli_usage_error(cmd, "parity round --format bf16 0.1 1e-8 inf", "no values to round");
        goto done;
    }
    double *xs = malloc((size_t)nvals * sizeof *xs);
    if (!xs) {
        rc = cli_input_error(cmd, "out of memory");
        goto done;
    }
    for (int k = 0; k < nvals; k++) {
        if (cli_parse_double(vals[k], &xs[k]) != 0) {
            rc = cli_usage_error(cmd, "a number such as 0.1, -3e-5, 0x1.8p-3, inf or nan",
                                 "'%s' is not a number", vals[k]);
            free(xs);
            goto done;
        }
    }
    parity_round_opts_t o = parity_format_default_opts(&f);
    o.rounding = rounding;
    if (saturate) o.saturate_finite = o.saturate_inf = 1;
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, 0);
    int hexw = (f.total_bits + 3) / 4;
    printf("format %s: %d fraction bits, %d exponent bits, max %.17g, min normal %.17g, "
           "min subnormal %.17g\n",
           f.name, f.mant_bits, f.exp_bits, f.max_finite, f.min_normal, f.min_subnormal);
    printf("rounding %s, overflow to %s", rounding_name(rounding),
           saturate || rounding == PARITY_ROUND_TOWARD_ZERO
               ? "max finite"
               : (f.naninf == PARITY_NANINF_FN ? "NaN" : "inf"));
    if (rounding == PARITY_ROUND_STOCHASTIC) printf(", seed %llu", (unsigned long long)seed);
    printf("\n%-24s %-24s %-*s %s\n", "value", "becomes", hexw + 2, "bits", "error (ulp)");
    for (int k = 0; k < nvals; k++) {
        double x = xs[k];
        uint32_t bits = parity_format_encode(&f, x, &o, &rng);
        double y = parity_format_decode(&f, bits);
        char err[64];
        if (isnan(x) || isnan(y) || isinf(x) || isinf(y)) {
            /* Exact in the special cases; an overflow to inf/NaN has no finite error. */
            if (isinf(x) && isinf(y) && (x > 0) == (y > 0)) snprintf(err, sizeof err, "0");
            else if (isnan(x) && isnan(y)) snprintf(err, sizeof err, "0 (NaN)");
            else if (isinf(x)) snprintf(err, sizeof err, "inf saturated to max finite");
            else snprintf(err, sizeof err, isnan(y) ? "overflow to NaN" : "overflow to inf");
        } else {
            /* y - x is exact by Sterbenz's lemma whenever x/2 <= y <= 2x, i.e. for every rounding
             * but those to 0 (exact too: -x) or near the smallest subnormal; divided by the
             * format's ulp at x (a power of two, exact) it is the error in ulps. */
            double e = (y - x) / parity_format_ulp(&f, x);
            snprintf(err, sizeof err, "%+.6g", e);
        }
        printf("%-24s %-24.17g 0x%0*x %s\n", vals[k], y, hexw, (unsigned)bits, err);
    }
    free(xs);
done:
    free(vals);
    return rc;
}
