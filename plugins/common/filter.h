/* filter.h — the system call filter every runner gets, one definition for
 * the local executor (built in hutch's process, installed in the runner) and
 * for hutch-init (built and installed by pid 1 of a Docker sandbox before it
 * starts the runner).  Only libseccomp and libc here: hutch-init is static
 * and links nothing of hutch. */
#ifndef HUTCH_FILTER_H
#define HUTCH_FILTER_H

#include <stddef.h>

/* Compile the filter to BPF (caller frees *bpf).  Allocates: call it before
 * fork() where the child must not allocate.  0 or -errno, with a message in
 * errbuf. */
int filter_build(void **bpf, size_t *bpf_len, char *errbuf, size_t len);

/* Install a compiled filter in the calling thread (no_new_privs must be set
 * or the caller hold CAP_SYS_ADMIN).  Does not allocate.  0 or -errno. */
int filter_apply(const void *bpf, size_t bpf_len);

#endif
