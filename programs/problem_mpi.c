/* `parity problem` under an MPI launcher (problem_mpi.h). A problem's cases call back into its
 * PyTorch reference, so the work stays in one Python interpreter per rank: each rank's interpreter
 * judges problems R, R+S, R+2S, ... of the folder (every rank lists the folder alike) into a file;
 * the files' bytes are gathered on rank 0 over MPI (ranks on other machines share no file
 * system), and rank 0's interpreter merges them into the report one process would print, in the
 * folder's order, and writes the --json. */
#define _GNU_SOURCE
#include "problem_mpi.h"

#include "check_mpi.h"

#ifdef PARITY_HAVE_MPI
#include <errno.h>
#include <limits.h>
#include <mpi.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

enum { NAME_LEN = PATH_MAX + 32 }; /* a folder of PATH_MAX and "/rank-I.json" */

/* Runs args (NULL-terminated) and waits: its exit code, 128 + N when killed by signal N. The
 * child's standard output goes to standard error when quiet (a shard prints its report into its
 * file; anything a solution prints must not land in the report's stream). */
static int run(char **args, int quiet)
{
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (quiet) posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    fflush(stdout);
    fflush(stderr);
    pid_t pid;
    int e = posix_spawnp(&pid, args[0], &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (e != 0) {
        fprintf(stderr, "parity problem: cannot run Python (%s): %s; set PARITY_PYTHON to a Python with numpy "
                "and torch\n", args[0], strerror(e));
        return 2;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return 2;
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

/* The whole file into *buf (NUL-terminated), its length into *n; 0 or -1. */
static int slurp(const char *path, char **buf, long *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int rc = -1;
    if (fseek(f, 0, SEEK_END) == 0) {
        long len = ftell(f);
        if (len >= 0 && len < INT_MAX && fseek(f, 0, SEEK_SET) == 0) {
            *buf = malloc((size_t)len + 1);
            if (*buf && fread(*buf, 1, (size_t)len, f) == (size_t)len) {
                (*buf)[len] = 0;
                *n = len;
                rc = 0;
            }
        }
    }
    fclose(f);
    return rc;
}

/* Rank 0: every rank's bytes into DIR/rank-I.json and the merge run over them. */
static int merge(char **args, int nargs, const char *dir, const char *all, const int *lens, const int *offs,
                 int size)
{
    char **margs = calloc((size_t)nargs + (size_t)size + 2, sizeof *margs);
    char *names = calloc((size_t)size, NAME_LEN);
    if (!margs || !names) {
        free(margs);
        free(names);
        fprintf(stderr, "parity problem: out of memory\n");
        return 2;
    }
    int k = 0, rc = 0;
    for (int i = 0; i < nargs; i++) margs[k++] = args[i];
    margs[k++] = "--merge";
    for (int r = 0; r < size && rc == 0; r++) {
        char *name = names + (size_t)r * NAME_LEN;
        snprintf(name, NAME_LEN, "%s/rank-%d.json", dir, r);
        FILE *f = fopen(name, "wb");
        if (!f || fwrite(all + offs[r], 1, (size_t)lens[r], f) != (size_t)lens[r]) {
            fprintf(stderr, "parity problem: cannot write %s: %s\n", name, strerror(errno));
            rc = 2;
        }
        if (f && fclose(f) != 0) rc = 2;
        margs[k++] = name;
    }
    margs[k] = NULL;
    if (rc == 0) rc = run(margs, 0);
    for (int r = 0; r < size; r++) unlink(names + (size_t)r * NAME_LEN);
    free(margs);
    free(names);
    return rc;
}

int problem_mpi_run(char **args, int nargs)
{
    if (!check_mpi_launched()) return -1;
    int size = 1, rank = 0;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
        fprintf(stderr, "parity problem: MPI could not be initialised\n");
        return 2;
    }
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (size < 2) {
        MPI_Finalize();
        return -1;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[PATH_MAX], out[PATH_MAX + 16], shard[32];
    snprintf(dir, sizeof dir, "%s/parity-problem-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int rc = 0;
    if (!mkdtemp(dir)) {
        fprintf(stderr, "parity problem: rank %d: cannot make a folder in %s: %s\n", rank,
                tmp && *tmp ? tmp : "/tmp", strerror(errno));
        rc = 2;
    }
    snprintf(out, sizeof out, "%s/shard.json", dir);
    snprintf(shard, sizeof shard, "%d/%d", rank, size);
    if (rc == 0) {
        args[nargs] = "--shard";
        args[nargs + 1] = shard;
        args[nargs + 2] = "--shard-out";
        args[nargs + 3] = out;
        args[nargs + 4] = NULL;
        rc = run(args, 1);
        args[nargs] = NULL;
    }
    char *mine = NULL;
    long n = 0;
    if (rc == 0 && slurp(out, &mine, &n) != 0) {
        fprintf(stderr, "parity problem: rank %d: Python wrote no results (%s)\n", rank, out);
        rc = 2;
    }
    unlink(out);
    /* A rank that failed (a usage error: every rank fails alike, rank 0 said why) fails the job. */
    int worst = rc;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (worst == 0) {
        int len = (int)n, *lens = NULL, *offs = NULL;
        char *all = NULL;
        if (rank == 0) {
            lens = calloc((size_t)size, sizeof *lens);
            offs = calloc((size_t)size, sizeof *offs);
            if (!lens || !offs) {
                fprintf(stderr, "parity problem: out of memory gathering %d ranks' results\n", size);
                MPI_Abort(MPI_COMM_WORLD, 2);
            }
        }
        MPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
        long total = 0;
        if (rank == 0) {
            for (int r = 0; r < size; r++) {
                offs[r] = (int)total;
                total += lens[r];
            }
            if (total < INT_MAX) all = malloc((size_t)total + 1);
        }
        /* Every rank learns whether rank 0 can take the bytes (an int's worth, at most). */
        int can = rank != 0 || all != NULL;
        MPI_Bcast(&can, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (can) {
            MPI_Gatherv(mine, len, MPI_BYTE, all, lens, offs, MPI_BYTE, 0, MPI_COMM_WORLD);
            if (rank == 0) worst = merge(args, nargs, dir, all, lens, offs, size);
        } else if (rank == 0) {
            fprintf(stderr, "parity problem: the ranks' results (%ld bytes) do not fit in memory or in one MPI "
                    "message of 2 GiB; split the folder\n", total);
            worst = 2;
        }
        MPI_Bcast(&worst, 1, MPI_INT, 0, MPI_COMM_WORLD);
        free(all);
        free(lens);
        free(offs);
    }
    free(mine);
    rmdir(dir);
    MPI_Finalize();
    return worst;
}

#else

int problem_mpi_run(char **args, int nargs)
{
    (void)args;
    (void)nargs;
    return -1;
}

#endif
