/* docker.h — what the Docker executor's files share, and nobody else:
 * the executor's state, a sandbox, and each file's functions the others
 * call.  Not an API (that is hutch-executor.h; the engines' is engines.h).
 *
 *   docker.c  the executor: open and close, a sandbox's life (create,
 *             start, files in and out, reap, kill, destroy), /run/hutch
 *   sweep.c   what is left on the engines: the registry of live
 *             sandboxes, the sweeps at open and close, the ABI's sweep(),
 *             and an engine's comeback (dk_lost_sweep)
 *   doctor.c  hutch doctor's lines, and the runtime and packages the
 *             images record
 *
 * Thread rules: st->live_mu guards st->live and each sandbox's n and
 * live links; uid_users and noview_said are atomic; st->boot_mu guards
 * st->boot.  Everything else of the state is written by open() before
 * any sandbox exists, and only read after. */
#ifndef HUTCH_DOCKER_DOCKER_H
#define HUTCH_DOCKER_DOCKER_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "engines.h"
#include "hutch-executor.h"
#include "sbio.h"

#define DK_OWNER_LABEL "hutch.owner"
/* On the volumes the engine makes with a container (anonymous: their names
 * say nothing): the number of the sandbox they belong to. */
#define DK_SANDBOX_LABEL "hutch.sandbox"

/* The program's host uid (and gid) in a container: DK_UID_BASE + (hutch's
 * pid << 8 | a slot this process holds while the container lives).  pids
 * are below 2^22 (PID_MAX_LIMIT), so the range is 0x10000000 to
 * 0x4fffffff: no distribution allocates it, and it stays below the local
 * executor's 0x70000000 + pid and below 2^31 (hutch-init's maximum).  So a
 * uid is unique among the live containers of every hutch process of the
 * host (one pid namespace), up to DK_UID_SLOTS live containers per
 * process; beyond that two of them share one. */
#define DK_UID_BASE  0x10000000u
#define DK_UID_SLOTS 256u

struct dk_boot;

struct dk_state {
    const struct hutch_host *host;
    struct dk_engines engines;
    char instance[64];
    char owner[320];          /* hostname:pid:starttime */
    unsigned long long start; /* this process's start time, as in owner */
    char dir[PATH_MAX];       /* cfg->state_dir: this process's socket dirs */
    char parent[PATH_MAX];    /* where the state dirs of other hutch processes are */
    char init_path[PATH_MAX];
    char runner_dir[PATH_MAX];
    /* hutch-init and the runners as a tar for /run/hutch (owned by root):
     * made by open(), made again when they change on disk (boot_get). */
    pthread_mutex_t boot_mu;
    struct dk_boot *boot;
    unsigned long seq;
    /* Live containers per uid slot (see uid_take()), updated atomically:
     * sandboxes start and end on several threads. */
    unsigned uid_users[DK_UID_SLOTS];
    int noview_said; /* atomic: a refused view is logged once */
    /* The sandboxes alive or being started, by number: what an engine's
     * comeback must not sweep. */
    pthread_mutex_t live_mu;
    struct dk_sandbox *live;
    /* sandboxes_cpu_weight (0: unset), and the lock of the engines'
     * cg_decided and cg_parent. */
    uint32_t cpu_weight;
    pthread_mutex_t cg_mu;
};

struct dk_sandbox {
    struct hutch_sandbox pub; /* first: the core sees this */
    struct dk_state *st;
    struct dk_engine *eng; /* where it runs (its live count is held) */
    char endpoints[1024];  /* the policy's executor_options.docker.endpoints */
    int uid_slot;          /* -1 until taken */
    unsigned uid;          /* the program's host uid and gid, and /work's owner */
    char id[80];
    char image[256];
    char runtime[64]; /* the policy's executor_options.docker.runtime, or "" */
    int preload;      /* plugin_preload(): the runner's --preload */
    struct sbio io;
    struct dk_attach *att;
    char work_volume[160]; /* Podman: /work's volume, made before the container */
    /* Where the engine says /work is on this host (work_host_find), "" when
     * nowhere hutch may look, work_host_why saying why: a candidate that
     * docker_get proves before it reads anything there. */
    char work_host[PATH_MAX];
    char work_host_why[160];
    /* Egress, on an engine of this host (egress_make): the directory the
     * container gets at DK_EGRESS_DIR and the listener in it, the core's
     * egress_fd once start() returned; "" and -1 without. */
    char egress_dir[PATH_MAX];
    int egress_lfd;
    int egress_init; /* init was given --egress and still listens */
    int killed;
    char label[64];       /* how->label, then the job's: for log lines */
    uint64_t deadline_ms; /* the job's (CLOCK_MONOTONIC), 0 until assigned */
    unsigned long n;      /* its number (container hutch-INSTANCE-N), 0: none */
    struct dk_sandbox *live_next, *live_prev; /* st->live, under live_mu */
};

/* docker.c: the options, declared once (opts.h): the policy's
 * executor_options.docker and the environment variables of the process. */
extern const struct hutch_option dk_options[];

/* doctor.c: the image of a language (see there). */
const char *dk_image_for(const char *version, const char *lang, int data, char *buf,
                         size_t len);

/* sweep.c */
/* Removes a container and its anonymous volumes: 0, or the last error's
 * code (dk_engine_failure() tells the engine's absence). */
int dk_remove_container(struct dk_state *st, const struct dk_api *api, const char *id);
/* Into st->live with number n (again: the number changes), and out. */
void dk_live_set(struct dk_state *st, struct dk_sandbox *sb, unsigned long n);
void dk_live_del(struct dk_state *st, struct dk_sandbox *sb);
/* e answers again after it was down: what of this instance no live
 * sandbox holds goes. */
void dk_lost_sweep(struct dk_state *st, struct dk_engine *e);
/* What gone hutch processes left (mine_only: this instance's) on every
 * engine that answers. */
void dk_sweep(struct dk_state *st, int mine_only);
void docker_sweep(const struct hutch_host *host, const char *parent);

/* doctor.c: the executor's doctor, runtime and packages operations. */
void docker_doctor(const struct hutch_host *host, void *ctx,
                   void (*report)(void *ctx, const char *status, const char *what,
                                  const char *detail));
int docker_runtime(void *state, const char *language, char *buf, size_t len,
                   struct hutch_err *err);
int docker_packages(void *state, const char *language, const char *flavour, char *buf,
                    size_t len, struct hutch_err *err);

#endif
