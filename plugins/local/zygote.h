/* zygote.h — the local executor's Python zygote (zygote.c): a sandbox
 * factory that holds an initialised interpreter with the runner loaded, so
 * that a Python sandbox's runner is a fork of it instead of a new
 * interpreter.  See zygote.c for what siblings share and why. */
#ifndef HUTCH_LOCAL_ZYGOTE_H
#define HUTCH_LOCAL_ZYGOTE_H

#include <stddef.h>

/* In the factory, before it serves any request: load the interpreter that
 * `interp` (a real path, /usr/bin/python3.X) names as a library,
 * initialise it as `interp -I -S` would start, and load the runner from
 * `runner_dir` as /run/hutch/hutch_runner.py.  0, or -errno with the
 * reason in why (the factory then serves without it). */
int lsb_zygote_init(const char *interp, const char *runner_dir, char *why, size_t len);
/* Around the factory's fork of a C1 that will run Python. */
void lsb_zygote_before_fork(void);
void lsb_zygote_after_fork_parent(void);
/* In the runner's process, where an exec'd runner would execve(): the
 * process is set up (descriptors, limits, Landlock, seccomp, /work); run
 * the runner in the interpreter this process inherited.  Never returns. */
__attribute__((noreturn)) void lsb_zygote_run(void);

#endif
