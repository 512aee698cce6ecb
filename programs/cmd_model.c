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

static const char *const BUILTIN_PROMPTS[] = {
    "Once upon a time, there was a little dog named Max. Max liked to run in the park.",
    "Lily and Ben went to the beach. They wanted to build a big sand castle.",
    "One day, a little bird found a shiny stone in the garden. She was very happy.",
    "Tom was sad because his toy car was broken. His mom said, \"We can fix it together.\"",
    "The sun was hot, so the cat slept under the big tree all day long.",
    "Before we proceed any further, hear me speak.", /* tinyshakespeare.txt, line 2 */
};
#define N_BUILTIN (sizeof BUILTIN_PROMPTS / sizeof BUILTIN_PROMPTS[0])

/* ------------------------------------------------------------------------------------------ */

int model_cli_parse_opts(const char *cmd, int argc, char **argv, opts_t *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED()                                                                              \
    do {                                                                                    \
        if (!v) return cli_usage_error(cmd, "parity model --help", "%s needs a value", a); \
        i++;                                                                                \
    } while (0)
        if (!strcmp(a, "--tokenizer") || !strcmp(a, "-z")) {
            NEED();
            o->tok = v;
        } else if (!strcmp(a, "--path")) {
            NEED();
            if (o->npaths == 2)
                return cli_usage_error(cmd, "--path A --path B", "at most two --path options");
            o->paths[o->npaths++] = v;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--temperature")) {
            NEED();
            if (cli_parse_double(v, &o->temp) != 0 || !(o->temp >= 0) || isinf(o->temp))
                return cli_usage_error(cmd, "-t 0 (greedy) or -t 0.8", "%s wants a finite temperature >= 0, got '%s'", a, v);
        } else if (!strcmp(a, "-n") || !strcmp(a, "--steps")) {
            NEED();
            if (cli_parse_long(v, 1, 1L << 20, &o->steps) != 0)
                return cli_usage_error(cmd, "-n 200", "%s wants a step count in 1..1048576, got '%s'", a, v);
        } else if (!strcmp(a, "--prompt") || !strcmp(a, "-i")) {
            NEED();
            o->prompt = v;
        } else if (!strcmp(a, "--prompts")) {
            NEED();
            o->prompts = v;
        } else if (!strcmp(a, "--out") || !strcmp(a, "-o")) {
            NEED();
            o->out = v;
        } else if (!strcmp(a, "--top")) {
            NEED();
            long k;
            if (cli_parse_long(v, 0, 64, &k) != 0)
                return cli_usage_error(cmd, "--top 5 (0..64)", "--top wants 0..64 ids, got '%s'", v);
            o->top = (int)k;
        } else if (!strcmp(a, "--seed")) {
            NEED();
            if (cli_parse_u64(v, &o->seed) != 0)
                return cli_usage_error(cmd, "--seed 42", "--seed wants a non-negative decimal integer, got '%s'", v);
        } else if (!strcmp(a, "--max-k3")) {
            NEED();
            if (cli_parse_double(v, &o->max_k3) != 0 || !(o->max_k3 >= 0) || isinf(o->max_k3))
                return cli_usage_error(cmd, "--max-k3 1e-4", "--max-k3 wants a finite number >= 0, got '%s'", v);
        } else if (!strcmp(a, "--markdown")) {
            o->markdown = 1;
        } else if (!strcmp(a, "--moe")) {
            o->moe = 1;
        } else if (!strcmp(a, "--moe-file")) {
            NEED();
            o->moe = 1, o->moe_file = v;
        } else if (!strcmp(a, "--floor")) {
            o->floor = 1;
        } else if (!strcmp(a, "--manifest")) {
            NEED();
            o->manifest = v;
        } else if (!strcmp(a, "--image")) {
            NEED();
            if (cli_parse_long(v, 0, PARITY_MODEL_MAX_PATCHES, &o->image) != 0)
                return cli_usage_error(cmd, "--image 16 (0..64 patches)", "--image wants 0..64 patches, got '%s'", v);
        } else if (!strcmp(a, "--experts") || !strcmp(a, "--topk") || !strcmp(a, "--shared")) {
            NEED();
            long k;
            if (cli_parse_long(v, 0, 4096, &k) != 0)
                return cli_usage_error(cmd, "--experts 8 --topk 4 --shared 108", "%s wants an integer in 0..4096, got '%s'", a, v);
            if (a[2] == 'e') o->up.experts = (int)k;
            else if (a[2] == 't') o->up.topk = (int)k;
            else o->up.n_shared = (int)k;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error(cmd, "parity model --help", "unknown option '%s'", a);
        } else if (!o->model) {
            o->model = a;
        } else {
            return cli_usage_error(cmd, "parity model run [MODEL]", "unexpected argument '%s'", a);
        }
#undef NEED
    }
    return 0;
}

