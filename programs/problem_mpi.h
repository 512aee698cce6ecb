/* `parity problem` as one rank of an MPI job (mpirun, srun): the ranks split a folder's problems
 * and rank 0 reports (docs/problems.md, "Many problems, many machines"). Built with MPI only when
 * CMake finds it; without it, problem_mpi_run always answers "not under MPI". */
#ifndef PARITY_PROBLEM_MPI_H
#define PARITY_PROBLEM_MPI_H

/* args: the interpreter's argv (args[0] the interpreter, NULL-terminated, with room for 4 more
 * entries after its last). When this process was started by an MPI launcher in a job of 2 or more
 * ranks: runs the interpreter on this rank's share (args + --shard R/S --shard-out FILE), gathers
 * every rank's results on rank 0, which runs the interpreter once more to merge and report them
 * (args + --merge FILES), and returns the job's exit code, the same on every rank. Returns -1 when
 * not under a launcher, in a job of one rank, or built without MPI: the caller runs args itself. */
int problem_mpi_run(char **args, int nargs);

#endif
