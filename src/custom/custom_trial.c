/* Declared ops: the trial a reference runs under (custom_impl.h), at the bottom of the module. The
 * cause classifier (custom_cause.c) and the contract's rounded intermediates (custom_tol.c) re-run
 * a declared reference with one parameter at a trial value or one intermediate rounded; the
 * reference reads the trial through parity_custom_trial / parity_custom_intermediate (custom_op.h)
 * and the call's attributes through custom_trial_attrs (custom_op.c). One trial per thread.
 * Deliberately not here: the fits (custom_cause.c), the reference call (custom_op.c). */
#include <string.h>

#include "parity/format.h"
#include "src/custom/custom_impl.h"

static _Thread_local parity_custom_trial_t *cur_trial;

parity_custom_trial_t *custom_trial_enter(parity_custom_trial_t *t)
{
    parity_custom_trial_t *prev = cur_trial;
    cur_trial = t;
    return prev;
}

parity_custom_trial_t *parity_custom_trial(void) { return cur_trial; }

double parity_custom_intermediate(const char *name, double x)
{
    parity_custom_trial_t *t = cur_trial;
    parity_format_t f;
    if (!t || !t->intermediate || !name || strcmp(t->intermediate, name) != 0 || !t->format ||
        parity_format_get(t->format, &f, NULL) != PARITY_OK)
        return x;
    t->used = 1;
    return parity_variant_round(&f, x, t->dir);
}

const double *custom_trial_attrs(const parity_custom_op_t *op, double *buf)
{
    const parity_abi_op_decl_t *d = op->d;
    const parity_custom_trial_t *t = cur_trial;
    if (!t || !t->param) return d->attr_values;
    for (int a = 0; a < d->n_attrs; a++) buf[a] = strcmp(d->attr_names[a], t->param) == 0 ? t->value : d->attr_values[a];
    return buf;
}
