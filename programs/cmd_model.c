/* `parity model`: a real pretrained model (llama2.c format, stories260K by default) run through
 * the fp64 reference and serving-style forward paths: `run` generates text, `dump` writes
 * teacher-forced logprobs (JSONL, docs/model.md), `parity` compares two paths (logprob metrics,
 * per-layer drift, first greedy divergence). The arithmetic is libparity's model module. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_model.h"
#include "parity/metrics.h"
#include "parity/model.h"
#include "parity/tokenizer.h"
#include "src/core/internal.h"

void parity_help_model(FILE *out)
{
    fprintf(out,
            "usage: parity model run    [MODEL] [--tokenizer TOK] [--path SPEC] [-t TEMP] [-n STEPS]\n"
            "                           [--prompt P] [--seed S]\n"
            "       parity model dump   [MODEL] [--tokenizer TOK] --path SPEC [--prompts FILE]\n"
            "                           --out FILE [--top K] [--seed S]\n"
            "       parity model parity [MODEL] [--tokenizer TOK] --path A --path B [--prompts FILE]\n"
            "                           [-n STEPS] [--max-k3 X] [--markdown] [--floor]\n"
            "                           [--manifest PREFIX]\n"
            "       parity model upcycle [MODEL] --out FILE [--experts 8] [--topk 4] [--shared 108]\n"
            "       parity model capture [MODEL] --path SPEC --out DIR [--replay A_DIR] [--prompts FILE]\n"
            "every subcommand takes --moe (the MoE built from MODEL: stories260K_moe.bin in the\n"
            "data folder) or --moe-file FILE, and dump/parity take --image N (an N-patch synthetic\n"
            "image through a vision encoder, prefixed to every prompt; modality \"image\").\n"
            "\n"
            "MODEL is a llama2.c checkpoint (default: the shipped stories260K.bin, found as `parity\n"
            "--help` says under data), TOK its llama2.c tokenizer (default: the shipped tok512.bin).\n"
            "\n"
            "run     generates from the prompt (default: none, i.e. from BOS) for STEPS positions\n"
            "        (default 256, capped at the model's seq_len) at temperature TEMP (default 0:\n"
            "        greedy) and prints the text as llama2.c's run does; speed goes to stderr.\n"
            "dump    teacher-forces every prompt and writes one JSON object per prompt to FILE:\n"
            "        {\"id\", \"text\", \"path\", \"context_ids\", \"token_ids\", \"logprobs\"\n"
            "        [, \"top_ids\", \"top_logprobs\"]} (schema: docs/model.md), which `parity\n"
            "        logprobs` reads; --top K adds the K best ids and their logprobs per token.\n"
            "        The same path gives the same file, bit for bit: a second run that differs\n"
            "        (for `parity logprobs --floor-a/--floor-b`) needs another reduction order of\n"
            "        the same precision, e.g. --path bf16+splitk2 as a repeat of --path bf16\n"
            "        (docs/logprob-metrics.md), or --seed with an epR:overlap path.\n"
            "parity  runs paths A and B over the prompts and prints the logprob comparison (k1/k2/k3\n"
            "        means, max/mean/p99 |dlogprob|, top-1 agreement), the per-layer drift (relative\n"
            "        error of the hidden state after each layer, B vs A) and the first position where\n"
            "        greedy generation from BOS differs within STEPS (default 200).\n"
            "        --markdown prints one table row instead; --max-k3 X exits 1 when mean k3 > X.\n"
            "        With --image or --moe: every figure per modality, router flips per layer and\n"
            "        the routing's load balance and entropy. --floor: A against a repeated run of\n"
            "        A (another run seed). --manifest PREFIX writes PREFIX.a.json and PREFIX.b.json.\n"
            "upcycle builds the MoE side file from MODEL (deterministic; docs/moe-model.md).\n"
            "capture records every module's inputs and outputs (embed, per layer attn_norm, attn,\n"
            "        ffn_norm, mlp|moe with its routing, final_norm, lm_head) over the prompts into\n"
            "        DIR (capture.json + capture.safetensors, docs/bisect.md) for `parity bisect`;\n"
            "        --replay A_DIR also runs each module of this path on A's recorded inputs.\n");
    fprintf(out,
            "\n"
            "options (every subcommand accepts them; the ones a subcommand does not name are ignored):\n"
            "--tokenizer TOK, -z TOK  the llama2.c tokenizer (default tok512.bin in the data folder)\n"
            "-t TEMP, --temperature TEMP  run: sampling temperature, >= 0; 0 (default) is greedy\n"
            "                 (argmax, ties to the lower id), otherwise a sample from\n"
            "                 softmax(logits / TEMP) drawn with --seed's generator\n"
            "-n STEPS, --steps STEPS  run: positions to generate, prompt included (default 256,\n"
            "                 capped at seq_len 512); parity: the greedy generations from BOS\n"
            "                 compared for the first divergence (default 200). 1..1048576\n"
            "--prompt P, -i P run: the text to start from (encoded with BOS, then continued)\n"
            "--seed S         run: the sampling seed (with -t > 0; default 0); dump: the server-run\n"
            "                 seed, the arrival order of epR:overlap's partials (other paths give\n"
            "                 the same bits for every seed)\n"
            "--out FILE, -o FILE  dump: the JSONL file; upcycle: the MoE side file\n"
            "--top K          dump: the K (0..64) most likely ids per position (default 0: none)\n"
            "--max-k3 X       parity: exit 1 when the mean k3 exceeds X\n"
            "--markdown       parity: one table row instead of the report\n"
            "--floor          parity: A against a repeated run of A (run seed 1)\n"
            "--manifest PREFIX  parity: write each side's manifest (docs/moe-model.md)\n"
            "--image N        dump/parity: an N-patch (0..64) synthetic image after BOS\n"
            "--moe, --moe-file FILE  the MoE built from MODEL (default file stories260K_moe.bin)\n"
            "--experts E, --topk K, --shared S  upcycle: experts, experts per token, shared units\n");
    fprintf(out,
            "--prompts FILE   one prompt per line (empty lines skipped); default: 5 built-in\n"
            "                 TinyStories-style sentences and a tinyshakespeare line.\n"
            "--path SPEC      tokens joined by '+' (default ref):\n"
            "  ref            fp64 reference (no rounding anywhere)\n"
            "  fp32|bf16|fp16 weights and activations stored in that dtype, fp32 math\n"
            "  bf16acc        bf16 storage and bf16 GEMM accumulation (a known-bad mutant)\n"
            "  fused          fused residual add + RMSNorm (vLLM fused_add_rms_norm)\n"
            "  kvcache        every position computed by the decode kernel against the KV cache\n"
            "  splitkS        GEMMs split K into S parts (1..16)\n"
            "  tpR[:ALGO[:DT]]  R ranks (dividing n_heads); row-parallel outputs all-reduced by\n"
            "                 ALGO ring|tree|oneshot, each hop rounded to DT fp64|fp32|bf16|fp16\n"
            "  batchB[:padded|:packed]  GEMMs shared with B-1 companion prompts; without splitk a\n"
            "                 split-K heuristic depends on the batch's row count\n"
            "  fusedmoe       (MoE) the fused gate->dispatch->experts->combine kernel: slot order,\n"
            "                 fp32 accumulation and weights, SwiGLU product before rounding\n"
            "  moe:KEY=VAL,.. (MoE) routing/combine over that base: softmax fp32|bf16, topk\n"
            "                 lowid|highid, renorm 1|0, weights fp32|bf16, order expert|slot,\n"
            "                 combine bf16buf|bf16prod|fp32acc|fp32fma, shared before|after\n"
            "  epR[:overlap]  (MoE) R expert-parallel ranks (1,2,4,8); overlap: partials reduced\n"
            "                 in arrival order (a different order every run: --floor shows it)\n"
            "  e.g. --path bf16+kvcache+tp4:ring:bf16+splitk2, --moe --path bf16+fusedmoe+ep4\n");
    fprintf(out,
            "\n"
            "examples:\n"
            "  parity model run -n 200                   reproduces llama2.c's run -t 0 -n 200\n"
            "  parity model parity --path ref --path bf16+fused\n"
            "  parity model dump --path bf16 --out bf16.jsonl --top 5\n"
            "  parity model run -t 0.8 --seed 7 -n 100    samples at temperature 0.8\n"
            "\n"
            "exit codes: 0 done, 1 mean k3 above --max-k3, 2 usage error, 3 input error.\n");
}

static void print_piece(const char *s, size_t n)
{
    if (!s || n == 0) return;
    if (n == 1 && !(isprint((unsigned char)s[0]) || isspace((unsigned char)s[0]))) return;
    fwrite(s, 1, n, stdout);
}

/* ------------------------------------------------------------------------------------------ */

