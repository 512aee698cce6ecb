/* JSON output shared by the CLI's reports: non-finite numbers as strings, atomic file writes
 * (a report is complete or absent), and the drift block of allreduce / moe reports. */
#ifndef PARITY_JSON_OUT_H
#define PARITY_JSON_OUT_H

#include <cjson/cJSON.h>

#include "parity/reduce.h"
#include "src/core/json_util.h" /* parity_json_num, parity_json_write: the library's, shared */
/* The drift statistics of parity_reduce_drift as an object. */
cJSON *cli_drift_json(const parity_reduce_drift_t *d);

#endif
