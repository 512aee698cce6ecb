/* Internal to the JSONL reader: a strict JSON scanner over a line's bytes, shared by the fast
 * paths (logprob_jsonl_fast.c) and the tree builder (logprob_jsonl_tree.c): a cursor, blanks,
 * strings, numbers correctly rounded as strtod would round them, containers, skipping a value.
 * Everything it does not take exactly as cJSON would it declines (returns 0), and the caller
 * leaves the line to cJSON. The number parser and the smallest steps are inline here: they run
 * once per number or element of every line, and the library is built without LTO; the rest is
 * in logprob_json_scan.c. Not a public header. */
#ifndef PARITY_LOGPROB_JSON_SCAN_H
#define PARITY_LOGPROB_JSON_SCAN_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *p, *e;
} fp_cur_t;

static inline void fp_ws(fp_cur_t *c)
{
    /* compact JSON has none: one comparison in the common case */
    if (c->p < c->e && (unsigned char)*c->p > ' ') return;
    while (c->p < c->e && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n')) c->p++;
}

/* 10^0 .. 10^22, each exact in binary64 (5^22 < 2^53); static so that each file's loops see
 * constants */
static const double fp_pow10[23] __attribute__((unused)) = {
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* m * 10^q (|q| <= 22, 2^53 <= m < 2^63), correctly rounded, into *v; 0 when it cannot tell
 * (then strtod decides). The derivation is at its definition (logprob_json_scan.c). */
int lp_json_exact(uint64_t m, int q, double *v);
/* A string without escapes or control characters at c->p: [*b, *b + *n), c->p after it; 0
 * (c->p unspecified) for anything else. */
int lp_json_str(fp_cur_t *c, const char **b, size_t *n);

/* A strict JSON number. Correctly rounded like strtod: when the decimal significand m (all
 * its digits kept) is below 2^53 (exact) and the decimal exponent q satisfies |q| <= 22 (10^|q| is
 * exact in binary64), m * 10^q or m / 10^q is one correctly rounded operation (Clinger 1990,
 * "How to read floating point numbers accurately"); up to 19 digits (m < 2^63) lp_json_exact
 * decides in double-double; otherwise, or when lp_json_exact cannot tell, strtod converts the
 * validated token. *is_int: no fraction, no exponent and at most 15 digits (*iv holds it: an
 * id as cJSON would read it; longer integers are left to cJSON as ids, not as values). */
/* Digits eight at a time (SWAR, on a little-endian load of 8 bytes): the number of leading
 * ASCII digits of w, and their value. A byte b is a digit when b - '0' and b + (0x7f - '9')
 * both leave its top bit clear; a borrow out of a non-digit byte only disturbs bytes after the
 * first non-digit, which are not used. The value: the k digits moved to the top bytes (the low
 * bytes become leading zeros), then pairs, quads and the two halves combined by multiplies. */
static inline int swar_ndigits(uint64_t w)
{
    uint64_t x = w - 0x3030303030303030ull, y = w + 0x4646464646464646ull;
    uint64_t bad = (x | y) & 0x8080808080808080ull;
    return bad ? __builtin_ctzll(bad) >> 3 : 8;
}

static inline uint64_t swar_value(uint64_t w, int k)
{
    uint64_t t = (w - 0x3030303030303030ull) << (8 * (8 - k)); /* k >= 1 */
    t = (t * 10 + (t >> 8)) & 0x00ff00ff00ff00ffull;             /* 2-digit groups */
    t = (t * 100 + (t >> 16)) & 0x0000ffff0000ffffull;           /* 4-digit groups */
    return (t * 10000 + (t >> 32)) & 0xffffffffull;                /* 8 digits */
}

/* Digits at p (up to e) appended to m (at most 19 kept, the rest counted in *extra): returns
 * the position after them, *nd the number read. */
static inline const char *fp_digits(const char *p, const char *e, uint64_t *m, int *nd, int *extra)
{
    while (e - p >= 8 && *nd <= 11) { /* 11 + 8 = 19 digits fit in m */
        uint64_t w;
        memcpy(&w, p, 8);
        int k = swar_ndigits(w);
        if (k == 0) return p;
        static const uint64_t pw[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};
        *m = *m * pw[k] + swar_value(w, k);
        *nd += k;
        p += k;
        if (k < 8) return p;
    }
    while (p < e && *p >= '0' && *p <= '9') {
        if (*nd < 19) *m = *m * 10 + (uint64_t)(*p - '0');
        else (*extra)++;
        (*nd)++;
        p++;
    }
    return p;
}

static inline __attribute__((always_inline)) int fp_num(fp_cur_t *c, double *v, int *is_int, int64_t *iv)
{
    const char *b = c->p, *p = c->p, *e = c->e;
    int neg = 0;
    if (p < e && *p == '-') neg = 1, p++;
    if (p >= e || *p < '0' || *p > '9') return 0;
    uint64_t m = 0;
    int nd = 0, q = 0;
    if (*p == '0') {
        p++;
    } else {
        int extra = 0;
        p = fp_digits(p, e, &m, &nd, &extra);
        q += extra;
    }
    *is_int = 1;
    if (p < e && *p == '.') {
        *is_int = 0;
        p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        if (nd == 0)
            while (p < e && *p == '0') { /* leading zeros of 0.000123 do not count as digits */
                q--;
                p++;
            }
        int nd0 = nd, extra = 0;
        p = fp_digits(p, e, &m, &nd, &extra);
        q -= (nd - nd0) - extra; /* each kept fraction digit scales by 1/10 */
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *is_int = 0;
        p++;
        int eneg = 0;
        if (p < e && (*p == '+' || *p == '-')) eneg = *p == '-', p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        int x = 0;
        while (p < e && *p >= '0' && *p <= '9') {
            if (x < 100000) x = x * 10 + (*p - '0');
            p++;
        }
        q += eneg ? -x : x;
    }
    c->p = p;
    if (p - b > 63) return 0; /* cJSON reads at most 63 characters of a number */
    if (*is_int) {
        if (nd <= 15) *iv = neg ? -(int64_t)m : (int64_t)m;
        else *is_int = 0; /* not an id the fast path takes (cJSON decides); still a value */
    }
    if (nd <= 19 && q >= -22 && q <= 22) { /* no digit dropped: m 10^q is the value */
        if (m < (1ull << 53)) {
            double d = (double)m; /* exact */
            d = q < 0 ? d / fp_pow10[-q] : d * fp_pow10[q];
            *v = neg ? -d : d;
            return 1;
        }
        double d;
        if (m < (1ull << 63) && lp_json_exact(m, q, &d)) {
            *v = neg ? -d : d;
            return 1;
        }
    }
    char buf[64];
    size_t len = (size_t)(p - b);
    if (len >= sizeof buf) return 0;
    memcpy(buf, b, len);
    buf[len] = 0;
    char *end;
    *v = strtod(buf, &end);
    return *end == 0 && isfinite(*v);
}

typedef struct {
    char *b;
    size_t cap;
} fc_buf_t;

/* A string at c->p: decoded into o (NUL-terminated) when o is not NULL, else only validated;
 * 0 for what it leaves to cJSON (at the definition). */
int lp_json_string(fp_cur_t *c, fc_buf_t *o);

/* The opening bracket `open` and, when the next non-blank is `close`, that too: 1 when the
 * container is empty, 0 when members follow, -1 when the bracket is missing. */
static inline int fc_open(fp_cur_t *c, char open, char close)
{
    fp_ws(c);
    if (c->p >= c->e || *c->p != open) return -1;
    c->p++;
    fp_ws(c);
    if (c->p < c->e && *c->p == close) {
        c->p++;
        return 1;
    }
    return 0;
}

/* After a member or element: 1 at a ',' (consumed: another follows), 0 at `close` (consumed: the
 * container ends), -1 otherwise. */
static inline int fc_next(fp_cur_t *c, char close)
{
    fp_ws(c);
    if (c->p >= c->e) return -1;
    if (*c->p == ',') {
        c->p++;
        return 1;
    }
    return *c->p++ == close ? 0 : -1;
}

/* The members of an object at c->p: for each key, fn(ctx, key, keylen, c) reads the value
 * (returns 0 to give up) or, when it returns -1, the value is skipped. */
typedef int (*fc_member_fn)(void *ctx, const char *k, size_t kn, fp_cur_t *c);
int lp_json_object(fp_cur_t *c, fc_member_fn fn, void *ctx);
/* Skip one value (strictly valid JSON) at nesting depth `depth` (more than 256: 0). */
int lp_json_skip(fp_cur_t *c, int depth);

#define FC_KEY(k, kn, lit) ((kn) == sizeof(lit) - 1 && !memcmp((k), (lit), sizeof(lit) - 1))

#endif
