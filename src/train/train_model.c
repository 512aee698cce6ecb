/* The training probe's model: token embedding -> RMSNorm (+ learned positions) -> L pre-norm
 * blocks (causal multi-head attention, SiLU MLP) -> final RMSNorm -> class-factorized LM head ->
 * cross-entropy, with an explicit fp32 backward. The embedding-gradient + first-RMSNorm backward
 * is the in-process fp32 reference, the faithful floor (in-process, another fp32 order), or a
 * candidate kernel called through the ABI; the gradient probe compares a step's dE with the reference.
 * Matrices are stored input-major (y = x W) so every inner loop is an axpy the compiler can
 * vectorize without reassociating a sum (we never build with fast-math). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "parity/format.h"
#include "parity/rng.h"
#include "src/train/train_impl.h"


/* Hot loops: -O3 vectorization (no reassociation: results are those of the scalar loops) and,
 * on x86-64 GCC, an AVX2 clone picked at load time. -ffp-contract=off still forbids FMA. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define HOT __attribute__((optimize("O3"), target_clones("avx2", "default")))
#elif defined(__GNUC__) && !defined(__clang__)
#define HOT __attribute__((optimize("O3")))
#else
#define HOT
#endif

/* ---- building blocks -------------------------------------------------------------------------- */

/* out (n, o) = in (n, i) W (i, o) */
HOT static void mm_fwd(float *restrict out, const float *restrict in, const float *restrict w,
                       int n, int ni, int no)
{
    for (int r = 0; r < n; r++) {
        float *restrict o = out + (size_t)r * no;
        const float *x = in + (size_t)r * ni;
        for (int j = 0; j < no; j++) o[j] = 0.0f;
        for (int k = 0; k < ni; k++) {
            float xv = x[k];
            const float *restrict wr = w + (size_t)k * no;
            for (int j = 0; j < no; j++) o[j] += xv * wr[j];
        }
    }
}

/* dW (i, o) += in (n, i)^T dout (n, o), rows in order n = 0.. */
HOT static void mm_dw(float *restrict dw, const float *restrict in, const float *restrict dout,
                      int n, int ni, int no)
{
    for (int r = 0; r < n; r++) {
        const float *x = in + (size_t)r * ni;
        const float *restrict g = dout + (size_t)r * no;
        for (int k = 0; k < ni; k++) {
            float xv = x[k];
            float *restrict d = dw + (size_t)k * no;
            for (int j = 0; j < no; j++) d[j] += xv * g[j];
        }
    }
}

/* din (n, i) = dout (n, o) W^T, using wt (o, i) = W^T as scratch. */
HOT static void mm_dx(float *restrict din, const float *restrict dout, const float *restrict w,
                      float *restrict wt, int n, int ni, int no)
{
    for (int k = 0; k < ni; k++)
        for (int j = 0; j < no; j++) wt[(size_t)j * ni + k] = w[(size_t)k * no + j];
    mm_fwd(din, dout, wt, n, no, ni);
}

/* y = x r g with r = 1/sqrt(mean x^2 + eps), per row. */
static void rms_fwd(float *y, float *rs, const float *x, const float *g, int n, int d)
{
    for (int r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * d;
        float ss = 0.0f;
        for (int k = 0; k < d; k++) ss += xr[k] * xr[k];
        float rr = 1.0f / sqrtf(ss / (float)d + TRAIN_RMS_EPS);
        rs[r] = rr;
        for (int k = 0; k < d; k++) y[(size_t)r * d + k] = xr[k] * rr * g[k];
    }
}

/* SiLU, u * sigmoid(u) (as in Llama's MLP; tanh-GELU's tanhf cost 15% of a step). */
static float sigmoid(float u) { return 1.0f / (1.0f + expf(-u)); }

/* ---- construction ---------------------------------------------------------------------------- */

static float *carve(parity_train_model_t *m, const char *name, size_t count, size_t *off)
{
    m->tname[m->nt] = name;
    m->toff[m->nt] = *off;
    m->tcnt[m->nt] = count;
    m->nt++;
    float *p = m->params ? m->params + *off : NULL;
    *off += count;
    return p;
}

static const char *const layer_names[8][6] = {
#define LN(i) {"l" #i ".g1", "l" #i ".wqkv", "l" #i ".wo", "l" #i ".g2", "l" #i ".w1", "l" #i ".w2"}
    LN(0), LN(1), LN(2), LN(3), LN(4), LN(5), LN(6), LN(7)
#undef LN
};

