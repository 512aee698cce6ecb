/* Status strings, diagnostics and the data-folder lookup used by every module. */
/* dladdr (the installed data folder) is a GNU extension. */
#define _GNU_SOURCE
#include "parity/status.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- the data folders --------------------------------------------------------------------- */

#ifndef PARITY_SOURCE_DIR
#define PARITY_SOURCE_DIR "."
#endif
/* Set by CMake from GNUInstallDirs; the defaults are its defaults for a /usr/local prefix. */
#ifndef PARITY_INSTALL_FULL_DATADIR
#define PARITY_INSTALL_FULL_DATADIR "/usr/local/share/parity"
#endif
#ifndef PARITY_INSTALL_BINDIR
#define PARITY_INSTALL_BINDIR "bin"
#endif
#ifndef PARITY_INSTALL_LIBDIR
#define PARITY_INSTALL_LIBDIR "lib"
#endif
#ifndef PARITY_INSTALL_DATADIR
#define PARITY_INSTALL_DATADIR "share"
#endif

static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static char install_dir[PATH_MAX + 64];

/* If `dir` ends in "/" + suffix, the length of what comes before; else 0. */
static size_t strip_suffix(const char *dir, const char *suffix)
{
    size_t n = strlen(dir), k = strlen(suffix);
    if (k == 0 || n <= k + 1 || strcmp(dir + n - k, suffix) != 0 || dir[n - k - 1] != '/') return 0;
    return n - k - 1;
}

/* The installed data folder: <prefix>/share/parity, <prefix> being the folder above the bin/ or
 * lib/ folder that holds the file with this code (dladdr), so that an install tree moved or made
 * with `cmake --install --prefix` finds its own data. Anything else (a build tree) falls back to
 * the configured prefix's folder. */
static void find_install_dir(void)
{
    snprintf(install_dir, sizeof install_dir, "%s", PARITY_INSTALL_FULL_DATADIR);
    Dl_info info;
    char real[PATH_MAX];
    if (!dladdr((const void *)install_dir, &info) || !info.dli_fname) return;
    /* Linked statically into a program, the file glibc names is the program's argv[0]: a bare
     * "parity" when it was started from PATH, which realpath would resolve against the working
     * directory. The kernel knows the program's real file. */
    if (!strchr(info.dli_fname, '/')) {
        ssize_t n = readlink("/proc/self/exe", real, sizeof real - 1);
        if (n <= 0) return;
        real[n] = '\0';
    } else if (!realpath(info.dli_fname, real)) {
        return;
    }
    char *slash = strrchr(real, '/');
    if (!slash || slash == real) return;
    *slash = '\0';
    size_t pre = strip_suffix(real, PARITY_INSTALL_BINDIR);
    if (!pre) pre = strip_suffix(real, PARITY_INSTALL_LIBDIR);
    if (!pre) return;
    snprintf(install_dir, sizeof install_dir, "%.*s/%s/parity", (int)pre, real, PARITY_INSTALL_DATADIR);
}

const char **parity_data_dirs(const char *dirs[3])
{
    const char *env = getenv("PARITY_DATA");
    pthread_once(&install_once, find_install_dir);
    dirs[0] = (env && *env) ? env : NULL;
    dirs[1] = install_dir;
    dirs[2] = PARITY_SOURCE_DIR "/data";
    return dirs;
}

parity_status_t parity_data_path(const char *name, char *out, size_t cap, parity_diag_t *diag)
{
    if (!name || !*name || !out || cap == 0)
        return parity_diag_set(diag, PARITY_E_INVALID, "parity_data_path: name and out are required");
    const char *dirs[3];
    parity_data_dirs(dirs);
    for (int i = 0; i < 3; i++) {
        if (!dirs[i]) continue;
        int n = snprintf(out, cap, "%s/%s", dirs[i], name);
        if (n < 0 || (size_t)n >= cap)
            return parity_diag_set(diag, PARITY_E_INVALID, "%s/%s: path too long", dirs[i], name);
        struct stat sb;
        if (stat(out, &sb) == 0 && S_ISREG(sb.st_mode)) return PARITY_OK;
    }
    out[0] = '\0';
    return parity_diag_set(diag, PARITY_E_IO,
                           "%s: data file not found; looked in $PARITY_DATA (%s), the installed data "
                           "folder (%s) and the source tree (%s). Set PARITY_DATA to a folder holding "
                           "it, or reinstall parity (cmake --install puts it under share/parity)",
                           name, dirs[0] ? dirs[0] : "unset", dirs[1], dirs[2]);
}
