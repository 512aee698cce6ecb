/* The out-of-line parts of the strict JSON scanner (logprob_json_scan.h): strings with and
 * without escapes, the double-double decision for 16-19 digit numbers, skipping a value and
 * walking an object's members. Nothing here allocates but lp_json_string's output buffer. */
#include "src/logprob/logprob_json_scan.h"

/* A string without escapes or control characters: [*b, *b + *n). */
int lp_json_str(fp_cur_t *c, const char **b, size_t *n)
{
    if (c->p >= c->e || *c->p != '"') return 0;
    const char *q = ++c->p;
    while (c->p < c->e && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '\\' || ch < 0x20) return 0;
        c->p++;
    }
    if (c->p >= c->e) return 0;
    *b = q;
    *n = (size_t)(c->p - q);
    c->p++;
    return 1;
}

/* m * 10^q (|q| <= 22, 2^53 <= m < 2^63), correctly rounded, into *v; 0 when it cannot tell
 * (then strtod decides). The decimals engines print for a float32 logprob widened to double
 * (Python's repr: -0.4887298047542572) have 16-17 digits, beyond Clinger's exact case, and
 * strtod on them was 5x the whole parse.
 * m = xh + xl exactly (xh = m rounded, xl = the remainder, |xl| <= 2^10, both doubles), and
 * P = 10^|q| is exact. For q < 0: vh = RN(xh / P), whose remainder r = xh - vh P is exact and
 * computed exactly by an FMA (Boldo & Daumas; no underflow here), so m / P = vh + y with
 * y = (r + xl) / P exactly; vl = RN(RN(r + xl) / P) is y within 2.0001u |y|, and
 * |y| <= |xl| / P + ulp(vh) / 2 <= 2^-52 |m / P|. For q > 0: vh = RN(xh P), e = xh P - vh
 * exactly (FMA), m P = vh + e + xl P, vl = RN(e + RN(xl P)), within 3u 2^-52 |m P|. Either way
 * vh + vl is within delta = 2^-102 |t| of the true value t. s = RN(vh + vl) and its error
 * err = (vh + vl) - s exactly (Fast2Sum, |vh| >= |vl|); s is t correctly rounded unless
 * vh + vl is within delta of a midpoint between s and a neighbour, i.e. unless |err| is
 * within delta of ulp(s)/2 (ulp(s)/4 below a power of two). delta < 2^-48 ulp(s); the
 * margin taken is 2^-40 ulp(s), so strtod is called for about one number in 2^39. The result
 * is in [1e-22, 2^63 1e22]: normal, finite. */
int lp_json_exact(uint64_t m, int q, double *v)
{
    double xh = (double)m;
    double xl = (double)(int64_t)(m - (uint64_t)xh);
    double P = fp_pow10[q < 0 ? -q : q], vh, vl;
    if (q < 0) {
        vh = xh / P;
        double r = fma(-vh, P, xh);
        vl = (r + xl) / P;
    } else {
        vh = xh * P;
        vl = fma(xh, P, -vh) + xl * P;
    }
    double sum = vh + vl;
    double err = vl - (sum - vh);
    uint64_t u;
    memcpy(&u, &sum, sizeof u);
    double ulp;
    uint64_t ue = (u & 0x7ff0000000000000ull) - (52ull << 52); /* 2^(exponent - 52) */
    memcpy(&ulp, &ue, sizeof ulp);
    double half = (err < 0 && (u & 0x000fffffffffffffull) == 0) ? 0.25 * ulp : 0.5 * ulp;
    if (half - fabs(err) <= 0x1p-40 * ulp) return 0;
    *v = sum;
    return 1;
}

static int fc_put(fc_buf_t *o, size_t *n, const char *src, size_t k)
{
    if (*n + k + 1 > o->cap) {
        size_t c = o->cap ? o->cap : 256;
        while (c < *n + k + 1) c *= 2;
        char *q = realloc(o->b, c);
        if (!q) return 0;
        o->b = q;
        o->cap = c;
    }
    memcpy(o->b + *n, src, k);
    *n += k;
    return 1;
}

static int fc_hex4(const char *p, unsigned *v)
{
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        unsigned d = ch >= '0' && ch <= '9' ? (unsigned)(ch - '0') : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                   : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10) : 16u;
        if (d > 15) return 0;
        x = x * 16 + d;
    }
    *v = x;
    return 1;
}

/* A string at c->p: decoded into o (NUL-terminated) when o is not NULL, else only validated.
 * Escapes as cJSON decodes them: the short ones, \uXXXX to UTF-8, a high surrogate followed by
 * \u and a low one to a 4-byte sequence; 0 for a lone surrogate or \u0000 (cJSON fails, or ends
 * the C string there) and for control characters (left to cJSON). */
