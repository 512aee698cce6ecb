/* JSON output helpers of the CLI (see json_out.h); numbers and atomic files: src/core/json_util.c. */
#include "json_out.h"


cJSON *cli_drift_json(const parity_reduce_drift_t *d)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", (double)d->n);
    cJSON_AddNumberToObject(o, "n_differ", (double)d->n_differ);
    cJSON_AddItemToObject(o, "frac_differ", parity_json_num(d->frac_differ));
    cJSON_AddItemToObject(o, "max_ulp", parity_json_num(d->max_ulp));
    cJSON_AddItemToObject(o, "mean_ulp", parity_json_num(d->mean_ulp));
    cJSON_AddItemToObject(o, "p50_ulp", parity_json_num(d->p50_ulp));
    cJSON_AddItemToObject(o, "p90_ulp", parity_json_num(d->p90_ulp));
    cJSON_AddItemToObject(o, "p99_ulp", parity_json_num(d->p99_ulp));
    cJSON *h = cJSON_AddArrayToObject(o, "ulp_hist");
    for (int i = 0; i < 6; i++) cJSON_AddItemToArray(h, cJSON_CreateNumber((double)d->ulp_hist[i]));
    cJSON_AddItemToObject(o, "max_abs", parity_json_num(d->max_abs));
    cJSON_AddItemToObject(o, "max_rel", parity_json_num(d->max_rel));
    cJSON_AddItemToObject(o, "mean_rel", parity_json_num(d->mean_rel));
    cJSON_AddItemToObject(o, "nmse", parity_json_num(d->nmse));
    cJSON_AddItemToObject(o, "rel_floor", parity_json_num(d->rel_floor));
    return o;
}
