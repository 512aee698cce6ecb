/* The real engine behind the all-reduce simulator: the same rank-local tensors (parity's reduce
 * inputs) through MPI_Allreduce on R ranks, with Open MPI's algorithm forced through
 *   mpirun --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm N
 * and rank 0 comparing the result bit for bit with every simulator algorithm. It does not choose
 * the algorithm itself (only mpirun's MCA parameters can), and it runs nothing without mpirun. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity/format.h"
#include "parity/reduce.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: mpirun -np R --mca coll_tuned_use_dynamic_rules 1 \\\n"
            "              --mca coll_tuned_allreduce_algorithm N parity_mpi_allreduce\n"
            "              [--dtype fp32|fp64|bf16] [--workload W] [--n N] [--k K] [--seed S]\n"
            "\n"
            "All-reduces parity's rank-local inputs (see `parity allreduce --help`) with\n"
            "MPI_Allreduce(MPI_SUM) and compares the result bit for bit with each simulated\n"
            "algorithm. bf16 travels as MPI_UINT16_T with a commutative user op that adds in\n"
            "fp32 and rounds to bf16 (as NCCL does). Exit 0 when every rank got the same bits\n"
            "and the simulator of the forced algorithm reproduces them, 1 when not, 2 usage,\n"
            "3 when the algorithm is not forced (no prediction to check).\n");
}

/* inout[i] = bf16(float(in[i]) + float(inout[i])): fp32 add, one rounding to bf16. */
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    const uint16_t *a = in;
    uint16_t *b = inout;
    for (int i = 0; i < *len; i++) {
        float s = parity_bf16_to_fp32_1(a[i]) + parity_bf16_to_fp32_1(b[i]);
        b[i] = parity_fp32_to_bf16_1(s);
    }
}

