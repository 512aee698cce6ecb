/* MPI for `parity check` (check_mpi.h): detection of the launcher, MPI_Init, and the exchange
 * the grid needs (a bitwise OR of every rank's results, which gathers them exactly because each
 * unit's bytes are zero on every rank but its owner). Compiled to stubs without MPI. */
#include "check_mpi.h"

#include <limits.h>
#include <stdlib.h>

#ifdef PARITY_HAVE_MPI
#include <mpi.h>

/* Launchers set these: Open MPI's mpirun (OMPI_COMM_WORLD_SIZE), PMIx-based srun and prterun
 * (PMIX_RANK), PMI-1/2 srun (PMI_RANK). A plain `parity check` never calls MPI_Init: singleton
 * start-up costs a second and would make MPI a runtime need of every check. */
int check_mpi_launched(void)
{
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

static int or_all(void *ctx, void *buf, size_t n)
{
    (void)ctx;
    char *p = buf;
    while (n > 0) { /* MPI counts are int: chunks of at most 1 GiB */
        int c = n > (size_t)1 << 30 ? 1 << 30 : (int)n;
        if (MPI_Allreduce(MPI_IN_PLACE, p, c, MPI_BYTE, MPI_BOR, MPI_COMM_WORLD) != MPI_SUCCESS) return -1;
        p += c;
        n -= (size_t)c;
    }
    return 0;
}

int check_mpi_begin(parity_check_exec_t *exec)
{
    if (!check_mpi_launched()) return 0;
    int size = 1, rank = 0;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) return -1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    exec->rank = rank;
    exec->n_ranks = size;
    exec->or_all = or_all;
    exec->or_ctx = NULL;
    return 1;
}

void check_mpi_end(int *rc)
{
    int mine = *rc, all = mine;
    if (MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) == MPI_SUCCESS) *rc = all;
    MPI_Finalize();
}

#else

int check_mpi_launched(void) { return 0; }

int check_mpi_begin(parity_check_exec_t *exec)
{
    (void)exec;
    return 0;
}

void check_mpi_end(int *rc) { (void)rc; }

#endif
