/* model: llama2.c checkpoint loading (mmap, header validated against the file size) and the
 * path-spec grammar. The forward arithmetic lives in model_forward.c, generation in
 * model_generate.c. Only the legacy (version 0) fp32 format is read: it is what stories260K.bin
 * is, and the versioned exports (int8 Q80, "ak42" magic) are a different layout. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/model/model_impl.h"

/* ------------------------------------------------------------------------------------------ */
/* Loading                                                                                    */
/* ------------------------------------------------------------------------------------------ */

parity_status_t parity_model_default_files(char *model_path, size_t model_cap, char *tok_path,
                                           size_t tok_cap, parity_diag_t *diag)
{
    parity_status_t st = PARITY_OK;
    if (model_path && model_cap) st = parity_data_path("stories260K.bin", model_path, model_cap, diag);
    if (st == PARITY_OK && tok_path && tok_cap) st = parity_data_path("tok512.bin", tok_path, tok_cap, diag);
    return st;
}

const parity_model_config_t *parity_model_config(const parity_model_t *m)
{
    return m ? &m->cfg : NULL;
}

void parity_model_free(parity_model_t *m)
{
    if (!m) return;
    model_moe_free(m->moe);
    if (m->map && m->map != MAP_FAILED) munmap(m->map, m->map_size);
    free(m);
}

/* Float count of the tensors after the header, in run.c's order (memory_map_weights). All
 * products are computed in uint64 from values already checked to be positive and bounded, so
 * they cannot overflow. */
static uint64_t expected_floats(const parity_model_config_t *c)
{
    uint64_t D = (uint64_t)c->dim, F = (uint64_t)c->hidden_dim, L = (uint64_t)c->n_layers;
    uint64_t V = (uint64_t)c->vocab_size, S = (uint64_t)c->seq_len;
    uint64_t hs = D / (uint64_t)c->n_heads, kvd = hs * (uint64_t)c->n_kv_heads;
    uint64_t n = V * D;                        /* token_embedding */
    n += L * D;                                /* rms_att */
    n += L * D * D + 2 * L * kvd * D;          /* wq, wk, wv */
    n += L * D * D;                            /* wo */
    n += L * D;                                /* rms_ffn */
    n += 3 * L * F * D;                        /* w1, w2, w3 */
    n += D;                                    /* rms_final */
    n += S * hs;                               /* freq_cis_real + freq_cis_imag: 2 * S*hs/2 */
    if (!c->shared_classifier) n += V * D;     /* wcls */
    return n;
}

