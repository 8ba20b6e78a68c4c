/* replay.c — the main of a fuzz harness built without libFuzzer: runs
 * LLVMFuzzerTestOneInput once on each file named on the command line, and on
 * each regular file of each directory named (sorted, not recursive).  Prints
 * one line per input before running it, so the one that crashed is the last
 * one printed.  Exit status 0 when every input ran, 1 when one could not be
 * read; a crash ends the process as the sanitizers or the harness decide.
 *
 * libFuzzer binaries (--enable-fuzzers) take the same file arguments
 * themselves; tests/fuzz/replay.sh calls either kind the same way. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "fuzz.h"
#include "util.h"

#define REPLAY_MAX_INPUT (64u << 20)

static int run_file(const char *path)
{
    struct hutch_err err = {0};
    char *data = NULL;
    size_t len = 0;

    if (hutch_read_file(path, REPLAY_MAX_INPUT, &data, &len, &err) < 0) {
        fprintf(stderr, "replay: %s\n", err.msg);
        return -1;
    }
    printf("replay: %s (%zu bytes)\n", path, len);
    fflush(stdout);
    /* A copy of exactly len bytes, so ASan sees a read past the input. */
    {
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy) {
            free(data);
            return -1;
        }
        memcpy(copy, data, len);
        free(data);
        LLVMFuzzerTestOneInput(copy, len);
        free(copy);
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    if (!d) {
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d))) {
        char *p;
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        if (asprintf(&p, "%s/%s", dir, e->d_name) < 0)
            abort();
        if (stat(p, &st) < 0 || !S_ISREG(st.st_mode)) {
            free(p);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            names = realloc(names, cap * sizeof(*names));
            if (!names)
                abort();
        }
        names[n++] = p;
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        if (run_file(names[i]) < 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 0;

    LLVMFuzzerInitialize(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            rc |= run_dir(argv[i]) < 0;
        else
            rc |= run_file(argv[i]) < 0;
    }
    return rc;
}
