/* A 64-bit digest of a buffer's bytes. Two uses: "are the rerun's outputs the first run's, bit
 * for bit" without keeping the first run's outputs in a buffer of their own (check.c: the rerun
 * then writes into the judged run's buffers; a vocabulary-sized output is 824 MB of shared memory
 * per buffer, and mapping, faulting in and freeing such a buffer cost a worker about 1.2 CPU-s:
 * more than the rest of the comparison), and "did the kernel change its inputs"
 * (parity_tensor_hash).
 *
 * Why not FNV-1a (which parity_tensor_hash was until December 2026): over 8-byte words it maps a
 * difference in bit 63 of a word to bit 63 of the state and nothing else (2^63 P = 2^63 mod 2^64
 * for odd P), so two sign flips of odd-indexed fp32 elements (or of bf16 elements 3 and 7)
 * cancel; a kernel whose reruns differ in signs, or that negates two of its inputs, would pass.
 * Here each word goes through the round of xxHash64 (from its published description: acc = rotl(acc +
 * w P2, 31) P1) in one of eight independent lanes (about memory speed), and the lanes are folded
 * with its avalanche step (shifts and multiplications that spread every bit over the word). Two
 * buffers that differ are reported equal with probability about 2^-64 for differences that do
 * not target this function; the first run and the rerun are the same kernel on the same inputs in two processes,
 * so the only way to target it is to compute it (and a kernel hiding a change to its inputs would
 * have to do the same). */
#include "src/core/internal.h"

#include <stdlib.h>
#include <string.h>

#include "src/core/parallel.h"

#define P1 0x9E3779B185EBCA87ULL
#define P2 0xC2B2AE3D27D4EB4FULL
#define P3 0x165667B19E3779F9ULL

static inline uint64_t rotl64(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
/* One word into a lane: the xxHash64 round. The word enters through a multiplication and an
 * addition (carries), not an xor: with acc = rotl(acc ^ w, r) P1 a difference that the
 * multiplication leaves in bit 63 alone (2^63 P = 2^63 mod 2^64) is cancelled by the same bit
 * flipped in the lane's next word, a two-bit collision; here the difference the next word would
 * need depends on the values through the carries. */
static inline uint64_t lane(uint64_t acc, uint64_t w) { return rotl64(acc + w * P2, 31) * P1; }
static inline uint64_t avalanche(uint64_t h)
{
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    return h ^ (h >> 32);
}

static uint64_t digest_block(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t a0 = P3, a1 = 2 * P3, a2 = 3 * P3, a3 = 4 * P3, a4 = 5 * P3, a5 = 6 * P3,
             a6 = 7 * P3, a7 = 8 * P3; /* eight lanes in registers */
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        uint64_t w[8];
        memcpy(w, p + i, 64);
        a0 = lane(a0, w[0]);
        a1 = lane(a1, w[1]);
        a2 = lane(a2, w[2]);
        a3 = lane(a3, w[3]);
        a4 = lane(a4, w[4]);
        a5 = lane(a5, w[5]);
        a6 = lane(a6, w[6]);
        a7 = lane(a7, w[7]);
    }
    const uint64_t a[8] = {a0, a1, a2, a3, a4, a5, a6, a7};
    uint64_t h = (uint64_t)n * P2;
    for (int l = 0; l < 8; l++) h = rotl64(h ^ avalanche(a[l]), 27) * P1 + P3;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = lane(h, w);
    }
    for (; i < n; i++) h = lane(h, p[i]);
    return avalanche(h);
}

/* Buffers over DIGEST_BLOCK bytes: the digest of each block (the function above, which takes
 * the block's length in), computed on every core, then the blocks' digests in order through one
 * more lane, folded as above. The block size is fixed, so the digest does not depend on the
 * thread count; a change in any block changes that block's digest with probability 1 - 2^-64,
 * and the chained lane is order-sensitive (two blocks swapped give another digest). A check
 * hashes its inputs after every run (536 MB on the production workload) and its outputs for the
 * rerun: one core was idle during each of those passes. */
/* 4 MiB: a block is about a millisecond of work at memory speed, so handing blocks to threads
 * costs nothing measurable, and buffers up to it (all but the vocabulary-sized ones and the
 * production inputs) keep the one-pass digest without thread start-up. */
enum { DIGEST_BLOCK = 1 << 22 };

typedef struct {
    const unsigned char *p;
    size_t n;
    uint64_t *d;
} blocks_t;

static void digest_blocks(void *ctx, int64_t b, int64_t e, int thread)
{
    (void)thread;
    blocks_t *B = ctx;
    for (int64_t k = b; k < e; k++) {
        size_t off = (size_t)k * DIGEST_BLOCK, len = B->n - off < DIGEST_BLOCK ? B->n - off : DIGEST_BLOCK;
        B->d[k] = digest_block(B->p + off, len);
    }
}

uint64_t parity_digest64(const void *data, size_t n)
{
    if (n <= DIGEST_BLOCK) return digest_block(data, n);
    size_t nb = (n + DIGEST_BLOCK - 1) / DIGEST_BLOCK;
    blocks_t B = {data, n, malloc(nb * sizeof(uint64_t))};
    if (B.d) parity_parallel_for((int64_t)nb, 0, digest_blocks, &B);
    uint64_t h = (uint64_t)n * P1;
    for (size_t k = 0; k < nb; k++) {
        size_t off = k * DIGEST_BLOCK, len = n - off < DIGEST_BLOCK ? n - off : DIGEST_BLOCK;
        /* without memory for the list: the same blocks one at a time */
        h = lane(h, B.d ? B.d[k] : digest_block(B.p + off, len));
    }
    free(B.d);
    return avalanche(h);
}