/* Lay out the parameters; with m->params NULL only counts. */
static size_t layout(parity_train_model_t *m)
{
    size_t off = 0;
    int V = m->V, D = m->D, T = m->T, F = m->F;
    m->nt = 0;
    m->wte = carve(m, "wte", (size_t)V * D, &off);
    m->g0 = carve(m, "g0", (size_t)D, &off);
    m->wpe = carve(m, "wpe", (size_t)T * D, &off);
    for (int l = 0; l < m->L; l++) {
        train_layer_w_t *w = &m->lw[l];
        w->g1 = carve(m, layer_names[l][0], (size_t)D, &off);
        w->wqkv = carve(m, layer_names[l][1], (size_t)D * 3 * D, &off);
        w->wo = carve(m, layer_names[l][2], (size_t)D * D, &off);
        w->g2 = carve(m, layer_names[l][3], (size_t)D, &off);
        w->w1 = carve(m, layer_names[l][4], (size_t)D * F, &off);
        w->w2 = carve(m, layer_names[l][5], (size_t)F * D, &off);
    }
    m->gf = carve(m, "gf", (size_t)D, &off);
    m->wc = carve(m, "wc", (size_t)D * m->C, &off);
    m->wout = carve(m, "wout", (size_t)D * V, &off);
    return off;
}

static void grads_views(parity_train_model_t *m)
{
#define G(p) (m->grads + ((p) - m->params))
    m->dwte = G(m->wte); m->dg0 = G(m->g0); m->dwpe = G(m->wpe);
    for (int l = 0; l < m->L; l++) {
        m->dlw[l].g1 = G(m->lw[l].g1); m->dlw[l].wqkv = G(m->lw[l].wqkv);
        m->dlw[l].wo = G(m->lw[l].wo); m->dlw[l].g2 = G(m->lw[l].g2);
        m->dlw[l].w1 = G(m->lw[l].w1); m->dlw[l].w2 = G(m->lw[l].w2);
    }
    m->dgf = G(m->gf); m->dwc = G(m->wc); m->dwout = G(m->wout);
#undef G
}

/* Init (docs/train.md): wte ~ N(0,1) (the RMSNorm after it makes its scale irrelevant to the
 * forward, and rms 1 keeps the SGD step relative to the row sane); norm weights 1; positions
 * N(0, 0.02); matrices N(0, 0.5/sqrt(fan_in)), the residual projections (wo, w2) further divided
 * by sqrt(2L) as in GPT-2. Each tensor draws from its own rng stream. */
static void init_weights(parity_train_model_t *m, uint64_t seed)
{
    for (int t = 0; t < m->nt; t++) {
        const char *nm = m->tname[t];
        float *p = m->params + m->toff[t];
        size_t n = m->tcnt[t];
        const char *dot = strrchr(nm, '.');
        const char *base = dot ? dot + 1 : nm;
        double sd;
        if (base[0] == 'g') {
            for (size_t i = 0; i < n; i++) p[i] = 1.0f;
            continue;
        }
        if (strcmp(base, "wte") == 0) sd = 1.0;
        else if (strcmp(base, "wpe") == 0) sd = 0.02;
        else if (strcmp(base, "w2") == 0) sd = 0.5 / sqrt((double)m->F) / sqrt(2.0 * m->L);
        else if (strcmp(base, "wo") == 0) sd = 0.5 / sqrt((double)m->D) / sqrt(2.0 * m->L);
        else sd = 0.5 / sqrt((double)m->D);
        parity_rng_t rng;
        parity_rng_seed(&rng, seed, 0x7a1000u + (uint64_t)t);
        for (size_t i = 0; i < n; i++) p[i] = (float)(sd * parity_rng_normal(&rng));
    }
}

static void free_kernel_bufs(parity_train_model_t *m)
{
    parity_tensor_free(m->k_dy); parity_tensor_free(m->k_x); parity_tensor_free(m->k_g);
    parity_tensor_free(m->k_ids); parity_tensor_free(m->k_dE); parity_tensor_free(m->k_dg);
    m->k_dy = m->k_x = m->k_g = m->k_ids = m->k_dE = m->k_dg = NULL;
    m->kn = 0;
}

