/* libFuzzer target: the two cache files parity reads back, selected by the input's first byte
 * (even: a noise-floor entry of `parity check`, src/verify/check_cache.c; odd: the bandwidth and
 * compute ceilings of `parity bench`, src/bench/bench_ceil.c), the rest of the input being the
 * file. Both are caches: anything malformed must be a miss (never a crash, never a value taken
 * from a damaged file). Properties checked: a floor hit happens only for the byte-exact file
 * check_cache_put writes for that key and value; a ceilings hit has the positive bandwidths and
 * peak the reader promises. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "src/bench/bench_impl.h"
#include "src/verify/check_cache.h"

#define FUZZ_KEY "parity 0.1.0 build fuzz; op gemm; workload fuzz; seed 1; threads 0; floor fp32_seq/2/1/0"

static char dir[512], entry[700], again[512];

/* A private cache folder with the entry of FUZZ_KEY written once by the writer: its file name
 * (floor-<hash of the key>) is what the reader opens. */
static void setup(void)
{
    const char *t = getenv("TMPDIR");
    if (!t || !*t) t = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/parity-fuzz-cache-%ld", t, (long)getpid());
    snprintf(again, sizeof again, "%s/again", dir);
    if (check_cache_put(dir, FUZZ_KEY, 0.5) != 0 || check_cache_put(again, FUZZ_KEY, 0.5) != 0) abort();
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "floor-", 6)) snprintf(entry, sizeof entry, "%s/%s", dir, e->d_name);
    if (d) closedir(d);
    if (!entry[0]) abort();
}

static void cleanup(void)
{
    char p[800];
    unlink(entry);
    snprintf(p, sizeof p, "%s%s", again, entry + strlen(dir));
    unlink(p);
    rmdir(again);
    rmdir(dir);
}

static int same_file(const char *a, const uint8_t *data, size_t size)
{
    FILE *f = fopen(a, "rb");
    if (!f) return 0;
    static uint8_t buf[20000];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    return n == size && memcmp(buf, data, size) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int once;
    if (!once++) {
        setup();
        atexit(cleanup);
    }
    if (size == 0) return 0;
    const uint8_t *file = data + 1;
    size_t n = size - 1;
    if (!(data[0] & 1)) {
        FILE *f = fopen(entry, "wb");
        if (!f) return 0;
        int ok = fwrite(file, 1, n, f) == n;
        if (fclose(f) != 0 || !ok) return 0;
        double q = 0;
        if (check_cache_get(dir, FUZZ_KEY, &q)) {
            /* a hit: the writer, given that value, writes exactly this file */
            char p[800];
            if (check_cache_put(again, FUZZ_KEY, q) != 0) return 0;
            snprintf(p, sizeof p, "%s%s", again, entry + strlen(dir));
            if (!same_file(p, file, n)) abort();
        }
        return 0;
    }
    const char *path = fuzz_write(0, "ceilings.txt", file, n);
    if (!path) return 0;
    parity_ceilings_t c;
    memset(&c, 0, sizeof c);
    if (bench_ceilings_cache_read(path, &c) == 0 &&
        !(c.copy_gbs > 0 && c.triad_gbs > 0 && c.peak_gflops_f32 > 0 && c.bw_gbs >= c.copy_gbs))
        abort(); /* a hit the caller could not use */
    return 0;
}
