/* The noise-floor cache of `parity check` (check_cache.h, docs/check-speed.md): one small text
 * file per floor, named by a hash of its key and holding the key itself, the value as a C99 hex
 * float (exact) and a checksum; anything that does not match to the byte is a miss. */
/* dladdr (which file holds this code: the build's identity) is a GNU extension. */
#define _GNU_SOURCE
#include "src/verify/check_cache.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "parity/verify.h"
#include "parity/version.h"

#define CACHE_MAGIC "parity floor cache 1\n"
#define CACHE_MAX_BYTES 16384

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}
#define FNV_SEED 0xcbf29ce484222325ULL

/* ---- the build's identity ---- */

static char build_id[64];
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

/* A hash of the whole file that holds this code (the parity executable, or libparity.so when
 * linked dynamically): the catalog kernels, the references and the error model are all in it, so
 * any change to them is a new build id. A few MB hashed once per run (~10 ms). */
static void find_build_id(void)
{
    Dl_info info;
    char real[PATH_MAX];
    if (!dladdr((const void *)build_id, &info) || !info.dli_fname || !realpath(info.dli_fname, real))
        return;
    FILE *f = fopen(real, "rb");
    if (!f) return;
    uint64_t h = FNV_SEED;
    unsigned char buf[1 << 16];
    size_t n, total = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        h = fnv1a(h, buf, n);
        total += n;
    }
    int err = ferror(f);
    fclose(f);
    if (err || total == 0) return;
    snprintf(build_id, sizeof build_id, "%016llx-%zu", (unsigned long long)h, total);
}

/* ---- keys ---- */

int parity_check_cache_default_dir(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/') n = snprintf(buf, cap, "%s/parity", xdg); /* the spec: absolute only */
    else if (home && home[0]) n = snprintf(buf, cap, "%s/.cache/parity", home);
    else return -1;
    return n > 0 && (size_t)n < cap ? 0 : -1;
}

int check_floor_key(char *buf, size_t cap, const parity_op_t *op, const parity_workload_t *wl,
                    uint64_t seed, const parity_abi_kernel_t *const *floor_k, int n_floor,
                    int n_threads)
{
    pthread_once(&build_once, find_build_id);
    if (!build_id[0]) return -1;
    /* Every field of the workload that an op's build reads, printed exactly: the shape, and every
     * parameter of the op's family (its field table; %a for doubles). */
    char params[1024];
    int np = parity_workload_describe(op->wl_family, wl, 1, params, sizeof params);
    if (np < 0 || (size_t)np >= sizeof params) return -1;
    int n = snprintf(buf, cap,
                     "parity %s build %s; op %s; workload %s n %lld d %lld v %lld %s production %d; "
                     "seed %llu; threads %d; floor",
                     PARITY_VERSION_STRING, build_id, op->name, wl->name, (long long)wl->n,
                     (long long)wl->d, (long long)wl->v, params, wl->production,
                     (unsigned long long)seed, n_threads);
    for (int i = 0; i < n_floor && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, " %s/%d/%d/%u", floor_k[i]->name,
                      (int)floor_k[i]->in_dtype, (int)floor_k[i]->out_dtype, (unsigned)floor_k[i]->flags);
    if (n <= 0 || (size_t)n >= cap) return -1;
    for (char *p = buf; *p; p++)
        if (*p == '\n') *p = ' '; /* one line in the file */
    return 0;
}

static void entry_path(char *buf, size_t cap, const char *dir, const char *key)
{
    snprintf(buf, cap, "%s/floor-%016llx", dir, (unsigned long long)fnv1a(FNV_SEED, key, strlen(key)));
}

/* The file's text for (key, q); returns its length or -1. */
static int entry_text(char *buf, size_t cap, const char *key, double q)
{
    int n = snprintf(buf, cap, CACHE_MAGIC "key %s\nq %a\n", key, q);
    if (n <= 0 || (size_t)n + 32 >= cap) return -1;
    uint64_t h = fnv1a(FNV_SEED, buf, (size_t)n);
    n += snprintf(buf + n, cap - (size_t)n, "sum %016llx\n", (unsigned long long)h);
    return n;
}

int check_cache_get(const char *dir, const char *key, double *q)
{
    char path[PATH_MAX];
    entry_path(path, sizeof path, dir, key);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char got[CACHE_MAX_BYTES + 1], want[CACHE_MAX_BYTES + 1];
    size_t n = fread(got, 1, CACHE_MAX_BYTES + 1, f);
    fclose(f);
    if (n == 0 || n > CACHE_MAX_BYTES) return 0;
    got[n] = 0;
    /* Parse q from the file, then rebuild the whole text from (key, q): only a byte-identical
     * file is a hit, so truncation, a flipped bit, a foreign key or a stale format all miss. */
    char prefix[CACHE_MAX_BYTES];
    int pn = snprintf(prefix, sizeof prefix, CACHE_MAGIC "key %s\nq ", key);
    if (pn <= 0 || (size_t)pn >= sizeof prefix || strncmp(got, prefix, (size_t)pn) != 0) return 0;
    char *end = NULL;
    errno = 0;
    double v = strtod(got + pn, &end);
    if (errno != 0 || end == got + pn || *end != '\n') return 0;
    int wn = entry_text(want, sizeof want, key, v);
    if (wn < 0 || (size_t)wn != n || memcmp(want, got, n) != 0) return 0;
    *q = v;
    return 1;
}

/* mkdir -p with mode 0700 (a cache is private to its user). */
static int make_dirs(const char *dir)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", dir) >= (int)sizeof tmp) return -1;
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0700) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

int check_cache_put(const char *dir, const char *key, double q)
{
    char text[CACHE_MAX_BYTES + 1];
    int n = entry_text(text, sizeof text, key, q);
    if (n < 0 || make_dirs(dir) != 0) return -1;
    char path[PATH_MAX], tmp[PATH_MAX + 32];
    entry_path(path, sizeof path, dir, key);
    /* The temporary name is unique per process, so concurrent checks (ranks, jobs, users of a
     * shared folder) never write into one another's file; rename replaces atomically. */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return -1;
    int ok = fwrite(text, 1, (size_t)n, f) == (size_t)n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}