void parity_train_model_free(parity_train_model_t *m)
{
    if (!m) return;
    free(m->params); free(m->grads); free(m->ids_buf); free(m->e); free(m->r0);
    for (int l = 0; l < m->L; l++) {
        train_layer_a_t *a = &m->la[l];
        free(a->x); free(a->r1); free(a->a); free(a->qkv); free(a->p); free(a->y);
        free(a->mid); free(a->r2); free(a->m); free(a->u); free(a->z);
    }
    free(m->xf); free(m->rf); free(m->f); free(m->pc); free(m->pw);
    free(m->dh); free(m->dt1); free(m->dt2); free(m->dqkv); free(m->dfu); free(m->wt); free(m->dp);
    free(m->hits); free(m->wcT); free(m->woT);
    free(m->ref_dE); free(m->emu16); free(m->emu32); free(m->rowbuf); free(m->perm);
    free_kernel_bufs(m);
    free(m);
}

parity_status_t parity_train_model_new(const parity_train_config_t *cfg, int vocab, uint64_t seed,
                                       parity_train_model_t **out, parity_diag_t *diag)
{
    *out = NULL;
    if (!cfg || vocab < 2 || cfg->d_model < 2 || cfg->n_heads < 1 || cfg->d_model % cfg->n_heads ||
        cfg->n_layers < 1 || cfg->n_layers > 8 || cfg->mlp_mult < 1 || cfg->seq_len < 1 ||
        cfg->batch_seqs < 1 || cfg->val_seqs < 0 || vocab > (1 << 24) || cfg->d_model > 4096 ||
        cfg->seq_len > 4096)
        return parity_diag_set(diag, PARITY_E_INVALID,
                               "train model: need vocab >= 2, D divisible by heads, 1..8 layers, "
                               "positive sizes");
    parity_train_model_t *m = calloc(1, sizeof *m);
    if (!m) return PARITY_E_NOMEM;
    m->cfg = *cfg;
    m->V = vocab; m->D = cfg->d_model; m->H = cfg->n_heads; m->T = cfg->seq_len;
    m->F = cfg->mlp_mult * cfg->d_model; m->L = cfg->n_layers;
    /* class-factorized head: C classes of S consecutive (frequency-ranked) ids, C ~ sqrt(V), so
     * a token costs 2D(C + S) flops instead of 2DV with an exact, normalized softmax. */
    m->C = (int)ceil(sqrt((double)vocab));
    m->S = (vocab + m->C - 1) / m->C;
    m->C = (vocab + m->S - 1) / m->S;
    m->nseq_max = cfg->batch_seqs > cfg->val_seqs ? cfg->batch_seqs : cfg->val_seqs;
    m->np = layout(m);
    m->params = malloc(m->np * sizeof(float));
    m->grads = calloc(m->np, sizeof(float));
    size_t N = (size_t)m->nseq_max * (size_t)m->T, D = (size_t)m->D, F = (size_t)m->F;
    int ok = m->params && m->grads;
    ok = ok && (m->ids_buf = malloc(N * sizeof(int32_t))) && (m->e = malloc(N * D * 4)) &&
         (m->r0 = malloc(N * 4));
    for (int l = 0; ok && l < m->L; l++) {
        train_layer_a_t *a = &m->la[l];
        ok = (a->x = malloc(N * D * 4)) && (a->r1 = malloc(N * 4)) && (a->a = malloc(N * D * 4)) &&
             (a->qkv = malloc(N * 3 * D * 4)) &&
             (a->p = malloc((size_t)m->nseq_max * m->H * m->T * m->T * 4)) &&
             (a->y = malloc(N * D * 4)) && (a->mid = malloc(N * D * 4)) &&
             (a->r2 = malloc(N * 4)) && (a->m = malloc(N * D * 4)) && (a->u = malloc(N * F * 4)) &&
             (a->z = malloc(N * F * 4));
    }
    ok = ok && (m->xf = malloc(N * D * 4)) && (m->rf = malloc(N * 4)) && (m->f = malloc(N * D * 4)) &&
         (m->pc = malloc(N * (size_t)m->C * 4)) && (m->pw = malloc(N * (size_t)m->S * 4)) &&
         (m->dh = malloc(N * D * 4)) && (m->dt1 = malloc(N * D * 4)) &&
         (m->dt2 = malloc(N * D * 4)) && (m->dqkv = malloc(N * 3 * D * 4)) &&
         (m->dfu = malloc(N * F * 4)) && (m->wt = malloc(D * (3 * D > F ? 3 * D : F) * 4)) &&
         (m->dp = malloc((size_t)m->T * 4)) && (m->hits = calloc((size_t)vocab, sizeof(int64_t))) &&
         (m->wcT = malloc((size_t)m->C * D * 4)) && (m->woT = malloc((size_t)vocab * D * 4));
    if (!ok) {
        parity_train_model_free(m);
        return parity_diag_set(diag, PARITY_E_NOMEM, "train model: out of memory");
    }
    layout(m);
    grads_views(m);
    init_weights(m, seed);
    *out = m;
    return PARITY_OK;
}

