/* Machine ceilings for the speed of light: memory bandwidth from STREAM-like copy and triad over
 * arrays several times the last-level cache, and the peak fp32/fp64 rate from independent
 * multiply-add chains on every core; cached per machine (CPU model + core count + threads).
 * Deliberately not here: what an op costs (bench_cost.c), timing kernels (bench.c). A GPU path
 * fills parity_ceilings_t from its own probes with device = "cuda". */
#include "parity/bench.h"
#include "src/bench/bench_impl.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/core/internal.h"
#include "src/core/parallel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PARITY_X86_PEAK 1
#endif

/* ---- STREAM -------------------------------------------------------------------------------- */

typedef struct {
    double *a;
    const double *b, *c;
    double s;
} stream_ctx_t;

static void copy_range(void *p, int64_t lo, int64_t hi, int t)
{
    (void)t;
    stream_ctx_t *x = p;
    double *restrict a = x->a;
    const double *restrict b = x->b;
    for (int64_t i = lo; i < hi; i++) a[i] = b[i];
}

static void triad_range(void *p, int64_t lo, int64_t hi, int t)
{
    (void)t;
    stream_ctx_t *x = p;
    double *restrict a = x->a;
    const double *restrict b = x->b, *restrict c = x->c;
    double s = x->s;
    for (int64_t i = lo; i < hi; i++) a[i] = b[i] + s * c[i];
}

static double stream_run(parity_range_fn fn, stream_ctx_t *ctx, int64_t n, int n_threads,
                         int reps, double bytes_per_elem, double *worst_gbs)
{
    double best = 0, worst = INFINITY;
    if (reps < 1) reps = 1;
    for (int r = 0; r < reps; r++) {
        double t0 = parity_now();
        parity_parallel_for(n, n_threads, fn, ctx);
        double dt = parity_now() - t0;
        double gbs = dt > 0 ? bytes_per_elem * (double)n / dt * 1e-9 : 0;
        if (gbs > best) best = gbs;
        if (gbs < worst) worst = gbs;
    }
    if (worst_gbs) *worst_gbs = worst;
    return best;
}

double parity_bench_stream_copy(double *a, const double *b, int64_t n, int n_threads, int reps)
{
    stream_ctx_t ctx = {a, b, NULL, 0};
    return stream_run(copy_range, &ctx, n, n_threads, reps, 16.0, NULL);
}

double parity_bench_stream_triad(double *a, const double *b, const double *c, int64_t n,
                                 int n_threads, int reps)
{
    stream_ctx_t ctx = {a, b, c, 3.0};
    return stream_run(triad_range, &ctx, n, n_threads, reps, 24.0, NULL);
}

static void init_range(void *p, int64_t lo, int64_t hi, int t)
{
    (void)t;
    stream_ctx_t *x = p;
    /* First touch from the threads that will stream the range (page placement). */
    for (int64_t i = lo; i < hi; i++) {
        x->a[i] = 0.0;
        ((double *)x->b)[i] = 1.0;
        ((double *)x->c)[i] = 2.0;
    }
}

/* ---- peak flop rate ------------------------------------------------------------------------ */

/* Portable probe: 8 x 8 independent chains x = x*m + a (a multiply and an add, separately
 * rounded: what -ffp-contract=off code can reach). */
typedef float v8f __attribute__((vector_size(32)));
typedef double v4d __attribute__((vector_size(32)));

