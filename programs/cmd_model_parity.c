/* `parity model parity`: two forward paths over the same prompts: the logprob comparison of the
 * realized tokens (overall and per modality when an image is prefixed), the per-layer drift of
 * the hidden state, router decisions that flip between the paths and each path's routing
 * balance (MoE), the floor of a repeated run of A, the first greedy divergence, and each side's
 * manifest. The arithmetic is libparity's model module; this file only measures and prints. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cmd_model.h"
#include "parity/manifest.h"
#include "parity/metrics.h"

enum { M_ALL = 0, M_TEXT = 1, M_IMAGE = 2, NMOD = 3 };
static const char *const MOD_NAMES[NMOD] = {"all", "text", "image"};

/* ||b - a|| / ||a|| per hidden slice, over positions, and the largest per-position value. */
typedef struct {
    double ss_diff, ss_ref, max_pos;
} drift_t;

static void drift_add(drift_t *d, const double *a, const double *b, size_t t0, size_t t1,
                      size_t dim)
{
    for (size_t t = t0; t < t1; t++) {
        double sd = 0, sr = 0;
        for (size_t j = 0; j < dim; j++) {
            double e = b[t * dim + j] - a[t * dim + j];
            sd += e * e;
            sr += a[t * dim + j] * a[t * dim + j];
        }
        d->ss_diff += sd, d->ss_ref += sr;
        double rel = sr > 0 ? sqrt(sd / sr) : (sd > 0 ? INFINITY : 0);
        if (rel > d->max_pos) d->max_pos = rel;
    }
}

static double drift_rel(const drift_t *d)
{
    return d->ss_ref > 0 ? sqrt(d->ss_diff / d->ss_ref) : (d->ss_diff > 0 ? INFINITY : 0);
}

/* Routing statistics of one path: expert loads per layer, mean router entropy. */
typedef struct {
    double *load;    /* (L, E) tokens routed to each expert (each token counts K times) */
    double *entropy; /* (L) sum over tokens of H(p) / ln E */
    double ntok;
} routing_t;

static void routing_add(routing_t *rs, const parity_model_runner_t *r, int L, int E, int K, int S,
                        size_t n)
{
    const int32_t *ids;
    const double *p;
    if (parity_model_runner_routing(r, &ids, &p) != PARITY_OK) return;
    for (int l = 0; l < L; l++)
        for (size_t t = 0; t < n; t++) {
            const int32_t *id = ids + ((size_t)l * S + t) * K;
            const double *pp = p + ((size_t)l * S + t) * E;
            for (int j = 0; j < K; j++) rs->load[(size_t)l * E + id[j]] += 1;
            double h = 0;
            for (int e = 0; e < E; e++)
                if (pp[e] > 0) h -= pp[e] * log(pp[e]);
            rs->entropy[l] += E > 1 ? h / log((double)E) : 0;
        }
    rs->ntok += (double)n;
}

/* Prints per layer: the load of every expert as a fraction of routed slots, max/mean load (1 is
 * perfect balance), the coefficient of variation of the loads, and the mean normalised entropy. */
static void routing_print(const char *name, const routing_t *rs, int L, int E, int K)
{
    printf("routing of %s (%.0f tokens; load = share of the %d routed slots per token):\n", name,
           rs->ntok, K);
    printf("  %-8s", "layer");
    for (int e = 0; e < E; e++) printf(" e%-5d", e);
    printf("  max/mean    cv  entropy/ln E  unused\n");
    for (int l = 0; l < L; l++) {
        double tot = 0, mx = 0, ss = 0;
        int unused = 0;
        for (int e = 0; e < E; e++) tot += rs->load[(size_t)l * E + e];
        double mean = tot / E;
        printf("  %-8d", l);
        for (int e = 0; e < E; e++) {
            double v = rs->load[(size_t)l * E + e];
            printf(" %.3f ", tot > 0 ? v / tot : 0);
            mx = v > mx ? v : mx;
            ss += (v - mean) * (v - mean);
            unused += v == 0;
        }
        printf("  %8.3f %5.3f  %12.3f  %6d\n", mean > 0 ? mx / mean : 0,
               mean > 0 ? sqrt(ss / E) / mean : 0, rs->ntok > 0 ? rs->entropy[l] / rs->ntok : 0,
               unused);
    }
}

