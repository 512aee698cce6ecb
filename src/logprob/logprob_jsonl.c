/* The JSONL logprob reader, one record (one request) per line: finding the lines (serially),
 * parsing a batch of them in parallel (each line by a fast path, logprob_jsonl_fast.c, or from
 * its cJSON tree, logprob_jsonl_tree.c and logprob_jsonl_schema.c), checking every value read
 * is a logprob, and finishing the batch in line order (errors, modality numbering, pages given
 * back). Telling the shape from the first record at open. Shapes and field names:
 * docs/logprobs.md. */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/logprob/logprob_jsonl_impl.h"
#include "src/core/parallel.h"

#define BATCH_BYTES ((size_t)2 << 20) /* small enough that the batch buffers stay in cache */

/* Whether s[i..n) starts a bare non-finite literal: NaN, Infinity, -Infinity (Python's
 * json.dumps with its default allow_nan=True) or nan, inf, -inf, -nan (C's printf), in any
 * case, ending at a delimiter. Its length, or 0. */
static size_t nonfinite_literal_at(const char *s, size_t i, size_t n)
{
    size_t j = i;
    if (j < n && (s[j] == '-' || s[j] == '+')) j++;
    static const char *const words[] = {"infinity", "nan", "inf"};
    for (int w = 0; w < 3; w++) {
        size_t l = strlen(words[w]);
        if (n - j < l) continue;
        size_t k = 0;
        while (k < l && (s[j + k] | 0x20) == words[w][k]) k++;
        if (k < l) continue;
        size_t e = j + l;
        if (e == n || strchr(" \t\r\n,]}", s[e])) return e - i;
    }
    return 0;
}

/* A line that is not JSON because a number is spelled as a bare non-finite literal: what the
 * literal is, the field holding it ('logprobs'[1], 'choices'[0].logprobs.content[2].logprob)
 * and what to write instead, in msg; 0 when the line has no such literal (then it is invalid
 * JSON for another reason). Scans outside strings only, tracking the key or index of each
 * enclosing container. */
static int lp_jsonl_nonfinite_literal(const char *s, size_t n, char *msg, size_t cap)
{
    enum { MAXD = 32 };
    struct {
        char key[40];
        long idx;
        int arr, want_key;
    } f[MAXD];
    int dep = 0;
    char prev = 0; /* the last structural character before a value (0 at the start) */
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
        if (c == '"') {
            size_t j = i + 1;
            while (j < n && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
            if (dep > 0 && dep <= MAXD && !f[dep - 1].arr && f[dep - 1].want_key) {
                size_t l = j - i - 1 < sizeof f[0].key - 1 ? j - i - 1 : sizeof f[0].key - 1;
                memcpy(f[dep - 1].key, s + i + 1, l);
                f[dep - 1].key[l] = 0;
                f[dep - 1].want_key = 0;
            }
            i = j;
            prev = '"';
            continue;
        }
        if (c == '{' || c == '[') {
            if (dep < MAXD) {
                f[dep].key[0] = 0;
                f[dep].idx = 0;
                f[dep].arr = c == '[';
                f[dep].want_key = c == '{';
            }
            dep++;
        } else if (c == '}' || c == ']') {
            if (dep > 0) dep--;
        } else if (c == ',') {
            if (dep > 0 && dep <= MAXD) {
                if (f[dep - 1].arr) f[dep - 1].idx++;
                else f[dep - 1].want_key = 1;
            }
        } else if ((prev == ':' || prev == '[' || prev == ',' || prev == 0)) {
            size_t l = nonfinite_literal_at(s, i, n);
            if (l) {
                char path[160];
                size_t pl = 0;
                path[0] = 0;
                int top = dep < MAXD ? dep : MAXD;
                for (int k = 0; k < top && pl < sizeof path - 1; k++) {
                    int w = f[k].arr ? snprintf(path + pl, sizeof path - pl, "[%ld]", f[k].idx)
                                     : snprintf(path + pl, sizeof path - pl, k ? ".%s" : "'%s'", f[k].key);
                    if (w > 0) pl += (size_t)w < sizeof path - pl ? (size_t)w : sizeof path - pl - 1;
                }
                const char *lit = s + i;
                int neg = lit[0] == '-', nan = (lit[neg || lit[0] == '+'] | 0x20) == 'n';
                snprintf(msg, cap,
                         "not a JSON object: %s%s is %.*s, which JSON does not allow (it has no NaN or Infinity; "
                         "Python's json.dumps writes them unless allow_nan=False). %s (docs/logprobs.md)",
                         pl ? "field " : "", pl ? path : "the line", (int)l, lit,
                         nan   ? "A logprob is never NaN: write null for an absent value"
                         : neg ? "A logprob of -inf (probability 0) is written as the string \"-inf\""
                               : "A logprob is never +inf: write null for an absent value");
                return 1;
            }
        }
        prev = c;
    }
    return 0;
}

