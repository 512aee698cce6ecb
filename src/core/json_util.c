/* src/core/json_util.h */
#include "src/core/json_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "parity/format.h"

cJSON *parity_json_num(double x)
{
    char b[32];
    parity_format_decimal(x, b);
    /* NaN and inf are strings (JSON has no literal for them); finite values read back exactly */
    return isfinite(x) ? cJSON_CreateRaw(b) : cJSON_CreateString(b);
}

int parity_json_write(const char *path, const cJSON *root)
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