#define CHAINS8(T, x) T x##0 = x, x##1 = x, x##2 = x, x##3 = x, x##4 = x, x##5 = x, x##6 = x, x##7 = x
static double peak_portable_f32(int64_t iters)
{
    v8f m = {0}, a = {0}, init = {0};
    m += 0.9999999f;
    a += 1e-7f;
    init += 0.5f;
    CHAINS8(v8f, init);
    for (int64_t i = 0; i < iters; i++) {
        init0 = init0 * m + a; init1 = init1 * m + a; init2 = init2 * m + a; init3 = init3 * m + a;
        init4 = init4 * m + a; init5 = init5 * m + a; init6 = init6 * m + a; init7 = init7 * m + a;
    }
    v8f s = init0 + init1 + init2 + init3 + init4 + init5 + init6 + init7;
    return (double)s[0]; /* keeps the loop alive */
}
static double peak_portable_f64(int64_t iters)
{
    v4d m = {0}, a = {0}, init = {0};
    m += 0.9999999;
    a += 1e-7;
    init += 0.5;
    CHAINS8(v4d, init);
    for (int64_t i = 0; i < iters; i++) {
        init0 = init0 * m + a; init1 = init1 * m + a; init2 = init2 * m + a; init3 = init3 * m + a;
        init4 = init4 * m + a; init5 = init5 * m + a; init6 = init6 * m + a; init7 = init7 * m + a;
    }
    v4d s = init0 + init1 + init2 + init3 + init4 + init5 + init6 + init7;
    return s[0];
}
#define PORTABLE_FLOPS_F32 (8.0 * 8 * 2) /* per iteration */
#define PORTABLE_FLOPS_F64 (8.0 * 4 * 2)

#ifdef PARITY_X86_PEAK
/* The machine's own limit: fused multiply-add on the widest vectors it has, 12 chains (enough
 * to cover FMA latency x throughput on current cores). */
#define FMA12(F, x, m, a)                                                                        \
    x##0 = F(x##0, m, a); x##1 = F(x##1, m, a); x##2 = F(x##2, m, a); x##3 = F(x##3, m, a);      \
    x##4 = F(x##4, m, a); x##5 = F(x##5, m, a); x##6 = F(x##6, m, a); x##7 = F(x##7, m, a);      \
    x##8 = F(x##8, m, a); x##9 = F(x##9, m, a); x##10 = F(x##10, m, a); x##11 = F(x##11, m, a)
#define DECL12(T, x, v) T x##0 = v, x##1 = v, x##2 = v, x##3 = v, x##4 = v, x##5 = v, x##6 = v, \
    x##7 = v, x##8 = v, x##9 = v, x##10 = v, x##11 = v
#define SUM12(add, x) add(add(add(add(x##0, x##1), add(x##2, x##3)), add(add(x##4, x##5), \
    add(x##6, x##7))), add(add(x##8, x##9), add(x##10, x##11)))

__attribute__((target("avx512f"))) static double peak_avx512_f32(int64_t iters)
{
    __m512 m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
    DECL12(__m512, z, _mm512_set1_ps(0.5f));
    for (int64_t i = 0; i < iters; i++) { FMA12(_mm512_fmadd_ps, z, m, a); }
    __m512 s = SUM12(_mm512_add_ps, z);
    return (double)_mm512_reduce_add_ps(s);
}
__attribute__((target("avx512f"))) static double peak_avx512_f64(int64_t iters)
{
    __m512d m = _mm512_set1_pd(0.9999999), a = _mm512_set1_pd(1e-7);
    DECL12(__m512d, z, _mm512_set1_pd(0.5));
    for (int64_t i = 0; i < iters; i++) { FMA12(_mm512_fmadd_pd, z, m, a); }
    __m512d s = SUM12(_mm512_add_pd, z);
    return _mm512_reduce_add_pd(s);
}
__attribute__((target("avx2,fma"))) static double peak_avx2_f32(int64_t iters)
{
    __m256 m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
    DECL12(__m256, z, _mm256_set1_ps(0.5f));
    for (int64_t i = 0; i < iters; i++) { FMA12(_mm256_fmadd_ps, z, m, a); }
    __m256 s = SUM12(_mm256_add_ps, z);
    float out[8];
    _mm256_storeu_ps(out, s);
    return (double)out[0];
}
__attribute__((target("avx2,fma"))) static double peak_avx2_f64(int64_t iters)
{
    __m256d m = _mm256_set1_pd(0.9999999), a = _mm256_set1_pd(1e-7);
    DECL12(__m256d, z, _mm256_set1_pd(0.5));
    for (int64_t i = 0; i < iters; i++) { FMA12(_mm256_fmadd_pd, z, m, a); }
    __m256d s = SUM12(_mm256_add_pd, z);
    double out[4];
    _mm256_storeu_pd(out, s);
    return out[0];
}
#endif

typedef struct {
    double (*fn)(int64_t);
    int64_t iters;
    volatile double sink[64];
} peak_ctx_t;

static void peak_range(void *p, int64_t lo, int64_t hi, int t)
{
    peak_ctx_t *x = p;
    for (int64_t i = lo; i < hi; i++) x->sink[t & 63] += x->fn(x->iters);
}

/* Best GFLOP/s of `reps` runs of fn on every thread, flops_per_iter per call iteration. */
static double peak_measure(double (*fn)(int64_t), double flops_per_iter, int n_threads, int reps)
{
    peak_ctx_t ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.fn = fn;
    /* Calibrate: iterations for about 20 ms on one thread. */
    int64_t it = 1 << 14;
    for (;;) {
        double t0 = parity_now();
        ctx.sink[0] += fn(it);
        double dt = parity_now() - t0;
        if (dt > 0.004 || it > ((int64_t)1 << 34)) {
            double per = dt > 0 ? dt / (double)it : 1e-9;
            it = (int64_t)(0.02 / per) + 1;
            break;
        }
        it *= 4;
    }
    ctx.iters = it;
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = parity_now();
        parity_parallel_for(n_threads, n_threads, peak_range, &ctx);
        double dt = parity_now() - t0;
        double g = dt > 0 ? flops_per_iter * (double)it * n_threads / dt * 1e-9 : 0;
        if (g > best) best = g;
    }
    return best;
}

