/* Status codes and diagnostics shared by every libparity module.
 * The library never prints, exits or aborts on bad input: it returns a status and, where the
 * caller passes a parity_diag_t, a message naming the file, the field and what was expected. */
#ifndef PARITY_STATUS_H
#define PARITY_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PARITY_OK = 0,
    PARITY_E_INVALID = 1,     /* a bad argument from the caller (usage error) */
    PARITY_E_NOMEM = 2,       /* allocation failed */
    PARITY_E_IO = 3,          /* a file could not be opened, read or written */
    PARITY_E_FORMAT = 4,      /* input data is malformed (bad header, truncated, wrong dtype) */
    PARITY_E_UNSUPPORTED = 5, /* valid request that this build or op does not support */
    PARITY_E_NOTFOUND = 6     /* a named thing (op, kernel, format, file) does not exist */
} parity_status_t;

/* A short, static, human name for a status ("invalid argument", ...). Never NULL. */
const char *parity_status_str(parity_status_t st);

/* A diagnostic message filled by functions that can fail on user input. */
typedef struct {
    char msg[1024];
} parity_diag_t;

/* printf-style: writes into diag->msg when diag is non-NULL; returns st so a caller can write
 * `return parity_diag_set(d, PARITY_E_FORMAT, "%s: header: expected ...", path);`. */
parity_status_t parity_diag_set(parity_diag_t *diag, parity_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Exit codes of the CLI (docs/plugins.md, "parity check": exit status). */
enum {
    PARITY_EXIT_OK = 0,        /* everything faithful / within floor */
    PARITY_EXIT_VERDICT = 1,   /* a verdict failed */
    PARITY_EXIT_USAGE = 2,     /* usage error */
    PARITY_EXIT_INPUT = 3      /* input or I/O error */
};

/* Map a library status to the CLI exit code: INVALID -> 2, everything else non-OK -> 3. */
int parity_status_exit_code(parity_status_t st);

/* The real data parity ships (tinyshakespeare, GPT-2 BPE files, the stories260K model and
 * tokenizer; data/README.md says where each file comes from) is looked for in three places, in
 * this order, file by file:
 *   1. $PARITY_DATA, when set and non-empty;
 *   2. the installed data folder: <prefix>/share/parity, where <prefix> is found from the file
 *      that holds libparity's code (the `parity` executable or libparity.so), so a relocated
 *      `cmake --install --prefix P` works; failing that, the configured install prefix's;
 *   3. the source tree's data/ (the build-time PARITY_SOURCE_DIR/data).
 * parity_data_dirs writes the three folders (NULL where a place does not apply, e.g. $PARITY_DATA
 * unset) into dirs[0..3) and returns dirs. The strings are static; never NULL itself. */
const char **parity_data_dirs(const char *dirs[3]);

/* Full path of the data file `name` (a bare file name such as "tok512.bin") in the first of the
 * three places that holds it, written into out[0..cap). PARITY_OK when found; PARITY_E_IO when no
 * place holds it, with diag naming the file and the three places looked in; PARITY_E_INVALID
 * when name, out or cap is unusable or the path does not fit. */
parity_status_t parity_data_path(const char *name, char *out, size_t cap, parity_diag_t *diag);

#ifdef __cplusplus
}
#endif
#endif
