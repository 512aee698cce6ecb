/* Records of a JSONL logprob dump from the line's cJSON tree, one extractor per shape: parity's
 * own schema, OpenAI chat and completions responses (bare or inside an OpenAI Batch output
 * line), vLLM offline RequestOutput, SGLang /generate; telling the shape of a first record and
 * finding a record's request id. Every error message of a malformed record comes from here (the
 * fast paths leave such lines to this code). Shapes and field names: docs/logprobs.md. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/logprob/logprob_jsonl_impl.h"

/* A logprob: a number (finite or -inf), null (absent), or the strings "-inf"/"-Infinity"
 * (Python's json module cannot write -inf as valid JSON). Returns -1 for anything else. */
static int lp_value(const cJSON *j, double *v, int *present)
{
    *present = 0;
    if (!j || cJSON_IsNull(j)) return 0;
    if (cJSON_IsNumber(j)) {
        *v = j->valuedouble;
        if (isnan(*v) || *v == INFINITY) return -1;
        *present = 1;
        return 0;
    }
    if (cJSON_IsString(j) && (!strcmp(j->valuestring, "-inf") || !strcmp(j->valuestring, "-Infinity"))) {
        *v = -INFINITY;
        *present = 1;
        return 0;
    }
    return -1;
}

static int int_id(const cJSON *j, int64_t *v)
{
    if (!cJSON_IsNumber(j)) return -1;
    double x = j->valuedouble;
    if (!(x >= -9007199254740992.0 && x <= 9007199254740992.0) || x != floor(x)) return -1;
    *v = (int64_t)x;
    return 0;
}