parity_status_t parity_model_load(const char *path, parity_model_t **out, parity_diag_t *diag)
{
    if (out) *out = NULL;
    if (!path || !out) return parity_diag_set(diag, PARITY_E_INVALID, "model load: NULL argument");
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return parity_diag_set(diag, PARITY_E_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_IO, "%s: cannot stat: %s", path, strerror(errno));
    }
    uint64_t size = (uint64_t)sb.st_size;
    int32_t h[7];
    if (size < sizeof h) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: header: expected 28 bytes (7 x int32), file has %llu", path,
                               (unsigned long long)size);
    }
    if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_IO, "%s: cannot read the header", path);
    }
    static const char *names[7] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                   "n_kv_heads", "vocab_size", "seq_len"};
    /* Bounds keep every product in expected_floats far below 2^63 and reject files that are
     * not checkpoints at all (a text file's first bytes read as huge or negative ints). */
    static const int32_t maxv[7] = {1 << 16, 1 << 18, 1 << 10, 1 << 10, 1 << 10, 1 << 22, 1 << 20};
    parity_model_config_t c;
    int32_t v[7];
    memcpy(v, h, sizeof v);
    c.shared_classifier = v[5] > 0;
    if (v[5] < 0) v[5] = v[5] == INT32_MIN ? 0 : -v[5]; /* (-INT32_MIN overflows; 0 is rejected below) */
    for (int i = 0; i < 7; i++) {
        if (v[i] <= 0 || v[i] > maxv[i]) {
            close(fd);
            return parity_diag_set(diag, PARITY_E_FORMAT,
                                   "%s: header field %s = %d: expected 1..%d (is this a llama2.c "
                                   "legacy checkpoint?)",
                                   path, names[i], h[i], maxv[i]);
        }
    }
    c.dim = v[0], c.hidden_dim = v[1], c.n_layers = v[2], c.n_heads = v[3];
    c.n_kv_heads = v[4], c.vocab_size = v[5], c.seq_len = v[6];
    const char *bad = NULL;
    if (c.dim % c.n_heads) bad = "dim divisible by n_heads";
    else if (c.n_heads % c.n_kv_heads) bad = "n_heads divisible by n_kv_heads";
    else if ((c.dim / c.n_heads) % 2) bad = "an even head size (RoPE rotates pairs)";
    if (bad) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: header (dim %d, n_heads %d, n_kv_heads %d): expected %s", path,
                               c.dim, c.n_heads, c.n_kv_heads, bad);
    }
    uint64_t want = 28 + 4 * expected_floats(&c);
    if (size != want) {
        close(fd);
        return parity_diag_set(diag, PARITY_E_FORMAT,
                               "%s: file size %llu bytes, but the header (dim %d, hidden_dim %d, "
                               "n_layers %d, n_heads %d, n_kv_heads %d, vocab_size %d%s, seq_len %d) "
                               "implies %llu bytes",
                               path, (unsigned long long)size, c.dim, c.hidden_dim, c.n_layers,
                               c.n_heads, c.n_kv_heads, h[5],
                               c.shared_classifier ? " shared classifier" : " separate classifier",
                               c.seq_len, (unsigned long long)want);
    }
    void *map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return parity_diag_set(diag, PARITY_E_IO, "%s: cannot map: %s", path, strerror(errno));
    parity_model_t *m = calloc(1, sizeof *m);
    if (!m) {
        munmap(map, (size_t)size);
        return parity_diag_set(diag, PARITY_E_NOMEM, "%s: out of memory", path);
    }
    m->cfg = c;
    m->map = map;
    m->map_size = (size_t)size;
    /* Carve the tensors (run.c's memory_map_weights order). The header is 28 bytes, so the
     * floats are only 4-byte aligned, which is all float needs. */
    const float *p = (const float *)((const char *)map + 28);
    size_t D = (size_t)c.dim, F = (size_t)c.hidden_dim, L = (size_t)c.n_layers;
    size_t V = (size_t)c.vocab_size, hs = D / (size_t)c.n_heads, kvd = hs * (size_t)c.n_kv_heads;
    m->w.emb = p, p += V * D;
    m->w.rms_att = p, p += L * D;
    m->w.wq = p, p += L * D * D;
    m->w.wk = p, p += L * kvd * D;
    m->w.wv = p, p += L * kvd * D;
    m->w.wo = p, p += L * D * D;
    m->w.rms_ffn = p, p += L * D;
    m->w.w1 = p, p += L * F * D;
    m->w.w2 = p, p += L * D * F;
    m->w.w3 = p, p += L * F * D;
    m->w.rms_final = p, p += D;
    p += (size_t)c.seq_len * hs; /* freq_cis_real, freq_cis_imag: RoPE is computed on the fly */
    m->w.wcls = c.shared_classifier ? m->w.emb : p;
    *out = m;
    return PARITY_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* Path specs                                                                                 */
/* ------------------------------------------------------------------------------------------ */

void parity_model_path_default(parity_model_path_t *p)
{
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->storage = PARITY_MODEL_FP64;
    p->accum = PARITY_MODEL_FP64;
    p->tp = 1;
    p->allreduce = PARITY_MODEL_AR_RING;
    p->hop = PARITY_MODEL_FP64;
    p->moe = model_moe_base_spec(0);
    p->ep = 1;
}

static const char *const DTYPE_NAMES[] = {"fp64", "fp32", "bf16", "fp16"};
static const char *const AR_NAMES[] = {"ring", "tree", "oneshot"};

const char *parity_model_dtype_name(parity_model_dtype_t d)
{
    return (unsigned)d < 4 ? DTYPE_NAMES[d] : "?";
}

static int dtype_from(const char *s, size_t n, parity_model_dtype_t *d)
{
    for (int i = 0; i < 4; i++)
        if (strlen(DTYPE_NAMES[i]) == n && !strncmp(s, DTYPE_NAMES[i], n)) {
            *d = (parity_model_dtype_t)i;
            return 0;
        }
    return -1;
}

