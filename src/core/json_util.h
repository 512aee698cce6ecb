/* JSON numbers and atomic JSON files, shared by the library's reports (src/verify/report.c) and
 * the CLI's (programs/json_out.c). An internal header of the bottom module: not installed. */
#ifndef PARITY_CORE_JSON_UTIL_H
#define PARITY_CORE_JSON_UTIL_H

#include <cjson/cJSON.h>

/* A number; JSON has no inf/nan, so they are written as "inf", "-inf", "nan"; finite values
 * as the shortest decimal that reads back exactly. */
cJSON *parity_json_num(double x);
/* Print root to path through a temporary file in the same folder and a rename (a report is
 * complete or absent). 0 or -1. */
int parity_json_write(const char *path, const cJSON *root);

#endif