static void measure_peaks(int n_threads, int reps, double *f32, double *f64)
{
    *f32 = peak_measure(peak_portable_f32, PORTABLE_FLOPS_F32, n_threads, reps);
    *f64 = peak_measure(peak_portable_f64, PORTABLE_FLOPS_F64, n_threads, reps);
#ifdef PARITY_X86_PEAK
    __builtin_cpu_init();
    double a = 0, b = 0;
    if (__builtin_cpu_supports("avx512f")) {
        a = peak_measure(peak_avx512_f32, 12.0 * 16 * 2, n_threads, reps);
        b = peak_measure(peak_avx512_f64, 12.0 * 8 * 2, n_threads, reps);
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        a = peak_measure(peak_avx2_f32, 12.0 * 8 * 2, n_threads, reps);
        b = peak_measure(peak_avx2_f64, 12.0 * 4 * 2, n_threads, reps);
    }
    if (a > *f32) *f32 = a;
    if (b > *f64) *f64 = b;
#endif
}

/* ---- machine identity ---------------------------------------------------------------------- */

static void cpu_model(char *out, size_t len)
{
    snprintf(out, len, "unknown-cpu");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0 || strncmp(line, "Processor", 9) == 0 ||
            strncmp(line, "cpu model", 9) == 0) {
            char *c = strchr(line, ':');
            if (!c) continue;
            c++;
            while (*c == ' ' || *c == '\t') c++;
            size_t n = strcspn(c, "\n");
            if (n == 0) continue;
            snprintf(out, len, "%.*s", (int)n, c);
            break;
        }
    }
    fclose(f);
}

static int64_t llc_size(void)
{
    int64_t best = 0;
#ifdef _SC_LEVEL3_CACHE_SIZE
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 > 0) best = l3;
#endif
    if (best > 0) return best;
    for (int i = 0; i < 8; i++) {
        char p[128];
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(p, "r");
        if (!f) continue;
        long long v = 0;
        char unit = 0;
        if (fscanf(f, "%lld%c", &v, &unit) >= 1) {
            int64_t b = unit == 'K' ? v * 1024 : unit == 'M' ? v * 1024 * 1024 : v;
            if (b > best) best = b;
        }
        fclose(f);
    }
    return best;
}

static int64_t avail_memory(void)
{
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || psz <= 0) return (int64_t)4 << 30;
    return (int64_t)pages * psz;
}

/* ---- cache ---------------------------------------------------------------------------------- */

