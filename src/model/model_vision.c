/* model_vision: a synthetic second modality. A deterministic picture is cut into patches, the
 * patches go through a small vision-encoder stack (patch embedding + position, two pre-norm
 * layers of single-head bidirectional attention and a SiLU MLP, as a ViT) with its own fixed
 * pseudo-random weights, and a projector maps them into the language model's embedding space
 * at the text embeddings' RMS (a LLaVA-style prefix). All of it runs in the runner's
 * arithmetic, so a bf16 path also has a bf16 encoder. Not here: a trained encoder, real images,
 * cross-attention. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/model/model_impl.h"
#include "parity/rng.h"

enum { PATCH = 48 /* 4x4x3 pixels */, DV = 32, HV = 64, NLAYER = 2, GRID = 8 /* 8x8 patches */ };
#define ENC_SEED 0x7669736f6eULL /* "vison": the encoder's weights, the same for every image */

#define ST(x) model_rnd(r, r->p.storage, (x))
#define C(x) model_rnd(r, cd, (x))

/* n values of N(0, std^2), rounded to storage, from stream `stream` of the encoder seed. */
static void fill(const parity_model_runner_t *r, double *w, size_t n, double std, uint64_t stream)
{
    parity_rng_t g;
    parity_rng_seed(&g, ENC_SEED, stream);
    for (size_t i = 0; i < n; i++) w[i] = ST((double)(float)(std * parity_rng_normal(&g)));
}

/* out = x / rms(x) over n values (unit weight), run.c's order: ss sequential, / n, + eps. */
static void vnorm(const parity_model_runner_t *r, double *out, const double *x, int n)
{
    parity_model_dtype_t cd = model_cmp_dtype(r);
    double ss = 0;
    for (int j = 0; j < n; j++) ss = C(ss + C(x[j] * x[j]));
    ss = C(C(ss / n) + (cd == PARITY_MODEL_FP64 ? 1e-5 : (double)1e-5f));
    double inv = C(1.0 / model_sqrt(cd, ss));
    for (int j = 0; j < n; j++) out[j] = ST(C(inv * x[j]));
}

/* The picture of `seed`, normalised pixels (mean 0, as a ViT's input): channel c is
 * 0.5 sin(a_c X + b_c Y + phi_c) plus N(0, 0.2^2) noise, X, Y in [0, 1) over a 32x32 image; patch i is grid cell (i % 8, i / 8), its 48 values
 * in (y, x, c) order. */
static void patches(const parity_model_runner_t *r, uint64_t seed, size_t n, double *px)
{
    parity_rng_t g;
    parity_rng_seed(&g, seed, 0x696d616765ULL /* "image" */);
    double a[3], b[3], ph[3];
    for (int c = 0; c < 3; c++) {
        a[c] = 2 + 10 * parity_rng_uniform(&g);
        b[c] = 2 + 10 * parity_rng_uniform(&g);
        ph[c] = 6.283185307179586 * parity_rng_uniform(&g);
    }
    for (size_t i = 0; i < n; i++) {
        int gx = (int)(i % GRID), gy = (int)(i / GRID);
        for (int y = 0; y < 4; y++)
            for (int x = 0; x < 4; x++)
                for (int c = 0; c < 3; c++) {
                    double X = (gx * 4 + x) / 32.0, Y = (gy * 4 + y) / 32.0;
                    double v = 0.5 * sin(a[c] * X + b[c] * Y + ph[c]) + 0.2 * parity_rng_normal(&g);
                    px[i * PATCH + (size_t)((y * 4 + x) * 3 + c)] = ST((double)(float)v);
                }
    }
}

