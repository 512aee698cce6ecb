/* `parity check` as one rank of an MPI job (mpirun, srun): the ranks split the check's grid and
 * rank 0 reports (docs/check-speed.md). Built with MPI only when CMake finds it; without it,
 * check_mpi_begin always answers "not under MPI". */
#ifndef PARITY_CHECK_MPI_H
#define PARITY_CHECK_MPI_H

#include "parity/verify.h"

/* 1 when an MPI launcher started this process (the environment says so: Open MPI's mpirun, PMIx
 * and PMI srun), 0 otherwise or when built without MPI. parity problem asks it too. */
int check_mpi_launched(void);
/* When this process was started by an MPI launcher (the environment says so), initialise MPI
 * and fill exec's rank, n_ranks and or_all; returns 1. Returns 0 when not under a launcher (or
 * built without MPI, or a job of one rank): exec is untouched. -1 when MPI failed to start. */
int check_mpi_begin(parity_check_exec_t *exec);
/* The job's exit code (the largest rank's, so every rank exits alike) into *rc; MPI_Finalize. */
void check_mpi_end(int *rc);

#endif