int model_cli_load_all(const char *cmd, const opts_t *o, loaded_t *L)
{
    parity_diag_t d;
    /* Only the files not named on the command line are looked up in the data folders. */
    parity_status_t st = parity_model_default_files(o->model ? NULL : L->model_path, sizeof L->model_path,
                                                    o->tok ? NULL : L->tok_path, sizeof L->tok_path, &d);
    if (st == PARITY_OK && o->moe && !o->moe_file)
        st = parity_model_moe_default_file(L->moe_path, sizeof L->moe_path, &d);
    if (st != PARITY_OK) return cli_input_error(cmd, "%s", d.msg);
    if (o->moe_file) snprintf(L->moe_path, sizeof L->moe_path, "%s", o->moe_file);
    if (o->model) snprintf(L->model_path, sizeof L->model_path, "%s", o->model);
    if (o->tok) snprintf(L->tok_path, sizeof L->tok_path, "%s", o->tok);
    st = parity_model_load(L->model_path, &L->m, &d);
    if (st != PARITY_OK) return st == PARITY_E_INVALID ? cli_usage_error(cmd, NULL, "%s", d.msg)
                                                       : cli_input_error(cmd, "%s", d.msg);
    if (o->moe && (st = parity_model_moe_attach(L->m, L->moe_path, &d)) != PARITY_OK) {
        parity_model_free(L->m);
        L->m = NULL;
        return cli_input_error(cmd, "%s", d.msg);
    }
    st = parity_llama_tok_load(L->tok_path, parity_model_config(L->m)->vocab_size, &L->tok, &d);
    if (st != PARITY_OK) {
        parity_model_free(L->m);
        L->m = NULL;
        return cli_input_error(cmd, "%s", d.msg);
    }
    return 0;
}

void model_cli_unload(loaded_t *L)
{
    parity_llama_tok_free(L->tok);
    parity_model_free(L->m);
}

int model_cli_make_runner(const char *cmd, const loaded_t *L, const char *spec,
                       parity_model_path_t *p, parity_model_runner_t **r)
{
    parity_diag_t d;
    if (parity_model_path_parse(spec ? spec : "ref", p, &d) != PARITY_OK)
        return cli_usage_error(cmd, "--path bf16+kvcache+tp4:ring:bf16+splitk2", "%s", d.msg);
    parity_status_t st = parity_model_runner_new(L->m, p, r, &d);
    if (st == PARITY_E_INVALID) return cli_usage_error(cmd, "--path bf16+tp4", "%s", d.msg);
    if (st != PARITY_OK) return cli_input_error(cmd, "%s", d.msg);
    return 0;
}

/* run.c's safe_printf: a single raw byte that is neither printable nor whitespace is dropped. */
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
/* Prompts                                                                                    */
/* ------------------------------------------------------------------------------------------ */

void model_cli_prompts_free(prompts_t *P)
{
    for (size_t i = 0; i < P->n; i++) {
        free(P->text[i]);
        free(P->ids[i]);
    }
    free(P->text);
    free(P->ids);
    free(P->len);
}