static int parse_line(parity_logprob_reader_t *r, const char *line, size_t len, parity_logprob_seq_t *s, uint64_t ordinal,
                      line_err_t *e)
{
    lp_seq_reset(s);
    s->ordinal = ordinal;
    if (r->fmt == PARITY_LOGPROB_JSONL && !r->slice_field && lp_jsonl_fast_parity(r, line, len, s, ordinal)) return 0;
    if (r->fmt == PARITY_LOGPROB_OPENAI_CHAT && !r->slice_field) {
        if (lp_jsonl_fast_chat(r, line, len, s, ordinal)) return 0;
        lp_seq_reset(s);
        s->ordinal = ordinal;
    }
    lp_seq_reset(s);
    s->ordinal = ordinal;
    cJSON *root = lp_jsonl_tree_parse(line, len);
    if (!root || !cJSON_IsObject(root)) {
        lp_jsonl_tree_drop();
        if (!root && lp_jsonl_nonfinite_literal(line, len, e->msg, sizeof e->msg)) return e->st = PARITY_E_FORMAT;
        return LERR(e, "not a JSON object%s", root ? "" : " (invalid JSON)");
    }
    const cJSON *o = lp_jsonl_unwrap(root);
    int rc = lp_jsonl_parse_record(r, o, s, e);
    if (!rc) {
        char ob[32];
        const char *id = r->ordinal_ids ? NULL : lp_jsonl_id_of(root, r->fmt);
        if (!id && r->fmt == PARITY_LOGPROB_VLLM && cJSON_IsString(jl_get(o, "request_id")))
            id = jl_get(o, "request_id")->valuestring;
        if (!id) {
            snprintf(ob, sizeof ob, "#%llu", (unsigned long long)ordinal);
            id = ob;
        }
        if (lp_seq_set_str(&s->id, id)) rc = e->st = PARITY_E_NOMEM;
        if (!rc && r->slice_field) {
            const cJSON *fv = jl_get(root, r->slice_field);
            if (!fv && o != root) fv = jl_get(o, r->slice_field);
            char nb[64];
            if (cJSON_IsNumber(fv)) snprintf(nb, sizeof nb, "%.17g", fv->valuedouble);
            const char *val = cJSON_IsString(fv) ? fv->valuestring : cJSON_IsNumber(fv) ? nb
                              : cJSON_IsBool(fv)  ? (cJSON_IsTrue(fv) ? "true" : "false")
                                                  : NULL;
            if (lp_seq_set_str(&s->field, val)) rc = e->st = PARITY_E_NOMEM;
        }
    }
    lp_jsonl_tree_drop(); /* the whole tree (instead of cJSON_Delete) */
    return rc;
}

/* Find the next non-blank line from r->pos: [*b, *b + *len), advancing r->pos and r->line. */
static int next_line(parity_logprob_reader_t *r, const char **b, size_t *len, uint64_t *lineno)
{
    while (r->pos < r->len) {
        const char *p = (const char *)r->base + r->pos;
        size_t left = r->len - r->pos;
        const char *nl = memchr(p, '\n', left);
        size_t l = nl ? (size_t)(nl - p) : left;
        r->pos += l + (nl ? 1 : 0);
        r->line++;
        size_t a = 0;
        while (a < l && (p[a] == ' ' || p[a] == '\t' || p[a] == '\r')) a++;
        if (a == l) continue;
        *b = p;
        *len = l;
        *lineno = r->line;
        return 1;
    }
    return 0;
}