parity_status_t parity_model_runner_set_image(parity_model_runner_t *r, uint64_t seed,
                                              size_t n_patch, size_t pos0)
{
    if (!r || n_patch > PARITY_MODEL_MAX_PATCHES || pos0 + n_patch > (size_t)r->S)
        return PARITY_E_INVALID;
    r->n_img = 0, r->img0 = 0;
    if (n_patch == 0) return PARITY_OK;
    parity_model_dtype_t cd = model_cmp_dtype(r);
    const size_t n = n_patch, D = (size_t)r->D;
    /* weights: Wp, pos, per layer Wq Wk Wv Wo W1 W2, projector */
    size_t nw = DV * PATCH + GRID * GRID * DV + NLAYER * (4 * DV * DV + 2 * HV * DV) + D * DV;
    size_t ns = n * PATCH + 4 * n * DV + n * HV + n + DV + D;
    double *buf = malloc((nw + ns) * sizeof *buf);
    if (!buf) return PARITY_E_NOMEM;
    double *wp = buf, *pos = wp + DV * PATCH, *lw = pos + GRID * GRID * DV;
    double *wproj = lw + NLAYER * (4 * DV * DV + 2 * HV * DV);
    double *px = wproj + D * DV, *z = px + n * PATCH, *a = z + n * DV, *qkv = a + n * DV;
    double *hb = qkv + 2 * n * DV, *att = hb + n * HV, *tmp = att + n, *pr = tmp + DV;
    uint64_t st = 1;
    fill(r, wp, DV * PATCH, 1 / sqrt((double)PATCH), st++);
    fill(r, pos, GRID * GRID * DV, 0.1, st++);
    for (int l = 0; l < NLAYER; l++) {
        double *L0 = lw + (size_t)l * (4 * DV * DV + 2 * HV * DV);
        for (int k = 0; k < 4; k++) fill(r, L0 + (size_t)k * DV * DV, DV * DV, 1 / sqrt((double)DV), st++);
        fill(r, L0 + 4 * DV * DV, HV * DV, 1 / sqrt((double)DV), st++);
        fill(r, L0 + 4 * DV * DV + HV * DV, DV * HV, 0.5 / sqrt((double)HV), st++);
    }
    fill(r, wproj, D * DV, 1 / sqrt((double)DV), st++);
    /* the text embeddings' RMS (fp64 over the checkpoint), the projector's output scale */
    const model_weights_f32_t *w32 = &r->m->w;
    double ss = 0;
    size_t ne = (size_t)r->V * D;
    for (size_t i = 0; i < ne; i++) ss += (double)w32->emb[i] * w32->emb[i];
    double scale = ST(sqrt(ss / (double)ne));

    patches(r, seed, n, px);
    size_t rows = n; /* the encoder's GEMMs see all patches at once */
    for (size_t i = 0; i < n; i++) {
        model_gemm(r, z + i * DV, wp, px + i * PATCH, DV, PATCH, rows, 0);
        for (int j = 0; j < DV; j++) z[i * DV + j] = ST(C(z[i * DV + j] + pos[i * DV + (size_t)j]));
    }
    const double sq = model_sqrt(cd, (double)DV);
    for (int l = 0; l < NLAYER; l++) {
        const double *L0 = lw + (size_t)l * (4 * DV * DV + 2 * HV * DV);
        const double *wq = L0, *wk = L0 + DV * DV, *wv = L0 + 2 * DV * DV, *wo = L0 + 3 * DV * DV;
        const double *w1 = L0 + 4 * DV * DV, *w2 = w1 + HV * DV;
        double *q = qkv, *k = qkv + n * DV, *v = a; /* a is free once q, k, v exist */
        for (size_t i = 0; i < n; i++) {
            vnorm(r, tmp, z + i * DV, DV);
            model_gemm(r, q + i * DV, wq, tmp, DV, DV, rows, 0);
            model_gemm(r, k + i * DV, wk, tmp, DV, DV, rows, 0);
            model_gemm(r, hb + i * DV, wv, tmp, DV, DV, rows, 0); /* v staged in hb */
        }
        memcpy(v, hb, n * DV * sizeof *v);
        for (size_t i = 0; i < n; i++) {
            /* bidirectional attention over every patch: scores, two-pass softmax, P.V */
            double mx = -INFINITY, sum = 0;
            for (size_t t = 0; t < n; t++) {
                double s = 0;
                for (int j = 0; j < DV; j++) s = C(s + C(q[i * DV + j] * k[t * DV + j]));
                att[t] = ST(C(ST(s) / sq));
                mx = att[t] > mx ? att[t] : mx;
            }
            for (size_t t = 0; t < n; t++) {
                att[t] = C(model_exp(cd, C(att[t] - mx)));
                sum = C(sum + att[t]);
            }
            for (size_t t = 0; t < n; t++) att[t] = ST(C(att[t] / sum));
            for (int j = 0; j < DV; j++) {
                double o = 0;
                for (size_t t = 0; t < n; t++) o = C(o + C(att[t] * v[t * DV + j]));
                tmp[j] = ST(o);
            }
            model_gemm(r, pr, wo, tmp, DV, DV, rows, 0);
            for (int j = 0; j < DV; j++) q[i * DV + j] = pr[j]; /* q row i is not read again */
        }
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < DV; j++) z[i * DV + j] = ST(C(z[i * DV + j] + q[i * DV + j]));
        for (size_t i = 0; i < n; i++) {
            vnorm(r, tmp, z + i * DV, DV);
            model_gemm(r, hb, w1, tmp, HV, DV, rows, 0);
            for (int j = 0; j < HV; j++) {
                double h = hb[j];
                hb[j] = ST(C(h * C(1.0 / C(1.0 + C(model_exp(cd, -h))))));
            }
            model_gemm(r, tmp, w2, hb, DV, HV, rows, 0);
            for (int j = 0; j < DV; j++) z[i * DV + j] = ST(C(z[i * DV + j] + tmp[j]));
        }
    }
    for (size_t i = 0; i < n; i++) {
        vnorm(r, tmp, z + i * DV, DV);
        model_gemm(r, pr, wproj, tmp, (int)D, DV, rows, 0);
        vnorm(r, pr, pr, (int)D);
        for (size_t j = 0; j < D; j++) r->img[i * D + j] = ST(C(scale * pr[j]));
    }
    free(buf);
    r->img0 = pos0, r->n_img = n;
    return PARITY_OK;
}

