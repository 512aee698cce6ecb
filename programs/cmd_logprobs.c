/* `parity logprobs A B`: how far apart two logprob dumps are, slice by slice, against a noise
 * floor. A thin shell over logprob.h: option parsing, opening the dumps, printing reports. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parity/logprob.h"
#include "parity/logprob_rl.h"

void parity_help_logprobs(FILE *out)
{
    fprintf(out,
            "usage: parity logprobs A B [--floor-a A2] [--floor-b B2] [--floor F]\n"
            "                       [--format F] [--format-a F] [--format-b F]\n"
            "                       [--slice-by FIELD] [--dtype D] [--moe] [--k3-alarm X]\n"
            "                       [--dlogprob-alarm X] [--floor-factor X] [--no-slices]\n"
            "                       [--threads N] [--worst N] [--json FILE] [--html FILE]\n"
            "                       [--rl] [--clip-eps E] [--tis-cap C] [--rl-json FILE]\n"
            "                       [--allow positive,nonfinite]\n"
            "\n"
            "Compares the per-token logprobs of dump B against dump A (for example A = trainer,\n"
            "B = inference server). delta = logprob_B - logprob_A, ratio r = p_A / p_B; k1, k2, k3\n"
            "estimate KL(B || A). Sequences are paired by request id, tokens by position; the first\n"
            "position where token ids differ is reported per request and nothing after it is compared.\n"
            "\n"
            "inputs (detected from content and extension; --format forces one for both files):\n"
            "  npy                 1-D or [sequences, positions] float32/float64; sidecars X.mask.npy\n"
            "                      and X.tokens.npy are used when present\n"
            "  safetensors         tensors logprobs, token_ids, mask, modality, phase, top_ids,\n"
            "                      top_logprobs (F64/F32/BF16/F16, I64/I32)\n"
            "  jsonl               parity's own schema (docs/logprobs.md)\n"
            "  openai-chat         choices[0].logprobs.content[] (optionally in OpenAI Batch output)\n"
            "  openai-completions  choices[0].logprobs.tokens / token_logprobs / top_logprobs\n"
            "  vllm                RequestOutput: prompt_token_ids, prompt_logprobs, outputs[0]\n"
            "  sglang              meta_info.input_token_logprobs / output_token_logprobs\n"
            "\n"
            "--floor-a A2       a second run of A's side (the same engine and configuration as A, e.g.\n"
            "                   the trainer run again): the floor of every metric is A vs A2, and each\n"
            "                   metric is also reported as a multiple of it\n"
            "--floor-b B2       a second run of B's side (e.g. the server run again): the floor is B vs B2.\n"
            "                   Both: each metric's floor is the larger of the two. A floor is two runs\n"
            "                   of the SAME side: a run of the other side measures the drift itself and\n"
            "                   would hide it, so a file measurably closer to the other side (mean\n"
            "                   |dlogprob| 10x smaller) is refused (exit 2). A second run that gives the\n"
            "                   same bits measures nothing: it must differ as runs differ (another\n"
            "                   batch, GEMM split or reduction order; parity help model, dump)\n"
            "--floor F          F compared with both A and B: F repeats the side it is 10x closer to\n"
            "                   (mean |dlogprob|); when neither is, exit 2: write --floor-a or --floor-b.\n"
            "                   Without a floor, an analytic floor from the dtype (docs/logprob-metrics.md).\n"
            "                   A k3 above --k3-alarm is excused by a floor only while the floor's own k3\n"
            "                   is within the alarm; when the floor is as large as the drift (a metric\n"
            "                   above its alarm but within --floor-factor x its floor) the report warns\n"
            "                   (JSON: floor.as_large_as_drift, floor.excused)\n"
            "--dtype D          declared dtype for the analytic floor: fp64, fp32, bf16, fp16\n"
            "                   (default: the coarser of the two files' dtypes; JSON counts as fp32)\n"
            "--slice-by FIELD   also slice by a string field of each JSONL record\n"
            "--no-slices        no modality / position / prefill-decode slices\n"
            "--k3-alarm X       alarm when mean k3 > X (default 1e-3, dense models; --moe: 1e-1)\n"
            "--dlogprob-alarm X alarm when max |delta| > X (default 5e-2, SGLang's logprob tests)\n"
            "--floor-factor X   a metric within X times its floor does not alarm (default 3), except a\n"
            "                   k3 whose measured floor is itself above --k3-alarm\n"
            "--threads N        worker threads (default: all cores; $PARITY_THREADS)\n"
            "--worst N          worst tokens to list (default 10, at most 100)\n"
            "--json FILE        write the report as JSON (docs/logprobs.md), atomically\n"
            "--html FILE        write a self-contained HTML page with SVG plots\n");
    fprintf(out,
            "--rl               also report the mismatch's effect on a GRPO/PPO step, A being the\n"
            "                   trainer and B the rollout that sampled the tokens: k3 with either\n"
            "                   side as the policy, the fraction of tokens whose ratio p_A/p_B\n"
            "                   leaves [1-E, 1+E] (--clip-eps, default 0.2), truncated importance\n"
            "                   weights min(r, C) (--tis-cap, default 2); per modality too. The\n"
            "                   main report and --json are unchanged; --rl-json FILE writes these.\n"
            "--allow R[,R]      read values that cannot be logprobs as given instead of refusing\n"
            "                   the file (exit 3, naming the file, line or offset and field):\n"
            "                     positive   values above +2^-14 (6.1e-05): log_softmax in fp32 gives\n"
            "                                at most ~2 ulps of logsumexp above 0; more means the\n"
            "                                dump holds probabilities or logits, or was computed in\n"
            "                                bf16/fp16 arithmetic (docs/logprobs.md)\n"
            "                     nonfinite  NaN and +inf in npy/safetensors (counted as invalid)\n"
            "                   An empty dump, or two with no sequence in common, is always exit 3.\n"
            "\n"
            "examples:\n"
            "  parity logprobs train.jsonl serve.jsonl --floor-b serve2.jsonl   # serve2: the server again\n"
            "  parity logprobs train.jsonl serve.jsonl --floor-a train2.jsonl --floor-b serve2.jsonl\n"
            "  parity logprobs train.safetensors serve.jsonl --floor-a train2.safetensors --slice-by modality\n"
            "  parity logprobs tp8.jsonl tp4.jsonl --moe --json drift.json --html drift.html\n"
            "\n"
            "exit codes: 0 within alarms; 1 drift (a slice in alarm, a token-id divergence, or\n"
            "requests present on one side only); 2 usage error; 3 malformed or unreadable input.\n\n"
            "The report is the same, byte for byte, whatever --threads is and whichever SIMD copy\n"
            "of the hot loops the CPU gets (AVX-512, AVX2, SSE2; $PARITY_SIMD=avx2|sse2 forces a\n"
            "lower one, to check). Memory is bounded by the batch, not the file, unless the two\n"
            "files list their requests in different orders (docs/logprobs.md).\n");
}

static int opt_is(const char *a, const char *name, const char **val, int *i, int argc, char **argv, int *need)
{
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != 0) return 0;
    if (*i + 1 >= argc) {
        *need = 1;
        return 1;
    }
    *val = argv[++*i];
    return 1;
}

#define FLOOR_HINT "parity logprobs A B --floor-a A2 (a second run of A) | --floor-b B2 (of B) | both"

/* Compare dump y against dump x (fresh readers). */
static parity_status_t compare_files(const char *x, const parity_logprob_read_opts_t *rx, const char *y,
                                     const parity_logprob_read_opts_t *ry, const parity_logprob_cmp_opts_t *o,
                                     parity_logprob_result_t **out, parity_diag_t *d)
{
    parity_logprob_reader_t *a = NULL, *b = NULL;
    parity_status_t st = parity_logprob_open(x, rx, &a, d);
    if (st == PARITY_OK) st = parity_logprob_open(y, ry, &b, d);
    if (st == PARITY_OK) st = parity_logprob_compare(a, b, o, out, d);
    parity_logprob_close(a);
    parity_logprob_close(b);
    return st;
}

