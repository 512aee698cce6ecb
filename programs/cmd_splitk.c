/* `parity splitk`: how far a split-K GEMM drifts from the unsplit one, for a K and split counts,
 * with fp32 or bf16 partials (the workspace format). A shell over parity_reduce_splitk. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parity/reduce.h"

void parity_help_splitk(FILE *out)
{
    fprintf(out,
            "usage: parity splitk [--k K] [--splits S,S,...] [--n N] [--out bf16|fp32] [--seed S]\n"
            "\n"
            "Each of N outputs is a dot product of K bf16 x bf16 terms (the partial workload of\n"
            "`parity allreduce`: activations with outlier channels). K is cut into S contiguous\n"
            "parts, each accumulated in fp32, stored as fp32 or bf16 partials, and added in order\n"
            "in fp32 (serial fixup); the output is rounded to --out (default bf16). Each row\n"
            "reports |split - unsplit| and |split - exact| in ulps of the output format.\n"
            "Defaults: K 4096 (1..1048576), splits 1,2,4,8,16 (up to 32, each 1..K), N 1024\n"
            "(1..1048576), seed 1; numbers in decimal digits.\n"
            "\n"
            "examples:\n"
            "  parity splitk\n"
            "  parity splitk --k 8192 --splits 1,3,7 --out fp32\n"
            "\n"
            "exit codes: 0 reported, 2 usage error, 3 the simulation failed (out of memory).\n");
}

int parity_cmd_splitk(int argc, char **argv)
{
    const char *cmd = "splitk", *hint = "parity splitk --k 4096 --splits 1,2,4,8";
    long k = 4096, n = 1024;
    uint64_t seed = 1;
    const char *splits = "1,2,4,8,16";
    parity_reduce_dtype_t outf = PARITY_REDUCE_BF16;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (cli_is_help(a)) {
            parity_help_splitk(stdout);
            return 0;
        }
        if (i + 1 >= argc) return cli_usage_error(cmd, hint, "unexpected or incomplete '%s'", a);
        const char *v = argv[++i];
        int rc = 0;
        if (!strcmp(a, "--k")) {
            if ((rc = cli_opt_long(cmd, a, v, 1, 1 << 20, &k))) return rc;
        } else if (!strcmp(a, "--n")) {
            if ((rc = cli_opt_long(cmd, a, v, 1, 1 << 20, &n))) return rc;
        } else if (!strcmp(a, "--seed")) {
            if ((rc = cli_opt_seed(cmd, a, v, &seed, NULL))) return rc;
        } else if (!strcmp(a, "--splits")) {
            splits = v;
        } else if (!strcmp(a, "--out")) {
            if (!strcmp(v, "bf16")) outf = PARITY_REDUCE_BF16;
            else if (!strcmp(v, "fp32")) outf = PARITY_REDUCE_FP32;
            else return cli_usage_error(cmd, "--out bf16|fp32", "bad --out '%s'", v);
        } else {
            return cli_usage_error(cmd, hint, "unknown option '%s'", a);
        }
    }
    long sv[32];
    int ns = 0;
    if (cli_parse_long_list(splits, 1, k, sv, 32, &ns) != 0)
        return cli_usage_error(cmd, hint, "--splits wants up to 32 integers in 1..K (%ld), comma separated, "
                               "got '%s'", k, splits);
    size_t N = (size_t)n;
    double *base = malloc(N * sizeof *base), *ref = malloc(N * sizeof *ref), *o = malloc(N * sizeof *o);
    if (!base || !ref || !o) {
        free(base), free(ref), free(o);
        return cli_input_error(cmd, "out of memory");
    }
    int rc = 0;
    if (parity_reduce_splitk(seed, N, (size_t)k, 1, PARITY_REDUCE_FP32, outf, base, ref)) rc = 3;
    for (size_t i = 0; i < N && !rc; i++) ref[i] = parity_reduce_round(outf, ref[i]);
    printf("split-K GEMM drift: K %ld, %zu outputs, output %s, seed %llu (ulps of the output)\n", k,
           N, parity_reduce_dtype_name(outf), (unsigned long long)seed);
    printf("| splits | partials | vs unsplit: differ | p99 ulp | max ulp | vs exact: p99 ulp | max ulp |\n");
    printf("|--------|----------|--------------------|---------|---------|-------------------|---------|\n");
    for (int s = 0; s < ns && !rc; s++)
        for (int pd = 0; pd < 2 && !rc; pd++) {
            parity_reduce_dtype_t part = pd ? PARITY_REDUCE_BF16 : PARITY_REDUCE_FP32;
            parity_reduce_drift_t d1, d2;
            if (parity_reduce_splitk(seed, N, (size_t)k, (int)sv[s], part, outf, o, NULL) ||
                parity_reduce_drift(o, base, N, outf, &d1) || parity_reduce_drift(o, ref, N, outf, &d2)) {
                rc = 3;
                break;
            }
            printf("| %6ld | %-8s | %18.3f | %7.1f | %7.1f | %17.1f | %7.1f |\n", sv[s],
                   parity_reduce_dtype_name(part), d1.frac_differ, d1.p99_ulp, d1.max_ulp,
                   d2.p99_ulp, d2.max_ulp);
        }
    free(base), free(ref), free(o);
    if (rc) return cli_input_error(cmd, "simulation failed");
    return 0;
}
