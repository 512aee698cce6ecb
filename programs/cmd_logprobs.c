/* `parity logprobs A B`: how far apart two logprob dumps are, slice by slice, against a noise
 * floor. A thin shell over logprob.h: option parsing, opening the dumps, printing reports. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parity/logprob.h"
#include "parity/logprob_rl.h"

void parity_help_logprobs(FILE *out)
{
    fprintf(out,
            "usage: parity logprobs A B [--floor A2] [--format F] [--format-a F] [--format-b F]\n"
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
            "--floor A2         a second dump from the same engine and configuration as A: every\n"
            "                   metric is also reported as a multiple of A vs A2. Without it, an\n"
            "                   analytic floor from the dtype (docs/logprob-metrics.md).\n"
            "--dtype D          declared dtype for the analytic floor: fp64, fp32, bf16, fp16\n"
            "                   (default: the coarser of the two files' dtypes; JSON counts as fp32)\n"
            "--slice-by FIELD   also slice by a string field of each JSONL record\n"
            "--no-slices        no modality / position / prefill-decode slices\n"
            "--k3-alarm X       alarm when mean k3 > X (default 1e-3, dense models; --moe: 1e-1)\n"
            "--dlogprob-alarm X alarm when max |delta| > X (default 5e-2, SGLang's logprob tests)\n"
            "--floor-factor X   a metric within X times its floor never alarms (default 3)\n"
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
            "  parity logprobs train.safetensors serve.jsonl --floor serve2.jsonl --slice-by modality\n"
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

int parity_cmd_logprobs(int argc, char **argv)
{
    const char *cmd = "logprobs", *hint = "parity logprobs A.jsonl B.jsonl [--floor A2.jsonl]";
    const char *files[2] = {NULL, NULL}, *floorp = NULL, *json = NULL, *html = NULL, *slice = NULL;
    const char *fmt_both = NULL, *fmt_ab[2] = {NULL, NULL};
    parity_lp_cmp_opts_t o = parity_lp_cmp_default_opts();
    int nfiles = 0, moe = 0, k3_set = 0, rl = 0;
    const char *rl_json = NULL;
    parity_lp_rl_opts_t rlo = parity_lp_rl_default_opts();
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
            if (need || cli_parse_double(v, &x) || !(x >= 1))
                return cli_usage_error(cmd, "--floor-factor 3", "--floor-factor needs a number >= 1");
            o.floor_factor = x;
        } else if (opt_is(a, "--floor", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, hint, "--floor needs a file");
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
            if (need || cli_parse_double(v, &x) || !(x >= 0))
                return cli_usage_error(cmd, "--k3-alarm 1e-3", "--k3-alarm needs a non-negative number");
            o.k3_alarm = x;
            k3_set = 1;
        } else if (opt_is(a, "--dlogprob-alarm", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_double(v, &x) || !(x >= 0))
                return cli_usage_error(cmd, "--dlogprob-alarm 5e-2", "--dlogprob-alarm needs a non-negative number");
            o.dlogprob_alarm = x;
        } else if (opt_is(a, "--threads", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_long(v, 1, 64, &l))
                return cli_usage_error(cmd, "--threads 4", "--threads needs an integer in 1..64");
            o.n_threads = (int)l;
        } else if (opt_is(a, "--worst", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_long(v, 0, 100, &l))
                return cli_usage_error(cmd, "--worst 20", "--worst needs an integer in 0..100");
            o.worst_tokens = (size_t)l;
        } else if (opt_is(a, "--json", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, "--json report.json", "--json needs a file");
            json = v;
        } else if (opt_is(a, "--html", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, "--html report.html", "--html needs a file");
            html = v;
        } else if (opt_is(a, "--clip-eps", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_double(v, &x) || !(x > 0 && x < 1))
                return cli_usage_error(cmd, "--clip-eps 0.2", "--clip-eps needs a number in (0, 1)");
            rlo.clip_eps = x, rl = 1;
        } else if (opt_is(a, "--tis-cap", &v, &i, argc, argv, &need)) {
            if (need || cli_parse_double(v, &x) || !(x >= 1) || x > 1e300)
                return cli_usage_error(cmd, "--tis-cap 2", "--tis-cap needs a finite number >= 1");
            rlo.tis_cap = x, rl = 1;
        } else if (opt_is(a, "--rl-json", &v, &i, argc, argv, &need)) {
            if (need) return cli_usage_error(cmd, "--rl-json rl.json", "--rl-json needs a file");
            rl_json = v, rl = 1;
        } else if (!strcmp(a, "--rl")) {
            rl = 1;
        } else if (opt_is(a, "--allow", &v, &i, argc, argv, &need)) {
            if (need || parity_lp_allow_from_names(v, &allow) != PARITY_OK)
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
    if (moe && !k3_set) o.k3_alarm = 1e-1;
    parity_lp_read_opts_t ro[2];
    for (int s = 0; s < 2; s++) {
        memset(&ro[s], 0, sizeof ro[s]);
        ro[s].slice_field = slice;
        ro[s].n_threads = o.n_threads;
        ro[s].allow = allow;
        const char *f = fmt_ab[s] ? fmt_ab[s] : fmt_both;
        if (f && parity_lp_format_from_name(f, &ro[s].format) != PARITY_OK)
            return cli_usage_error(cmd, "--format npy|safetensors|jsonl|openai-chat|openai-completions|vllm|sglang",
                                   "unknown format '%s'", f);
    }
    parity_diag_t d;
    parity_lp_reader_t *r[3] = {NULL, NULL, NULL};
    parity_lp_result_t *res = NULL, *fres = NULL;
    int rc = PARITY_EXIT_OK;
    parity_status_t st;
    for (int s = 0; s < 2; s++)
        if ((st = parity_lp_open(files[s], &ro[s], &r[s], &d)) != PARITY_OK) {
            rc = cli_input_error(cmd, "%s", d.msg);
            goto done;
        }
    if ((st = parity_lp_compare(r[0], r[1], &o, &res, &d)) != PARITY_OK) {
        rc = st == PARITY_E_INVALID ? cli_usage_error(cmd, hint, "%s", d.msg) : cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    if (floorp) {
        parity_lp_close(r[0]);
        r[0] = NULL;
        if ((st = parity_lp_open(files[0], &ro[0], &r[0], &d)) != PARITY_OK ||
            (st = parity_lp_open(floorp, &ro[0], &r[2], &d)) != PARITY_OK ||
            (st = parity_lp_compare(r[0], r[2], &o, &fres, &d)) != PARITY_OK) {
            rc = cli_input_error(cmd, "floor: %s", d.msg);
            goto done;
        }
        parity_lp_result_set_floor(res, fres);
    }
    parity_lp_report_text(res, stdout);
    if (json && (st = parity_lp_report_json(res, json, &d)) != PARITY_OK) {
        rc = cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    if (html && (st = parity_lp_report_html(res, html, &d)) != PARITY_OK) {
        rc = cli_input_error(cmd, "%s", d.msg);
        goto done;
    }
    if (rl) {
        /* a second pass over fresh readers: the main comparison is untouched */
        parity_lp_reader_t *q[2] = {NULL, NULL};
        parity_lp_rl_result_t *rr = NULL;
        for (int s = 0; s < 2 && st == PARITY_OK; s++) st = parity_lp_open(files[s], &ro[s], &q[s], &d);
        if (st == PARITY_OK) st = parity_lp_rl_compute(q[0], q[1], &rlo, &rr, &d);
        if (st == PARITY_OK) parity_lp_rl_report_text(rr, stdout);
        if (st == PARITY_OK && rl_json) st = parity_lp_rl_report_json(rr, rl_json, &d);
        parity_lp_rl_result_free(rr);
        for (int s = 0; s < 2; s++) parity_lp_close(q[s]);
        if (st != PARITY_OK) {
            rc = cli_input_error(cmd, "rl: %s", d.msg);
            goto done;
        }
    }
    rc = parity_lp_result_exit_code(res);
done:
    parity_lp_result_free(res);
    parity_lp_result_free(fres);
    for (int s = 0; s < 3; s++) parity_lp_close(r[s]);
    return rc;
}