size_t parity_train_model_nparams(const parity_train_model_t *m) { return m->np; }
float *parity_train_model_params(parity_train_model_t *m) { return m->params; }
float *parity_train_model_grads(parity_train_model_t *m) { return m->grads; }
int parity_train_model_ntensors(const parity_train_model_t *m) { return m->nt; }

const char *parity_train_model_tensor(const parity_train_model_t *m, int i, size_t *offset,
                                      size_t *count)
{
    if (i < 0 || i >= m->nt) return NULL;
    if (offset) *offset = m->toff[i];
    if (count) *count = m->tcnt[i];
    return m->tname[i];
}

/* ---- forward ----------------------------------------------------------------------------------- */

HOT static void attn_fwd(parity_train_model_t *m, train_layer_a_t *a, int nseq)
{
    int T = m->T, D = m->D, H = m->H, hd = D / H;
    float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < nseq; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *q = a->qkv + ((size_t)b * T + t) * 3 * D + h * hd;
                float *p = a->p + (((size_t)b * H + h) * T + t) * T;
                float mx = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    const float *k = a->qkv + ((size_t)b * T + u) * 3 * D + D + h * hd;
                    float s = 0.0f;
                    for (int i = 0; i < hd; i++) s += q[i] * k[i];
                    s *= scale;
                    p[u] = s;
                    if (s > mx) mx = s;
                }
                float sum = 0.0f;
                for (int u = 0; u <= t; u++) {
                    p[u] = expf(p[u] - mx);
                    sum += p[u];
                }
                float inv = 1.0f / sum;
                float *y = a->y + ((size_t)b * T + t) * D + h * hd;
                for (int i = 0; i < hd; i++) y[i] = 0.0f;
                for (int u = 0; u <= t; u++) {
                    p[u] *= inv;
                    const float *v = a->qkv + ((size_t)b * T + u) * 3 * D + 2 * D + h * hd;
                    for (int i = 0; i < hd; i++) y[i] += p[u] * v[i];
                }
            }
}

/* Head of one token: word logits of the target's class, both softmaxes in place, the loss. */
HOT static double head_fwd_row(parity_train_model_t *m, int n, int32_t tg)
{
    int D = m->D, C = m->C, S = m->S, V = m->V;
    int cls = tg / S, lo = cls * S, sz = (lo + S <= V ? S : V - lo);
    float *pc = m->pc + (size_t)n * C, *restrict pw = m->pw + (size_t)n * S;
    const float *f = m->f + (size_t)n * D;
    for (int j = 0; j < sz; j++) pw[j] = 0.0f;
    for (int k = 0; k < D; k++) {
        float fv = f[k];
        const float *restrict wr = m->wout + (size_t)k * V + lo;
        for (int j = 0; j < sz; j++) pw[j] += fv * wr[j];
    }
    float *ps[2] = {pc, pw};
    int len[2] = {C, sz}, tix[2] = {cls, tg - lo};
    double loss = 0.0;
    for (int s = 0; s < 2; s++) {
        float *p = ps[s], mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < len[s]; j++) if (p[j] > mx) mx = p[j];
        float lt = p[tix[s]] - mx;
        for (int j = 0; j < len[s]; j++) {
            p[j] = expf(p[j] - mx);
            sum += p[j];
        }
        loss += (double)logf(sum) - (double)lt;
        float inv = 1.0f / sum;
        for (int j = 0; j < len[s]; j++) p[j] *= inv;
    }
    return loss;
}

