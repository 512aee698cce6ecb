/* model_generate: teacher-forced forwards, logprobs, batch row counts and generation with
 * run.c's prompt/BOS semantics (greedy argmax or temperature sampling). The arithmetic itself is
 * model_forward.c's. Not here: top-p sampling (run.c's default 0.9 only matters for t > 0). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/model_impl.h"
#include "parity/rng.h"
#include "parity/tokenizer.h"

parity_status_t parity_model_runner_set_companions(parity_model_runner_t *r, const size_t *lens,
                                                   size_t n)
{
    if (!r || (n > 0 && !lens)) return PARITY_E_INVALID;
    if (r->p.batch <= 0) return PARITY_OK;
    if (n != (size_t)(r->p.batch - 1)) return PARITY_E_INVALID;
    free(r->companions);
    r->companions = NULL;
    if (n == 0) return PARITY_OK;
    r->companions = malloc(n * sizeof *lens);
    if (!r->companions) return PARITY_E_NOMEM;
    memcpy(r->companions, lens, n * sizeof *lens);
    return PARITY_OK;
}

/* padded: B rows per position of the longest sequence; packed (varlen): the sum of lengths. */
size_t model_prefill_rows(const parity_model_runner_t *r, size_t n)
{
    if (r->p.batch <= 0) return n;
    size_t B = (size_t)r->p.batch, mx = n, sum = n;
    for (size_t i = 0; i + 1 < B; i++) {
        size_t c = r->companions ? r->companions[i] : n;
        if (c > mx) mx = c;
        sum += c;
    }
    return r->p.packed ? sum : B * mx;
}

size_t model_decode_rows(const parity_model_runner_t *r)
{
    return r->p.batch > 0 ? (size_t)r->p.batch : 1;
}

int model_rows_matter(const parity_model_runner_t *r)
{
    return r->p.batch > 0 && r->p.splitk == 0;
}

static parity_status_t check_tokens(const parity_model_runner_t *r, const int32_t *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (t[i] < 0 || t[i] >= r->V) return PARITY_E_INVALID;
    return PARITY_OK;
}

parity_status_t parity_model_forward(parity_model_runner_t *r, const int32_t *tokens, size_t n,
                                     double *logits, double *hidden)
{
    if (!r || !tokens || n == 0 || n > (size_t)r->S) return PARITY_E_INVALID;
    if (check_tokens(r, tokens, n) != PARITY_OK) return PARITY_E_INVALID;
    if (r->p.kvcache) {
        size_t rows = model_decode_rows(r);
        for (size_t t = 0; t < n; t++)
            model_run_positions(r, tokens, t, t + 1, rows,
                                logits ? logits + t * (size_t)r->V : NULL, hidden, n);
    } else {
        model_run_positions(r, tokens, 0, n, model_prefill_rows(r, n), logits, hidden, n);
    }
    return PARITY_OK;
}

double parity_model_logprob(const double *row, size_t v, int32_t id)
{
    double mx = -INFINITY;
    for (size_t i = 0; i < v; i++)
        if (row[i] > mx) mx = row[i];
    double s = 0;
    for (size_t i = 0; i < v; i++) s += exp(row[i] - mx);
    return row[id] - mx - log(s);
}

static int32_t argmax(const double *x, int n)
{
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

static int32_t sample(const double *x, int n, double temperature, parity_rng_t *rng)
{
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < n; i++)
        if (x[i] > mx) mx = x[i];
    for (int i = 0; i < n; i++) s += exp((x[i] - mx) / temperature);
    double u = parity_rng_uniform(rng) * s, cdf = 0;
    for (int i = 0; i < n; i++) {
        cdf += exp((x[i] - mx) / temperature);
        if (u < cdf) return i;
    }
    return n - 1; /* u within rounding of s */
}

parity_status_t parity_model_generate(parity_model_runner_t *r, const int32_t *prompt,
                                      size_t n_prompt, size_t steps, double temperature,
                                      uint64_t seed, int32_t *out, size_t *n_out)
{
    if (n_out) *n_out = 0;
    if (!r || !prompt || !out || !n_out || n_prompt == 0) return PARITY_E_INVALID;
    if (steps > (size_t)r->S) steps = (size_t)r->S;
    if (n_prompt > steps || check_tokens(r, prompt, n_prompt) != PARITY_OK) return PARITY_E_INVALID;
    int recompute = !r->p.kvcache && model_rows_matter(r);
    double *logits = malloc((recompute ? steps : 1) * (size_t)r->V * sizeof *logits);
    if (!logits) return PARITY_E_NOMEM;
    parity_rng_t rng;
    parity_rng_seed(&rng, seed, 0x6d6f64656cULL /* "model" */);
    memcpy(out, prompt, n_prompt * sizeof *out);
    size_t n = 1;
    uint64_t sig = 0;
    for (size_t pos = 0; pos < steps; pos++) {
        const double *row = logits;
        uint64_t s = recompute ? model_split_signature(r, model_prefill_rows(r, pos + 1)) : 0;
        /* Positions already computed are reused while every GEMM keeps its split count: a full
         * recompute would repeat exactly the same operations on them. */
        if (recompute && (pos == 0 || s != sig)) {
            sig = s;
            /* A cache-less server recomputes the prefix; its GEMMs have the whole prefix's rows. */
            model_run_positions(r, out, 0, pos + 1, model_prefill_rows(r, pos + 1), logits, NULL,
                                pos + 1);
            row = logits + pos * (size_t)r->V;
        } else {
            size_t rows = r->p.kvcache ? model_decode_rows(r) : model_prefill_rows(r, pos + 1);
            model_run_positions(r, out, pos, pos + 1, rows, logits, NULL, pos + 1);
        }
        int32_t next;
        if (pos + 1 < n_prompt) next = prompt[pos + 1];
        else if (temperature <= 0) next = argmax(row, r->V);
        else next = sample(row, r->V, temperature, &rng);
        if (next == PARITY_LLAMA_BOS) break;
        out[n++] = next;
    }
    free(logits);
    *n_out = n;
    return PARITY_OK;
}