parity_status_t lp_jsonl_open(parity_logprob_reader_t *r, parity_diag_t *d)
{
    lp_jsonl_hooks_install();
    r->dtype = "text";
    size_t save = r->pos;
    uint64_t sl = r->line;
    const char *b;
    size_t len;
    uint64_t ln;
    if (!next_line(r, &b, &len, &ln)) {
        if (r->fmt == PARITY_LOGPROB_AUTO) r->fmt = PARITY_LOGPROB_JSONL;
        return PARITY_OK; /* an empty dump: no sequences */
    }
    r->pos = save;
    r->line = sl;
    if (len > r->opts.max_line)
        return parity_diag_set(d, PARITY_E_FORMAT, "%s:%llu: line of %zu bytes exceeds the limit of %zu", r->name,
                               (unsigned long long)ln, len, r->opts.max_line);
    cJSON *root = cJSON_ParseWithLength(b, len);
    if (!root || !cJSON_IsObject(root)) {
        char lit[320];
        if (!root && lp_jsonl_nonfinite_literal(b, len, lit, sizeof lit))
            return parity_diag_set(d, PARITY_E_FORMAT, "%s:%llu: %s", r->name, (unsigned long long)ln, lit);
        cJSON_Delete(root);
        return parity_diag_set(d, PARITY_E_FORMAT,
                               "%s:%llu: not a JSON object; expected JSONL (one JSON object per line), .npy "
                               "or .safetensors",
                               r->name, (unsigned long long)ln);
    }
    parity_logprob_format_t f = r->fmt == PARITY_LOGPROB_AUTO ? lp_jsonl_detect(root) : r->fmt; /* or forced */
    if (f == PARITY_LOGPROB_AUTO) {
        cJSON_Delete(root);
        return parity_diag_set(d, PARITY_E_UNSUPPORTED,
                               "%s:%llu: cannot tell the JSON shape: expected 'logprobs' (parity), "
                               "'choices[].logprobs' (OpenAI), 'outputs'/'prompt_logprobs' (vLLM) or "
                               "'meta_info' (SGLang); use --format",
                               r->name, (unsigned long long)ln);
    }
    r->fmt = f;
    r->ordinal_ids = lp_jsonl_id_of(root, f) == NULL &&
                     !(f == PARITY_LOGPROB_VLLM && cJSON_IsString(jl_get(lp_jsonl_unwrap(root), "request_id")));
    cJSON_Delete(root);
    return PARITY_OK;
}

/* A batch of lines of one reader: collected serially (line boundaries), parsed in parallel,
 * then finished serially in line order (errors, modality renumbering, pages released). */
typedef struct {
    parity_logprob_reader_t *r;
    parity_logprob_seq_t *seqs;
    const char **lines;
    size_t *lens;
    uint64_t *lnos;
    line_err_t *errs;
    uint64_t ord0;
    size_t n, bytes, nmods0;
} jl_batch_t;

/* The field of token i (top entry j, or -1) as the record's shape spells it, for messages. The
 * shapes that put the prompt first (vLLM, SGLang) are told apart by the token's phase. */