/* Forward through the final RMSNorm; head probabilities and the summed loss (double). */
static double forward(parity_train_model_t *m, const int32_t *inputs, const int32_t *targets,
                      int nseq)
{
    int D = m->D, T = m->T, F = m->F, C = m->C;
    int N = nseq * T;
    for (int n = 0; n < N; n++) {
        int32_t id = inputs[n];
        m->ids_buf[n] = id;
        memcpy(m->e + (size_t)n * D, m->wte + (size_t)id * D, (size_t)D * sizeof(float));
    }
    float *x0 = m->la[0].x;
    rms_fwd(x0, m->r0, m->e, m->g0, N, D);
    for (int n = 0; n < N; n++)
        for (int k = 0; k < D; k++) x0[(size_t)n * D + k] += m->wpe[(size_t)(n % T) * D + k];
    for (int l = 0; l < m->L; l++) {
        train_layer_a_t *a = &m->la[l];
        train_layer_w_t *w = &m->lw[l];
        rms_fwd(a->a, a->r1, a->x, w->g1, N, D);
        mm_fwd(a->qkv, a->a, w->wqkv, N, D, 3 * D);
        attn_fwd(m, a, nseq);
        mm_fwd(a->mid, a->y, w->wo, N, D, D);
        for (size_t i = 0; i < (size_t)N * D; i++) a->mid[i] += a->x[i];
        rms_fwd(a->m, a->r2, a->mid, w->g2, N, D);
        mm_fwd(a->u, a->m, w->w1, N, D, F);
        for (size_t i = 0; i < (size_t)N * F; i++) a->z[i] = a->u[i] * sigmoid(a->u[i]);
        float *next = l + 1 < m->L ? m->la[l + 1].x : m->xf;
        mm_fwd(next, a->z, w->w2, N, F, D);
        for (size_t i = 0; i < (size_t)N * D; i++) next[i] += a->mid[i];
    }
    rms_fwd(m->f, m->rf, m->xf, m->gf, N, D);
    /* head: p(class) * p(word | class), each an exact softmax */
    mm_fwd(m->pc, m->f, m->wc, N, D, C);
    double loss = 0.0;
    for (int n = 0; n < N; n++) loss += head_fwd_row(m, n, targets[n]);
    return loss;
}

double parity_train_model_loss(parity_train_model_t *m, const int32_t *inputs,
                               const int32_t *targets, int nseq)
{
    if (!m || nseq < 1 || nseq > m->nseq_max) return NAN;
    return forward(m, inputs, targets, nseq) / ((double)nseq * m->T);
}

/* ---- backward ---------------------------------------------------------------------------------- */

HOT static void attn_bwd(parity_train_model_t *m, train_layer_a_t *a, const float *dy, int nseq)
{
    int T = m->T, D = m->D, H = m->H, hd = D / H;
    float scale = 1.0f / sqrtf((float)hd);
    memset(m->dqkv, 0, (size_t)nseq * T * 3 * D * sizeof(float));
    for (int b = 0; b < nseq; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *p = a->p + (((size_t)b * H + h) * T + t) * T;
                const float *g = dy + ((size_t)b * T + t) * D + h * hd;
                const float *q = a->qkv + ((size_t)b * T + t) * 3 * D + h * hd;
                float *dq = m->dqkv + ((size_t)b * T + t) * 3 * D + h * hd;
                float *dp = m->dp, dot = 0.0f;
                for (int u = 0; u <= t; u++) {
                    const float *v = a->qkv + ((size_t)b * T + u) * 3 * D + 2 * D + h * hd;
                    float *dv = m->dqkv + ((size_t)b * T + u) * 3 * D + 2 * D + h * hd;
                    float s = 0.0f;
                    for (int i = 0; i < hd; i++) {
                        s += g[i] * v[i];
                        dv[i] += p[u] * g[i];
                    }
                    dp[u] = s;
                    dot += p[u] * s;
                }
                for (int u = 0; u <= t; u++) {
                    float ds = p[u] * (dp[u] - dot) * scale;
                    const float *k = a->qkv + ((size_t)b * T + u) * 3 * D + D + h * hd;
                    float *dk = m->dqkv + ((size_t)b * T + u) * 3 * D + D + h * hd;
                    for (int i = 0; i < hd; i++) {
                        dq[i] += ds * k[i];
                        dk[i] += ds * q[i];
                    }
                }
            }
}