/* --- parity's own schema ----------------------------------------------------------------- */
static int parse_parity(parity_logprob_reader_t *r, const cJSON *o, parity_logprob_seq_t *s, line_err_t *e)
{
    const cJSON *ids = jl_get(o, "token_ids"), *lps = jl_get(o, "logprobs"), *toks = jl_get(o, "tokens");
    const cJSON *ti = jl_get(o, "top_ids"), *tl = jl_get(o, "top_logprobs");
    const cJSON *mod = jl_get(o, "modality"), *ph = jl_get(o, "phase"), *pl = jl_get(o, "prefill_len");
    if (!cJSON_IsArray(lps)) return LERR(e, "field 'logprobs': expected an array");
    int n = cJSON_GetArraySize(lps);
    if (ids && (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) != n))
        return LERR(e, "field 'token_ids': expected an array of %d ids (as many as logprobs)", n);
    if (toks && (!cJSON_IsArray(toks) || cJSON_GetArraySize(toks) != n))
        return LERR(e, "field 'tokens': expected an array of %d strings (as many as logprobs)", n);
    if (!!ti != !!tl) return LERR(e, "fields 'top_ids' and 'top_logprobs' must be given together");
    size_t K = 0;
    if (ti) {
        if (!cJSON_IsArray(ti) || !cJSON_IsArray(tl) || cJSON_GetArraySize(ti) != n || cJSON_GetArraySize(tl) != n)
            return LERR(e, "fields 'top_ids'/'top_logprobs': expected arrays of %d lists", n);
        for (const cJSON *a = ti->child, *b = tl->child; a && b; a = a->next, b = b->next) {
            if (cJSON_IsNull(a) && cJSON_IsNull(b)) continue;
            if (!cJSON_IsArray(a) || !cJSON_IsArray(b) || cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
                return LERR(e, "fields 'top_ids'/'top_logprobs': each entry must be two lists of equal length");
            if ((size_t)cJSON_GetArraySize(a) > K) K = (size_t)cJSON_GetArraySize(a);
        }
        if (K > 4096) return LERR(e, "fields 'top_ids': more than 4096 entries per token");
    }
    if (mod && !cJSON_IsString(mod) && !(cJSON_IsArray(mod) && cJSON_GetArraySize(mod) == n))
        return LERR(e, "field 'modality': expected a string or an array of %d strings", n);
    if (ph && !cJSON_IsString(ph) && !(cJSON_IsArray(ph) && cJSON_GetArraySize(ph) == n))
        return LERR(e, "field 'phase': expected \"prefill\"/\"decode\" or an array of %d of them", n);
    int64_t plen = -1;
    if (pl && int_id(pl, &plen)) return LERR(e, "field 'prefill_len': expected an integer");
    if (!ids && !toks) return LERR(e, "record needs 'token_ids' (or at least 'tokens')");
    if (lp_seq_reserve(s, (size_t)n, K)) return e->st = PARITY_E_NOMEM;
    uint16_t m1 = cJSON_IsString(mod) ? lp_intern_mod(r, mod->valuestring) : 0;
    const cJSON *jl = lps->child, *jid = ids ? ids->child : NULL, *jt = toks ? toks->child : NULL;
    const cJSON *jm = cJSON_IsArray(mod) ? mod->child : NULL, *jp = cJSON_IsArray(ph) ? ph->child : NULL;
    const cJSON *jti = ti ? ti->child : NULL, *jtl = tl ? tl->child : NULL;
    for (int i = 0; i < n; i++) {
        double v = 0;
        int pres;
        uint8_t fl = 0;
        if (lp_value(jl, &v, &pres))
            return LERR(e, "field 'logprobs'[%d]: expected a number (finite or -inf) or null; NaN/inf/text is "
                           "not a logprob", i);
        int64_t key;
        const char *txt = NULL;
        if (jt) {
            if (!cJSON_IsString(jt)) return LERR(e, "field 'tokens'[%d]: expected a string", i);
            txt = jt->valuestring;
        }
        if (jid) {
            if (int_id(jid, &key)) return LERR(e, "field 'token_ids'[%d]: expected an integer", i);
        } else {
            key = jl_text_key(txt, &fl);
        }
        uint16_t m = m1;
        if (jm) {
            if (!cJSON_IsString(jm) && !cJSON_IsNull(jm)) return LERR(e, "field 'modality'[%d]: expected a string", i);
            m = cJSON_IsString(jm) ? lp_intern_mod(r, jm->valuestring) : 0;
        }
        const char *phs = cJSON_IsString(ph) ? ph->valuestring : jp && cJSON_IsString(jp) ? jp->valuestring : NULL;
        if (phs) {
            if (!strcmp(phs, "prefill")) fl |= PARITY_LOGPROB_PREFILL;
            else if (!strcmp(phs, "decode")) fl |= PARITY_LOGPROB_DECODE;
            else return LERR(e, "field 'phase'[%d]: expected \"prefill\" or \"decode\", got \"%.40s\"", i, phs);
        } else if (plen >= 0) {
            fl |= i < plen ? PARITY_LOGPROB_PREFILL : PARITY_LOGPROB_DECODE;
        }
        jl_push(s, key, v, pres, fl, m, txt);
        if (jti && cJSON_IsArray(jti)) {
            size_t j = 0;
            for (const cJSON *a = jti->child, *b = jtl->child; a && b; a = a->next, b = b->next, j++) {
                int64_t id;
                double tv;
                int tp;
                if (int_id(a, &id) || id < -1 || id > INT32_MAX)
                    return LERR(e, "field 'top_ids'[%d][%zu]: expected a token id", i, j);
                if (lp_value(b, &tv, &tp) || !tp)
                    return LERR(e, "field 'top_logprobs'[%d][%zu]: expected a finite number or -inf", i, j);
                s->top_id[(size_t)i * K + j] = (int32_t)id;
                s->top_lp[(size_t)i * K + j] = tv;
            }
        }
        jl = jl->next;
        if (jid) jid = jid->next;
        if (jt) jt = jt->next;
        if (jm) jm = jm->next;
        if (jp) jp = jp->next;
        if (jti) jti = jti->next, jtl = jtl->next;
    }
    return 0;
}

