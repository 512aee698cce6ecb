/* `parity problem`: judge a benchmark problem as it is (SOL-ExecBench / FlashInfer-Bench problem
 * folders, KernelBench problem files; docs/problems.md). The references are PyTorch, so the work
 * is done by the Python package (python/parity/problems.py); this command finds an interpreter
 * and runs it with the same arguments, standard streams and exit code.
 *
 * The interpreter: $PARITY_PYTHON, else the source tree's .venv/bin/python, else /usr/bin/python3,
 * else python3 on PATH (the order CMakeLists.txt uses for the tests). The package: the source
 * tree's python/ first on PYTHONPATH when it is there (an installed package otherwise); the
 * bridge: the one beside this binary (build tree: <build>/python/libparity_python.so) unless
 * $PARITY_PY_LIB names one. Exit 2 with a message when no interpreter runs or it lacks numpy or
 * torch. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "problem_mpi.h"

#ifndef PARITY_SOURCE_DIR
#define PARITY_SOURCE_DIR ""
#endif

void parity_help_problem(FILE *out)
{
    fprintf(out,
            "usage: parity problem PATH [--solution FILE | --solutions DIR [--sample S]]\n"
            "                           [--contract math|reference] [--json FILE] [--seed N] [--quick]\n"
            "                           [--own-lines N]\n"
            "                           [--solution-name NAME] [--precision fp32|fp16|bf16] [--jobs N]\n"
            "                           [--isolate]\n"
            "\n"
            "Judge a benchmark problem as it is. PATH: a SOL-ExecBench / FlashInfer-Bench problem\n"
            "folder (definition.json, optional workload.jsonl and reference.py) or definition JSON,\n"
            "a KernelBench problem .py file (class Model, get_inputs, get_init_inputs), a folder of\n"
            "those (levelN/ subfolders included), or a FlashInfer-Bench dataset root (definitions/).\n"
            "Solutions by the benchmark's naming: --solutions DIR, solution JSONs matched to problems\n"
            "by their \"definition\" field (a FlashInfer-Bench root uses its solutions/), or a\n"
            "KernelBench run folder of level_L_problem_P_sample_S_kernel.py (--sample S: one sample);\n"
            "--solution-name picks each problem folder's solution file. --jobs N judges N at once in\n"
            "worker processes (0: one per core). Under mpirun or srun the ranks split a folder's\n"
            "problems and rank 0 prints the report and writes the JSON one process would.\n"
            "The problem becomes a declared op: roles inferred from the definition (printed), its\n"
            "PyTorch reference re-run with every float dtype promoted to fp64 as the oracle.\n"
            "--solution: the benchmark's own format (a solution JSON whose Python entry point\n"
            "\"file.py::fn\" is destination-passing or value-returning; a KernelBench file with\n"
            "ModelNew); without it the reference itself, run in its own dtypes, is judged.\n"
            "Triton/CUDA solutions are `unsupported` (with the reason) where no GPU is. C++ solutions\n"
            "(language cpp, torch binding; KernelBench load_inline) are built and run in a child\n"
            "process: a crash or a hang past $PARITY_PROBLEM_TIMEOUT s (300) is a verdict;\n"
            "--isolate runs Python solutions there too.\n"
            "--contract: math (fp32 internals, one rounding per output) or reference (default:\n"
            "the roundings the reference itself performs are allowed). The benchmark's own rule\n"
            "(SOL-ExecBench, FlashInfer-Bench or KernelBench) is reported beside the verdict;\n"
            "--json writes verdict, contract, benchmark_rule {name, verdict} and parity's report.\n"
            "Without --quick the problem's own workload lines are judged too (their axes, random,\n"
            "scalar, safetensors and custom inputs; at most --own-lines N, default 6, per set of\n"
            "scalar values, spread over their sizes; lines with other scalars judged as an op of\n"
            "their own). --precision: a KernelBench problem's precision.\n"
            "\n"
            "Runs the Python package: $PARITY_PYTHON, else the source tree's .venv/bin/python, else\n"
            "/usr/bin/python3, else python3 on PATH; it needs numpy and torch.\n"
            "\n"
            "examples:\n"
            "  parity problem path/to/rmsnorm_problem --solution path/to/solution.json\n"
            "  parity problem level1/23_Softmax.py --solution my_softmax.py --contract math\n"
            "  parity problem KernelBench/level1 --solutions runs/my_run --quick --json all.json\n"
            "  parity problem flashinfer-trace --quick          # its definitions and solutions/\n"
            "  mpirun -n 8 parity problem KernelBench/level2 --quick --json level2.json\n"
            "\n"
            "exit codes: 0 faithful, 1 not faithful (or unsupported), 2 usage error or no Python\n"
            "with torch, 3 a problem or solution file parity cannot read (file and field named).\n");
}

static int executable(const char *p) { return p && *p && access(p, X_OK) == 0; }

/* The bootstrap the interpreter runs: a missing numpy/torch/parity is exit 2 with a message. */
static const char *const BOOT =
    "import sys\n"
    "try:\n"
    "    import numpy, torch\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('parity problem: %s cannot import numpy and torch (%s): the problems are PyTorch; '\n"
    "                     'set PARITY_PYTHON to a Python that has them\\n' % (sys.executable, e))\n"
    "    sys.exit(2)\n"
    "try:\n"
    "    from parity.problems import main\n"
    "except ImportError as e:\n"
    "    sys.stderr.write('parity problem: %s cannot import the parity package (%s)\\n' % (sys.executable, e))\n"
    "    sys.exit(2)\n"
    "sys.exit(main(sys.argv[1:]))\n";

