/* bisect_report: the text report, the JSON (docs/bisect.md, "JSON") and the self-contained HTML
 * page (a per-module plot of output drift, introduced and inherited error against the floor)
 * of a parity_bisect result. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parity/bisect.h"

static const char *floor_name(int src)
{
    return src == 1 ? "repeat of A" : src == 2 ? "A vs golden" : "none";
}

static void jnum(FILE *f, double v)
{
    if (isnan(v) || isinf(v)) fputs("null", f);
    else fprintf(f, "%.6e", v);
}

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

static void ratio_str(char *buf, size_t cap, double intro, double floor)
{
    if (floor > 0) snprintf(buf, cap, "%.3gx", intro / floor);
    else snprintf(buf, cap, "%s", intro > 0 ? "inf" : "-");
}

void parity_bisect_print_text(FILE *f, const parity_bisect_opts_t *o, const parity_bisect_result_t *r)
{
    const parity_capture_t *A = o->a, *B = o->b;
    int src = r->n_mod ? r->mod[0].floor_source : 0;
    fprintf(f, "parity bisect: model %s, %zu modules, %zu rows\n", A->model, r->n_mod, A->rows);
    fprintf(f, "  A: %s (%s)\n  B: %s (%s)\n", o->name_a ? o->name_a : "A", A->path,
            o->name_b ? o->name_b : "B", B->path);
    fprintf(f, "  floor: %s%s%s; a module departs when its introduced error > %g x floor\n",
            floor_name(src), src == 1 ? " " : "", src == 1 && o->floor ? o->floor->path : "",
            o->floor_factor);
    for (const char *l = r->note; *l;) { /* one "note:" line per line of the notes */
        const char *e = strchr(l, '\n');
        int len = e ? (int)(e - l) : (int)strlen(l);
        fprintf(f, "  note: %.*s\n", len, l);
        l += len + (e ? 1 : 0);
    }
    if (r->first >= 0) {
        const parity_bisect_module_t *m = &r->mod[r->first];
        char rt[32];
        ratio_str(rt, sizeof rt, m->introduced, m->floor);
        fprintf(f, "first departing module: %s (%s): introduced %.3e (%s), floor %.3e (%s); "
                "inherited %.3e, output drift %.3e\n", m->name, m->kind, m->introduced,
                m->replayed ? "replayed on A's inputs" : "estimated from drift growth", m->floor, rt,
                m->inherited, m->drift_out);
    } else {
        fprintf(f, "first departing module: none (every module's introduced error is within %g x its floor)\n",
                o->floor_factor);
    }
    fprintf(f, "flat %g walk (SGLang/vLLM dump comparators, 1 - 2<a,b>/(|a|^2+|b|^2)): %s\n",
            o->flat_threshold, r->flat_first >= 0 ? r->mod[r->flat_first].name : "no module flagged");
    fprintf(f, "\n%-24s %-12s %10s %10s %10s %10s %10s %9s %10s\n", "module", "kind", "in drift",
            "out drift", "introduced", "inherited", "floor", "x floor", "cos-metric");
    for (size_t i = 0; i < r->n_mod; i++) {
        const parity_bisect_module_t *m = &r->mod[i];
        char rt[32];
        ratio_str(rt, sizeof rt, m->introduced, m->floor);
        fprintf(f, "%-24s %-12s %10.3e %10.3e %10.3e%c %9.3e %10.3e %9s %10.3e%s\n", m->name, m->kind,
                m->drift_in, m->drift_out, m->introduced, m->replayed ? ' ' : '~', m->inherited,
                m->floor, rt, m->cos_metric,
                (long)i == r->first ? "  <- first departing" : m->departs ? "  departs" : "");
    }
    fprintf(f, "(introduced: measured by replaying B's module on A's inputs; '~' estimated from drift growth)\n");
    fprintf(f, "\nranked by introduced / floor:");
    size_t shown = 0;
    for (size_t i = 0; i < r->n_mod && shown < 8; i++) {
        const parity_bisect_module_t *m = &r->mod[r->rank[i]];
        if (!m->departs) continue;
        char rt[32];
        ratio_str(rt, sizeof rt, m->introduced, m->floor);
        fprintf(f, "%s %zu. %s (%s)", shown ? "," : "", shown + 1, m->name, rt);
        shown++;
    }
    fprintf(f, "%s\n", shown ? "" : " no module departs");
    for (size_t i = 0; i < r->n_mod; i++) {
        const parity_bisect_module_t *m = &r->mod[i];
        if (!m->n_slices || i != (size_t)(r->first >= 0 ? r->first : 0)) continue;
        fprintf(f, "modality slices of %s (output drift):", m->name);
        for (int s = 0; s < m->n_slices; s++) fprintf(f, " %s %.3e", m->slice_name[s], m->slice_drift[s]);
        fprintf(f, "\n");
    }
    if (r->n_flips) {
        fprintf(f, "\nrouting flips: %zu (token rows whose top-k expert set differs)\n", r->n_flips);
        for (size_t i = 0; i < r->n_flips && i < 10; i++) {
            const parity_bisect_flip_t *x = &r->flips[i];
            fprintf(f, "  %s, sequence %zu token %zu: [", x->module, x->seq, x->token);
            for (int k = 0; k < x->k; k++) fprintf(f, "%s%d", k ? "," : "", (int)x->a[k]);
            fprintf(f, "] -> [");
            for (int k = 0; k < x->k; k++) fprintf(f, "%s%d", k ? "," : "", (int)x->b[k]);
            if (isnan(x->margin)) fprintf(f, "]\n");
            else fprintf(f, "], A's gate margin %.3e\n", x->margin);
        }
        if (r->n_flips > 10) fprintf(f, "  ... %zu more in --json\n", r->n_flips - 10);
    }
}

