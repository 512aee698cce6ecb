/* Status strings, diagnostics and the data-folder lookup used by every module. */
#include "parity/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const char *parity_status_str(parity_status_t st)
{
    switch (st) {
    case PARITY_OK: return "ok";
    case PARITY_E_INVALID: return "invalid argument";
    case PARITY_E_NOMEM: return "out of memory";
    case PARITY_E_IO: return "I/O error";
    case PARITY_E_FORMAT: return "malformed input";
    case PARITY_E_UNSUPPORTED: return "unsupported";
    case PARITY_E_NOTFOUND: return "not found";
    }
    return "unknown status";
}

parity_status_t parity_diag_set(parity_diag_t *diag, parity_status_t st, const char *fmt, ...)
{
    if (diag) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(diag->msg, sizeof diag->msg, fmt, ap);
        va_end(ap);
    }
    return st;
}

int parity_status_exit_code(parity_status_t st)
{
    if (st == PARITY_OK) return PARITY_EXIT_OK;
    if (st == PARITY_E_INVALID) return PARITY_EXIT_USAGE;
    return PARITY_EXIT_INPUT;
}

const char *parity_data_dir(void)
{
    const char *env = getenv("PARITY_DATA");
    if (env && *env) return env;
#ifdef PARITY_SOURCE_DIR
    return PARITY_SOURCE_DIR "/../shared/data";
#else
    return "../shared/data";
#endif
}