int parity_cmd_problem(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            parity_help_problem(stdout);
            return 0;
        }
    }
    if (argc < 2)
        return cli_usage_error("problem", "parity problem PATH [--solution FILE]", "PATH is required");

    char venv[PATH_MAX];
    snprintf(venv, sizeof venv, "%s/.venv/bin/python", PARITY_SOURCE_DIR);
    const char *env = getenv("PARITY_PYTHON");
    const char *py = NULL;
    if (env && *env) {
        if (!executable(env)) {
            fprintf(stderr, "parity problem: PARITY_PYTHON=%s is not an executable\n", env);
            return PARITY_EXIT_USAGE;
        }
        py = env;
    } else if (PARITY_SOURCE_DIR[0] && executable(venv)) {
        py = venv;
    } else if (executable("/usr/bin/python3")) {
        py = "/usr/bin/python3";
    } else {
        py = "python3"; /* PATH */
    }

    /* the source tree's package first, when this binary was built from one that has it */
    char pkg[PATH_MAX], pypath[2 * PATH_MAX];
    snprintf(pkg, sizeof pkg, "%s/python/parity/problems.py", PARITY_SOURCE_DIR);
    if (PARITY_SOURCE_DIR[0] && access(pkg, R_OK) == 0) {
        const char *old = getenv("PYTHONPATH");
        snprintf(pypath, sizeof pypath, "%s/python%s%s", PARITY_SOURCE_DIR, old && *old ? ":" : "",
                 old && *old ? old : "");
        setenv("PYTHONPATH", pypath, 1);
    }
    /* the bridge built beside this binary (a build tree), unless one is named */
    if (!getenv("PARITY_PY_LIB")) {
        char self[PATH_MAX], lib[PATH_MAX + 64];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            self[n] = 0;
            char *slash = strrchr(self, '/');
            if (slash) {
                *slash = 0;
                snprintf(lib, sizeof lib, "%s/python/libparity_python.so", self);
                if (access(lib, R_OK) == 0) setenv("PARITY_PY_LIB", lib, 1);
            }
        }
    }

    char **args = calloc((size_t)argc + 8, sizeof *args); /* + problem_mpi_run's 4 */
    if (!args) return cli_input_error("problem", "out of memory");
    int k = 0;
    args[k++] = (char *)py;
    args[k++] = "-c";
    args[k++] = (char *)BOOT;
    for (int i = 1; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    /* Under mpirun or srun, the ranks split a folder's problems and rank 0 reports. */
    int mpi = problem_mpi_run(args, k);
    if (mpi >= 0) {
        free(args);
        return mpi;
    }
    fflush(stdout);
    fflush(stderr);
    execvp(py, args);
    fprintf(stderr, "parity problem: cannot run Python (%s): %s; set PARITY_PYTHON to a Python with numpy "
            "and torch\n", py, strerror(errno));
    free(args);
    return PARITY_EXIT_USAGE;
}