static void field_name(parity_logprob_format_t f, const parity_logprob_seq_t *s, size_t i, long j, char *b, size_t cap)
{
    size_t np = 0;
    if (f == PARITY_LOGPROB_VLLM || f == PARITY_LOGPROB_SGLANG)
        while (np < s->n && (s->flags[np] & PARITY_LOGPROB_PREFILL)) np++;
    int pre = i < np;
    size_t k = pre ? i : i - np;
    char top[48] = "";
    switch (f) {
    case PARITY_LOGPROB_OPENAI_CHAT:
        if (j >= 0) snprintf(top, sizeof top, ".top_logprobs[%ld]", j);
        snprintf(b, cap, "choices[0].logprobs.content[%zu]%s.logprob", i, top);
        break;
    case PARITY_LOGPROB_OPENAI_COMPLETIONS:
        if (j >= 0) snprintf(b, cap, "choices[0].logprobs.top_logprobs[%zu] (entry %ld)", i, j);
        else snprintf(b, cap, "choices[0].logprobs.token_logprobs[%zu]", i);
        break;
    case PARITY_LOGPROB_VLLM:
        if (j >= 0) snprintf(top, sizeof top, " (top entry %ld)", j);
        snprintf(b, cap, "%s[%zu]%s", pre ? "prompt_logprobs" : "outputs[0].logprobs", k, top);
        break;
    case PARITY_LOGPROB_SGLANG:
        if (j >= 0) snprintf(b, cap, "meta_info.%s_top_logprobs[%zu][%ld][0]", pre ? "input" : "output", k, j);
        else snprintf(b, cap, "meta_info.%s_token_logprobs[%zu][0]", pre ? "input" : "output", k);
        break;
    default:
        if (j >= 0) snprintf(b, cap, "field 'top_logprobs'[%zu][%ld]", i, j);
        else snprintf(b, cap, "field 'logprobs'[%zu]", i);
        break;
    }
}

/* The values of a parsed record that cannot be logprobs (lp_bad_value: positive beyond the
 * rounding slack; the parsers already refuse NaN and inf, which JSON cannot spell); one pass
 * over the record's doubles, in the parsing thread. */
static int check_values(const parity_logprob_reader_t *r, const parity_logprob_seq_t *s, line_err_t *e)
{
    unsigned allow = r->opts.allow | PARITY_LOGPROB_ALLOW_NONFINITE; /* (-inf is fine; NaN/inf: the parsers) */
    long bi = -1, bj = -1;
    for (size_t i = 0; i < s->n && bi < 0; i++)
        if ((s->flags[i] & PARITY_LOGPROB_PRESENT) && lp_bad_value(s->lp[i], allow)) bi = (long)i;
    size_t lim = bi >= 0 ? (size_t)bi : s->n; /* the token's own value first (vLLM's top entries hold it too) */
    for (size_t i = 0; i < lim && s->k && bj < 0; i++)
        for (size_t j = 0; j < s->k; j++)
            if (s->top_id[i * s->k + j] >= 0 && lp_bad_value(s->top_lp[i * s->k + j], allow)) {
                bi = (long)i;
                bj = (long)j;
                break;
            }
    if (bi < 0) return 0;
    double v = bj >= 0 ? s->top_lp[(size_t)bi * s->k + (size_t)bj] : s->lp[bi];
    char fb[96], wb[200];
    field_name(r->fmt, s, (size_t)bi, bj, fb, sizeof fb);
    lp_bad_describe(wb, sizeof wb, v, lp_bad_value(v, allow), 0);
    return LERR(e, "%s %s", fb, wb);
}

static void jl_parse_one(jl_batch_t *j, size_t i)
{
    j->errs[i].st = PARITY_OK;
    if (!parse_line(j->r, j->lines[i], j->lens[i], &j->seqs[i], j->ord0 + (uint64_t)i, &j->errs[i]))
        check_values(j->r, &j->seqs[i], &j->errs[i]);
}

/* One or two batches in one parallel section (a section costs a wake-up of every worker). Thread
 * t's share is lines [n t / T, n (t + 1) / T) of each batch, the same share of both files,
 * which the comparison's pairs (in line order when the files list requests alike) then find in
 * its cache; a thread done with its share takes lines of the others' (parity_steal_t). A
 * line's result does not depend on the thread (modality names are renumbered afterwards). */
typedef struct {
    jl_batch_t *b[2];
    int nt;
    parity_steal_t st; /* items: share t is its A lines then its B lines */
} jl_job_t;

static void jl_parse(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)b;
    (void)e;
    jl_job_t *j = ctx;
    size_t na = j->b[0]->n, nb = j->b[1] ? j->b[1]->n : 0, T = (size_t)j->nt;
    int64_t g;
    while ((g = parity_steal_next(&j->st, thread)) >= 0) {
        /* the share t holding item g, and g's place in it */
        size_t t = 0;
        while (t + 1 < T && (size_t)g >= na * (t + 1) / T + nb * (t + 1) / T) t++;
        size_t a0 = na * t / T, a1 = na * (t + 1) / T, o = (size_t)g - a0 - nb * t / T;
        if (o < a1 - a0) jl_parse_one(j->b[0], a0 + o);
        else jl_parse_one(j->b[1], nb * t / T + (o - (a1 - a0)));
    }
}