/* A decimal integer in [lo, hi] spelled by exactly s[0..n). */
static int int_from(const char *s, size_t n, long lo, long hi, int *out)
{
    if (n == 0 || n > 6) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

static int has_prefix(const char *s, size_t n, const char *pre)
{
    size_t k = strlen(pre);
    return n >= k && !strncmp(s, pre, k);
}

parity_status_t parity_model_path_parse(const char *spec, parity_model_path_t *out,
                                        parity_diag_t *diag)
{
    parity_model_path_t p;
    parity_model_path_default(&p);
    if (out) *out = p;
    if (!spec || !out) return parity_diag_set(diag, PARITY_E_INVALID, "path spec: NULL argument");
    int seen_prec = 0, seen_fused = 0, seen_kv = 0, seen_split = 0, seen_tp = 0, seen_batch = 0;
    int seen_fmoe = 0, seen_moe = 0, seen_ep = 0;
    const char *moe_text = NULL;
    size_t moe_len = 0;
    const char *s = spec;
    if (!*s) return parity_diag_set(diag, PARITY_E_INVALID, "path spec: empty (try 'ref' or 'bf16+kvcache')");
    for (;;) {
        const char *e = strchr(s, '+');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        int dup = 0;
        if (n == 0)
            return parity_diag_set(diag, PARITY_E_INVALID, "path spec '%s': empty token between '+'", spec);
        parity_model_dtype_t d;
        if ((n == 3 && !strncmp(s, "ref", 3)) || dtype_from(s, n, &d) == 0 ||
            (n == 7 && !strncmp(s, "bf16acc", 7))) {
            dup = seen_prec++;
            if (n == 3 || (n == 4 && d == PARITY_MODEL_FP64)) {
                p.storage = p.accum = PARITY_MODEL_FP64;
            } else if (n == 7) {
                p.storage = p.accum = PARITY_MODEL_BF16;
            } else {
                p.storage = d;
                p.accum = PARITY_MODEL_FP32;
            }
        } else if (n == 5 && !strncmp(s, "fused", 5)) {
            dup = seen_fused++;
            p.fused_norm = 1;
        } else if (n == 7 && !strncmp(s, "kvcache", 7)) {
            dup = seen_kv++;
            p.kvcache = 1;
        } else if (has_prefix(s, n, "splitk")) {
            dup = seen_split++;
            if (int_from(s + 6, n - 6, 1, 16, &p.splitk) != 0)
                return parity_diag_set(diag, PARITY_E_INVALID,
                                       "path spec '%s': '%.*s': expected splitkS with S in 1..16",
                                       spec, (int)n, s);
        } else if (has_prefix(s, n, "tp")) {
            dup = seen_tp++;
            const char *c1 = memchr(s, ':', n);
            size_t rn = c1 ? (size_t)(c1 - s) - 2 : n - 2;
            if (int_from(s + 2, rn, 1, 8, &p.tp) != 0)
                return parity_diag_set(diag, PARITY_E_INVALID,
                                       "path spec '%s': '%.*s': expected tpR with R in 1..8", spec,
                                       (int)n, s);
            if (c1) {
                const char *a = c1 + 1;
                const char *c2 = memchr(a, ':', (size_t)(s + n - a));
                size_t an = c2 ? (size_t)(c2 - a) : (size_t)(s + n - a);
                int found = -1;
                for (int i = 0; i < 3; i++)
                    if (strlen(AR_NAMES[i]) == an && !strncmp(a, AR_NAMES[i], an)) found = i;
                if (found < 0)
                    return parity_diag_set(diag, PARITY_E_INVALID,
                                           "path spec '%s': all-reduce '%.*s': expected ring, "
                                           "tree or oneshot",
                                           spec, (int)an, a);
                p.allreduce = (parity_model_allreduce_t)found;
                if (c2) {
                    size_t dn = (size_t)(s + n - (c2 + 1));
                    if (dtype_from(c2 + 1, dn, &p.hop) != 0)
                        return parity_diag_set(diag, PARITY_E_INVALID,
                                               "path spec '%s': hop dtype '%.*s': expected fp64, "
                                               "fp32, bf16 or fp16",
                                               spec, (int)dn, c2 + 1);
                    p.hop_set = 1;
                }
            }
        } else if (n == 8 && !strncmp(s, "fusedmoe", 8)) {
            dup = seen_fmoe++;
            p.moe_fused = 1;
        } else if (has_prefix(s, n, "moe:")) {
            dup = seen_moe++;
            moe_text = s + 4, moe_len = n - 4;
        } else if (has_prefix(s, n, "ep")) {
            dup = seen_ep++;
            const char *c1 = memchr(s, ':', n);
            size_t rn = c1 ? (size_t)(c1 - s) - 2 : n - 2;
            if (int_from(s + 2, rn, 1, 8, &p.ep) != 0 || (p.ep & (p.ep - 1)))
                return parity_diag_set(diag, PARITY_E_INVALID,
                                       "path spec '%s': '%.*s': expected epR with R 1, 2, 4 or 8 "
                                       "(optionally epR:overlap)",
                                       spec, (int)n, s);
            if (c1) {
                size_t on = (size_t)(s + n - (c1 + 1));
                if (on == 7 && !strncmp(c1 + 1, "overlap", 7)) p.ep_overlap = 1;
                else
                    return parity_diag_set(diag, PARITY_E_INVALID,
                                           "path spec '%s': '%.*s': expected epR or epR:overlap",
                                           spec, (int)n, s);
            }
        } else if (has_prefix(s, n, "batch")) {
            dup = seen_batch++;
            const char *c1 = memchr(s, ':', n);
            size_t bn = c1 ? (size_t)(c1 - s) - 5 : n - 5;
            if (int_from(s + 5, bn, 1, 64, &p.batch) != 0)
                return parity_diag_set(diag, PARITY_E_INVALID,
                                       "path spec '%s': '%.*s': expected batchB with B in 1..64",
                                       spec, (int)n, s);
            if (c1) {
                size_t mn = (size_t)(s + n - (c1 + 1));
                if (mn == 6 && !strncmp(c1 + 1, "padded", 6)) p.packed = 0;
                else if (mn == 6 && !strncmp(c1 + 1, "packed", 6)) p.packed = 1;
                else
                    return parity_diag_set(diag, PARITY_E_INVALID,
                                           "path spec '%s': batch layout '%.*s': expected padded "
                                           "or packed",
                                           spec, (int)mn, c1 + 1);
            }
        } else {
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "path spec '%s': unknown token '%.*s': expected ref, fp32, "
                                   "bf16, fp16, bf16acc, fused, kvcache, splitkS, "
                                   "tpR[:ring|tree|oneshot[:DTYPE]], batchB[:padded|packed], "
                                   "fusedmoe, moe:KEY=VAL,..., epR[:overlap]",
                                   spec, (int)n, s);
        }
        if (dup)
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "path spec '%s': '%.*s' repeats an option already given", spec,
                                   (int)n, s);
        if (!e) break;
        s = e + 1;
    }
    if (!p.hop_set) p.hop = p.storage;
    p.moe = model_moe_base_spec(p.moe_fused);
    if (moe_text) {
        char buf[256];
        parity_moe_spec_t base = p.moe;
        if (moe_len == 0 || moe_len >= sizeof buf)
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "path spec '%s': moe: needs KEY=VAL,... (e.g. moe:softmax=bf16)",
                                   spec);
        memcpy(buf, moe_text, moe_len);
        buf[moe_len] = '\0';
        parity_diag_t d2;
        if (parity_moe_spec_parse(buf, &base, &p.moe, &d2) != PARITY_OK)
            return parity_diag_set(diag, PARITY_E_INVALID, "path spec '%s': moe:%s: %s", spec, buf,
                                   d2.msg);
        p.moe_set = !parity_moe_spec_equal(&base, &p.moe);
    }
    *out = p;
    return PARITY_OK;
}

