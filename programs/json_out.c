/* JSON output helpers of the CLI (see json_out.h). */
#include "json_out.h"

#include "parity/format.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

cJSON *cli_json_num(double x)
{
    char b[32];
    parity_format_decimal(x, b);
    /* NaN and inf are strings (JSON has no literal for them); finite values read back exactly */
    return isfinite(x) ? cJSON_CreateRaw(b) : cJSON_CreateString(b);
}

int cli_json_write(const char *path, const cJSON *root)
{
    char *text = cJSON_Print(root);
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    FILE *f = NULL;
    if (text && tmp) {
        snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
        f = fopen(tmp, "w");
    }
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok && f) remove(tmp);
    free(text);
    free(tmp);
    return ok ? 0 : -1;
}

cJSON *cli_drift_json(const parity_reduce_drift_t *d)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", (double)d->n);
    cJSON_AddNumberToObject(o, "n_differ", (double)d->n_differ);
    cJSON_AddItemToObject(o, "frac_differ", cli_json_num(d->frac_differ));
    cJSON_AddItemToObject(o, "max_ulp", cli_json_num(d->max_ulp));
    cJSON_AddItemToObject(o, "mean_ulp", cli_json_num(d->mean_ulp));
    cJSON_AddItemToObject(o, "p50_ulp", cli_json_num(d->p50_ulp));
    cJSON_AddItemToObject(o, "p90_ulp", cli_json_num(d->p90_ulp));
    cJSON_AddItemToObject(o, "p99_ulp", cli_json_num(d->p99_ulp));
    cJSON *h = cJSON_AddArrayToObject(o, "ulp_hist");
    for (int i = 0; i < 6; i++) cJSON_AddItemToArray(h, cJSON_CreateNumber((double)d->ulp_hist[i]));
    cJSON_AddItemToObject(o, "max_abs", cli_json_num(d->max_abs));
    cJSON_AddItemToObject(o, "max_rel", cli_json_num(d->max_rel));
    cJSON_AddItemToObject(o, "mean_rel", cli_json_num(d->mean_rel));
    cJSON_AddItemToObject(o, "nmse", cli_json_num(d->nmse));
    cJSON_AddItemToObject(o, "rel_floor", cli_json_num(d->rel_floor));
    return o;
}