static int cache_file(const parity_ceilings_t *c, int64_t array_bytes, char *path, size_t len)
{
    char dir[300];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(dir, sizeof dir, "%s/parity", xdg);
    else if (home && home[0]) snprintf(dir, sizeof dir, "%s/.cache/parity", home);
    else return -1;
    char key[104];
    size_t k = 0;
    for (const char *p = c->model; *p && k + 1 < 100; p++)
        key[k++] = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '-';
    key[k] = 0;
    /* A probe size the caller forced is part of the key: small test probes never stand in for
     * the real ceilings. */
    if (array_bytes > 0)
        snprintf(path, len, "%s/ceilings-%s-%s-%dc-%dt-%lldB.txt", dir, c->device, key, c->cores,
                 c->threads, (long long)array_bytes);
    else
        snprintf(path, len, "%s/ceilings-%s-%s-%dc-%dt.txt", dir, c->device, key, c->cores, c->threads);
    return 0;
}

static int mkdir_p(const char *file)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", file);
    char *slash = strrchr(tmp, '/');
    if (!slash) return -1;
    *slash = 0;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
    return 0;
}

int bench_ceilings_cache_read(const char *path, parity_ceilings_t *c)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[256];
    int got = 0;
    if (!fgets(line, sizeof line, f) || strncmp(line, "parity-ceilings 1", 17) != 0) {
        fclose(f);
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        char k[64];
        double v;
        if (sscanf(line, "%63s %lf", k, &v) != 2) continue;
        int bytes = strcmp(k, "llc_bytes") == 0 || strcmp(k, "array_bytes") == 0;
        /* Sizes become integers: a value no int64_t holds (or NaN) is a damaged file, a miss
         * (converting it would be undefined behaviour: fuzz_caches found 1e300). */
        if (bytes && !(v >= 0 && v <= 0x1p62)) {
            fclose(f);
            return -1;
        }
        if (strcmp(k, "llc_bytes") == 0) { c->llc_bytes = (int64_t)v; got |= 1; }
        else if (strcmp(k, "array_bytes") == 0) { c->array_bytes = (int64_t)v; got |= 2; }
        else if (strcmp(k, "copy_gbs") == 0) { c->copy_gbs = v; got |= 4; }
        else if (strcmp(k, "triad_gbs") == 0) { c->triad_gbs = v; got |= 8; }
        else if (strcmp(k, "copy_spread") == 0) { c->copy_spread = v; got |= 16; }
        else if (strcmp(k, "triad_spread") == 0) { c->triad_spread = v; got |= 32; }
        else if (strcmp(k, "peak_gflops_f32") == 0) { c->peak_gflops_f32 = v; got |= 64; }
        else if (strcmp(k, "peak_gflops_f64") == 0) { c->peak_gflops_f64 = v; got |= 128; }
        else if (strcmp(k, "seconds") == 0) { c->seconds = v; got |= 256; }
    }
    fclose(f);
    if (got != 511 || !(c->copy_gbs > 0) || !(c->triad_gbs > 0) || !(c->peak_gflops_f32 > 0))
        return -1;
    c->bw_gbs = c->copy_gbs > c->triad_gbs ? c->copy_gbs : c->triad_gbs;
    return 0;
}

static int cache_write(const char *path, const parity_ceilings_t *c)
{
    if (mkdir_p(path) != 0) return -1;
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return -1;
    fprintf(f, "parity-ceilings 1\n# %s, %d cores, %d threads\n", c->model, c->cores, c->threads);
    fprintf(f, "llc_bytes %lld\narray_bytes %lld\n", (long long)c->llc_bytes,
            (long long)c->array_bytes);
    fprintf(f, "copy_gbs %.17g\ntriad_gbs %.17g\ncopy_spread %.17g\ntriad_spread %.17g\n",
            c->copy_gbs, c->triad_gbs, c->copy_spread, c->triad_spread);
    fprintf(f, "peak_gflops_f32 %.17g\npeak_gflops_f64 %.17g\nseconds %.17g\n", c->peak_gflops_f32,
            c->peak_gflops_f64, c->seconds);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        remove(tmp);
        return -1;
    }
    return 0;
}

/* ---- public ----------------------------------------------------------------------------------- */

void parity_ceiling_opts_default(parity_ceiling_opts_t *o)
{
    memset(o, 0, sizeof *o);
    o->reps = 5;
    o->use_cache = 1;
}

