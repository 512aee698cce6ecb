/* Shared by the fuzz targets whose readers take a path, not a buffer (checkpoints, tokenizers,
 * npy sidecars, compare's inputs and outputs): the input written to a file of this process's
 * own (removed at exit), rewritten for every input. The folder is $TMPDIR if set, else /dev/shm
 * when writable, else /tmp: on a disk file system (ext4) truncating and rewriting a file flushes
 * it to the device on close (ext4's auto_da_alloc), which took half of the CPU time of these
 * targets (perf, fuzz_llama_tok: 50% in open/close syscalls); tmpfs does not. */
#ifndef PARITY_FUZZ_FILE_H
#define PARITY_FUZZ_FILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define FUZZ_MAX_FILES 4
static char fuzz_paths[FUZZ_MAX_FILES][512];

static void fuzz_files_remove(void)
{
    for (int i = 0; i < FUZZ_MAX_FILES; i++)
        if (fuzz_paths[i][0]) unlink(fuzz_paths[i]);
}

/* The path of slot i with the given file name (e.g. "x.mask.npy"); the same on every call. */
static const char *fuzz_path(int i, const char *name)
{
    if (!fuzz_paths[i][0]) {
        const char *t = getenv("TMPDIR");
        static int registered;
        if (!t || !*t) t = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(fuzz_paths[i], sizeof fuzz_paths[i], "%s/parity-fuzz-%ld-%s", t, (long)getpid(), name);
        if (!registered++) atexit(fuzz_files_remove);
    }
    return fuzz_paths[i];
}

/* Write n bytes to slot i; the path, or NULL when the file cannot be written (not a finding). */
static const char *fuzz_write(int i, const char *name, const void *data, size_t n)
{
    const char *p = fuzz_path(i, name);
    FILE *f = fopen(p, "wb");
    if (!f) return NULL;
    size_t w = n ? fwrite(data, 1, n, f) : 0;
    if (fclose(f) != 0 || w != n) return NULL;
    return p;
}

#endif
