/* Verdicts: what parity says of a kernel on a workload (docs/check-json.md, docs/plugins.md).
 * Part of the stable API: included by parity/parity.h and by parity/verify.h. The values of the
 * verdicts never change; a new verdict is appended after the last. */
#ifndef PARITY_VERDICT_H
#define PARITY_VERDICT_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PARITY_VERDICT_FAITHFUL = 0,
    PARITY_VERDICT_UNFAITHFUL,
    PARITY_VERDICT_CRASHED,
    PARITY_VERDICT_TIMEOUT,
    PARITY_VERDICT_OOB,           /* "wrote-out-of-bounds" */
    PARITY_VERDICT_MODIFIED_INPUTS,
    PARITY_VERDICT_NONDETERMINISTIC,
    PARITY_VERDICT_UNSUPPORTED,
    PARITY_VERDICT_STALE_CACHE    /* "stale-cache": faithful when called alone, wrong after a
                                   * call on other inputs or shapes (docs/check-json.md) */
} parity_verdict_t;

/* Not a verdict: the kernel ran and returned OK, its outputs not judged yet ("not-judged";
 * parity_run_kernel in fileflow.h). Outside the enum's run 0..PARITY_VERDICT_STALE_CACHE of
 * verdicts, whose values never change (the Python package reads them in order until
 * parity_verdict_name answers "?"), and never in a result that parity_check_run or
 * parity_compare_run returned PARITY_OK for. */
#define PARITY_VERDICT_NOT_JUDGED ((parity_verdict_t)127)

/* The vocabulary of docs/check-json.md: "faithful", "unfaithful", "crashed", "timeout",
 * "wrote-out-of-bounds", "modified-inputs", "nondeterministic", "unsupported", "stale-cache";
 * "not-judged" for PARITY_VERDICT_NOT_JUDGED; "?" for any other value. A static string: never
 * NULL, never freed by the caller. */
const char *parity_verdict_name(parity_verdict_t v);

#ifdef __cplusplus
}
#endif
#endif