void parity_model_path_str(const parity_model_path_t *p, char *buf, size_t cap)
{
    if (!buf || cap == 0) return;
    buf[0] = '\0';
    if (!p) return;
    size_t k = 0;
#define APPEND(...)                                                                   \
    do {                                                                              \
        int w_ = snprintf(buf + k, k < cap ? cap - k : 0, __VA_ARGS__);               \
        if (w_ > 0) k += (size_t)w_;                                                  \
    } while (0)
    if (p->accum == PARITY_MODEL_BF16) APPEND("bf16acc");
    else if (p->storage == PARITY_MODEL_FP64) APPEND("ref");
    else APPEND("%s", parity_model_dtype_name(p->storage));
    if (p->fused_norm) APPEND("+fused");
    if (p->kvcache) APPEND("+kvcache");
    if (p->splitk > 0) APPEND("+splitk%d", p->splitk);
    if (p->tp > 1) {
        APPEND("+tp%d:%s", p->tp, AR_NAMES[p->allreduce]);
        if (p->hop_set) APPEND(":%s", parity_model_dtype_name(p->hop));
    }
    if (p->batch > 0) APPEND("+batch%d:%s", p->batch, p->packed ? "packed" : "padded");
    if (p->moe_fused) APPEND("+fusedmoe");
    {
        /* moe: lists only the keys that differ from the base spec, in moe.h's key order. */
        parity_moe_spec_t base = model_moe_base_spec(p->moe_fused);
        char sb[256], sp[256];
        parity_moe_spec_str(&base, sb, sizeof sb);
        parity_moe_spec_str(&p->moe, sp, sizeof sp);
        const char *a = sb, *b = sp;
        int first = 1;
        while (*a && *b) {
            size_t la = strcspn(a, ","), lb = strcspn(b, ",");
            if (la != lb || strncmp(a, b, la)) {
                APPEND("%s%.*s", first ? "+moe:" : ",", (int)lb, b);
                first = 0;
            }
            a += la + (a[la] == ','), b += lb + (b[lb] == ',');
        }
    }
    if (p->ep > 1) APPEND("+ep%d%s", p->ep, p->ep_overlap ? ":overlap" : "");
#undef APPEND
    if (k >= cap) buf[cap - 1] = '\0';
}