/* Head backward: d logits = (p - onehot) / N for both softmaxes; df (into m->dh) = d logits
 * times the transposed weights (copied once so the inner loops are axpys over D). */
HOT static void head_bwd(parity_train_model_t *m, const int32_t *targets, int N)
{
    int D = m->D, C = m->C, S = m->S, V = m->V;
    float invN = 1.0f / (float)N;
    float *restrict wcT = m->wcT, *restrict woT = m->woT;
    for (int k = 0; k < D; k++) {
        for (int j = 0; j < C; j++) wcT[(size_t)j * D + k] = m->wc[(size_t)k * C + j];
        for (int j = 0; j < V; j++) woT[(size_t)j * D + k] = m->wout[(size_t)k * V + j];
    }
    for (int n = 0; n < N; n++) {
        int32_t tg = targets[n];
        int cls = tg / S, lo = cls * S, sz = (lo + S <= V ? S : V - lo);
        float *restrict pc = m->pc + (size_t)n * C, *restrict pw = m->pw + (size_t)n * S;
        for (int j = 0; j < C; j++) pc[j] *= invN;
        pc[cls] -= invN;
        for (int j = 0; j < sz; j++) pw[j] *= invN;
        pw[tg - lo] -= invN;
        const float *f = m->f + (size_t)n * D;
        float *restrict d = m->dh + (size_t)n * D;
        for (int k = 0; k < D; k++) d[k] = 0.0f;
        for (int j = 0; j < C; j++) {
            float g = pc[j];
            const float *restrict w = wcT + (size_t)j * D;
            for (int k = 0; k < D; k++) d[k] += g * w[k];
        }
        for (int j = 0; j < sz; j++) {
            float g = pw[j];
            const float *restrict w = woT + (size_t)(lo + j) * D;
            for (int k = 0; k < D; k++) d[k] += g * w[k];
        }
        for (int k = 0; k < D; k++) {
            float fv = f[k];
            float *restrict dwc = m->dwc + (size_t)k * C, *restrict dwo = m->dwout + (size_t)k * V + lo;
            for (int j = 0; j < C; j++) dwc[j] += fv * pc[j];
            for (int j = 0; j < sz; j++) dwo[j] += fv * pw[j];
        }
    }
}

static int to_dtype(parity_tensor_t *t, const float *src, size_t n)
{
    if (t->view.dtype == PARITY_DT_BF16) parity_fp32_to_bf16(src, t->view.data, n);
    else if (t->view.dtype == PARITY_DT_F32) memcpy(t->view.data, src, n * sizeof(float));
    else return -1;
    return 0;
}

static int from_dtype(float *dst, const parity_tensor_t *t, size_t n)
{
    if (t->view.dtype == PARITY_DT_BF16) parity_bf16_to_fp32(t->view.data, dst, n);
    else if (t->view.dtype == PARITY_DT_F32) memcpy(dst, t->view.data, n * sizeof(float));
    else return -1;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(dst[i])) return 1;
    return 0;
}

/* The candidate: dy, x, gamma converted to in_dtype, ids as int32; dE, dgamma pre-filled with NaN
 * (a kernel must write every element) and converted back to fp32. */
