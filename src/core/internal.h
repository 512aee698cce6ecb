/* The library's shared internals: what every module (src/<module>/, the ops under ops/, the CLI
 * under programs/, the Python bridge under python/csrc/) may use beside the public API, from the
 * bottom module src/core. It includes nothing above core (only the C library and public
 * include/parity/ headers; tests/cli_layers.sh checks that nothing under src/core includes
 * another module's header), so any file may include it without creating a cycle. Not a public
 * header: libparity.so does not export these names (cmake/export_map.cmake).
 *
 *   clock    parity_now: monotonic seconds, for every deadline and timing (clock.c)
 *   child    waiting for and ending a forked child with a deadline (child.c)
 *   guards   the guard regions and canary byte around every tensor are the public tensor API's
 *            (parity/tensor.h: PARITY_GUARD_BYTES, parity_tensor_guards_ok,
 *            parity_tensor_reset_guards, tensor.c); here the bulk store into a tensor view
 *   digests  parity_digest64 (digest.c), and the RNG's inline step (rng.c)
 *
 * core's other headers are topical and used directly: parallel.h (the thread pool) and
 * json_util.h (JSON numbers, atomic files). */
#ifndef PARITY_CORE_INTERNAL_H
#define PARITY_CORE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "parity/kernel_abi.h"
#include "parity/rng.h"

/* ---- clock (clock.c) ---------------------------------------------------------------------- */

/* Seconds on the monotonic clock (CLOCK_MONOTONIC): differences of two calls are elapsed time. */
double parity_now(void);

/* ---- child processes (child.c) ------------------------------------------------------------ */

/* The parent's side of a forked child: a descriptor that becomes readable when the child ends
 * (pidfd_open, Linux 5.3), or -1 where there is none (then parity_child_wait sleeps and polls). */
int parity_child_fd(pid_t pid);
/* Waits up to max_s seconds for child pid to end. 1: it ended (*status as waitpid sets it); 0: it
 * is still running; -1: waitpid failed. With fd >= 0 it returns as soon as the child ends; without,
 * it sleeps in steps that grow from *sleep_us (start it at 200) to 20 ms. */
int parity_child_wait(pid_t pid, int fd, int *status, double max_s, long *sleep_us);
/* Ends child pid (SIGKILL) and reaps it: *status as waitpid sets it. */
void parity_child_kill(pid_t pid, int *status);

/* ---- guards: tensors (tensor.c) ----------------------------------------------------------- */

/* x[0..n) stored into v's elements [start, start + n), each rounded to v's dtype as
 * parity_tensor_set does. */
void parity_tensor_store_f64(parity_abi_tensor_t *v, int64_t start, const double *x, int64_t n);

/* A bf16's value from its bits, the top half of an fp32's (NaN and Inf included): inline for the
 * per-element loops (the judge's rows, the declared ops' inputs read back), where a call per
 * element cost as much as the rest; format_bulk.c's parity_bf16_to_fp32_1 is this. */
static inline float parity_bf16_bits_to_f32(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- digests (digest.c) and the RNG's step (rng.c) ---------------------------------------- */

/* A 64-bit digest of a buffer. Every bit of the input reaches every bit of the digest, so two
 * different buffers share one with probability about 2^-64 (unlike FNV-1a over words, where sign
 * flips of two elements cancel); the same bytes at any address give the same digest. At about
 * memory speed (eight independent lanes), on every core for buffers over 4 MiB (blocks of a fixed
 * size: the same digest for any thread count). */
uint64_t parity_digest64(const void *data, size_t n);

/* The xoshiro256** step of rng.c as an inline function, for the loops that draw hundreds of
 * millions of numbers (the workloads' normals, src/op/workload.c), where a call per draw across
 * files was a third of the generator's time. The one definition of the step: rng.c's exported
 * parity_rng_u64 and parity_rng_uniform are these, so the bits are the same either way. */
static inline uint64_t parity_rng_rotl_(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t parity_rng_u64_inline(parity_rng_t *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = parity_rng_rotl_(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = parity_rng_rotl_(s[3], 45);
    return result;
}

/* n normals times scale into o by the ziggurat method (rng.c: Marsaglia and Tsang, exact up to
 * its tables' rounding; one 64-bit draw and no libm call for 98.5% of the values, where
 * parity_rng_normal's Box-Muller takes a log and a cos each): the built-in workloads' values
 * (src/op/workload.c) and the declared ops' (src/custom/custom_op.c). */
void parity_rng_normals(parity_rng_t *rng, double *o, int64_t n, double scale);

/* Uniform double in [0, 1) with 53 random bits (exact: an integer below 2^53 times 2^-53). */
static inline double parity_rng_uniform_inline(parity_rng_t *rng)
{
    return (double)(parity_rng_u64_inline(rng) >> 11) * 0x1.0p-53;
}

#endif