/* The modality names first seen in this batch were interned by the parsing threads in whatever
 * order they ran: renumber them in stream order (line, then position), as one thread would
 * have, so that modality indices, and with them the order of the modality slices in the
 * report, do not depend on the thread count. Names of earlier batches keep their index. */
static void canon_mods(parity_logprob_reader_t *r, size_t n0, parity_logprob_seq_t *seqs, size_t n)
{
    uint16_t map[LP_MAX_MODS + 1] = {0};
    size_t next = n0;
    /* A plain sequence has no tag and leaves mod[] unwritten (logprob.h): it is skipped. */
    for (size_t i = 0; i < n; i++)
        for (size_t p = 0; !seqs[i].plain && p < seqs[i].n; p++) {
            uint16_t m = seqs[i].mod[p];
            if (m > n0 && !map[m]) map[m] = (uint16_t)++next;
        }
    for (size_t m = n0 + 1; m <= r->nmods; m++) /* interned by a line that then failed */
        if (!map[m]) map[m] = (uint16_t)++next;
    char *names[LP_MAX_MODS + 1];
    for (size_t m = n0 + 1; m <= r->nmods; m++) names[map[m]] = r->mods[m];
    for (size_t m = n0 + 1; m <= r->nmods; m++) r->mods[m] = names[m];
    for (size_t i = 0; i < n; i++)
        for (size_t p = 0; !seqs[i].plain && p < seqs[i].n; p++)
            if (seqs[i].mod[p] > n0) seqs[i].mod[p] = map[seqs[i].mod[p]];
}

static void jl_batch_free(jl_batch_t *b)
{
    free(b->lines);
    free(b->lens);
    free(b->lnos);
    free(b->errs);
}

/* Up to max lines (and about BATCH_BYTES) of r into b. */
static parity_status_t jl_collect(parity_logprob_reader_t *r, parity_logprob_seq_t *seqs, size_t max, jl_batch_t *b,
                                  parity_diag_t *d)
{
    memset(b, 0, sizeof *b);
    b->r = r;
    b->seqs = seqs;
    b->ord0 = r->ordinal;
    b->nmods0 = r->nmods;
    b->lines = malloc(max * sizeof *b->lines);
    b->lens = malloc(max * sizeof *b->lens);
    b->lnos = malloc(max * sizeof *b->lnos);
    b->errs = calloc(max, sizeof *b->errs);
    if (!b->lines || !b->lens || !b->lnos || !b->errs) return parity_diag_set(d, PARITY_E_NOMEM, "out of memory");
    while (b->n < max && b->bytes < BATCH_BYTES) {
        const char *l;
        size_t len;
        uint64_t ln;
        if (!next_line(r, &l, &len, &ln)) break;
        if (len > r->opts.max_line)
            return parity_diag_set(d, PARITY_E_FORMAT, "%s:%llu: line of %zu bytes exceeds the limit of %zu", r->name,
                                   (unsigned long long)ln, len, r->opts.max_line);
        b->lines[b->n] = l;
        b->lens[b->n] = len;
        b->lnos[b->n] = ln;
        b->bytes += len;
        b->n++;
    }
    return PARITY_OK;
}

/* Give back the pages of a mapped dump below upto (the lines read). */
static void lp_release(parity_logprob_reader_t *r, size_t upto)
{
    if (!r->mapped) return;
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0) return;
    size_t e = upto / (size_t)pg * (size_t)pg;
    /* Release in steps of at least 8 MiB to keep the syscall count low. */
    if (e > r->released + ((size_t)8 << 20)) {
        madvise((void *)(r->base + r->released), e - r->released, MADV_DONTNEED);
        r->released = e;
    }
}


