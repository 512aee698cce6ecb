/* `parity bisect A B`: which module of a model first departs, and whether it introduced the
 * drift or inherited it. The captures are written by `parity model capture` or by
 * parity.capture (PyTorch); the comparison is libparity's bisect module (docs/bisect.md). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "parity/bisect.h"

void parity_help_bisect(FILE *out)
{
    fprintf(out,
            "usage: parity bisect A B [--floor A2] [--golden G] [--json OUT] [--html OUT]\n"
            "                         [--floor-factor X] [--flat-threshold X]\n"
            "\n"
            "A and B are captures (directories with capture.json + capture.safetensors, format\n"
            "parity.capture/1, docs/bisect.md) of the same model over the same inputs: A the\n"
            "reference side (the trainer), B the side under suspicion (the server). Written by\n"
            "  parity model capture --path P --out DIR [--replay A_DIR]     (parity's model)\n"
            "  parity.capture(model, inputs, DIR, replay_from=A_DIR)         (a PyTorch model)\n"
            "Per module in execution order it prints the drift of B's inputs and outputs against\n"
            "A's, the error B's module INTRODUCED -- measured when B was captured with --replay A\n"
            "(each module of B run on A's recorded inputs), else estimated as the growth of the\n"
            "relative drift from input to output ('~') -- and the INHERITED rest, against a\n"
            "per-module floor; then the answer: the first module whose introduced error exceeds\n"
            "--floor-factor x its floor, the ranked list, the routing flips of MoE blocks\n"
            "(token, experts before/after, A's gate margin) and, beside it, the module a flat\n"
            "1e-3 walk (SGLang/vLLM dump comparators: 1 - 2<a,b>/(|a|^2+|b|^2) > 1e-3) names.\n"
            "\n"
            "--floor A2        a repeat of A's side (the same precision in another reduction\n"
            "                  order, captured with --replay A): the floor is A2's introduced error\n"
            "--golden G        the fp64 run (captured as A's --replay source): the floor is A's own\n"
            "                  introduced error against G; every module's drift to G is reported\n"
            "--floor-factor X  departure threshold over the floor (default 2; docs/bisect.md)\n"
            "--flat-threshold X  the comparators' walk threshold (default 1e-3)\n"
            "--json OUT        the report as JSON (first_departing, modules, ranked, routing_flips)\n"
            "--html OUT        a self-contained page: per-module drift vs floor, introduced and\n"
            "                  inherited\n"
            "\n"
            "exit codes: 0 no module departs, 1 a module departs, 2 usage error, 3 input error\n"
            "(captures of different models, modules or shapes name the first mismatch).\n");
}

static int open_capture(const char *cmd, const char *dir, parity_capture_t **c)
{
    parity_diag_t d;
    if (parity_capture_read(dir, c, &d) != PARITY_OK) return cli_input_error(cmd, "%s", d.msg);
    return 0;
}

static int write_report(const char *cmd, const char *path, const parity_bisect_opts_t *o,
                        const parity_bisect_result_t *r, int html)
{
    FILE *f = fopen(path, "wb");
    if (!f) return cli_input_error(cmd, "%s: cannot write", path);
    if (html) parity_bisect_print_html(f, o, r);
    else parity_bisect_print_json(f, o, r);
    if (fclose(f) != 0) return cli_input_error(cmd, "%s: write failed", path);
    return 0;
}

int parity_cmd_bisect(int argc, char **argv)
{
    const char *cmd = "bisect";
    const char *pos[2] = {NULL, NULL}, *floor_dir = NULL, *golden = NULL, *json = NULL, *html = NULL;
    int npos = 0;
    parity_bisect_opts_t o;
    parity_bisect_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (cli_is_help(a)) {
            parity_help_bisect(stdout);
            return PARITY_EXIT_OK;
        }
        int takes = !strcmp(a, "--floor") || !strcmp(a, "--golden") || !strcmp(a, "--json") ||
                    !strcmp(a, "--html") || !strcmp(a, "--floor-factor") || !strcmp(a, "--flat-threshold");
        if (takes && !v) return cli_usage_error(cmd, "parity bisect --help", "%s needs a value", a);
        if (!strcmp(a, "--floor")) floor_dir = v, i++;
        else if (!strcmp(a, "--golden")) golden = v, i++;
        else if (!strcmp(a, "--json")) json = v, i++;
        else if (!strcmp(a, "--html")) html = v, i++;
        else if (!strcmp(a, "--floor-factor") || !strcmp(a, "--flat-threshold")) {
            double x;
            if (cli_parse_double(v, &x) != 0 || !(x > 0) || isinf(x))
                return cli_usage_error(cmd, "--floor-factor 2", "%s wants a finite number > 0, got '%s'", a, v);
            if (a[3] == 'l' && a[4] == 'o') o.floor_factor = x;
            else o.flat_threshold = x;
            i++;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error(cmd, "parity bisect --help", "unknown option '%s'", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return cli_usage_error(cmd, "parity bisect A B", "unexpected argument '%s'", a);
        }
    }
    if (npos < 2) return cli_usage_error(cmd, "parity bisect A_DIR B_DIR", "needs two captures, A and B");
    parity_capture_t *A = NULL, *B = NULL, *F = NULL, *G = NULL;
    parity_bisect_result_t res;
    memset(&res, 0, sizeof res);
    int rc = open_capture(cmd, pos[0], &A);
    if (!rc) rc = open_capture(cmd, pos[1], &B);
    if (!rc && floor_dir) rc = open_capture(cmd, floor_dir, &F);
    if (!rc && golden) rc = open_capture(cmd, golden, &G);
    if (rc) goto done;
    o.a = A, o.b = B, o.floor = F, o.golden = G;
    o.name_a = pos[0], o.name_b = pos[1], o.name_floor = floor_dir, o.name_golden = golden;
    parity_diag_t d;
    parity_status_t st = parity_bisect(&o, &res, &d);
    if (st != PARITY_OK) {
        rc = cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    parity_bisect_print_text(stdout, &o, &res);
    if (json && (rc = write_report(cmd, json, &o, &res, 0))) goto done;
    if (html && (rc = write_report(cmd, html, &o, &res, 1))) goto done;
    rc = res.first >= 0 ? PARITY_EXIT_VERDICT : PARITY_EXIT_OK;
done:
    parity_bisect_result_free(&res);
    parity_capture_free(A);
    parity_capture_free(B);
    parity_capture_free(F);
    parity_capture_free(G);
    return rc;
}
