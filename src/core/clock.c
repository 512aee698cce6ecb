/* The clock of every deadline and timing in the library, the CLI and the bridge (internal.h). */
#include "src/core/internal.h"

#include <time.h>

double parity_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