/* The parsed batch in line order: the first failed line's error, the lines before it read. */
static parity_status_t jl_finish(jl_batch_t *b, size_t *got, parity_diag_t *d)
{
    parity_logprob_reader_t *r = b->r;
    parity_status_t st = PARITY_OK;
    size_t ok = b->n;
    for (size_t i = 0; i < b->n; i++) {
        b->seqs[i].line = b->lnos[i];
        if (b->errs[i].st) {
            ok = i;
            st = parity_diag_set(d, b->errs[i].st, "%s:%llu: %s", r->name, (unsigned long long)b->lnos[i],
                                 b->errs[i].st == PARITY_E_NOMEM ? "out of memory" : b->errs[i].msg);
            break;
        }
    }
    /* only the lines parsed without error are read (a failed line's sequence may be partial) */
    if (r->nmods > b->nmods0) canon_mods(r, b->nmods0, b->seqs, ok);
    r->ordinal += ok;
    *got = ok;
    if (ok) lp_release(r, (size_t)(b->lines[ok - 1] - (const char *)r->base));
    return st;
}

/* in parallel unless the batches are tiny: a batch of a few long lines (engine output with
 * top-k: ~0.5 MB per 2048-token line) is as much work as thousands of short ones */
static void jl_parse_all(jl_batch_t *a, jl_batch_t *b)
{
    size_t nbl = b ? b->n : 0, n = a->n > nbl ? a->n : nbl, bytes = a->bytes + (b ? b->bytes : 0);
    int nt = n < 2 || bytes < ((size_t)64 << 10) ? 1 : a->r->opts.n_threads;
    if (nt <= 0) nt = parity_num_threads();
    if (nt > 64) nt = 64;
    if ((size_t)nt > n) nt = n > 0 ? (int)n : 1;
    jl_job_t job;
    job.b[0] = a;
    job.b[1] = b;
    job.nt = nt;
    int64_t bound[65];
    size_t na = a->n, nb = b ? b->n : 0;
    for (int t = 0; t <= nt; t++) bound[t] = (int64_t)(na * (size_t)t / (size_t)nt + nb * (size_t)t / (size_t)nt);
    parity_steal_init(&job.st, nt, bound);
    parity_parallel_for(nt, nt, jl_parse, &job);
}

/* An over-long line ends the batch with its error (in d), the lines before it are still parsed
 * and an error among them, earlier in the file, is the one reported (as one line at a time
 * would); only a failed allocation (the batch has no arrays) stops at once. */
static int jl_usable(const jl_batch_t *b) { return b->lines && b->lens && b->lnos && b->errs; }

parity_status_t lp_jsonl_next(parity_logprob_reader_t *r, parity_logprob_seq_t *seqs, size_t max, size_t *got,
                              parity_diag_t *d)
{
    jl_batch_t b;
    parity_status_t st = jl_collect(r, seqs, max, &b, d);
    if (jl_usable(&b)) {
        jl_parse_all(&b, NULL);
        parity_status_t fs = jl_finish(&b, got, d);
        if (fs) st = fs;
    }
    jl_batch_free(&b);
    return st;
}

parity_status_t lp_jsonl_next2(parity_logprob_reader_t *ra, parity_logprob_seq_t *sa, size_t maxa, size_t *gota,
                               parity_logprob_reader_t *rb, parity_logprob_seq_t *sb, size_t maxb, size_t *gotb,
                               parity_diag_t *d)
{
    jl_batch_t a, b;
    memset(&b, 0, sizeof b);
    *gota = *gotb = 0;
    /* B is not read when A's batch already ends in an error (as reading A, then B, would) */
    parity_status_t sta = jl_collect(ra, sa, maxa, &a, d), stb = PARITY_OK;
    if (!sta) stb = jl_collect(rb, sb, maxb, &b, d);
    int two = !sta && jl_usable(&b);
    if (jl_usable(&a)) {
        jl_parse_all(&a, two ? &b : NULL);
        parity_status_t fs = jl_finish(&a, gota, d);
        if (fs || sta) {
            jl_batch_free(&a);
            jl_batch_free(&b);
            return fs ? fs : sta;
        }
        if (two) {
            fs = jl_finish(&b, gotb, d);
            if (fs) stb = fs;
        }
    }
    jl_batch_free(&a);
    jl_batch_free(&b);
    return sta ? sta : stb;
}