/* The overall mean |dlogprob| of a comparison. */
static double lp_mean(const parity_logprob_result_t *r)
{
    const parity_logprob_slice_t *s = parity_logprob_result_slice(r, 0);
    return s && s->m.n_finite ? s->m.abs_dlogprob_mean : NAN;
}

int parity_cmd_logprobs(int argc, char **argv)
{
    const char *cmd = "logprobs", *hint = "parity logprobs A.jsonl B.jsonl [--floor-a A2.jsonl] [--floor-b B2.jsonl]";
    const char *files[2] = {NULL, NULL}, *floorp = NULL, *floor_ab[2] = {NULL, NULL}, *json = NULL, *html = NULL,
               *slice = NULL;
    const char *fmt_both = NULL, *fmt_ab[2] = {NULL, NULL};
    parity_logprob_cmp_opts_t o = parity_logprob_cmp_default_opts();
    int nfiles = 0, moe = 0, k3_set = 0, rl = 0;
    const char *rl_json = NULL;
    parity_logprob_rl_opts_t rlo = parity_logprob_rl_default_opts();
    unsigned allow = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int need = 0;
        if (cli_is_help(a)) {
            parity_help_logprobs(stdout);
            return PARITY_EXIT_OK;
        }
        if (a[0] != '-' || a[1] == 0) {
            if (nfiles >= 2) return cli_usage_error(cmd, hint, "unexpected argument '%s' (two dumps expected)", a);
            files[nfiles++] = a;
            continue;
        }
        double x;
        long l;
        if (opt_is(a, "--floor-factor", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_double(v, &x) || !(x >= 1) || isinf(x))
                return cli_usage_error(cmd, "--floor-factor 3", "--floor-factor needs a finite number >= 1, got '%s'", need ? "" : v);
            o.floor_factor = x;
        } else if (opt_is(a, "--floor-a", &v, &i, argc, argv, &need) ||
                   opt_is(a, "--floor-b", &v, &i, argc, argv, &need)) {
            int sd = a[8] == 'b';
            if (need) return cli_usage_error(cmd, FLOOR_HINT, "%.9s needs a file", a);
            if (floor_ab[sd]) return cli_usage_error(cmd, FLOOR_HINT, "--floor-%c given twice (one repeat per side)", "ab"[sd]);
            floor_ab[sd] = v;
        } else if (opt_is(a, "--floor", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, FLOOR_HINT, "--floor needs a file");
            if (floorp) return cli_usage_error(cmd, FLOOR_HINT, "--floor given twice: name each file's side with --floor-a / --floor-b");
            floorp = v;
        } else if (opt_is(a, "--format-a", &v, &i, argc, argv, &need) ||
                   opt_is(a, "--format-b", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, "--format-b sglang", "%s needs a format", a);
            fmt_ab[a[9] == 'b'] = v;
        } else if (opt_is(a, "--format", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, "--format vllm", "--format needs a format");
            fmt_both = v;
        } else if (opt_is(a, "--slice-by", &v, &i, argc, argv, &need)) {
            if (need || !*v) return cli_usage_error(cmd, "--slice-by modality", "--slice-by needs a field name");
            slice = v;
        } else if (opt_is(a, "--dtype", &v, &i, argc, argv, &need)) {
            if (need || (strcmp(v, "fp64") && strcmp(v, "fp32") && strcmp(v, "bf16") && strcmp(v, "fp16")))
                return cli_usage_error(cmd, "--dtype bf16", "--dtype must be fp64, fp32, bf16 or fp16");
            o.dtype = v;
        } else if (opt_is(a, "--k3-alarm", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_double(v, &x) || !(x >= 0) || isinf(x))
                return cli_usage_error(cmd, "--k3-alarm 1e-3", "--k3-alarm needs a finite number >= 0, got '%s'", need ? "" : v);
            o.k3_alarm = x;
            k3_set = 1;
        } else if (opt_is(a, "--dlogprob-alarm", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_double(v, &x) || !(x >= 0) || isinf(x))
                return cli_usage_error(cmd, "--dlogprob-alarm 5e-2", "--dlogprob-alarm needs a finite number >= 0, got '%s'", need ? "" : v);
            o.dlogprob_alarm = x;
        } else if (opt_is(a, "--threads", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_long(v, 1, 64, &l))
                return cli_usage_error(cmd, "--threads 4", "--threads needs an integer in 1..64, got '%s'", need ? "" : v);
            o.n_threads = (int)l;
        } else if (opt_is(a, "--worst", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_long(v, 0, 100, &l))
                return cli_usage_error(cmd, "--worst 20", "--worst needs an integer in 0..100, got '%s'", need ? "" : v);
            o.worst_tokens = (size_t)l;
        } else if (opt_is(a, "--json", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, "--json report.json", "--json needs a file");
            json = v;
        } else if (opt_is(a, "--html", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, "--html report.html", "--html needs a file");
            html = v;
        } else if (opt_is(a, "--clip-eps", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_double(v, &x) || !(x > 0 && x < 1))
                return cli_usage_error(cmd, "--clip-eps 0.2", "--clip-eps needs a number in (0, 1), got '%s'", need ? "" : v);
            rlo.clip_eps = x, rl = 1;
        } else if (opt_is(a, "--tis-cap", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_double(v, &x) || !(x >= 1) || x > 1e300)
                return cli_usage_error(cmd, "--tis-cap 2", "--tis-cap needs a finite number >= 1, got '%s'", need ? "" : v);
            rlo.tis_cap = x, rl = 1;
        } else if (opt_is(a, "--rl-json", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, "--rl-json rl.json", "--rl-json needs a file");
            rl_json = v, rl = 1;
        } else if (!strcmp(a, "--rl")) {
            rl = 1;
        } else if (opt_is(a, "--allow", &v, &i, argc, argv, &need)) {
            if (need || parity_logprob_allow_from_names(v, &allow) != PARITY_OK)
                return cli_usage_error(cmd, "--allow positive", "--allow takes positive, nonfinite or both (comma-separated)");
        } else if (!strcmp(a, "--moe")) {
            moe = 1;
        } else if (!strcmp(a, "--no-slices")) {
            o.by_modality = o.by_position = o.by_phase = 0;
        } else {
            return cli_usage_error(cmd, hint, "unknown option '%s'", a);
        }
    }
    if (nfiles != 2) return cli_usage_error(cmd, hint, "two dumps are needed (A and B), got %d", nfiles);
    if (floorp && (floor_ab[0] || floor_ab[1]))
        return cli_usage_error(cmd, FLOOR_HINT, "--floor with --floor-%c: name the side of every floor file "
                               "(--floor-a A2 for a second run of A, --floor-b B2 for one of B)", floor_ab[0] ? 'a' : 'b');
    if (moe && !k3_set) o.k3_alarm = 1e-1;
    parity_logprob_read_opts_t ro[2];
    for (int s = 0; s < 2; s++) {
        memset(&ro[s], 0, sizeof ro[s]);
        ro[s].slice_field = slice;
        ro[s].n_threads = o.n_threads;
        ro[s].allow = allow;
        const char *f = fmt_ab[s] ? fmt_ab[s] : fmt_both;
        if (f && parity_logprob_format_from_name(f, &ro[s].format) != PARITY_OK)
            return cli_usage_error(cmd, "--format npy|safetensors|jsonl|openai-chat|openai-completions|vllm|sglang",
                                   "unknown format '%s'", f);
    }
    parity_diag_t d;
    parity_logprob_reader_t *r[2] = {NULL, NULL};
    parity_logprob_result_t *res = NULL, *fr[2] = {NULL, NULL}, *fo[2] = {NULL, NULL};
    int rc = PARITY_EXIT_OK;
    parity_status_t st;
    for (int s = 0; s < 2; s++)
        if ((st = parity_logprob_open(files[s], &ro[s], &r[s], &d)) != PARITY_OK) {
            rc = cli_input_error(cmd, "%s", d.msg);
            goto done;
        }
    if ((st = parity_logprob_compare(r[0], r[1], &o, &res, &d)) != PARITY_OK) {
        rc = st == PARITY_E_INVALID ? cli_usage_error(cmd, hint, "%s", d.msg) : cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    for (int s = 0; s < 2; s++) { /* read to the end: the floors open their own readers */
        parity_logprob_close(r[s]);
        r[s] = NULL;
    }
    /* Measured floors: each compares one side with a second run of that side. */
    if (floorp) {
        /* --floor F: F compared with both sides; it repeats the one it is much closer to */
        parity_logprob_read_opts_t rf = ro[0];
        rf.format = PARITY_LOGPROB_AUTO;
        if (fmt_both) parity_logprob_format_from_name(fmt_both, &rf.format);
        if ((st = compare_files(files[0], &ro[0], floorp, &rf, &o, &fr[0], &d)) != PARITY_OK ||
            (st = compare_files(files[1], &ro[1], floorp, &rf, &o, &fr[1], &d)) != PARITY_OK) {
            rc = cli_input_error(cmd, "floor: %s", d.msg);
            goto done;
        }
        int side = parity_logprob_floor_side(fr[0], fr[1]);
        if (side < 0) {
            rc = cli_usage_error(cmd, FLOOR_HINT,
                                 "--floor %s: cannot tell which side it repeats: its mean |dlogprob| is %.3g to A and "
                                 "%.3g to B, less than %gx apart. A floor is two runs of the SAME side; a run of B "
                                 "taken as A's floor measures the drift itself and hides it. Write --floor-a %s if "
                                 "it is a second run of A's engine and configuration, --floor-b %s if of B's",
                                 floorp, lp_mean(fr[0]), lp_mean(fr[1]), PARITY_LOGPROB_FLOOR_SIDE_RATIO, floorp, floorp);
            goto done;
        }
        fo[side] = fr[!side];
        fr[!side] = NULL;
        parity_logprob_result_add_floor(res, fr[side], (parity_logprob_side_t)side, fo[side], 1);
    }
    for (int s = 0; s < 2; s++) {
        if (!floor_ab[s]) continue;
        if ((st = compare_files(files[s], &ro[s], floor_ab[s], &ro[s], &o, &fr[s], &d)) != PARITY_OK) {
            rc = cli_input_error(cmd, "floor: %s", d.msg);
            goto done;
        }
        /* Given for the side it does not repeat? Only a floor about as large as the drift can be:
         * when the floor's mean |dlogprob| is under half the drift's, F is at least as far from
         * the other side as from this one (|x - y| <= |x - f| + |f - y| per token), so the check
         * is skipped. */
        if (2 * lp_mean(fr[s]) >= lp_mean(res)) {
            if ((st = compare_files(files[!s], &ro[!s], floor_ab[s], &ro[s], &o, &fo[s], &d)) != PARITY_OK) {
                rc = cli_input_error(cmd, "floor: %s", d.msg);
                goto done;
            }
            const parity_logprob_result_t *af = s ? fo[s] : fr[s], *bf = s ? fr[s] : fo[s];
            if (parity_logprob_floor_side(af, bf) == !s) {
                rc = cli_usage_error(cmd, FLOOR_HINT,
                                     "--floor-%c %s: it is a run of %c's side, not %c's: its mean |dlogprob| is %.3g "
                                     "to %c and %.3g to %c (%gx apart or more), so as %c's floor it would measure the "
                                     "drift itself and hide it. Write --floor-%c %s",
                                     "ab"[s], floor_ab[s], "AB"[!s], "AB"[s], lp_mean(fo[s]), "AB"[!s],
                                     lp_mean(fr[s]), "AB"[s], PARITY_LOGPROB_FLOOR_SIDE_RATIO, "AB"[s], "ab"[!s],
                                     floor_ab[s]);
                goto done;
            }
        }
        if (parity_logprob_result_add_floor(res, fr[s], (parity_logprob_side_t)s, fo[s], 0) != PARITY_OK) {
            rc = cli_usage_error(cmd, FLOOR_HINT, "floor: cannot attach the floor of side %c", "AB"[s]);
            goto done;
        }
    }
    parity_logprob_report_text(res, stdout);
    if (json && (st = parity_logprob_report_json(res, json, &d)) != PARITY_OK) {
        rc = cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    if (html && (st = parity_logprob_report_html(res, html, &d)) != PARITY_OK) {
        rc = cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    if (rl) {
        /* a second pass over fresh readers: the main comparison is untouched */
        parity_logprob_reader_t *q[2] = {NULL, NULL};
        parity_logprob_rl_result_t *rr = NULL;
        for (int s = 0; s < 2 && st == PARITY_OK; s++) st = parity_logprob_open(files[s], &ro[s], &q[s], &d);
        if (st == PARITY_OK) st = parity_logprob_rl_compute(q[0], q[1], &rlo, &rr, &d);
        if (st == PARITY_OK) parity_logprob_rl_report_text(rr, stdout);
        if (st == PARITY_OK && rl_json) st = parity_logprob_rl_report_json(rr, rl_json, &d);
        parity_logprob_rl_result_free(rr);
        for (int s = 0; s < 2; s++) parity_logprob_close(q[s]);
        if (st != PARITY_OK) {
            rc = cli_input_error(cmd, "rl: %s", d.msg);
            goto done;
        }
    }
    rc = parity_logprob_result_exit_code(res);
done:
    parity_logprob_result_free(res);
    for (int s = 0; s < 2; s++) {
        parity_logprob_result_free(fr[s]);
        parity_logprob_result_free(fo[s]);
        parity_logprob_close(r[s]);
    }
    return rc;
}