parity_status_t parity_bench_ceilings(const parity_ceiling_opts_t *o, parity_ceilings_t *out,
                                      parity_diag_t *diag)
{
    parity_ceiling_opts_t def;
    if (!o) {
        parity_ceiling_opts_default(&def);
        o = &def;
    }
    if (!out) return parity_diag_set(diag, PARITY_E_INVALID, "ceilings: NULL output");
    memset(out, 0, sizeof *out);
    snprintf(out->device, sizeof out->device, "cpu");
    cpu_model(out->model, sizeof out->model);
    out->cores = parity_num_threads();
    out->threads = o->n_threads > 0 ? o->n_threads : out->cores;
    out->llc_bytes = llc_size();
    int reps = o->reps > 0 ? o->reps : 5;

    char path[512] = "";
    int have_path = o->use_cache && cache_file(out, o->array_bytes, path, sizeof path) == 0;
    if (have_path) {
        snprintf(out->cache_path, sizeof out->cache_path, "%s", path);
        if (!o->remeasure && bench_ceilings_cache_read(path, out) == 0) {
            out->from_cache = 1;
            return PARITY_OK;
        }
    }

    double t0 = parity_now();
    int64_t bytes = o->array_bytes;
    if (bytes <= 0) {
        bytes = 4 * out->llc_bytes;
        if (bytes < ((int64_t)64 << 20)) bytes = (int64_t)64 << 20;
        int64_t cap = avail_memory() / 12;
        if (bytes > cap) bytes = cap;
        if (bytes < ((int64_t)8 << 20)) bytes = (int64_t)8 << 20;
    }
    int64_t n = bytes / (int64_t)sizeof(double);
    out->array_bytes = n * (int64_t)sizeof(double);
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b),
           *c = malloc((size_t)n * sizeof *c);
    if (!a || !b || !c) {
        free(a); free(b); free(c);
        return parity_diag_set(diag, PARITY_E_NOMEM,
                               "ceilings: cannot allocate 3 STREAM arrays of %lld bytes",
                               (long long)out->array_bytes);
    }
    stream_ctx_t ctx = {a, b, c, 3.0};
    parity_parallel_for(n, out->threads, init_range, &ctx);
    double worst;
    out->copy_gbs = stream_run(copy_range, &ctx, n, out->threads, reps, 16.0, &worst);
    out->copy_spread = out->copy_gbs > 0 ? (out->copy_gbs - worst) / out->copy_gbs : 0;
    out->triad_gbs = stream_run(triad_range, &ctx, n, out->threads, reps, 24.0, &worst);
    out->triad_spread = out->triad_gbs > 0 ? (out->triad_gbs - worst) / out->triad_gbs : 0;
    free(a); free(b); free(c);
    out->bw_gbs = out->copy_gbs > out->triad_gbs ? out->copy_gbs : out->triad_gbs;
    measure_peaks(out->threads, reps < 3 ? reps : 3, &out->peak_gflops_f32, &out->peak_gflops_f64);
    out->seconds = parity_now() - t0;
    if (have_path && cache_write(path, out) != 0) out->cache_path[0] = 0; /* never an error */
    return PARITY_OK;
}

double parity_bench_sol(const parity_cost_t *cost, const parity_ceilings_t *ceil)
{
    if (!cost || !ceil || !(ceil->bw_gbs > 0)) return NAN;
    double peak = cost->flop_dtype && strcmp(cost->flop_dtype, "fp64") == 0 ? ceil->peak_gflops_f64
                                                                           : ceil->peak_gflops_f32;
    double tb = cost->bytes / (ceil->bw_gbs * 1e9);
    double tf = peak > 0 ? cost->flops / (peak * 1e9) : 0;
    return tb > tf ? tb : tf;
}

double parity_bench_score(double t_k, double t_sol, double t_b)
{
    if (!(t_k > 0) || !(t_b > 0) || !(t_sol >= 0) || !(t_b > t_sol)) return NAN;
    return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol));
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void parity_bench_stats(double *t, int n, double *median, double *best, double *worst)
{
    if (n < 1) {
        *median = *best = *worst = NAN;
        return;
    }
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    *best = t[0];
    *worst = t[n - 1];
    *median = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}