/* --- OpenAI chat: choices[0].logprobs.content[] ------------------------------------------ */
static int parse_chat(parity_logprob_reader_t *r, const cJSON *o, parity_logprob_seq_t *s, line_err_t *e)
{
    (void)r;
    const cJSON *ch = jl_get(o, "choices");
    if (!cJSON_IsArray(ch) || !ch->child) return LERR(e, "field 'choices': expected a non-empty array");
    const cJSON *lpo = jl_get(ch->child, "logprobs");
    const cJSON *c = lpo ? jl_get(lpo, "content") : NULL;
    if (!cJSON_IsArray(c)) return LERR(e, "field 'choices[0].logprobs.content': expected an array");
    int n = cJSON_GetArraySize(c);
    size_t K = 0;
    for (const cJSON *t = c->child; t; t = t->next) {
        const cJSON *tp = jl_get(t, "top_logprobs");
        if (cJSON_IsArray(tp) && (size_t)cJSON_GetArraySize(tp) > K) K = (size_t)cJSON_GetArraySize(tp);
    }
    if (K > 4096) return LERR(e, "top_logprobs: more than 4096 entries");
    if (lp_seq_reserve(s, (size_t)n, K)) return e->st = PARITY_E_NOMEM;
    int i = 0;
    for (const cJSON *t = c->child; t; t = t->next, i++) {
        const cJSON *tk = jl_get(t, "token");
        double v;
        int pres;
        if (!cJSON_IsString(tk)) return LERR(e, "choices[0].logprobs.content[%d].token: expected a string", i);
        if (lp_value(jl_get(t, "logprob"), &v, &pres) || !pres)
            return LERR(e, "choices[0].logprobs.content[%d].logprob: expected a number (finite or -inf)", i);
        uint8_t fl = PARITY_LOGPROB_DECODE;
        int64_t key = jl_text_key(tk->valuestring, &fl);
        jl_push(s, key, v, 1, fl, 0, tk->valuestring);
        const cJSON *tp = jl_get(t, "top_logprobs");
        size_t j = 0;
        if (cJSON_IsArray(tp))
            for (const cJSON *x = tp->child; x; x = x->next, j++) {
                const cJSON *xt = jl_get(x, "token");
                double xv;
                int xp;
                if (!cJSON_IsString(xt) || lp_value(jl_get(x, "logprob"), &xv, &xp) || !xp)
                    return LERR(e, "choices[0].logprobs.content[%d].top_logprobs[%zu]: expected {token, logprob}",
                                i, j);
                s->top_id[(size_t)i * K + j] = jl_text_top_id(xt->valuestring);
                s->top_lp[(size_t)i * K + j] = xv;
            }
    }
    return 0;
}

/* --- OpenAI completions: choices[0].logprobs.{tokens, token_logprobs, top_logprobs} ------- */
static int parse_compl(parity_logprob_reader_t *r, const cJSON *o, parity_logprob_seq_t *s, line_err_t *e)
{
    (void)r;
    const cJSON *ch = jl_get(o, "choices");
    if (!cJSON_IsArray(ch) || !ch->child) return LERR(e, "field 'choices': expected a non-empty array");
    const cJSON *lpo = jl_get(ch->child, "logprobs");
    const cJSON *toks = lpo ? jl_get(lpo, "tokens") : NULL, *tl = lpo ? jl_get(lpo, "token_logprobs") : NULL;
    const cJSON *top = lpo ? jl_get(lpo, "top_logprobs") : NULL;
    if (!cJSON_IsArray(toks) || !cJSON_IsArray(tl) || cJSON_GetArraySize(toks) != cJSON_GetArraySize(tl))
        return LERR(e, "choices[0].logprobs: expected arrays 'tokens' and 'token_logprobs' of equal length");
    int n = cJSON_GetArraySize(toks);
    if (top && !cJSON_IsNull(top) && (!cJSON_IsArray(top) || cJSON_GetArraySize(top) != n))
        return LERR(e, "choices[0].logprobs.top_logprobs: expected an array of %d objects or nulls", n);
    size_t K = 0;
    if (cJSON_IsArray(top))
        for (const cJSON *x = top->child; x; x = x->next)
            if (cJSON_IsObject(x) && (size_t)cJSON_GetArraySize(x) > K) K = (size_t)cJSON_GetArraySize(x);
    if (K > 4096) return LERR(e, "top_logprobs: more than 4096 entries");
    /* With echo, the prompt's tokens come first: usage.prompt_tokens of them when the counts add up. */
    int64_t pt = -1, ct = -1;
    const cJSON *u = jl_get(o, "usage");
    if (u && !int_id(jl_get(u, "prompt_tokens"), &pt) && !int_id(jl_get(u, "completion_tokens"), &ct) && pt + ct != n)
        pt = -1;
    if (lp_seq_reserve(s, (size_t)n, K)) return e->st = PARITY_E_NOMEM;
    const cJSON *a = toks->child, *b = tl->child, *x = cJSON_IsArray(top) ? top->child : NULL;
    for (int i = 0; i < n; i++, a = a->next, b = b->next) {
        double v = 0;
        int pres;
        if (!cJSON_IsString(a)) return LERR(e, "choices[0].logprobs.tokens[%d]: expected a string", i);
        if (lp_value(b, &v, &pres))
            return LERR(e, "choices[0].logprobs.token_logprobs[%d]: expected a number (finite or -inf) or null", i);
        uint8_t fl = pt >= 0 ? (i < pt ? PARITY_LOGPROB_PREFILL : PARITY_LOGPROB_DECODE) : 0;
        int64_t key = jl_text_key(a->valuestring, &fl);
        jl_push(s, key, v, pres, fl, 0, a->valuestring);
        if (x) {
            size_t j = 0;
            if (cJSON_IsObject(x))
                for (const cJSON *y = x->child; y; y = y->next, j++) {
                    double yv;
                    int yp;
                    if (lp_value(y, &yv, &yp) || !yp)
                        return LERR(e, "choices[0].logprobs.top_logprobs[%d]: values must be numbers", i);
                    s->top_id[(size_t)i * K + j] = jl_text_top_id(y->string);
                    s->top_lp[(size_t)i * K + j] = yv;
                }
            x = x->next;
        }
    }
    return 0;
}