/* Each side's manifest, from its path: what a serving stack's manifest would say. */
static const char *dtype_name(parity_model_dtype_t d)
{
    static const char *const N[] = {"fp64", "fp32", "bf16", "fp16"};
    return (unsigned)d < 4 ? N[d] : "?";
}

static int write_manifest(const char *prefix, const char *side, const parity_model_path_t *p,
                          int moe)
{
    parity_manifest_t *m = NULL;
    if (parity_manifest_new(&m) != PARITY_OK) return -1;
    char buf[64], path[1100];
    const char *dt = dtype_name(p->storage);
    int rc = 0;
#define SET(k, v) rc |= parity_manifest_set(m, (k), (v), NULL) != PARITY_OK
    snprintf(buf, sizeof buf, "%d", p->tp);
    SET("parallel.tp", buf);
    SET("dtypes.weights", dt);
    SET("dtypes.activations", dt);
    SET("dtypes.accum", p->accum == PARITY_MODEL_BF16 ? "bf16" : p->storage == PARITY_MODEL_FP64 ? "fp64" : "fp32");
    if (p->tp > 1) {
        static const char *const AR[] = {"ring", "tree", "oneshot"};
        SET("allreduce.algo", AR[p->allreduce]);
        SET("allreduce.dtype", dtype_name(p->hop));
    }
    SET("fusion.add_rmsnorm", p->fused_norm ? "true" : "false");
    SET("backends.attention", p->kvcache ? "decode-splitkv" : "eager");
    snprintf(buf, sizeof buf, "%d", p->splitk);
    SET("batch_invariant.splitk", buf);
    if (moe) {
        snprintf(buf, sizeof buf, "%d", p->ep);
        SET("parallel.ep", buf);
        SET("backends.moe", p->moe_fused ? "fused" : "stepwise");
        SET("fusion.silu_mul", p->moe_fused ? "true" : "false");
        SET("fusion.shared_expert", p->moe.shared == PARITY_MOE_SHARED_BEFORE ? "true" : "false");
        SET("fusion.ep_overlap", p->ep_overlap ? "true" : "false");
        SET("dtypes.router", p->moe.softmax == PARITY_MOE_SOFTMAX_BF16 ? "bf16" : "fp32");
        SET("dtypes.routing_weights", p->moe.weights == PARITY_MOE_W_BF16 ? dt : "fp32");
        char sp[256];
        parity_moe_spec_str(&p->moe, sp, sizeof sp);
        SET("backends.moe_spec", sp);
    }
    char spec[256];
    parity_model_path_str(p, spec, sizeof spec);
    SET("notes.path", spec);
#undef SET
    char *json = parity_manifest_to_json(m);
    snprintf(path, sizeof path, "%s.%s.json", prefix, side);
    FILE *f = json ? fopen(path, "wb") : NULL;
    if (!f || fputs(json, f) < 0) rc = 1;
    if (f && fclose(f) != 0) rc = 1;
    free(json);
    parity_manifest_free(m);
    return rc ? -1 : 0;
}