int model_cli_prompts_load(const char *cmd, const char *file, const loaded_t *L, long image,
                           prompts_t *P)
{
    memset(P, 0, sizeof *P);
    P->n_img = (size_t)image;
    size_t cap = N_BUILTIN;
    char *buf = NULL;
    if (file) {
        FILE *f = fopen(file, "rb");
        if (!f) return cli_input_error(cmd, "%s: cannot open the prompts file", file);
        size_t bcap = 1 << 16, blen = 0;
        buf = malloc(bcap + 1);
        size_t got;
        while (buf && (got = fread(buf + blen, 1, bcap - blen, f)) > 0) {
            blen += got;
            if (blen == bcap) {
                char *nb = realloc(buf, 2 * bcap + 1);
                if (!nb) {
                    free(buf);
                    buf = NULL;
                    break;
                }
                buf = nb, bcap *= 2;
            }
        }
        fclose(f);
        if (!buf) return cli_input_error(cmd, "out of memory");
        buf[blen] = '\0';
        cap = 1;
        for (size_t i = 0; i < blen; i++) cap += buf[i] == '\n';
    }
    P->text = calloc(cap, sizeof *P->text);
    P->ids = calloc(cap, sizeof *P->ids);
    P->len = calloc(cap, sizeof *P->len);
    if (!P->text || !P->ids || !P->len) {
        free(buf);
        return cli_input_error(cmd, "out of memory");
    }
    size_t S = (size_t)parity_model_config(L->m)->seq_len;
    char *line = buf;
    for (size_t k = 0; k < cap; k++) {
        const char *t;
        size_t tl;
        if (!file) {
            t = BUILTIN_PROMPTS[k], tl = strlen(t);
        } else {
            if (!line) break;
            char *nl = strchr(line, '\n');
            if (nl) *nl = '\0';
            t = line, tl = strlen(line);
            if (tl && t[tl - 1] == '\r') tl--;
            line = nl ? nl + 1 : NULL;
            if (tl == 0) continue;
        }
        size_t i = P->n;
        P->text[i] = malloc(tl + 1);
        if (!P->text[i]) break;
        memcpy(P->text[i], t, tl);
        P->text[i][tl] = '\0';
        P->n++;
        if (parity_llama_tok_encode(L->tok, t, tl, 1, 0, &P->ids[i], &P->len[i]) != PARITY_OK) {
            free(buf);
            return cli_input_error(cmd, "cannot encode prompt %zu", i);
        }
        if (image > 0 && P->len[i] > 0) {
            /* BOS, the image's tokens (the picture of seed i + 1), then the text */
            int32_t *ids = malloc((P->len[i] + (size_t)image) * sizeof *ids);
            parity_diag_t d;
            if (!ids || parity_model_image_tokens(L->m, i + 1, (size_t)image, ids + 1, &d) != PARITY_OK) {
                free(ids);
                free(buf);
                return cli_input_error(cmd, "cannot build the image of prompt %zu", i);
            }
            ids[0] = P->ids[i][0];
            memcpy(ids + 1 + image, P->ids[i] + 1, (P->len[i] - 1) * sizeof *ids);
            free(P->ids[i]);
            P->ids[i] = ids;
            P->len[i] += (size_t)image;
        }
        if (P->len[i] > S) P->len[i] = S; /* the model cannot see further */
    }
    free(buf);
    if (P->n == 0) return cli_input_error(cmd, "%s: no non-empty prompt lines", file ? file : "prompts");
    return 0;
}

/* Companions of prompt i in a batch of B: the next B-1 prompts, cyclically. */
const char *model_cli_modality(const prompts_t *P, size_t t)
{
    return t >= 1 && t <= P->n_img ? "image" : "text";
}

int model_cli_set_batch(parity_model_runner_t *r, const parity_model_path_t *p, const prompts_t *P,
                        size_t i)
{
    if (parity_model_runner_set_image(r, i + 1, P->n_img, 1) != PARITY_OK) return -1;
    if (p->batch <= 1) return 0;
    size_t lens[64];
    for (int k = 0; k < p->batch - 1; k++) lens[k] = P->len[(i + 1 + (size_t)k) % P->n];
    return parity_model_runner_set_companions(r, lens, (size_t)p->batch - 1) == PARITY_OK ? 0 : -1;
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