static int cmd_run(int argc, char **argv)
{
    const char *cmd = "model run";
    opts_t o = {0};
    o.steps = 256;
    int rc = model_cli_parse_opts(cmd, argc, argv, &o);
    if (rc) return rc;
    if (o.npaths > 1) return cli_usage_error(cmd, "--path bf16", "run takes one --path");
    loaded_t L = {0};
    if ((rc = model_cli_load_all(cmd, &o, &L))) return rc;
    parity_model_path_t p;
    parity_model_runner_t *r = NULL;
    int32_t *prompt = NULL, *seq = NULL;
    if ((rc = model_cli_make_runner(cmd, &L, o.paths[0], &p, &r))) goto done;
    size_t np = 0;
    const char *text = o.prompt ? o.prompt : "";
    if (parity_llama_tok_encode(L.tok, text, strlen(text), 1, 0, &prompt, &np) != PARITY_OK) {
        rc = cli_input_error(cmd, "cannot encode the prompt");
        goto done;
    }
    size_t steps = (size_t)o.steps, S = (size_t)parity_model_config(L.m)->seq_len;
    if (steps > S) steps = S;
    if (np > steps) {
        rc = cli_usage_error(cmd, "-n larger than the prompt's token count",
                             "the prompt has %zu tokens, more than -n %zu", np, steps);
        goto done;
    }
    seq = malloc((steps + 1) * sizeof *seq);
    if (!seq) {
        rc = cli_input_error(cmd, "out of memory");
        goto done;
    }
    size_t n = 0;
    double t0 = parity_now();
    parity_model_generate(r, prompt, np, steps, o.temp, o.seed, seq, &n);
    double dt = parity_now() - t0;
    for (size_t i = 1; i < n; i++) {
        size_t len;
        const char *piece = parity_llama_tok_decode_piece(L.tok, seq[i - 1], seq[i], &len);
        print_piece(piece, len);
    }
    printf("\n");
    fflush(stdout);
    char spec[128];
    parity_model_path_str(&p, spec, sizeof spec);
    fprintf(stderr, "parity model run: path %s, %zu positions in %.3f s, %.1f tok/s\n", spec,
            n > 1 ? n - 1 : 0, dt, dt > 0 ? (double)(n > 1 ? n - 1 : 0) / dt : 0.0);
done:
    free(seq);
    free(prompt);
    parity_model_runner_free(r);
    model_cli_unload(&L);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */

/* A logprob as parity's JSONL schema spells it: 17 significant digits (exact round trip), the
 * string "-inf" for probability 0 (JSON has no infinity; %g would print a bare -inf). */
static void put_logprob(FILE *f, double v)
{
    if (isinf(v) && v < 0) fputs("\"-inf\"", f);
    else if (isnan(v) || isinf(v)) fputs("null", f);
    else fprintf(f, "%.17g", v);
}

static int cmd_dump(int argc, char **argv)
{
    const char *cmd = "model dump";
    opts_t o = {0};
    int rc = model_cli_parse_opts(cmd, argc, argv, &o);
    if (rc) return rc;
    if (!o.out) return cli_usage_error(cmd, "parity model dump --path bf16 --out bf16.jsonl", "missing --out");
    if (o.npaths > 1) return cli_usage_error(cmd, "--path bf16", "dump takes one --path");
    loaded_t L = {0};
    if ((rc = model_cli_load_all(cmd, &o, &L))) return rc;
    parity_model_path_t p;
    parity_model_runner_t *r = NULL;
    prompts_t P = {0};
    double *logits = NULL;
    int32_t *top_best = NULL;
    FILE *f = NULL;
    if ((rc = model_cli_make_runner(cmd, &L, o.paths[0], &p, &r))) goto done;
    if ((rc = model_cli_prompts_load(cmd, o.prompts, &L, o.image, &P))) goto done;
    parity_model_runner_set_run_seed(r, o.seed); /* a server run: epR:overlap's arrival order */
    const parity_model_config_t *c = parity_model_config(L.m);
    size_t V = (size_t)c->vocab_size;
    logits = malloc((size_t)c->seq_len * V * sizeof *logits);
    top_best = malloc((size_t)c->seq_len * (o.top > 0 ? (size_t)o.top : 1) * sizeof *top_best);
    f = fopen(o.out, "wb");
    if (!logits || !top_best || !f) {
        rc = cli_input_error(cmd, "%s: cannot write", o.out);
        goto done;
    }
    char spec[128];
    parity_model_path_str(&p, spec, sizeof spec);
    for (size_t i = 0; i < P.n; i++) {
        size_t n = P.len[i];
        model_cli_set_batch(r, &p, &P, i);
        parity_model_forward(r, P.ids[i], n, logits, NULL);
        fprintf(f, "{\"id\": %zu, \"text\": \"", i);
        for (const unsigned char *s = (const unsigned char *)P.text[i]; *s; s++) {
            if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
            else if (*s < 0x20) fprintf(f, "\\u%04x", *s);
            else fputc(*s, f);
        }
        fprintf(f, "\", \"model\": \"%s\", \"path\": \"%s\", \"context_ids\": [%d], \"token_ids\": [",
                o.moe ? "stories260K-moe" : "stories260K", spec, (int)P.ids[i][0]);
        for (size_t t = 1; t < n; t++) fprintf(f, "%s%d", t > 1 ? ", " : "", (int)P.ids[i][t]);
        fprintf(f, "], \"logprobs\": [");
        for (size_t t = 1; t < n; t++) {
            if (t > 1) fprintf(f, ", ");
            put_logprob(f, parity_model_logprob(logits + (t - 1) * V, V, P.ids[i][t]));
        }
        fprintf(f, "]");
        if (P.n_img > 0) { /* per token, only with --image (the schema is unchanged without) */
            fprintf(f, ", \"modality\": [");
            for (size_t t = 1; t < n; t++)
                fprintf(f, "%s\"%s\"", t > 1 ? ", " : "", model_cli_modality(&P, t));
            fprintf(f, "]");
        }
        if (o.top > 0) {
            /* parity's JSONL schema (docs/logprobs.md): "top_ids" and "top_logprobs", two lists
             * per token of the same length, best first */
            int k = o.top < (int)V ? o.top : (int)V;
            int32_t *best = top_best;
            for (size_t t = 1; t < n; t++) {
                const double *row = logits + (t - 1) * V;
                int32_t *bt = best + (t - 1) * (size_t)k;
                for (int j = 0; j < k; j++) { /* k-pass selection: ties to the lower id */
                    int32_t b = -1;
                    for (size_t v = 0; v < V; v++) {
                        int used = 0;
                        for (int q = 0; q < j; q++) used |= bt[q] == (int32_t)v;
                        if (!used && (b < 0 || row[v] > row[b])) b = (int32_t)v;
                    }
                    bt[j] = b;
                }
            }
            fprintf(f, ", \"top_ids\": [");
            for (size_t t = 1; t < n; t++) {
                fprintf(f, "%s[", t > 1 ? ", " : "");
                for (int j = 0; j < k; j++) fprintf(f, "%s%d", j ? ", " : "", (int)best[(t - 1) * (size_t)k + (size_t)j]);
                fprintf(f, "]");
            }
            fprintf(f, "], \"top_logprobs\": [");
            for (size_t t = 1; t < n; t++) {
                const double *row = logits + (t - 1) * V;
                fprintf(f, "%s[", t > 1 ? ", " : "");
                for (int j = 0; j < k; j++) {
                    if (j) fprintf(f, ", ");
                    put_logprob(f, parity_model_logprob(row, V, best[(t - 1) * (size_t)k + (size_t)j]));
                }
                fprintf(f, "]");
            }
            fprintf(f, "]");
        }
        fprintf(f, "}\n");
    }
    if (fclose(f) != 0) rc = cli_input_error(cmd, "%s: write failed", o.out);
    f = NULL;
done:
    if (f) fclose(f);
    free(logits);
    free(top_best);
    model_cli_prompts_free(&P);
    parity_model_runner_free(r);
    model_cli_unload(&L);
    return rc;
}

/* ------------------------------------------------------------------------------------------ */

static int cmd_upcycle(int argc, char **argv)
{
    const char *cmd = "model upcycle";
    opts_t o = {0};
    parity_model_moe_opts_default(&o.up);
    int rc = model_cli_parse_opts(cmd, argc, argv, &o);
    if (rc) return rc;
    if (!o.out) return cli_usage_error(cmd, "parity model upcycle --out stories260K_moe.bin", "missing --out");
    o.moe = 0; /* upcycling starts from the dense checkpoint */
    loaded_t L = {0};
    if ((rc = model_cli_load_all(cmd, &o, &L))) return rc;
    parity_diag_t d;
    double t0 = parity_now();
    parity_status_t st = parity_model_moe_build(L.m, &o.up, o.out, &d);
    if (st == PARITY_E_INVALID) rc = cli_usage_error(cmd, "--experts 8 --topk 4 --shared 108", "%s", d.msg);
    else if (st != PARITY_OK) rc = cli_input_error(cmd, "%s", d.msg);
    else
        fprintf(stderr, "parity model upcycle: wrote %s (E %d, top-%d, shared %d units; %d calibration "
                "samples of %d tokens) in %.1f s\n", o.out, o.up.experts, o.up.topk, o.up.n_shared,
                o.up.n_calib, o.up.calib_len, parity_now() - t0);
    model_cli_unload(&L);
    return rc;
}

int parity_cmd_model(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("model", "parity model run -n 200", "missing subcommand (run, dump, parity)");
    if (cli_is_help(argv[1])) {
        parity_help_model(stdout);
        return PARITY_EXIT_OK;
    }
    for (int i = 2; i < argc; i++)
        if (cli_is_help(argv[i])) {
            parity_help_model(stdout);
            return PARITY_EXIT_OK;
        }
    if (!strcmp(argv[1], "run")) return cmd_run(argc - 2, argv + 2);
    if (!strcmp(argv[1], "dump")) return cmd_dump(argc - 2, argv + 2);
    if (!strcmp(argv[1], "parity")) return model_cli_parity(argc - 2, argv + 2);
    if (!strcmp(argv[1], "upcycle")) return cmd_upcycle(argc - 2, argv + 2);
    if (!strcmp(argv[1], "capture")) return model_cli_capture(argc - 2, argv + 2);
    return cli_usage_error("model", "parity model run | dump | parity | capture | upcycle", "unknown subcommand '%s'", argv[1]);
}