int model_cli_parity(int argc, char **argv)
{
    const char *cmd = "model parity";
    opts_t o = {0};
    o.steps = 200;
    o.max_k3 = -1;
    int rc = model_cli_parse_opts(cmd, argc, argv, &o);
    if (rc) return rc;
    if (o.npaths != 2)
        return cli_usage_error(cmd, "parity model parity --path ref --path bf16", "need two --path options");
    loaded_t L = {0};
    if ((rc = model_cli_load_all(cmd, &o, &L))) return rc;
    parity_model_path_t p[3];
    parity_model_runner_t *r[3] = {NULL, NULL, NULL};
    prompts_t P = {0};
    double *lg[3] = {NULL, NULL, NULL}, *hd[2] = {NULL, NULL}, *lp[3] = {NULL, NULL, NULL};
    int32_t *ida = NULL, *idb = NULL, *g[2] = {NULL, NULL};
    drift_t *dr = NULL;
    parity_dist_t *dist[NMOD] = {NULL}, *fdist[NMOD] = {NULL};
    routing_t rs[2] = {{0}};
    size_t *flips = NULL, nflip_pos[NMOD] = {0};
    int nr = o.floor ? 3 : 2;
    for (int k = 0; k < nr; k++)
        if ((rc = model_cli_make_runner(cmd, &L, o.paths[k == 2 ? 0 : k], &p[k], &r[k]))) goto done;
    if (nr == 3) parity_model_runner_set_run_seed(r[2], 1); /* a second server run of A */
    if ((rc = model_cli_prompts_load(cmd, o.prompts, &L, o.image, &P))) goto done;
    const parity_model_config_t *c = parity_model_config(L.m);
    size_t V = (size_t)c->vocab_size, S = (size_t)c->seq_len, D = (size_t)c->dim;
    int E = 0, K = 0, NL = c->n_layers;
    parity_model_moe_shape(L.m, &E, &K);
    int show_mod = o.image > 0;
    size_t NS = (size_t)NL + 3; /* embed, L layers, final norm, logits */
    for (int k = 0; k < nr; k++) {
        lg[k] = malloc(S * V * sizeof(double));
        lp[k] = malloc(S * sizeof(double));
    }
    for (int k = 0; k < 2; k++) {
        hd[k] = malloc((NS - 1) * S * D * sizeof(double));
        g[k] = malloc((S + 1) * sizeof(int32_t));
        if (E) {
            rs[k].load = calloc((size_t)NL * E, sizeof(double));
            rs[k].entropy = calloc((size_t)NL, sizeof(double));
            if (!rs[k].load || !rs[k].entropy) rc = 1;
        }
    }
    ida = malloc(S * sizeof *ida), idb = malloc(S * sizeof *idb);
    dr = calloc(NMOD * NS, sizeof *dr);
    flips = calloc((size_t)NMOD * (NL + 1), sizeof *flips);
    for (int k = 0; k < NMOD; k++)
        if (parity_metrics_dist_new(NULL, &dist[k]) != PARITY_OK ||
            (o.floor && parity_metrics_dist_new(NULL, &fdist[k]) != PARITY_OK))
            rc = 1;
    if (rc || !lg[0] || !lg[1] || !lp[0] || !lp[1] || (nr == 3 && (!lg[2] || !lp[2])) || !hd[0] ||
        !hd[1] || !g[0] || !g[1] || !ida || !idb || !dr || !flips) {
        rc = cli_input_error(cmd, "out of memory");
        goto done;
    }
    size_t ntok = 0, nmod_tok[NMOD] = {0};
    for (size_t i = 0; i < P.n; i++) {
        size_t n = P.len[i];
        if (n < 2) continue;
        for (int k = 0; k < nr; k++) {
            model_cli_set_batch(r[k], &p[k], &P, i);
            parity_model_forward(r[k], P.ids[i], n, lg[k], k < 2 ? hd[k] : NULL);
            for (size_t t = 0; t + 1 < n; t++) lp[k][t] = parity_model_logprob(lg[k] + t * V, V, P.ids[i][t + 1]);
            if (k < 2 && E) routing_add(&rs[k], r[k], NL, E, K, (int)S, n);
        }
        for (size_t t = 0; t + 1 < n; t++) {
            const double *ra = lg[0] + t * V, *rb = lg[1] + t * V;
            ida[t] = idb[t] = 0;
            for (size_t v = 1; v < V; v++) {
                if (ra[v] > ra[ida[t]]) ida[t] = (int32_t)v;
                if (rb[v] > rb[idb[t]]) idb[t] = (int32_t)v;
            }
        }
        /* modality runs of scored positions: [0, n_img) predict image tokens, the rest text */
        size_t nimg = P.n_img < n - 1 ? P.n_img : n - 1;
        size_t lo[NMOD] = {0, nimg, 0}, hi[NMOD] = {n - 1, n - 1, nimg};
        for (int m = 0; m < NMOD; m++) {
            if (hi[m] <= lo[m]) continue;
            parity_metrics_dist_add_seq(dist[m], lp[0] + lo[m], lp[1] + lo[m], hi[m] - lo[m]);
            parity_metrics_dist_add_topk(dist[m], ida + lo[m], idb + lo[m], hi[m] - lo[m], 1);
            if (o.floor) parity_metrics_dist_add_seq(fdist[m], lp[0] + lo[m], lp[2] + lo[m], hi[m] - lo[m]);
            nmod_tok[m] += hi[m] - lo[m];
        }
        ntok += n - 1;
        /* hidden drift and router flips by the modality of the input at each position:
         * positions 1..n_img hold the image */
        size_t in_lo[NMOD] = {0, 0, 1}, in_hi[NMOD] = {n, 1, 1 + (P.n_img < n - 1 ? P.n_img : n - 1)};
        for (int m = 0; m < NMOD; m++) {
            size_t ranges[2][2] = {{in_lo[m], in_hi[m]}, {0, 0}};
            if (m == M_TEXT) ranges[1][0] = in_hi[M_IMAGE], ranges[1][1] = n;
            for (int q = 0; q < 2; q++) {
                size_t a0 = ranges[q][0], a1 = ranges[q][1];
                if (a1 <= a0) continue;
                for (size_t s = 0; s + 1 < NS; s++)
                    drift_add(&dr[m * NS + s], hd[0] + s * n * D, hd[1] + s * n * D, a0, a1, D);
                drift_add(&dr[m * NS + NS - 1], lg[0], lg[1], a0, a1, V);
                if (E) {
                    const int32_t *ia, *ib;
                    parity_model_runner_routing(r[0], &ia, NULL);
                    parity_model_runner_routing(r[1], &ib, NULL);
                    for (int l = 0; l < NL; l++) {
                        size_t f = parity_moe_set_differ(ia + ((size_t)l * S + a0) * K,
                                                         ib + ((size_t)l * S + a0) * K, a1 - a0, (size_t)K);
                        flips[(size_t)m * (NL + 1) + l] += f;
                        flips[(size_t)m * (NL + 1) + NL] += f;
                    }
                }
                nflip_pos[m] += a1 - a0;
            }
        }
    }
    parity_dist_summary_t sm[NMOD], fs[NMOD];
    for (int m = 0; m < NMOD; m++) {
        parity_metrics_dist_summary(dist[m], &sm[m]);
        if (o.floor) parity_metrics_dist_summary(fdist[m], &fs[m]);
    }

    /* First greedy divergence from BOS (text only). */
    size_t steps = (size_t)o.steps < S ? (size_t)o.steps : S, ng[2] = {0, 0};
    int32_t bos = PARITY_LLAMA_BOS;
    for (int k = 0; k < 2; k++) {
        parity_model_runner_set_image(r[k], 0, 0, 0);
        if (p[k].batch > 1) {
            size_t lens[64];
            for (int q = 0; q < p[k].batch - 1; q++) lens[q] = P.len[(size_t)q % P.n];
            parity_model_runner_set_companions(r[k], lens, (size_t)p[k].batch - 1);
        }
        parity_model_generate(r[k], &bos, 1, steps, 0.0, 0, g[k], &ng[k]);
    }
    size_t div = 0;
    int diverged = 0;
    for (size_t t = 1; t < ng[0] && t < ng[1]; t++)
        if (g[0][t] != g[1][t]) {
            div = t, diverged = 1;
            break;
        }
    if (!diverged && ng[0] != ng[1]) div = ng[0] < ng[1] ? ng[0] : ng[1], diverged = 1;

    char sa[256], sb[256], dv[64];
    parity_model_path_str(&p[0], sa, sizeof sa);
    parity_model_path_str(&p[1], sb, sizeof sb);
    if (diverged) snprintf(dv, sizeof dv, "%zu", div);
    else snprintf(dv, sizeof dv, "none in %zu", steps);
    if (o.markdown && !E && !show_mod) {
        printf("| %s | %s | %.3e | %.3e | %.3e | %.3e | %s |\n", sb, sa, sm[0].k3_mean,
               sm[0].abs_dlogprob_max, sm[0].abs_dlogprob_p99, drift_rel(&dr[NS - 3]), dv);
    } else if (o.markdown) {
        /* one row per modality: path B | path A | modality | k3 | max | p99 | floor k3 | floor
         * max | flips | hidden drift after the last layer | divergence */
        for (int m = show_mod ? 1 : 0; m < (show_mod ? NMOD : 1); m++) {
            char fk[32] = "-", fm[32] = "-", fl[48] = "-";
            if (o.floor) snprintf(fk, sizeof fk, "%.3e", fs[m].k3_mean), snprintf(fm, sizeof fm, "%.3e", fs[m].abs_dlogprob_max);
            if (E) snprintf(fl, sizeof fl, "%.4f", nflip_pos[m] ? (double)flips[(size_t)m * (NL + 1) + NL] / ((double)nflip_pos[m] * NL) : 0.0);
            printf("| %s | %s | %s | %.3e | %.3e | %.3e | %s | %s | %s | %.3e | %s |\n", sb, sa,
                   m == 0 ? "text" : MOD_NAMES[m], sm[m].k3_mean, sm[m].abs_dlogprob_max,
                   sm[m].abs_dlogprob_p99, fk, fm, fl, drift_rel(&dr[m * NS + NS - 3]), dv);
        }
    } else {
        printf("parity model parity: %s%s%s (dim %d, %d layers, %d heads, %d kv heads, vocab %d",
               L.model_path, E ? " + " : "", E ? L.moe_path : "", c->dim, c->n_layers,
               c->n_heads, c->n_kv_heads, c->vocab_size);
        if (E) printf("; MoE: %d experts, top-%d, shared expert", E, K);
        printf(")\nA: %s\nB: %s\n", sa, sb);
        printf("prompts: %zu %s, %zu scored tokens (teacher-forced, BOS first", P.n,
               o.prompts ? o.prompts : "built-in", ntok);
        if (show_mod) printf("; a %zu-patch image after BOS: %zu image, %zu text tokens", P.n_img,
                             nmod_tok[M_IMAGE], nmod_tok[M_TEXT]);
        printf(")\n\n");
        printf("logprobs of the realized next tokens, B vs A (r = p_A/p_B)%s:\n",
               show_mod ? ", by the modality of the predicted token" : "");
        if (!show_mod) { /* the dense report's layout, unchanged */
            printf("  k1 mean             %+.3e\n", sm[0].k1_mean);
            printf("  k2 mean             %.3e\n", sm[0].k2_mean);
            printf("  k3 mean             %.3e   (max %.3e)\n", sm[0].k3_mean, sm[0].k3_max);
            printf("  |dlogprob| max      %.3e\n", sm[0].abs_dlogprob_max);
            printf("  |dlogprob| mean     %.3e\n", sm[0].abs_dlogprob_mean);
            printf("  |dlogprob| p99      %.3e\n", sm[0].abs_dlogprob_p99);
            printf("  top-1 agreement     %.4f\n", sm[0].top1_agree);
        } else {
            printf("  %-18s %12s %12s %12s\n", "", "all", "text", "image");
#define ROW(label, field, fmt) \
    printf("  %-18s " fmt " " fmt " " fmt "\n", label, sm[0].field, sm[1].field, sm[2].field)
            ROW("k1 mean", k1_mean, "%+12.3e");
            ROW("k2 mean", k2_mean, "%12.3e");
            ROW("k3 mean", k3_mean, "%12.3e");
            ROW("k3 max", k3_max, "%12.3e");
            ROW("|dlogprob| max", abs_dlogprob_max, "%12.3e");
            ROW("|dlogprob| mean", abs_dlogprob_mean, "%12.3e");
            ROW("|dlogprob| p99", abs_dlogprob_p99, "%12.3e");
            ROW("top-1 agreement", top1_agree, "%12.4f");
#undef ROW
        }
        if (o.floor) {
            printf("floor: A against a repeated run of A (run seed 1; only epR:overlap draws a new "
                   "order per run):\n");
            for (int m = 0; m < (show_mod ? NMOD : 1); m++) {
                char x[48];
                if (fs[m].k3_mean > 0) snprintf(x, sizeof x, "%.3g x the floor", sm[m].k3_mean / fs[m].k3_mean);
                else snprintf(x, sizeof x, "%s", sm[m].k3_mean > 0 ? "above a zero floor" : "zero, as the floor");
                printf("  %-6s k3 %.3e (B vs A: %s), |dlogprob| max %.3e\n", MOD_NAMES[m],
                       fs[m].k3_mean, x, fs[m].abs_dlogprob_max);
            }
        }
        printf("\nper-layer drift, B vs A: relative error ||hB - hA|| / ||hA|| of the hidden state\n");
        if (show_mod) printf("  %-12s %-12s %-12s %-12s %s\n", "after", "all tokens", "worst token", "text", "image");
        else printf("  %-12s %-12s %s\n", "after", "all tokens", "worst token");
        for (size_t s = 0; s < NS; s++) {
            char name[32];
            if (s == 0) snprintf(name, sizeof name, "embedding");
            else if (s + 2 < NS) snprintf(name, sizeof name, "layer %zu", s - 1);
            else if (s + 2 == NS) snprintf(name, sizeof name, "final norm");
            else snprintf(name, sizeof name, "logits");
            if (show_mod)
                printf("  %-12s %-12.3e %-12.3e %-12.3e %.3e\n", name, drift_rel(&dr[s]), dr[s].max_pos,
                       drift_rel(&dr[NS + s]), drift_rel(&dr[2 * NS + s]));
            else
                printf("  %-12s %-12.3e %.3e\n", name, drift_rel(&dr[s]), dr[s].max_pos);
        }
        if (E) {
            printf("\nrouter flips (positions whose top-%d expert set differs, B vs A):\n", K);
            printf("  %-8s %10s", "layer", "all");
            if (show_mod) printf(" %10s %10s", "text", "image");
            printf("\n");
            for (int l = 0; l <= NL; l++) {
                if (l < NL) printf("  %-8d", l);
                else printf("  %-8s", "total");
                for (int m = 0; m < (show_mod ? NMOD : 1); m++) {
                    double den = (double)nflip_pos[m] * (l < NL ? 1 : NL);
                    printf(" %10.4f", den > 0 ? (double)flips[(size_t)m * (NL + 1) + l] / den : 0.0);
                }
                printf("\n");
            }
            printf("\n");
            routing_print("A", &rs[0], NL, E, K);
            routing_print("B", &rs[1], NL, E, K);
        }
        printf("\nfirst greedy divergence (from BOS, %zu steps): ", steps);
        if (!diverged) {
            printf("none\n");
        } else if (div < ng[0] && div < ng[1]) {
            size_t la, lb;
            const char *pa = parity_llama_tok_decode_piece(L.tok, g[0][div - 1], g[0][div], &la);
            const char *pb = parity_llama_tok_decode_piece(L.tok, g[1][div - 1], g[1][div], &lb);
            printf("position %zu: A token %d \"%.*s\", B token %d \"%.*s\"\n", div, (int)g[0][div],
                   (int)la, pa ? pa : "", (int)g[1][div], (int)lb, pb ? pb : "");
        } else {
            printf("position %zu: one generation stopped (BOS) before the other\n", div);
        }
    }
    if (o.manifest) {
        if (write_manifest(o.manifest, "a", &p[0], E > 0) || write_manifest(o.manifest, "b", &p[1], E > 0)) {
            rc = cli_input_error(cmd, "%s.a.json / %s.b.json: cannot write the manifests", o.manifest, o.manifest);
            goto done;
        }
        if (!o.markdown)
            printf("manifests: %s.a.json, %s.b.json (parity manifest diff ranks them)\n", o.manifest, o.manifest);
    }
    if (o.max_k3 >= 0 && !(sm[0].k3_mean <= o.max_k3)) {
        fprintf(stderr, "parity model parity: mean k3 %.3e above --max-k3 %.3e\n", sm[0].k3_mean, o.max_k3);
        rc = PARITY_EXIT_VERDICT;
    }
done:
    for (int k = 0; k < 3; k++) {
        free(lg[k]);
        free(lp[k]);
        parity_model_runner_free(r[k]);
    }
    for (int k = 0; k < 2; k++) {
        free(hd[k]);
        free(g[k]);
        free(rs[k].load);
        free(rs[k].entropy);
    }
    for (int m = 0; m < NMOD; m++) {
        parity_metrics_dist_free(dist[m]);
        parity_metrics_dist_free(fdist[m]);
    }
    free(ida), free(idb), free(dr), free(flips);
    model_cli_prompts_free(&P);
    model_cli_unload(&L);
    return rc;
}