static void module_json(FILE *f, const parity_bisect_module_t *m, long idx)
{
    fprintf(f, "{\"index\": %ld, \"module\": ", idx);
    jstr(f, m->name);
    fprintf(f, ", \"kind\": ");
    jstr(f, m->kind);
    const char *k[] = {"drift_in", "drift_out", "max_abs_out", "cos_metric", "introduced", "inherited",
                       "floor", "drift_golden_a", "drift_golden_b"};
    double v[] = {m->drift_in, m->drift_out, m->max_abs_out, m->cos_metric, m->introduced,
                  m->inherited, m->floor, m->drift_golden_a, m->drift_golden_b};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        fprintf(f, ", \"%s\": ", k[i]);
        jnum(f, v[i]);
    }
    fprintf(f, ", \"introduced_from\": \"%s\", \"floor_from\": \"%s\", \"departs\": %s",
            m->replayed ? "replay" : "estimate", m->floor_source == 1 ? "repeat" : m->floor_source == 2 ? "golden" : "none",
            m->departs ? "true" : "false");
    if (m->n_slices) {
        fprintf(f, ", \"slices\": {");
        for (int s = 0; s < m->n_slices; s++) {
            fprintf(f, "%s", s ? ", " : "");
            jstr(f, m->slice_name[s]);
            fprintf(f, ": ");
            jnum(f, m->slice_drift[s]);
        }
        fprintf(f, "}");
    }
    fprintf(f, "}");
}

