/* fuzz.h — what the fuzz harnesses share: the libFuzzer entry points they
 * define, and a scratch directory for the parsers that read files or write
 * trees.  Each harness is built two ways (Makefile.am): with libFuzzer
 * (--enable-fuzzers), or with replay.c's main, which runs the corpus and the
 * crashes as an ordinary test.  A harness keeps no state from one input to
 * the next except what its LLVMFuzzerInitialize builds once. */
#ifndef HUTCH_FUZZ_H
#define HUTCH_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: report it the way a sanitizer would, and abort so
 * libFuzzer keeps the input. */
#define fuzz_assert(cond)                                                              \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                            \
            abort();                                                                   \
        }                                                                              \
    } while (0)

static char fuzz_dir[4096];

static int fuzz_rm_one(const char *p, const struct stat *st, int type, struct FTW *f)
{
    (void)st;
    (void)f;
    if (type == FTW_DP)
        return rmdir(p) < 0 ? -1 : 0;
    return unlink(p) < 0 ? -1 : 0;
}

/* Remove `path` and everything below it, never following a symlink. */
static inline void fuzz_rm_rf(const char *path)
{
    nftw(path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void fuzz_cleanup(void)
{
    if (fuzz_dir[0])
        fuzz_rm_rf(fuzz_dir);
}

/* Quiet logs (errors only) and, when `scratch`, a private directory
 * removed at exit; fuzz_dir names it.  It is under $TMPDIR when set, else
 * in /dev/shm when there is one: files are written and removed for every
 * input, and on a disk each truncation costs milliseconds. */
static inline void fuzz_setup(int scratch)
{
    const char *tmp = getenv("TMPDIR");

    hutch_log_set_level(HUTCH_LOG_ERROR);
    if (!scratch || fuzz_dir[0])
        return;
    if (!tmp || !*tmp)
        tmp = access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/hutch-fuzz.XXXXXX", tmp);
    if (!mkdtemp(fuzz_dir)) {
        perror("hutch fuzz: mkdtemp");
        abort();
    }
    atexit(fuzz_cleanup);
}

/* Replace the file at `path` with `data`. */
static inline void fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t off = 0;

    if (fd < 0) {
        perror(path);
        abort();
    }
    while (off < size) {
        ssize_t n = write(fd, data + off, size - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            perror(path);
            abort();
        }
        off += (size_t)n;
    }
    close(fd);
}

#endif