parity_status_t parity_model_image_tokens(const parity_model_t *m, uint64_t seed, size_t n_patch,
                                          int32_t *ids, parity_diag_t *diag)
{
    if (!m || (n_patch && !ids) || n_patch > PARITY_MODEL_MAX_PATCHES)
        return parity_diag_set(diag, PARITY_E_INVALID, "image tokens: NULL argument or more than %d patches",
                               PARITY_MODEL_MAX_PATCHES);
    parity_model_t dense = *m;
    dense.moe = NULL; /* the encoder does not depend on the FFNs */
    parity_model_path_t ref;
    parity_model_path_default(&ref);
    parity_model_runner_t *r = NULL;
    parity_status_t st = parity_model_runner_new(&dense, &ref, &r, diag);
    if (st != PARITY_OK) return st;
    st = parity_model_runner_set_image(r, seed, n_patch, 0);
    if (st == PARITY_OK) {
        const size_t D = (size_t)r->D;
        for (size_t i = 0; i < n_patch; i++) {
            int32_t best = 0;
            double bv = -INFINITY;
            for (int v = 3; v < r->V; v++) { /* not <unk>, <s>, </s> */
                double s = 0, nn = 0;
                for (size_t j = 0; j < D; j++) {
                    double e = r->w.emb[(size_t)v * D + j];
                    s += e * r->img[i * D + j];
                    nn += e * e;
                }
                s = nn > 0 ? s / sqrt(nn) : 0;
                if (s > bv) bv = s, best = v;
            }
            ids[i] = best;
        }
    } else {
        parity_diag_set(diag, st, "image tokens: out of memory");
    }
    parity_model_runner_free(r);
    return st;
}
