/* JSON output shared by the CLI's reports: non-finite numbers as strings, atomic file writes
 * (a report is complete or absent), and the drift block of allreduce / moe reports. */
#ifndef PARITY_JSON_OUT_H
#define PARITY_JSON_OUT_H

#include <cjson/cJSON.h>

#include "parity/reduce.h"

/* A number; JSON has no inf/nan, so they are written as "inf", "-inf", "nan". */
cJSON *cli_json_num(double x);
/* Print root to path through a temporary file in the same folder and a rename. 0 or -1. */
int cli_json_write(const char *path, const cJSON *root);
/* The drift statistics of parity_reduce_drift as an object. */
cJSON *cli_drift_json(const parity_reduce_drift_t *d);

#endif