/* --- vLLM: token ids plus a list of {id: {logprob, rank, decoded_token}} ----------------- */
static size_t vllm_k(const cJSON *lps)
{
    size_t K = 0;
    if (cJSON_IsArray(lps))
        for (const cJSON *d = lps->child; d; d = d->next)
            if (cJSON_IsObject(d) && (size_t)cJSON_GetArraySize(d) > K) K = (size_t)cJSON_GetArraySize(d);
    return K;
}

static int vllm_part(const cJSON *ids, const cJSON *lps, uint8_t phase, size_t K, parity_logprob_seq_t *s,
                     const char *what, line_err_t *e)
{
    int i = 0;
    for (const cJSON *a = ids->child, *d = lps->child; a; a = a->next, d = d->next, i++) {
        int64_t id;
        if (int_id(a, &id)) return LERR(e, "%s token_ids[%d]: expected an integer", what, i);
        if (cJSON_IsNull(d)) { /* the first prompt token has no logprob */
            jl_push(s, id, 0, 0, phase, 0, NULL);
            continue;
        }
        if (!cJSON_IsObject(d)) return LERR(e, "%s logprobs[%d]: expected an object or null", what, i);
        char kb[32];
        if (id >= 0) { /* the decimal key, as "%lld" prints it (snprintf was 3% of the shape) */
            char *q = kb + sizeof kb;
            *--q = 0;
            uint64_t u = (uint64_t)id;
            do *--q = (char)('0' + u % 10);
            while ((u /= 10));
            memmove(kb, q, (size_t)(kb + sizeof kb - q));
        } else {
            snprintf(kb, sizeof kb, "%lld", (long long)id);
        }
        const cJSON *me = jl_get(d, kb);
        double v;
        int pres;
        if (!me || lp_value(jl_get(me, "logprob"), &v, &pres) || !pres)
            return LERR(e, "%s logprobs[%d]: no {\"logprob\": number} entry for the token id %lld", what, i,
                        (long long)id);
        const cJSON *dt = jl_get(me, "decoded_token");
        size_t base = s->n;
        jl_push(s, id, v, 1, phase, 0, cJSON_IsString(dt) ? dt->valuestring : NULL);
        /* top entries ordered by rank (insertion sort over at most K entries) */
        int64_t rk[64];
        size_t j = 0;
        for (const cJSON *x = d->child; x && j < K; x = x->next, j++) {
            char *end;
            long long xid = 0;
            const char *ks = x->string;
            size_t kl = 0;
            while (kl < 10 && ks[kl] >= '0' && ks[kl] <= '9') xid = xid * 10 + (ks[kl++] - '0');
            if (kl == 0 || ks[kl]) xid = strtoll(ks, &end, 10); /* signs, blanks, long keys: as before */
            else end = (char *)ks + kl;
            double xv;
            int xp;
            int64_t rank = INT64_MAX;
            if (*end || xid < 0 || xid > INT32_MAX || lp_value(jl_get(x, "logprob"), &xv, &xp) || !xp)
                return LERR(e, "%s logprobs[%d]: entry \"%.20s\" must be a token id with a numeric logprob", what, i,
                            x->string);
            int_id(jl_get(x, "rank"), &rank);
            size_t pos = j;
            if (K <= 64) {
                while (pos > 0 && rk[pos - 1] > rank) {
                    rk[pos] = rk[pos - 1];
                    s->top_id[base * K + pos] = s->top_id[base * K + pos - 1];
                    s->top_lp[base * K + pos] = s->top_lp[base * K + pos - 1];
                    pos--;
                }
                rk[pos] = rank;
            }
            s->top_id[base * K + pos] = (int32_t)xid;
            s->top_lp[base * K + pos] = xv;
        }
    }
    return 0;
}

