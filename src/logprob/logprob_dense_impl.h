/* Internal to the logprob module, and to two of its units only: the row-level access to a dense
 * dump (npy or safetensors) that logprob_dense.c implements and the direct comparison
 * (logprob_direct.c, two plain dense dumps compared row by row in the reading thread) uses.
 * Everything else reads dense dumps in batches through the dispatcher (parity_logprob_next_batch ->
 * lp_dense_next). Not a public header. */
#ifndef PARITY_LOGPROB_DENSE_IMPL_H
#define PARITY_LOGPROB_DENSE_IMPL_H

#include "src/logprob/logprob_impl.h"

/* Whether every row of r can be read by lp_dense_row: a dense dump with at least one column in
 * a layout the vectorised row reader takes (fp32 or fp64 logprobs contiguous along rows, token
 * ids, mask and phase contiguous in an integer dtype or absent, no modality or top-k). */
int lp_dense_direct_ok(const parity_logprob_reader_t *r);
/* Row `row` into s as lp_dense_next returns it (PARITY_OK, or an error with *bad, *why), except
 * that the keys of a dump without token ids are left unwritten (every token is flagged
 * PARITY_LOGPROB_KEY_NONE, whose key reads as -1). */
parity_status_t lp_dense_row(const parity_logprob_reader_t *r, uint64_t row, parity_logprob_seq_t *s, uint64_t *bad,
                             int *why);
/* The message of such an error (row, *bad, *why as lp_dense_row set them) into d; returns its
 * status. */
parity_status_t lp_dense_row_error(const parity_logprob_reader_t *r, uint64_t row, uint64_t bad, int why,
                                   parity_diag_t *d);
/* Mark n more rows consumed (their pages are given back). */
void lp_dense_consume(parity_logprob_reader_t *r, uint64_t n);
/* Map the pages of rows [row0, row0 + n) ahead of reading them (advisory). */
void lp_dense_populate(const parity_logprob_reader_t *r, uint64_t row0, uint64_t n);

#endif
