/* `parity manifest capture|diff`: write a run's environment manifest, and rank the differences
 * between two by how likely each is to cause numerical drift. A shell over the manifest module. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "parity/manifest.h"

void parity_help_manifest(FILE *out)
{
    fprintf(out,
            "usage: parity manifest capture [--set KEY=VALUE]... [--no-probe] [--out FILE]\n"
            "       parity manifest diff A.json B.json [--json FILE]\n"
            "\n"
            "capture  writes a manifest (schema parity.manifest/1, docs/manifest.md): NCCL_*,\n"
            "         CUDA_VISIBLE_DEVICES, CUDA_VERSION and NCCL_VERSION from the environment,\n"
            "         GPU model/driver/count from nvidia-smi and the MPI version from mpirun when\n"
            "         they are on PATH (--no-probe: skip the tools), then each --set, e.g.\n"
            "           --set parallel.tp=8 --set allreduce.algo=ring --set dtypes.weights=bf16\n"
            "           --set parallel.rank_device_map=0,1,2,3 --set fusion.allreduce_rmsnorm=true\n"
            "         Values: integers, numbers, true/false, else strings. To stdout or --out.\n"
            "diff     lists the differences of A and B, most likely drift cause first, each with\n"
            "         a score 0..100 and a one-line reason (ranking rules: docs/manifest.md).\n"
            "\n"
            "exit codes: 0 written / compared (differences are not a failure), 2 usage error,\n"
            "3 unreadable or invalid manifest (the message names the file and the field).\n");
}

static int capture(int argc, char **argv)
{
    const char *cmd = "manifest capture", *out = NULL;
    int probe = 1;
    parity_manifest_t *m = NULL;
    if (parity_manifest_new(&m)) return cli_input_error(cmd, "out of memory");
    parity_diag_t diag;
    /* Options first pass: --no-probe must be known before capturing; --set applies after. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--no-probe")) probe = 0;
        else if (!strcmp(argv[i], "--set") || !strcmp(argv[i], "--out")) i++;
    }
    int rc = 0;
    if (parity_manifest_capture(m, probe, &diag)) {
        rc = cli_input_error(cmd, "%s", diag.msg);
        goto done;
    }
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--no-probe")) continue;
        if (cli_is_help(a)) {
            parity_help_manifest(stdout);
            goto done;
        }
        if (strcmp(a, "--set") && strcmp(a, "--out")) {
            rc = cli_usage_error(cmd, "parity manifest capture --set parallel.tp=8",
                                 "unknown argument '%s'", a);
            break;
        }
        if (i + 1 >= argc) {
            rc = cli_usage_error(cmd, "parity manifest capture --set parallel.tp=8", "%s needs a value", a);
            break;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--out")) {
            out = v;
            continue;
        }
        const char *eq = strchr(v, '=');
        char key[160];
        if (!eq || (size_t)(eq - v) >= sizeof key) {
            rc = cli_usage_error(cmd, "--set parallel.tp=8", "--set wants KEY=VALUE, got '%s'", v);
            break;
        }
        snprintf(key, sizeof key, "%.*s", (int)(eq - v), v);
        parity_status_t st = parity_manifest_set(m, key, eq + 1, &diag);
        if (st == PARITY_E_INVALID)
            rc = cli_usage_error(cmd, "--set parallel.tp=8", "%s", diag.msg);
        else if (st == PARITY_E_FORMAT)
            rc = cli_usage_error(cmd, "see docs/manifest.md for each field's type", "%s", diag.msg);
        else if (st)
            rc = cli_input_error(cmd, "%s", parity_status_str(st));
    }
    if (!rc) {
        char *text = parity_manifest_to_json(m);
        if (!text) {
            rc = cli_input_error(cmd, "out of memory");
        } else if (out) {
            FILE *f = fopen(out, "w");
            int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
            if (f && fclose(f)) ok = 0;
            if (!ok) rc = cli_input_error(cmd, "%s: cannot write", out);
        } else {
            printf("%s\n", text);
        }
        free(text);
    }
done:
    parity_manifest_free(m);
    return rc;
}

static int diff(int argc, char **argv)
{
    const char *cmd = "manifest diff", *hint = "parity manifest diff a.json b.json";
    const char *files[2] = {NULL, NULL}, *json = NULL;
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            parity_help_manifest(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--json")) {
            if (i + 1 >= argc) return cli_usage_error(cmd, hint, "--json needs a file");
            json = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            return cli_usage_error(cmd, hint, "unknown option '%s'", argv[i]);
        } else if (nf < 2) {
            files[nf++] = argv[i];
        } else {
            return cli_usage_error(cmd, hint, "too many files ('%s')", argv[i]);
        }
    }
    if (nf != 2) return cli_usage_error(cmd, hint, "want two manifests");
    parity_manifest_t *m[2] = {NULL, NULL};
    parity_diag_t diag;
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        parity_status_t st = parity_manifest_load(files[k], &m[k], &diag);
        if (st) rc = cli_input_error(cmd, "%s", diag.msg);
    }
    parity_manifest_diff_t *d = NULL;
    size_t n = 0;
    if (!rc && parity_manifest_diff(m[0], m[1], &d, &n)) rc = cli_input_error(cmd, "out of memory");
    if (!rc) {
        printf("manifest diff: A = %s, B = %s: %zu difference%s, most likely drift cause first\n",
               files[0], files[1], n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++)
            printf("%3zu. [%3d] %-28s %s -> %s\n       %s\n", i + 1, d[i].score, d[i].key, d[i].a,
                   d[i].b, d[i].reason);
        if (json) {
            cJSON *root = cJSON_CreateObject(), *arr;
            cJSON_AddStringToObject(root, "schema", "parity.manifest.diff/1");
            cJSON_AddStringToObject(root, "a", files[0]);
            cJSON_AddStringToObject(root, "b", files[1]);
            arr = cJSON_AddArrayToObject(root, "differences");
            for (size_t i = 0; i < n; i++) {
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "key", d[i].key);
                cJSON_AddStringToObject(e, "a", d[i].a);
                cJSON_AddStringToObject(e, "b", d[i].b);
                cJSON_AddNumberToObject(e, "score", d[i].score);
                cJSON_AddStringToObject(e, "reason", d[i].reason);
                cJSON_AddItemToArray(arr, e);
            }
            char *text = cJSON_Print(root);
            FILE *f = text ? fopen(json, "w") : NULL;
            int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
            if (f && fclose(f)) ok = 0;
            if (!ok) rc = cli_input_error(cmd, "%s: cannot write", json);
            free(text);
            cJSON_Delete(root);
        }
    }
    free(d);
    parity_manifest_free(m[0]);
    parity_manifest_free(m[1]);
    return rc;
}

int parity_cmd_manifest(int argc, char **argv)
{
    const char *hint = "parity manifest capture --set parallel.tp=8 | parity manifest diff a.json b.json";
    if (argc < 2) return cli_usage_error("manifest", hint, "want a subcommand: capture or diff");
    if (cli_is_help(argv[1])) {
        parity_help_manifest(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "capture")) return capture(argc - 1, argv + 1);
    if (!strcmp(argv[1], "diff")) return diff(argc - 1, argv + 1);
    return cli_usage_error("manifest", hint, "unknown subcommand '%s'", argv[1]);
}