static int same_bits(double x, double y)
{
    return memcmp(&x, &y, sizeof x) == 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, R;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R);
    const char *dtype = "fp32", *wname = "partial";
    long n = 4096, k = 256;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0) usage(stdout);
            MPI_Finalize();
            return 0;
        }
        int ok = v != NULL;
        if (ok && !strcmp(a, "--dtype")) dtype = v;
        else if (ok && !strcmp(a, "--workload")) wname = v;
        else if (ok && !strcmp(a, "--n")) ok = (n = strtol(v, NULL, 10)) > 0;
        else if (ok && !strcmp(a, "--k")) ok = (k = strtol(v, NULL, 10)) >= R;
        else if (ok && !strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else ok = 0;
        if (!ok) {
            if (rank == 0) {
                fprintf(stderr, "parity_mpi_allreduce: bad option '%s'\n", a);
                usage(stderr);
            }
            MPI_Finalize();
            return 2;
        }
        i++;
    }
    parity_reduce_workload_t w;
    parity_reduce_dtype_t hop = !strcmp(dtype, "fp64") ? PARITY_REDUCE_FP64
                            : !strcmp(dtype, "bf16") ? PARITY_REDUCE_BF16
                                                     : PARITY_REDUCE_FP32;
    if (parity_reduce_workload_parse(wname, &w) ||
        (strcmp(dtype, "fp32") && strcmp(dtype, "fp64") && strcmp(dtype, "bf16")) ||
        R > PARITY_REDUCE_MAX_RANKS) {
        if (rank == 0) fprintf(stderr, "parity_mpi_allreduce: bad --workload, --dtype or -np\n");
        MPI_Finalize();
        return 2;
    }
    /* The forced algorithm, as mpirun passes MCA parameters to the ranks. */
    const char *dyn = getenv("OMPI_MCA_coll_tuned_use_dynamic_rules");
    const char *alg = getenv("OMPI_MCA_coll_tuned_allreduce_algorithm");
    const char *red = getenv("OMPI_MCA_coll_tuned_reduce_algorithm");
    int algo = alg && dyn && atoi(dyn) == 1 ? atoi(alg) : 0;

    size_t N = (size_t)n;
    double *part = malloc((size_t)R * N * sizeof *part), *res = malloc(N * sizeof *res);
    double *sim = malloc(N * sizeof *sim);
    void *sbuf = malloc(N * 8), *rbuf = malloc(N * 8);
    if (!part || !res || !sim || !sbuf || !rbuf) MPI_Abort(MPI_COMM_WORLD, 3);
    if (parity_reduce_inputs(w, seed, N, (size_t)k, R, hop, part, NULL)) MPI_Abort(MPI_COMM_WORLD, 3);
    const double *mine = part + (size_t)rank * N;
    MPI_Datatype mdt = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    for (size_t i = 0; i < N; i++) {
        if (hop == PARITY_REDUCE_FP64) ((double *)sbuf)[i] = mine[i];
        else if (hop == PARITY_REDUCE_FP32) ((float *)sbuf)[i] = (float)mine[i];
        else ((uint16_t *)sbuf)[i] = parity_fp32_to_bf16_1((float)mine[i]);
    }
    if (hop == PARITY_REDUCE_FP64) mdt = MPI_DOUBLE;
    if (hop == PARITY_REDUCE_BF16) {
        mdt = MPI_UINT16_T;
        MPI_Op_create(bf16_sum, 1, &op);
    }
    MPI_Allreduce(sbuf, rbuf, (int)N, mdt, op, MPI_COMM_WORLD);
    for (size_t i = 0; i < N; i++)
        res[i] = hop == PARITY_REDUCE_FP64   ? ((double *)rbuf)[i]
                 : hop == PARITY_REDUCE_FP32 ? (double)((float *)rbuf)[i]
                                         : (double)parity_bf16_to_fp32_1(((uint16_t *)rbuf)[i]);
    /* Do all ranks hold the same bits? Compare everyone's result with rank 0's. */
    double *r0 = malloc(N * sizeof *r0);
    if (!r0) MPI_Abort(MPI_COMM_WORLD, 3);
    memcpy(r0, res, N * sizeof *r0);
    MPI_Bcast(r0, (int)N, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int differ = memcmp(r0, res, N * sizeof *r0) != 0, any_differ = 0;
    MPI_Reduce(&differ, &any_differ, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
    int rc = 0;
    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len;
        MPI_Get_library_version(ver, &len);
        char *nl = strchr(ver, ','), *nl2 = strchr(ver, '\n');
        if (nl) *nl = 0;
        if (nl2) *nl2 = 0;
        static const char *const onames[] = {"ignore (fixed decision)", "basic_linear",
                                             "nonoverlapping", "recursive_doubling", "ring",
                                             "segmented_ring", "rabenseifner"};
        printf("%s: coll_tuned_allreduce_algorithm %d (%s), %d ranks, %s, %zu elements "
               "(workload %s, K %ld, seed %llu)\n",
               ver, algo, algo >= 0 && algo <= 6 ? onames[algo] : "?", R, dtype, N, wname, k,
               seed);
        printf("  all ranks hold the same result: %s\n", any_differ ? "NO" : "yes");
        /* The simulator's prediction for the forced algorithm. Nonoverlapping is a tuned reduce
         * followed by a broadcast: predictable only when the reduce is pinned to linear (1). */
        int pred = -1;
        if (algo == 1) pred = PARITY_REDUCE_LINEAR;
        if (algo == 2 && red && atoi(red) == 1) pred = PARITY_REDUCE_LINEAR;
        if (algo == 3) pred = PARITY_REDUCE_RD;
        if (algo == 4 || algo == 5) pred = PARITY_REDUCE_MPI_RING;
        if (algo == 6) pred = PARITY_REDUCE_RABENSEIFNER;
        int pred_ok = 0;
        for (int a = 0; a <= PARITY_REDUCE_RABENSEIFNER; a++) {
            parity_reduce_spec_t s = {(parity_reduce_algo_t)a, R, hop,
                                  hop == PARITY_REDUCE_FP64 ? PARITY_REDUCE_FP64 : PARITY_REDUCE_FP32, 1};
            parity_reduce_allreduce(&s, part, N, sim);
            size_t same = 0;
            for (size_t i = 0; i < N; i++) same += same_bits(sim[i], res[i]);
            char sp[64];
            parity_reduce_spec_str(&s, sp, sizeof sp);
            printf("  simulator %-22s %6zu / %zu bit-identical%s\n", sp, same, N,
                   a == pred ? (same == N ? "  <- predicted: MATCH" : "  <- predicted: MISMATCH")
                             : "");
            if (a == pred) pred_ok = same == N;
        }
        if (pred < 0) {
            printf("  no prediction: force an algorithm with --mca coll_tuned_use_dynamic_rules 1 "
                   "--mca coll_tuned_allreduce_algorithm N (1, 3, 4, 5, 6; 2 with "
                   "--mca coll_tuned_reduce_algorithm 1)\n");
            rc = 3;
        } else {
            rc = pred_ok && !any_differ ? 0 : 1;
        }
        printf("verdict: %s\n", rc == 0 ? "simulator and MPI agree bit for bit"
                                : rc == 1 ? "MISMATCH between simulator and MPI"
                                          : "unchecked");
    }
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (op != MPI_SUM) MPI_Op_free(&op);
    free(part);
    free(res);
    free(sim);
    free(sbuf);
    free(rbuf);
    free(r0);
    MPI_Finalize();
    return rc;
}