static int parse_vllm(parity_logprob_reader_t *r, const cJSON *o, parity_logprob_seq_t *s, line_err_t *e)
{
    (void)r;
    const cJSON *pids = jl_get(o, "prompt_token_ids"), *plp = jl_get(o, "prompt_logprobs");
    const cJSON *outs = jl_get(o, "outputs"), *out0 = cJSON_IsArray(outs) ? outs->child : NULL;
    const cJSON *oids = out0 ? jl_get(out0, "token_ids") : NULL, *olp = out0 ? jl_get(out0, "logprobs") : NULL;
    int np = 0, no = 0;
    if (cJSON_IsArray(plp)) {
        if (!cJSON_IsArray(pids) || cJSON_GetArraySize(pids) != cJSON_GetArraySize(plp))
            return LERR(e, "'prompt_logprobs' needs 'prompt_token_ids' of the same length");
        np = cJSON_GetArraySize(plp);
    }
    if (cJSON_IsArray(olp)) {
        if (!cJSON_IsArray(oids) || cJSON_GetArraySize(oids) != cJSON_GetArraySize(olp))
            return LERR(e, "outputs[0]: 'logprobs' needs 'token_ids' of the same length");
        no = cJSON_GetArraySize(olp);
    }
    if (!np && !no && !cJSON_IsArray(plp) && !cJSON_IsArray(olp))
        return LERR(e, "vLLM record without 'prompt_logprobs' or 'outputs[0].logprobs'");
    size_t K = vllm_k(plp), K2 = vllm_k(olp);
    if (K2 > K) K = K2;
    if (K > 4096) return LERR(e, "logprobs: more than 4096 entries per token");
    if (lp_seq_reserve(s, (size_t)np + (size_t)no, K)) return e->st = PARITY_E_NOMEM;
    if (np && vllm_part(pids, plp, PARITY_LOGPROB_PREFILL, K, s, "prompt", e)) return e->st;
    if (no && vllm_part(oids, olp, PARITY_LOGPROB_DECODE, K, s, "outputs[0]", e)) return e->st;
    return 0;
}

/* --- SGLang: meta_info.{input,output}_token_logprobs = [[logprob, id, text], ...] -------- */
static size_t sgl_k(const cJSON *top)
{
    size_t K = 0;
    if (cJSON_IsArray(top))
        for (const cJSON *x = top->child; x; x = x->next)
            if (cJSON_IsArray(x) && (size_t)cJSON_GetArraySize(x) > K) K = (size_t)cJSON_GetArraySize(x);
    return K;
}

static int sgl_entry(const cJSON *x, double *v, int *pres, int64_t *id, const char **txt)
{
    if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) < 2) return -1;
    if (lp_value(x->child, v, pres)) return -1;
    if (int_id(x->child->next, id)) return -1;
    const cJSON *t = x->child->next->next;
    *txt = t && cJSON_IsString(t) ? t->valuestring : NULL;
    return 0;
}

static int sgl_part(const cJSON *lps, const cJSON *top, uint8_t phase, size_t K, parity_logprob_seq_t *s,
                    const char *what, line_err_t *e)
{
    if (!lps) return 0;
    if (!cJSON_IsArray(lps)) return LERR(e, "meta_info.%s_token_logprobs: expected an array", what);
    if (top && !cJSON_IsNull(top) && (!cJSON_IsArray(top) || cJSON_GetArraySize(top) != cJSON_GetArraySize(lps)))
        return LERR(e, "meta_info.%s_top_logprobs: expected one entry per token", what);
    const cJSON *tx = cJSON_IsArray(top) ? top->child : NULL;
    int i = 0;
    for (const cJSON *x = lps->child; x; x = x->next, i++) {
        double v = 0;
        int pres;
        int64_t id;
        const char *txt;
        if (sgl_entry(x, &v, &pres, &id, &txt))
            return LERR(e, "meta_info.%s_token_logprobs[%d]: expected [logprob|null, token_id, text|null]", what, i);
        size_t base = s->n;
        jl_push(s, id, v, pres, phase, 0, txt);
        if (tx) {
            size_t j = 0;
            if (cJSON_IsArray(tx))
                for (const cJSON *y = tx->child; y; y = y->next, j++) {
                    double yv = 0;
                    int yp;
                    int64_t yid;
                    const char *yt;
                    if (sgl_entry(y, &yv, &yp, &yid, &yt) || !yp || yid < 0 || yid > INT32_MAX)
                        return LERR(e, "meta_info.%s_top_logprobs[%d][%zu]: expected [logprob, token_id, text]",
                                    what, i, j);
                    s->top_id[base * K + j] = (int32_t)yid;
                    s->top_lp[base * K + j] = yv;
                }
            tx = tx->next;
        }
    }
    return 0;
}