static parity_status_t emb_rms_bwd_kernel(parity_train_model_t *m, const parity_abi_kernel_t *k,
                                          const float *dy, int N, uint64_t seed,
                                          parity_train_stats_t *st, parity_diag_t *diag)
{
    int D = m->D;
    if ((k->in_dtype != PARITY_DT_F32 && k->in_dtype != PARITY_DT_BF16) ||
        (k->out_dtype != PARITY_DT_F32 && k->out_dtype != PARITY_DT_BF16))
        return parity_diag_set(diag, PARITY_E_UNSUPPORTED,
                               "kernel %s: dtypes %d -> %d (train supports f32/bf16)", k->name,
                               k->in_dtype, k->out_dtype);
    if (m->kn != N || m->kin != k->in_dtype || m->kout != k->out_dtype) {
        free_kernel_bufs(m);
        int64_t snd[2] = {N, D}, sg[1] = {D}, sid[1] = {N}, sde[2] = {m->V, D};
        m->k_dy = parity_tensor_new("dy", (parity_dtype_t)k->in_dtype, 2, snd);
        m->k_x = parity_tensor_new("x", (parity_dtype_t)k->in_dtype, 2, snd);
        m->k_g = parity_tensor_new("gamma", (parity_dtype_t)k->in_dtype, 1, sg);
        m->k_ids = parity_tensor_new("ids", PARITY_DT_I32, 1, sid);
        m->k_dE = parity_tensor_new("dE", (parity_dtype_t)k->out_dtype, 2, sde);
        m->k_dg = parity_tensor_new("dgamma", (parity_dtype_t)k->out_dtype, 1, sg);
        if (!m->k_dy || !m->k_x || !m->k_g || !m->k_ids || !m->k_dE || !m->k_dg) {
            free_kernel_bufs(m);
            return parity_diag_set(diag, PARITY_E_NOMEM, "train: kernel buffers: out of memory");
        }
        m->kn = N; m->kin = k->in_dtype; m->kout = k->out_dtype;
    }
    /* a diverged model hands the op non-finite values: that is the training's failure, not
     * the kernel's (the caller reports it as divergence) */
    for (size_t i = 0; i < (size_t)N * D; i++)
        if (!isfinite(dy[i]) || !isfinite(m->e[i])) {
            st->nonfinite_input = 1;
            return parity_diag_set(diag, PARITY_E_INVALID,
                                   "non-finite dy or x reaching the op (the run diverged)");
        }
    to_dtype(m->k_dy, dy, (size_t)N * D);
    to_dtype(m->k_x, m->e, (size_t)N * D);
    to_dtype(m->k_g, m->g0, (size_t)D);
    memcpy(m->k_ids->view.data, m->ids_buf, (size_t)N * sizeof(int32_t));
    parity_tensor_fill_nan(m->k_dE);
    parity_tensor_fill_nan(m->k_dg);
    parity_abi_tensor_t in[4] = {m->k_dy->view, m->k_x->view, m->k_g->view, m->k_ids->view};
    parity_abi_tensor_t outv[2] = {m->k_dE->view, m->k_dg->view};
    static const char *const an[1] = {"eps"};
    static const double av[1] = {1e-5};
    parity_abi_call_t call = {PARITY_ABI_VERSION, (uint32_t)sizeof(parity_abi_call_t),
                              "embedding_rmsnorm_bwd", 4, 2, in, outv, 1, an, av, seed, 1};
    int rc = k->run(&call);
    st->kernel_status = rc;
    if (rc != PARITY_KERNEL_OK)
        return parity_diag_set(diag, PARITY_E_UNSUPPORTED, "kernel %s returned %d (%s)", k->name, rc,
                               rc == PARITY_KERNEL_UNSUPPORTED ? "unsupported" : "error");
    if (!parity_tensor_guards_ok(m->k_dE) || !parity_tensor_guards_ok(m->k_dg)) {
        st->out_of_bounds = 1;
        parity_tensor_reset_guards(m->k_dE);
        parity_tensor_reset_guards(m->k_dg);
        return parity_diag_set(diag, PARITY_E_UNSUPPORTED, "kernel %s wrote out of bounds", k->name);
    }
    if (from_dtype(m->dwte, m->k_dE, (size_t)m->V * D) || from_dtype(m->dg0, m->k_dg, (size_t)D)) {
        st->nonfinite = 1;
        return parity_diag_set(diag, PARITY_E_UNSUPPORTED,
                               "kernel %s left non-finite values in dE or dgamma", k->name);
    }
    return PARITY_OK;
}

