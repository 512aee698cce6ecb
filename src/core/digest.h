/* Internal: a 64-bit digest of a buffer (src/core/digest.c). */
#ifndef PARITY_DIGEST_H
#define PARITY_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/* Every bit of the input reaches every bit of the digest, so two different buffers share one
 * with probability about 2^-64 (unlike FNV-1a over words, where sign flips of two elements
 * cancel); the same bytes at any address give the same digest. At about memory speed (eight
 * independent lanes), on every core for buffers over 4 MiB (blocks of a fixed size: the same
 * digest for any thread count). */
uint64_t parity_digest64(const void *data, size_t n);

#endif
