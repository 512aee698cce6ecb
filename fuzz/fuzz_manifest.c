/* libFuzzer target: manifests (parity_manifest_parse: JSON, schema validation), and on a valid
 * one its JSON writer and the diff against itself, which must find no difference. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "parity/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    parity_manifest_t *m = NULL;
    parity_diag_t d;
    if (parity_manifest_parse(text, "fuzz.json", &m, &d) == PARITY_OK) {
        char *js = parity_manifest_to_json(m);
        parity_manifest_diff_t *df = NULL;
        size_t n = 0;
        if (parity_manifest_diff(m, m, &df, &n) == PARITY_OK && n != 0) abort(); /* a manifest differs from itself */
        free(df);
        /* what it writes reads back */
        parity_manifest_t *m2 = NULL;
        if (js && parity_manifest_parse(js, "fuzz-roundtrip.json", &m2, &d) != PARITY_OK) abort();
        parity_manifest_free(m2);
        free(js);
    }
    parity_manifest_free(m);
    free(text);
    return 0;
}