parity_status_t parity_train_model_grad(parity_train_model_t *m, const int32_t *inputs,
                                        const int32_t *targets, int nseq,
                                        const parity_abi_kernel_t *kernel, uint64_t call_seed,
                                        double *loss, parity_train_stats_t *st,
                                        parity_diag_t *diag)
{
    parity_train_stats_t dummy;
    if (!st) {
        memset(&dummy, 0, sizeof dummy);
        st = &dummy;
    }
    if (!m || !inputs || !targets || nseq < 1 || nseq > m->nseq_max)
        return parity_diag_set(diag, PARITY_E_INVALID, "train: bad batch");
    int D = m->D, T = m->T, F = m->F, V = m->V;
    int N = nseq * T;
    for (int n = 0; n < N; n++)
        if (inputs[n] < 0 || inputs[n] >= V || targets[n] < 0 || targets[n] >= V)
            return parity_diag_set(diag, PARITY_E_INVALID, "train: id out of range at %d", n);
    double t0 = parity_now();
    double total = forward(m, inputs, targets, nseq);
    *loss = total / (double)N;
    double t1 = parity_now();
    st->t_forward += t1 - t0;
    memset(m->grads, 0, m->np * sizeof(float));

    /* head backward: d logits = (p - onehot) / N for both softmaxes */
    head_bwd(m, targets, N);
    float *df = m->dh; /* (N, D) grad wrt f */
    /* final RMSNorm: dh <- d xf */
    float *dx = m->dt1;
    for (int n = 0; n < N; n++) {
        train_rms_bwd_row(dx, m->dgf, m->xf + (size_t)n * D, df + (size_t)n * D, m->gf, m->rf[n], D);
        memcpy(df + (size_t)n * D, dx, (size_t)D * sizeof(float));
    }
    float *dres = m->dh; /* grad wrt the residual stream, carried down */
    for (int l = m->L - 1; l >= 0; l--) {
        train_layer_a_t *a = &m->la[l];
        train_layer_w_t *w = &m->lw[l], *dw = &m->dlw[l];
        /* MLP: next = mid + gelu(m w1) w2 */
        mm_dw(dw->w2, a->z, dres, N, F, D);
        mm_dx(m->dfu, dres, w->w2, m->wt, N, F, D);
        for (size_t i = 0; i < (size_t)N * F; i++) {
            /* d/du u s(u) = s (1 + u (1 - s)) with s = sigmoid(u) = z / u, recomputed */
            float sg = sigmoid(a->u[i]);
            m->dfu[i] *= sg * (1.0f + a->u[i] * (1.0f - sg));
        }
        mm_dw(dw->w1, a->m, m->dfu, N, D, F);
        mm_dx(m->dt1, m->dfu, w->w1, m->wt, N, D, F);
        for (int n = 0; n < N; n++) {
            train_rms_bwd_row(m->dt2 + (size_t)n * D, dw->g2, a->mid + (size_t)n * D,
                        m->dt1 + (size_t)n * D, w->g2, a->r2[n], D);
        }
        for (size_t i = 0; i < (size_t)N * D; i++) dres[i] += m->dt2[i]; /* d mid */
        /* attention: mid = x + y wo */
        mm_dw(dw->wo, a->y, dres, N, D, D);
        mm_dx(m->dt1, dres, w->wo, m->wt, N, D, D); /* d y */
        attn_bwd(m, a, m->dt1, nseq);
        mm_dw(dw->wqkv, a->a, m->dqkv, N, D, 3 * D);
        mm_dx(m->dt1, m->dqkv, w->wqkv, m->wt, N, D, 3 * D); /* d a */
        for (int n = 0; n < N; n++) {
            train_rms_bwd_row(m->dt2 + (size_t)n * D, dw->g1, a->x + (size_t)n * D,
                        m->dt1 + (size_t)n * D, w->g1, a->r1[n], D);
        }
        for (size_t i = 0; i < (size_t)N * D; i++) dres[i] += m->dt2[i]; /* d x */
    }
    /* positions, then the op: dres is now dy, the grad wrt the first RMSNorm's output */
    for (int n = 0; n < N; n++)
        for (int k = 0; k < D; k++) m->dwpe[(size_t)(n % T) * D + k] += dres[(size_t)n * D + k];
    int64_t mh = 0;
    memset(m->hits, 0, (size_t)V * sizeof(int64_t));
    for (int n = 0; n < N; n++)
        if (++m->hits[m->ids_buf[n]] > mh) mh = m->hits[m->ids_buf[n]];
    st->max_hits = mh;
    double t2 = parity_now();
    parity_status_t s = PARITY_OK;
    if (kernel) s = emb_rms_bwd_kernel(m, kernel, dres, N, call_seed, st, diag);
    else if (m->floor_order > 0) train_emb_rms_bwd_floor(m, dres, N, call_seed);
    else train_emb_rms_bwd_ref(m, dres, N, m->dwte, m->dg0);
    double t3 = parity_now();
    st->t_kernel += t3 - t2;
    st->t_backward += t3 - t1;
    /* the probe is measurement, not training: its time is in no step figure */
    if (s == PARITY_OK && m->probe_on) train_probe_grad(m, dres, N);
    return s;
}
