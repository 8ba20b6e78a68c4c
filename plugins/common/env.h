/* env.h — the environment of every sandbox's runner, whatever the executor
 * (local, docker, gvisor): fixed and clean, nothing of hutch's own.  The
 * local executor execve()s the runner with it; docker and gvisor put it in
 * the container's config and hutch-init execve()s the runner with it again,
 * dropping what the engine added (Docker's HOSTNAME, an image's ENV).  The
 * list is in doc/executors.md ("Environments"); tests/run/run_*.sh check
 * it exactly.  An inherited NODE_EXTRA_CA_CERTS alone triples Node's
 * start-up. */
#ifndef HUTCH_SANDBOX_ENV_H
#define HUTCH_SANDBOX_ENV_H

static const char *const hutch_sandbox_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                                "HOME=/work",
                                                "LANG=C.UTF-8",
                                                "LC_ALL=C.UTF-8",
                                                "TMPDIR=/tmp",
                                                "USER=sandbox",
                                                "PYTHONDONTWRITEBYTECODE=1",
                                                "PYTHONIOENCODING=utf-8",
                                                "NODE_OPTIONS=",
                                                NULL};

#endif