void parity_bisect_print_json(FILE *f, const parity_bisect_opts_t *o, const parity_bisect_result_t *r)
{
    fprintf(f, "{\"schema\": \"parity.bisect/1\", \"model\": ");
    jstr(f, o->a->model);
    fprintf(f, ", \"a\": {\"path\": ");
    jstr(f, o->a->path);
    fprintf(f, ", \"id\": ");
    jstr(f, o->a->id);
    fprintf(f, "}, \"b\": {\"path\": ");
    jstr(f, o->b->path);
    fprintf(f, ", \"id\": ");
    jstr(f, o->b->id);
    fprintf(f, "}, \"rows\": %zu, \"floor_factor\": %g, \"note\": ", o->a->rows, o->floor_factor);
    jstr(f, r->note);
    fprintf(f, ",\n \"first_departing\": ");
    if (r->first >= 0) {
        const parity_bisect_module_t *m = &r->mod[r->first];
        fprintf(f, "{\"module\": ");
        jstr(f, m->name);
        fprintf(f, ", \"index\": %ld, \"introduced\": ", r->first);
        jnum(f, m->introduced);
        fprintf(f, ", \"floor\": ");
        jnum(f, m->floor);
        fprintf(f, ", \"introduced_from\": \"%s\"}", m->replayed ? "replay" : "estimate");
    } else {
        fprintf(f, "null");
    }
    fprintf(f, ",\n \"flat_walk\": {\"threshold\": %g, \"metric\": \"1 - 2<a,b>/(|a|^2+|b|^2)\", \"module\": ",
            o->flat_threshold);
    if (r->flat_first >= 0) jstr(f, r->mod[r->flat_first].name);
    else fputs("null", f);
    fprintf(f, "},\n \"ranked\": [");
    for (size_t i = 0, c = 0; i < r->n_mod; i++)
        if (r->mod[r->rank[i]].departs) {
            fprintf(f, "%s", c++ ? ", " : "");
            jstr(f, r->mod[r->rank[i]].name);
        }
    fprintf(f, "],\n \"modules\": [\n");
    for (size_t i = 0; i < r->n_mod; i++) {
        fprintf(f, "  ");
        module_json(f, &r->mod[i], (long)i);
        fprintf(f, "%s\n", i + 1 < r->n_mod ? "," : "");
    }
    fprintf(f, " ],\n \"routing_flips\": [");
    for (size_t i = 0; i < r->n_flips; i++) {
        const parity_bisect_flip_t *x = &r->flips[i];
        fprintf(f, "%s\n  {\"module\": ", i ? "," : "");
        jstr(f, x->module);
        fprintf(f, ", \"row\": %zu, \"sequence\": %zu, \"token\": %zu, \"experts_a\": [", x->row, x->seq, x->token);
        for (int k = 0; k < x->k; k++) fprintf(f, "%s%d", k ? ", " : "", (int)x->a[k]);
        fprintf(f, "], \"experts_b\": [");
        for (int k = 0; k < x->k; k++) fprintf(f, "%s%d", k ? ", " : "", (int)x->b[k]);
        fprintf(f, "], \"gate_margin\": ");
        jnum(f, x->margin);
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
}

/* ------------------------------------------------------------------------------------------ */
/* HTML: one SVG, log10 of each series per module, the first departing module marked.         */
/* ------------------------------------------------------------------------------------------ */

static void hesc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

#define PLOT_W 960
#define PLOT_H 360
#define PAD_L 60
#define PAD_B 110

static double ylog(double v, double lo, double hi)
{
    double l = v > 0 ? log10(v) : lo;
    if (l < lo) l = lo;
    if (l > hi) l = hi;
    return 10 + (PLOT_H - 10 - PAD_B) * (hi - l) / (hi - lo);
}

static void series(FILE *f, const parity_bisect_result_t *r, int which, const char *color,
                   const char *dash, double lo, double hi, double dx)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\"%s points=\"", color, dash);
    for (size_t i = 0; i < r->n_mod; i++) {
        const parity_bisect_module_t *m = &r->mod[i];
        double v = which == 0 ? m->drift_out : which == 1 ? m->introduced : which == 2 ? m->inherited : m->floor;
        fprintf(f, "%.1f,%.1f ", PAD_L + dx * ((double)i + 0.5), ylog(v, lo, hi));
    }
    fprintf(f, "\"/>\n");
}