static int parse_sglang(parity_logprob_reader_t *r, const cJSON *o, parity_logprob_seq_t *s, line_err_t *e)
{
    (void)r;
    const cJSON *m = jl_get(o, "meta_info");
    if (!cJSON_IsObject(m)) return LERR(e, "field 'meta_info': expected an object");
    const cJSON *il = jl_get(m, "input_token_logprobs"), *ol = jl_get(m, "output_token_logprobs");
    const cJSON *it = jl_get(m, "input_top_logprobs"), *ot = jl_get(m, "output_top_logprobs");
    if (!il && !ol) return LERR(e, "meta_info has no input_token_logprobs/output_token_logprobs (return_logprob)");
    size_t n = (size_t)(cJSON_IsArray(il) ? cJSON_GetArraySize(il) : 0) +
               (size_t)(cJSON_IsArray(ol) ? cJSON_GetArraySize(ol) : 0);
    size_t K = sgl_k(it), K2 = sgl_k(ot);
    if (K2 > K) K = K2;
    if (K > 4096) return LERR(e, "top logprobs: more than 4096 entries");
    if (lp_seq_reserve(s, n, K)) return e->st = PARITY_E_NOMEM;
    if (sgl_part(il, it, PARITY_LOGPROB_PREFILL, K, s, "input", e)) return e->st;
    if (sgl_part(ol, ot, PARITY_LOGPROB_DECODE, K, s, "output", e)) return e->st;
    return 0;
}

/* --- the shape and the request id of a record ------------------------------------------- */

const cJSON *lp_jsonl_unwrap(const cJSON *o)
{
    /* OpenAI Batch API output line: {"custom_id", "response": {"status_code", "body": {...}}} */
    const cJSON *resp = jl_get(o, "response");
    if (cJSON_IsObject(resp) && cJSON_IsObject(jl_get(resp, "body"))) return jl_get(resp, "body");
    return o;
}

parity_logprob_format_t lp_jsonl_detect(const cJSON *root)
{
    const cJSON *o = lp_jsonl_unwrap(root);
    const cJSON *ch = jl_get(o, "choices");
    if (cJSON_IsArray(ch) && ch->child) {
        const cJSON *l = jl_get(ch->child, "logprobs");
        if (l && jl_get(l, "content")) return PARITY_LOGPROB_OPENAI_CHAT;
        if (l && jl_get(l, "token_logprobs")) return PARITY_LOGPROB_OPENAI_COMPLETIONS;
        if (jl_get(ch->child, "message")) return PARITY_LOGPROB_OPENAI_CHAT;
        return PARITY_LOGPROB_OPENAI_COMPLETIONS;
    }
    if (cJSON_IsObject(jl_get(o, "meta_info"))) return PARITY_LOGPROB_SGLANG;
    if (jl_get(o, "outputs") || jl_get(o, "prompt_logprobs")) return PARITY_LOGPROB_VLLM;
    if (jl_get(o, "logprobs")) return PARITY_LOGPROB_JSONL;
    return PARITY_LOGPROB_AUTO;
}

const char *lp_jsonl_id_of(const cJSON *root, parity_logprob_format_t f)
{
    static const char *const own[] = {"id", "request_id", "custom_id", NULL};
    static const char *const other[] = {"custom_id", "request_id", NULL};
    for (const char *const *k = f == PARITY_LOGPROB_JSONL ? own : other; *k; k++) {
        const cJSON *v = jl_get(root, *k);
        if (cJSON_IsString(v)) return v->valuestring;
    }
    return NULL;
}

int lp_jsonl_parse_record(parity_logprob_reader_t *r, const cJSON *o, parity_logprob_seq_t *s, line_err_t *e)
{
    switch (r->fmt) {
    case PARITY_LOGPROB_OPENAI_CHAT: return parse_chat(r, o, s, e);
    case PARITY_LOGPROB_OPENAI_COMPLETIONS: return parse_compl(r, o, s, e);
    case PARITY_LOGPROB_VLLM: return parse_vllm(r, o, s, e);
    case PARITY_LOGPROB_SGLANG: return parse_sglang(r, o, s, e);
    default: return parse_parity(r, o, s, e);
    }
}