int lp_json_string(fp_cur_t *c, fc_buf_t *o)
{
    if (c->p >= c->e || *c->p != '"') return 0;
    const char *p = c->p + 1, *e = c->e;
    size_t n = 0;
    for (;;) {
        const char *q = p;
        while (q < e && *q != '"' && *q != '\\' && (unsigned char)*q >= 0x20) q++;
        if (q >= e || (unsigned char)*q < 0x20) return 0;
        if (o && !fc_put(o, &n, p, (size_t)(q - p))) return 0;
        p = q;
        if (*p == '"') break;
        if (e - p < 2) return 0;
        char es = p[1], out[4];
        size_t k = 1;
        switch (es) {
        case '"': out[0] = '"'; break;
        case '\\': out[0] = '\\'; break;
        case '/': out[0] = '/'; break;
        case 'b': out[0] = '\b'; break;
        case 'f': out[0] = '\f'; break;
        case 'n': out[0] = '\n'; break;
        case 'r': out[0] = '\r'; break;
        case 't': out[0] = '\t'; break;
        case 'u': {
            unsigned u;
            if (e - p < 6 || !fc_hex4(p + 2, &u) || u == 0 || (u >= 0xDC00 && u <= 0xDFFF)) return 0;
            if (u >= 0xD800 && u <= 0xDBFF) {
                unsigned l;
                if (e - p < 12 || p[6] != '\\' || p[7] != 'u' || !fc_hex4(p + 8, &l) || l < 0xDC00 || l > 0xDFFF)
                    return 0;
                u = 0x10000 + ((u - 0xD800) << 10) + (l - 0xDC00);
                p += 6;
            }
            if (u < 0x80) {
                out[0] = (char)u;
            } else if (u < 0x800) {
                out[0] = (char)(0xC0 | (u >> 6));
                out[1] = (char)(0x80 | (u & 0x3F));
                k = 2;
            } else if (u < 0x10000) {
                out[0] = (char)(0xE0 | (u >> 12));
                out[1] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[2] = (char)(0x80 | (u & 0x3F));
                k = 3;
            } else {
                out[0] = (char)(0xF0 | (u >> 18));
                out[1] = (char)(0x80 | ((u >> 12) & 0x3F));
                out[2] = (char)(0x80 | ((u >> 6) & 0x3F));
                out[3] = (char)(0x80 | (u & 0x3F));
                k = 4;
            }
            p += 4;
            break;
        }
        default: return 0;
        }
        if (o && !fc_put(o, &n, out, k)) return 0;
        p += 2;
    }
    if (o) {
        if (!fc_put(o, &n, "", 0)) return 0;
        o->b[n] = 0;
    }
    c->p = p + 1;
    return 1;
}

/* Skip one value (strictly valid JSON). */
int lp_json_skip(fp_cur_t *c, int depth)
{
    fp_ws(c);
    if (c->p >= c->e || depth > 256) return 0;
    char ch = *c->p;
    if (ch == '"') return lp_json_string(c, NULL);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        if (fc_open(c, ch, close)) return 1; /* empty (the bracket is there) */
        for (;;) {
            if (ch == '{') {
                fp_ws(c);
                if (!lp_json_string(c, NULL)) return 0;
                fp_ws(c);
                if (c->p >= c->e || *c->p++ != ':') return 0;
            }
            if (!lp_json_skip(c, depth + 1)) return 0;
            int nx = fc_next(c, close);
            if (nx <= 0) return nx == 0;
        }
    }
    static const char *const lit[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t k = strlen(lit[i]);
        if ((size_t)(c->e - c->p) >= k && !memcmp(c->p, lit[i], k)) {
            c->p += k;
            return 1;
        }
    }
    double v;
    int is_int;
    int64_t iv;
    /* a number fp_num declines (one that overflows, say) leaves the line to cJSON */
    return fp_num(c, &v, &is_int, &iv);
}

int lp_json_object(fp_cur_t *c, fc_member_fn fn, void *ctx)
{
    int o = fc_open(c, '{', '}');
    if (o) return o > 0;
    for (;;) {
        const char *k;
        size_t kn;
        fp_ws(c);
        if (!lp_json_str(c, &k, &kn)) return 0; /* keys with escapes: left to cJSON */
        fp_ws(c);
        if (c->p >= c->e || *c->p++ != ':') return 0;
        fp_ws(c);
        int r = fn(ctx, k, kn, c);
        if (r == 0) return 0;
        if (r < 0 && !lp_json_skip(c, 1)) return 0;
        int nx = fc_next(c, '}');
        if (nx <= 0) return nx == 0;
    }
}