void parity_bisect_print_html(FILE *f, const parity_bisect_opts_t *o, const parity_bisect_result_t *r)
{
    double lo = 0, hi = -30;
    for (size_t i = 0; i < r->n_mod; i++) {
        const parity_bisect_module_t *m = &r->mod[i];
        double v[4] = {m->drift_out, m->introduced, m->inherited, m->floor};
        for (int k = 0; k < 4; k++)
            if (v[k] > 0 && isfinite(v[k])) {
                double l = log10(v[k]);
                if (l < lo) lo = l;
                if (l > hi) hi = l;
            }
    }
    lo = floor(lo) - 1, hi = ceil(hi > lo + 1 ? hi : lo + 2);
    double dx = r->n_mod ? (double)(PLOT_W - PAD_L - 10) / (double)r->n_mod : 1;
    fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>parity bisect</title>\n"
               "<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;"
               "font-size:13px}td,th{padding:2px 8px;text-align:right}td:first-child,th:first-child{"
               "text-align:left}tr.dep td{background:#fde2e2}tr.first td{background:#f9b4b4;font-weight:bold}"
               ".k span{margin-right:18px}</style></head><body>\n<h2>parity bisect: ");
    hesc(f, o->a->model);
    fprintf(f, "</h2>\n<p>A: <code>");
    hesc(f, o->a->path);
    fprintf(f, "</code> &nbsp; B: <code>");
    hesc(f, o->b->path);
    fprintf(f, "</code> &nbsp; %zu rows; a module departs when its introduced error exceeds %g &times; its floor.</p>\n",
            o->a->rows, o->floor_factor);
    fprintf(f, "<p><b>First departing module: ");
    if (r->first >= 0) {
        hesc(f, r->mod[r->first].name);
        fprintf(f, "</b> (introduced %.3e, floor %.3e)", r->mod[r->first].introduced, r->mod[r->first].floor);
    } else {
        fprintf(f, "none</b>");
    }
    fprintf(f, ". Flat %g walk (dump comparators): <b>", o->flat_threshold);
    hesc(f, r->flat_first >= 0 ? r->mod[r->flat_first].name : "no module flagged");
    fprintf(f, "</b>.</p>\n");
    if (r->note[0]) {
        fprintf(f, "<p><i>");
        hesc(f, r->note);
        fprintf(f, "</i></p>\n");
    }
    fprintf(f, "<svg width=\"%d\" height=\"%d\" xmlns=\"http://www.w3.org/2000/svg\" font-size=\"10\">\n",
            PLOT_W, PLOT_H);
    for (int e = (int)lo; e <= (int)hi; e++) {
        double y = ylog(pow(10, e), lo, hi);
        fprintf(f, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/>"
                   "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">1e%d</text>\n",
                PAD_L, PLOT_W - 10, y, y, PAD_L - 4, y + 3, e);
    }
    if (r->first >= 0) {
        double x = PAD_L + dx * ((double)r->first + 0.5);
        fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"10\" y2=\"%d\" stroke=\"#c00\" stroke-dasharray=\"2,2\"/>\n",
                x, x, PLOT_H - PAD_B);
    }
    series(f, r, 0, "#999", "", lo, hi, dx);
    series(f, r, 3, "#2a2", " stroke-dasharray=\"5,3\"", lo, hi, dx);
    series(f, r, 2, "#36c", "", lo, hi, dx);
    series(f, r, 1, "#d22", "", lo, hi, dx);
    for (size_t i = 0; i < r->n_mod; i++) {
        double x = PAD_L + dx * ((double)i + 0.5);
        fprintf(f, "<text transform=\"translate(%.1f,%d) rotate(-60)\" text-anchor=\"end\">", x + 3,
                PLOT_H - PAD_B + 8);
        hesc(f, r->mod[i].name);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n<p class=\"k\"><span style=\"color:#d22\">&#9644; introduced (B's module)</span>"
               "<span style=\"color:#36c\">&#9644; inherited</span><span style=\"color:#999\">&#9644; "
               "output drift B vs A</span><span style=\"color:#2a2\">- - floor</span> (relative L2, log "
               "scale; zero drawn at the bottom)</p>\n");
    fprintf(f, "<table><tr><th>module</th><th>kind</th><th>in drift</th><th>out drift</th>"
               "<th>introduced</th><th>from</th><th>inherited</th><th>floor</th><th>cos-metric</th></tr>\n");
    for (size_t i = 0; i < r->n_mod; i++) {
        const parity_bisect_module_t *m = &r->mod[i];
        fprintf(f, "<tr class=\"%s\"><td>", (long)i == r->first ? "first" : m->departs ? "dep" : "");
        hesc(f, m->name);
        fprintf(f, "</td><td>");
        hesc(f, m->kind);
        fprintf(f, "</td><td>%.3e</td><td>%.3e</td><td>%.3e</td><td>%s</td><td>%.3e</td><td>%.3e</td>"
                   "<td>%.3e</td></tr>\n", m->drift_in, m->drift_out, m->introduced,
                m->replayed ? "replay" : "estimate", m->inherited, m->floor, m->cos_metric);
    }
    fprintf(f, "</table>\n<p>%zu routing flips.</p>\n</body></html>\n", r->n_flips);
}
