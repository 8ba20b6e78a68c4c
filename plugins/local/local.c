/* local.c — the local executor, host side: the plugin entry, cgroups, and
 * driving one sandbox through its control socket.  The processes inside the
 * sandbox live in sandbox.c; the system call filter in
 * plugins/common/filter.c.
 *
 * Needs no daemon and no privilege: user namespaces give the sandbox its own
 * root to build mounts with.  When hutch runs as root, or the host delegates
 * a cgroup, memory and pids limits are cgroup limits (v1 or v2); otherwise
 * rlimits stand in for them.
 *
 * Leftovers: a hutch killed with SIGKILL takes its sandboxes' processes
 * with it (PDEATHSIG), but not their cgroups.  Each sandbox cgroup is named
 * hutch-PID.START-INSTANCE-N, and the cgroups a hutch makes them in are
 * written in its state directory (CG_RECORD), so that any later hutch of
 * the same user removes them, whichever cgroup it runs in itself and
 * whichever executor it uses (local_sweep, called by the core at start). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"
#include "box.h"
#include "caps.h"
#include "factory.h"
#include "filter.h"
#include "hutch-executor.h"
#include "proc.h"
#include "sandbox.h"
#include "zygote.h"

#define START_TIMEOUT_MS 30000 /* a loaded machine starts slowly: generous */

struct cgroup_set {
    int version; /* 0 none, 1 or 2 */
    char mem_parent[PATH_MAX];
    char pids_parent[PATH_MAX];
    char cpu_parent[PATH_MAX]; /* "" without a usable cpu controller */
    char self_leaf[PATH_MAX];  /* v2: the leaf hutch moved itself into, or "" */
    char reason[256];          /* why there is none */
};

/* In a hutch's state directory: where it makes sandbox cgroups ("parent
 * DIR" lines) and the v2 leaf it moved itself into ("leaf DIR"). */
#define CG_RECORD     "cgroups"
#define CG_RECORD_MAX 8192

struct local_state {
    const struct hutch_host *host;
    int landlock;     /* Landlock can scope the runner (ABI 6) */
    uint32_t id_base; /* as root: the sandboxes' host uids, see sandbox.h */
    char instance[64];
    char owner[48]; /* PID.START of this hutch: in its cgroups' names */
    struct cgroup_set cg;
    unsigned long seq; /* atomic: sandboxes start on many threads */
    int late_attach;   /* /proc/PID/task/TID/children is there */
    void *bpf;         /* the runner's seccomp filter, compiled once */
    size_t bpf_len;
    atomic_int data_ok;         /* local_has_data's answer: 0 not asked, 1 yes, 2 no */
    struct lsb_factory factory; /* forks every sandbox (factory.c)... */
    struct lsb_factory zygote;  /* ...but Python's, when it can (zygote.c) */
    int zygote_on;              /* set up at open (HUTCH_LOCAL_ZYGOTE) */
    atomic_uint cold_python;    /* cold Python starts so far */
    /* Pooled sandboxes' cgroup attach, done by a thread of its own (see
     * attach_later): att_mu guards the queue and each sandbox's att_state. */
    pthread_mutex_t att_mu;
    pthread_cond_t att_cv;
    struct local_sandbox *att_head, *att_tail;
    pthread_t att_thread;
    int att_started, att_stop;
};

struct local_sandbox {
    struct hutch_sandbox pub; /* first: the core sees only this */
    pid_t c1;                 /* the factory's child; init's parent */
    int c1_pidfd;             /* how we wait for C1 and kill it */
    pid_t init_pid;           /* as seen from the host */
    int init_pidfd;
    int ctrl_fd;
    int exited; /* EXIT frame seen */
    int32_t status;
    int killed;
    char label[64];        /* how->label, then the job's: for log lines */
    char cg_mem[PATH_MAX]; /* sandbox's own cgroups, "" if none */
    char cg_pids[PATH_MAX];
    char cg_cpu[PATH_MAX]; /* v1 only; v2 sets cpu.max in cg_mem */
    int att_state;         /* ATT_*: under the state's att_mu */
    int att_rc;            /* attach_late's, once ATT_DONE */
    struct local_sandbox *att_next;
};

enum { ATT_NONE, ATT_QUEUED, ATT_RUNNING, ATT_DONE };

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* --- cgroups -------------------------------------------------------------- */

static int read_str(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    if (fd < 0)
        return -errno;
    n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -errno;
    buf[n] = '\0';
    return 0;
}

/* The cgroup path of this process for `controller` (v1), or the unified
 * path (controller NULL). */
static int own_cgroup(const char *controller, char *out, size_t len)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[1024];
    int r = -ENOENT;
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        char *ctl = strchr(line, ':'), *path;
        if (!ctl)
            continue;
        path = strchr(++ctl, ':');
        if (!path)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        if (controller ? strcmp(ctl, controller) == 0
                       : (line[0] == '0' && line[1] == ':' && *ctl == '\0')) {
            snprintf(out, len, "%s", path);
            r = 0;
            break;
        }
    }
    fclose(f);
    return r;
}

static void cgroup_detect(struct cgroup_set *cg)
{
    char own[PATH_MAX];
    struct stat st;

    memset(cg, 0, sizeof(*cg));
    if (stat("/sys/fs/cgroup/cgroup.controllers", &st) == 0) {
        char ctl[256];
        if (own_cgroup(NULL, own, sizeof(own)) < 0) {
            snprintf(cg->reason, sizeof(cg->reason),
                     "cannot find this process's cgroup");
            return;
        }
        snprintf(cg->mem_parent, sizeof(cg->mem_parent), "/sys/fs/cgroup%s",
                 strcmp(own, "/") ? own : "");
        if (access(cg->mem_parent, W_OK) < 0) {
            snprintf(cg->reason, sizeof(cg->reason),
                     "cgroup v2 %s is not writable (run as root or ask systemd for a "
                     "delegated cgroup: systemd-run --user -p Delegate=yes)",
                     cg->mem_parent);
            return;
        }
        /* Controllers can only be handed to children of a cgroup without
         * processes of its own: move hutch into a leaf first if needed. */
        if (read_str("/sys/fs/cgroup/cgroup.controllers", ctl, sizeof(ctl)) < 0 ||
            !strstr(ctl, "memory") || !strstr(ctl, "pids")) {
            snprintf(cg->reason, sizeof(cg->reason),
                     "cgroup v2 without the memory and pids controllers");
            return;
        }
        {
            char sub[PATH_MAX + 32];
            snprintf(sub, sizeof(sub), "%s/cgroup.subtree_control", cg->mem_parent);
            if (box_write_str(sub, "+memory +pids") == -EBUSY) {
                char leaf[PATH_MAX + 32], procs[PATH_MAX + 64], pid[32];
                snprintf(leaf, sizeof(leaf), "%s/hutch-self-%d", cg->mem_parent,
                         getpid());
                snprintf(procs, sizeof(procs), "%s/cgroup.procs", leaf);
                snprintf(pid, sizeof(pid), "%d", getpid());
                if (mkdir(leaf, 0755) < 0 && errno != EEXIST) {
                    snprintf(cg->reason, sizeof(cg->reason),
                             "cannot enable memory and pids controllers under %s",
                             cg->mem_parent);
                    return;
                }
                snprintf(cg->self_leaf, sizeof(cg->self_leaf), "%s", leaf);
                if (box_write_str(procs, pid) < 0 ||
                    box_write_str(sub, "+memory +pids") < 0) {
                    snprintf(cg->reason, sizeof(cg->reason),
                             "cannot enable memory and pids controllers under %s",
                             cg->mem_parent);
                    return;
                }
            }
        }
        snprintf(cg->pids_parent, sizeof(cg->pids_parent), "%s", cg->mem_parent);
        {
            /* The cpu controller is optional: without it, no CPU limit. */
            char sub[PATH_MAX + 32];
            snprintf(sub, sizeof(sub), "%s/cgroup.subtree_control", cg->mem_parent);
            if (strstr(ctl, "cpu") && box_write_str(sub, "+cpu") == 0)
                snprintf(cg->cpu_parent, sizeof(cg->cpu_parent), "%s", cg->mem_parent);
        }
        cg->version = 2;
        return;
    }
    if (own_cgroup("memory", own, sizeof(own)) < 0 ||
        stat("/sys/fs/cgroup/memory/memory.limit_in_bytes", &st) < 0) {
        snprintf(cg->reason, sizeof(cg->reason), "no memory cgroup controller mounted");
        return;
    }
    snprintf(cg->mem_parent, sizeof(cg->mem_parent), "/sys/fs/cgroup/memory%s",
             strcmp(own, "/") ? own : "");
    if (own_cgroup("pids", own, sizeof(own)) < 0 ||
        stat("/sys/fs/cgroup/pids", &st) < 0) {
        snprintf(cg->reason, sizeof(cg->reason), "no pids cgroup controller mounted");
        return;
    }
    snprintf(cg->pids_parent, sizeof(cg->pids_parent), "/sys/fs/cgroup/pids%s",
             strcmp(own, "/") ? own : "");
    if (access(cg->mem_parent, W_OK) < 0 || access(cg->pids_parent, W_OK) < 0) {
        snprintf(cg->reason, sizeof(cg->reason),
                 "cgroup v1 %s is not writable (run hutch as root for memory and pids "
                 "limits; rlimits are used instead)",
                 cg->mem_parent);
        return;
    }
    cg->version = 1;
    {
        static const char *const mounts[] = {"/sys/fs/cgroup/cpu",
                                             "/sys/fs/cgroup/cpu,cpuacct"};
        if (own_cgroup("cpu", own, sizeof(own)) == 0 ||
            own_cgroup("cpu,cpuacct", own, sizeof(own)) == 0 ||
            own_cgroup("cpuacct,cpu", own, sizeof(own)) == 0) {
            for (size_t i = 0; i < 2; i++) {
                char probe[PATH_MAX + 64];
                snprintf(probe, sizeof(probe), "%s%s/cpu.cfs_quota_us", mounts[i],
                         strcmp(own, "/") ? own : "");
                if (access(probe, W_OK) == 0) {
                    snprintf(cg->cpu_parent, sizeof(cg->cpu_parent), "%s%s", mounts[i],
                             strcmp(own, "/") ? own : "");
                    break;
                }
            }
        }
    }
}

static int cg_write(const char *dir, const char *file, const char *val)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    return box_write_str(path, val);
}

static void cg_remove(char *dir)
{
    if (!dir[0])
        return;
    /* The last processes may still be leaving: rmdir fails with EBUSY. */
    for (int i = 0; i < 200 && rmdir(dir) < 0 && errno == EBUSY; i++)
        usleep(1000);
    dir[0] = '\0';
}

/* Kill what is left in the cgroup `dir`, then remove it. */
static void cg_remove_leftover(const char *dir)
{
    char path[PATH_MAX], procs[PATH_MAX + 32];
    FILE *f;
    int pid;

    snprintf(path, sizeof(path), "%s", dir);
    snprintf(procs, sizeof(procs), "%s/cgroup.kill", path);
    if (box_write_str(procs, "1") < 0) { /* v1, or v2 before Linux 5.14 */
        snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
        f = fopen(procs, "re");
        while (f && fscanf(f, "%d", &pid) == 1)
            if (pid > 0)
                kill(pid, SIGKILL);
        if (f)
            fclose(f);
    }
    cg_remove(path);
}

/* Remove the sandbox cgroups below `parent` whose hutch is gone: named
 * hutch-PID.START-INSTANCE-N, the owner's pid and start time (as plugin.c
 * names state directories).  A kill -9 of hutch leaves them; the sandbox
 * processes in them die with it, or here. */
static void cg_sweep(struct local_state *st, const char *parent)
{
    DIR *d;
    if (!parent[0] || !(d = opendir(parent)))
        return;
    for (struct dirent *de; (de = readdir(d));) {
        char dir[PATH_MAX];
        unsigned long long start;
        int pid, end = 0;
        if (sscanf(de->d_name, "hutch-%d.%llu-%n", &pid, &start, &end) != 2 || !end)
            continue;
        if (pid > 0 && box_proc_start(pid) == start)
            continue; /* that hutch still runs */
        if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", parent, de->d_name) >=
            sizeof(dir))
            continue;
        st->host->log(HUTCH_LOG_INFO, "local", "removing leftover cgroup %s", dir);
        cg_remove_leftover(dir);
        if (access(dir, F_OK) == 0)
            st->host->log(HUTCH_LOG_WARN, "local", "cannot remove leftover cgroup %s",
                          dir);
    }
    closedir(d);
}

/* A cgroup path a record may name: /sys/fs/cgroup or below it, no
 * "." or ".." component, nothing but a path. */
static int cg_path_ok(const char *path)
{
    if (strncmp(path, "/sys/fs/cgroup", 14) != 0 || (path[14] && path[14] != '/') ||
        strlen(path) >= PATH_MAX - 128)
        return 0;
    for (const char *c = path; *c; c++)
        if ((unsigned char)*c < 0x20)
            return 0;
    return !strstr(path, "/./") && !strstr(path, "/../") &&
           strcmp(path + strlen(path) - 2, "/.") &&
           strcmp(path + strlen(path) - 3, "/..");
}

/* Removes what the gone hutch whose state directory is `dir` (PID.START
 * or PID.START.N) recorded: its sandbox cgroups (hutch-PID.START-*, and
 * what is still running in them) below each parent it names, its v2 leaf;
 * then the record and the directory, once nothing of it is left. */
static void sweep_record(const struct hutch_host *host, const char *dir, int pid,
                         unsigned long long start)
{
    char path[PATH_MAX + 16], buf[CG_RECORD_MAX], prefix[64], self[48];
    int left = 0, fd;
    ssize_t n;

    snprintf(path, sizeof(path), "%s/" CG_RECORD, dir);
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        (void)rmdir(dir); /* nothing recorded: only an empty one goes */
        return;
    }
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    snprintf(prefix, sizeof(prefix), "hutch-%d.%llu-", pid, start);
    snprintf(self, sizeof(self), "/hutch-self-%d", pid);
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "parent ", 7) == 0 && cg_path_ok(line + 7)) {
            DIR *d = opendir(line + 7);
            for (struct dirent *de; d && (de = readdir(d));) {
                char cg[PATH_MAX + 300];
                if (strncmp(de->d_name, prefix, strlen(prefix)) != 0)
                    continue;
                snprintf(cg, sizeof(cg), "%s/%s", line + 7, de->d_name);
                host->log(HUTCH_LOG_INFO, "local", "removing leftover cgroup %s", cg);
                cg_remove_leftover(cg);
                if (access(cg, F_OK) == 0) {
                    host->log(HUTCH_LOG_WARN, "local",
                              "cannot remove leftover cgroup %s", cg);
                    left = 1;
                }
            }
            if (d)
                closedir(d);
        } else if (strncmp(line, "leaf ", 5) == 0 && cg_path_ok(line + 5) &&
                   strlen(line + 5) > strlen(self) &&
                   strcmp(line + 5 + strlen(line + 5) - strlen(self), self) == 0) {
            /* Empty once its hutch is gone, unless a live process took the
             * pid since and moved itself in: then rmdir fails (EBUSY). */
            (void)rmdir(line + 5);
        }
    }
    if (left)
        return; /* the record stays for the next sweep */
    unlink(path);
    if (rmdir(dir) < 0 && errno != ENOENT)
        host->log(HUTCH_LOG_WARN, "local", "cannot remove %s: %s", dir,
                  strerror(errno));
}

/* The sweep of every hutch's start (see the top of this file): what the
 * hutch processes that are gone recorded in their state directories,
 * below `parent`. */
static void local_sweep(const struct hutch_host *host, const char *parent)
{
    DIR *d = opendir(parent);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));) {
        char dir[PATH_MAX + 300];
        unsigned long long start;
        int pid;
        if (sscanf(de->d_name, "%d.%llu", &pid, &start) != 2 || pid <= 0 ||
            !box_process_gone(pid, start))
            continue; /* not a state directory, or its hutch still runs */
        if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", parent, de->d_name) >=
            sizeof(dir))
            continue;
        sweep_record(host, dir, pid, start);
    }
    closedir(d);
}

/* Writes this hutch's record (CG_RECORD) into its state directory. */
static void cg_record(struct local_state *st, const char *state_dir)
{
    const char *parents[] = {st->cg.mem_parent, st->cg.pids_parent, st->cg.cpu_parent};
    char path[PATH_MAX + 16], buf[CG_RECORD_MAX];
    size_t n = 0;
    int fd;

    for (size_t i = 0; i < 3 && st->cg.version; i++) {
        int dup = 0;
        for (size_t j = 0; j < i; j++)
            dup |= strcmp(parents[i], parents[j]) == 0;
        if (parents[i][0] && !dup && n < sizeof(buf))
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "parent %s\n", parents[i]);
    }
    if (st->cg.self_leaf[0] && n < sizeof(buf))
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "leaf %s\n", st->cg.self_leaf);
    if (!n || n >= sizeof(buf))
        return;
    snprintf(path, sizeof(path), "%s/" CG_RECORD, state_dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || write(fd, buf, n) != (ssize_t)n)
        st->host->log(HUTCH_LOG_WARN, "local",
                      "cannot record this hutch's cgroups in %s: %s (a kill -9 "
                      "would leave them to the next hutch of this cgroup only)",
                      path, strerror(errno ? errno : EIO));
    if (fd >= 0)
        close(fd);
}

static void cg_sweep_all(struct local_state *st)
{
    if (st->cg.version == 0)
        return;
    cg_sweep(st, st->cg.mem_parent);
    if (st->cg.version == 1) {
        cg_sweep(st, st->cg.pids_parent);
        cg_sweep(st, st->cg.cpu_parent);
    }
}

static int cg_cpu_limit(struct local_state *st, struct local_sandbox *sb,
                        const char *name, uint32_t millis, struct hutch_err *err);

static int cg_create(struct local_state *st, struct local_sandbox *sb,
                     unsigned long seq, const struct hutch_sandbox_class *cls,
                     struct hutch_err *err)
{
    char name[128], val[64];
    int r;

    if (st->cg.version == 0)
        return 0;
    snprintf(name, sizeof(name), "hutch-%s-%s-%lu", st->owner, st->instance, seq);
    snprintf(sb->cg_mem, sizeof(sb->cg_mem), "%s/%s", st->cg.mem_parent, name);
    if (mkdir(sb->cg_mem, 0755) < 0) {
        r = -errno;
        sb->cg_mem[0] = '\0';
        return hutch_err_set(err, r, "creating cgroup %s/%s: %s", st->cg.mem_parent,
                             name, strerror(-r));
    }
    if (st->cg.version == 1) {
        snprintf(sb->cg_pids, sizeof(sb->cg_pids), "%s/%s", st->cg.pids_parent, name);
        if (mkdir(sb->cg_pids, 0755) < 0) {
            r = -errno;
            sb->cg_pids[0] = '\0';
            return hutch_err_set(err, r, "creating cgroup %s: %s", name, strerror(-r));
        }
        snprintf(val, sizeof(val), "%llu", (unsigned long long)cls->memory_bytes);
        r = cg_write(sb->cg_mem, "memory.limit_in_bytes", val);
        if (r == 0 &&
            access("/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes", F_OK) == 0)
            r = cg_write(sb->cg_mem, "memory.memsw.limit_in_bytes", val);
        if (r < 0)
            return hutch_err_set(err, r, "setting the memory limit: %s", strerror(-r));
        snprintf(val, sizeof(val), "%u", cls->pids_max);
        r = cg_write(sb->cg_pids, "pids.max", val);
        if (r < 0)
            return hutch_err_set(err, r, "setting the pids limit: %s", strerror(-r));
    } else {
        snprintf(val, sizeof(val), "%llu", (unsigned long long)cls->memory_bytes);
        r = cg_write(sb->cg_mem, "memory.max", val);
        if (r == 0)
            r = cg_write(sb->cg_mem, "memory.swap.max", "0");
        if (r == -ENOENT)
            r = 0; /* no swap accounting */
        if (r < 0)
            return hutch_err_set(err, r, "setting the memory limit: %s", strerror(-r));
        snprintf(val, sizeof(val), "%u", cls->pids_max);
        r = cg_write(sb->cg_mem, "pids.max", val);
        if (r < 0)
            return hutch_err_set(err, r, "setting the pids limit: %s", strerror(-r));
    }
    return cg_cpu_limit(st, sb, name, cls->cpu_millis, err);
}

/* The sandbox's place in the cpu controller: its weight among sandboxes
 * (local_cpu_weight) and, when the class has one, its CPU time as a CFS
 * quota over a 100 ms period (1000 millis = one CPU).  v1: a cgroup of its
 * own in the cpu hierarchy, made even without a quota so that its weight
 * can be set; v2: cg_mem.  Without a usable cpu controller, neither. */
static int cg_cpu_limit(struct local_state *st, struct local_sandbox *sb,
                        const char *name, uint32_t millis, struct hutch_err *err)
{
    char val[64];
    int r = 0;
    if (!st->cg.cpu_parent[0]) {
        if (millis)
            st->host->log(
                HUTCH_LOG_WARN, "local",
                "no usable cpu cgroup controller: the CPU limit is not applied");
        return 0;
    }
    if (st->cg.version == 2) {
        snprintf(val, sizeof(val), "%u 100000", millis * 100u);
        if (millis)
            r = cg_write(sb->cg_mem, "cpu.max", val);
    } else {
        snprintf(sb->cg_cpu, sizeof(sb->cg_cpu), "%s/%s", st->cg.cpu_parent, name);
        if (mkdir(sb->cg_cpu, 0755) < 0) {
            r = -errno;
            sb->cg_cpu[0] = '\0';
            return hutch_err_set(err, r, "creating cpu cgroup %s: %s", name,
                                 strerror(-r));
        }
        snprintf(val, sizeof(val), "%u", millis * 100u);
        if (millis)
            r = cg_write(sb->cg_cpu, "cpu.cfs_period_us", "100000");
        if (millis && r == 0)
            r = cg_write(sb->cg_cpu, "cpu.cfs_quota_us", val);
    }
    if (r < 0)
        return hutch_err_set(err, r, "setting the CPU limit: %s", strerror(-r));
    return 0;
}

/* cgroup v2's cpu.weight, or v1's cpu.shares (1024 for the default 100). */
static int local_cpu_weight(void *state, struct hutch_sandbox *hsb, uint32_t weight,
                            struct hutch_err *err)
{
    struct local_state *st = state;
    struct local_sandbox *sb = (struct local_sandbox *)hsb;
    char val[32];
    int r;

    if ((r = box_cpu_weight_check(weight, err)) < 0)
        return r;
    if (st->cg.version == 2 && st->cg.cpu_parent[0] && sb->cg_mem[0]) {
        snprintf(val, sizeof(val), "%u", weight);
        r = cg_write(sb->cg_mem, "cpu.weight", val);
    } else if (st->cg.version == 1 && sb->cg_cpu[0]) {
        snprintf(val, sizeof(val), "%u", box_cpu_shares(weight));
        r = cg_write(sb->cg_cpu, "cpu.shares", val);
    } else {
        return hutch_err_set(err, -ENOTSUP, "no usable cpu cgroup controller");
    }
    if (r < 0)
        return hutch_err_set(err, r, "setting the CPU weight: %s", strerror(-r));
    return 0;
}

static int cg_enter(struct local_sandbox *sb, pid_t pid)
{
    char val[32];
    int r = 0;
    snprintf(val, sizeof(val), "%d", pid);
    if (sb->cg_mem[0])
        r = cg_write(sb->cg_mem, "cgroup.procs", val);
    if (r == 0 && sb->cg_pids[0])
        r = cg_write(sb->cg_pids, "cgroup.procs", val);
    if (r == 0 && sb->cg_cpu[0])
        r = cg_write(sb->cg_cpu, "cgroup.procs", val);
    return r;
}

/* Attaching a process to a cgroup can wait for an RCU grace period (10-15
 * ms on cgroup v1's threadgroup rwsem).  Done before the sandbox's first
 * fork it would sit on every execution's critical path; done here, after
 * init has exec'd the runner, it overlaps the interpreter's start-up.  It
 * still precedes the job: no program code runs before start() returns, and
 * neither init nor the runner forks before then. */
static int attach_late(struct local_sandbox *sb)
{
    char path[96], buf[256];
    long pid;
    char *p, *end;
    int r;

    r = cg_enter(sb, sb->init_pid);
    if (r < 0)
        return r;
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", sb->init_pid,
             sb->init_pid);
    r = read_str(path, buf, sizeof(buf));
    if (r < 0)
        return r;
    for (p = buf; (pid = strtol(p, &end, 10)) > 0; p = end) {
        r = cg_enter(sb, (pid_t)pid);
        if (r < 0 && r != -ESRCH) /* a runner that already died is no risk */
            return r;
    }
    return 0;
}

/* A pooled sandbox waits, idle, until a job takes it: its attach need not
 * hold the pool's refill thread for the RCU grace period it can take (the
 * refill threads are as many as the CPUs, and with the zygote the wait was
 * most of a start).  One thread of the plugin attaches the queued
 * sandboxes in turn (a grace period is shared by the writes that follow
 * it closely); assign() waits for the sandbox's own, so the limits are in
 * force before the job's first byte, and destroy() takes a sandbox out of
 * the queue or waits for its attach. */
static void *attacher_main(void *arg)
{
    struct local_state *st = arg;
    pthread_mutex_lock(&st->att_mu);
    for (;;) {
        struct local_sandbox *sb;
        while (!st->att_head && !st->att_stop)
            pthread_cond_wait(&st->att_cv, &st->att_mu);
        if (!st->att_head)
            break;
        sb = st->att_head;
        st->att_head = sb->att_next;
        if (!st->att_head)
            st->att_tail = NULL;
        sb->att_state = ATT_RUNNING;
        pthread_mutex_unlock(&st->att_mu);
        {
            int rc = attach_late(sb);
            pthread_mutex_lock(&st->att_mu);
            sb->att_rc = rc;
        }
        sb->att_state = ATT_DONE;
        pthread_cond_broadcast(&st->att_cv);
    }
    pthread_mutex_unlock(&st->att_mu);
    return NULL;
}

/* Queue sb's attach; 0, or -errno when the thread cannot start (the caller
 * then attaches it itself). */
static int attach_later(struct local_state *st, struct local_sandbox *sb)
{
    int r = 0;
    pthread_mutex_lock(&st->att_mu);
    if (!st->att_started) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the thread takes no signal */
        r = -pthread_create(&st->att_thread, NULL, attacher_main, st);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        st->att_started = r == 0;
    }
    if (r == 0) {
        sb->att_state = ATT_QUEUED;
        sb->att_next = NULL;
        if (st->att_tail)
            st->att_tail->att_next = sb;
        else
            st->att_head = sb;
        st->att_tail = sb;
        pthread_cond_broadcast(&st->att_cv);
    }
    pthread_mutex_unlock(&st->att_mu);
    return r;
}

/* Wait for sb's attach (assign), or take it out of the queue (destroy):
 * afterwards the attacher no longer touches sb.  Its result, 0 when it
 * had none to do. */
static int attach_settle(struct local_state *st, struct local_sandbox *sb, int dequeue)
{
    int rc = 0;
    pthread_mutex_lock(&st->att_mu);
    if (dequeue && sb->att_state == ATT_QUEUED) {
        struct local_sandbox **at = &st->att_head, *prev = NULL;
        while (*at && *at != sb) {
            prev = *at;
            at = &(*at)->att_next;
        }
        if (*at) {
            *at = sb->att_next;
            if (st->att_tail == sb)
                st->att_tail = prev;
        }
        sb->att_state = ATT_NONE;
    }
    while (sb->att_state == ATT_QUEUED || sb->att_state == ATT_RUNNING)
        pthread_cond_wait(&st->att_cv, &st->att_mu);
    if (sb->att_state == ATT_DONE)
        rc = sb->att_rc;
    sb->att_state = ATT_NONE;
    pthread_mutex_unlock(&st->att_mu);
    return rc;
}

static int cg_oom(struct local_sandbox *sb)
{
    char buf[1024], path[PATH_MAX + 32];
    const char *key;
    if (!sb->cg_mem[0])
        return 0;
    if (sb->cg_pids[0]) { /* v1 */
        snprintf(path, sizeof(path), "%s/memory.oom_control", sb->cg_mem);
        key = "oom_kill ";
    } else {
        snprintf(path, sizeof(path), "%s/memory.events", sb->cg_mem);
        key = "oom_kill ";
    }
    if (read_str(path, buf, sizeof(buf)) < 0)
        return 0;
    for (char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, key, strlen(key)) == 0)
            return atol(l + strlen(key)) > 0;
    return 0;
}

/* --- interpreters --------------------------------------------------------- */

/* The options, declared once (opts.h): the policy's executor_options.local
 * and the environment variables of the process. */
static const struct hutch_option local_options[] = {
    OPT_ROW("flavour", HUTCH_OPTION_STRING, NULL, 0,
            "base (the default) or data: the host's Python must have numpy, "
            "pandas and matplotlib (the sandboxes run the host's interpreters)."),
    OPT_ROW("python", HUTCH_OPTION_STRING, "HUTCH_PYTHON", HUTCH_OPTION_ENV_ONLY,
            "The Python interpreter, below /usr (default /usr/bin/python3, else "
            "/usr/local/bin/python3)."),
    OPT_ROW("node", HUTCH_OPTION_STRING, "HUTCH_NODE", HUTCH_OPTION_ENV_ONLY,
            "The Node.js interpreter, below /usr (default /usr/bin/node, else "
            "/usr/local/bin/node, /usr/bin/nodejs)."),
    OPT_ROW("zygote", HUTCH_OPTION_BOOL, "HUTCH_LOCAL_ZYGOTE", HUTCH_OPTION_ENV_ONLY,
            "Python sandboxes fork a waiting interpreter instead of starting one "
            "(default true; needs the host's libpython3.X): false starts one each "
            "time."),
    OPT_ROW("uid_base", HUTCH_OPTION_INT, "HUTCH_LOCAL_UID_BASE", HUTCH_OPTION_ENV_ONLY,
            "The first of the 4194304 unused host uids and gids the sandboxes' "
            "users map to, from 65536 (default 1879048192, 0x70000000)."),
    OPT_END,
};

/* The real interpreter binary, never a shim from $PATH (pyenv, asdf…): only
 * what lives under /usr is visible in the sandbox anyway. */
static int find_interp(const char *language, char *out, size_t len,
                       struct hutch_err *err)
{
    static const char *const py[] = {"/usr/bin/python3", "/usr/local/bin/python3",
                                     NULL};
    static const char *const js[] = {"/usr/bin/node", "/usr/local/bin/node",
                                     "/usr/bin/nodejs", NULL};
    const char *const *c;
    const char *env;
    char real[PATH_MAX];

    if (strcmp(language, "python") == 0) {
        c = py;
        env = opt_env(local_options, "python");
    } else if (strcmp(language, "javascript") == 0) {
        c = js;
        env = opt_env(local_options, "node");
    } else {
        return hutch_err_set(err, -EINVAL,
                             "unknown language \"%s\": use python or javascript",
                             language);
    }
    for (; env || *c; env ? (void)(env = NULL) : (void)c++) {
        const char *cand = env ? env : *c;
        if (!realpath(cand, real) || access(real, X_OK) < 0)
            continue;
        if (strncmp(real, "/usr/", 5) != 0)
            continue;
        snprintf(out, len, "%s", real);
        return 0;
    }
    return hutch_err_set(
        err, -ENOENT,
        "no %s interpreter under /usr (install it: apt-get install -y %s)", language,
        strcmp(language, "python") == 0 ? "python3" : "nodejs");
}

/* --- runtime ---------------------------------------------------------------- */

/* The first line argv prints (empty environment, at most LOCAL_VERSION_MS),
 * control characters made spaces; "" when it prints nothing. */
#define LOCAL_VERSION_MS 5000
static int first_line(char *const argv[], char *out, size_t len, struct hutch_err *err)
{
    char *envp[] = {"PATH=/usr/bin:/bin", NULL};
    posix_spawn_file_actions_t fa;
    struct pollfd pfd;
    size_t got = 0;
    int pipefd[2], status = 0, r;
    pid_t pid;

    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return hutch_err_set(err, -errno, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
    r = posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (r != 0) {
        close(pipefd[0]);
        return hutch_err_set(err, -r, "running %s: %s", argv[0], strerror(r));
    }
    pfd.fd = pipefd[0];
    pfd.events = POLLIN;
    while (got < len - 1 && poll(&pfd, 1, LOCAL_VERSION_MS) > 0) {
        ssize_t n = read(pipefd[0], out + got, len - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    out[got] = '\0';
    close(pipefd[0]);
    kill(pid, SIGKILL); /* gone already, unless it hung */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    out[strcspn(out, "\r\n")] = '\0';
    for (char *c = out; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = ' ';
    return 0;
}

/* The first line `interp --version` prints: what the sandboxes of this
 * executor run. */
static int local_runtime(void *state, const char *language, char *buf, size_t len,
                         struct hutch_err *err)
{
    char interp[PATH_MAX], out[256];
    char *argv[] = {interp, "--version", NULL};
    int r;

    (void)state;
    r = find_interp(language, interp, sizeof(interp), err);
    if (r < 0)
        return r;
    r = first_line(argv, out, sizeof(out), err);
    if (r < 0)
        return r;
    if (!out[0])
        return hutch_err_set(err, -EIO, "%s --version said nothing", interp);
    /* node says "v20.1.0": name it, as the images' record does. */
    snprintf(buf, len, "%s%s", strcmp(language, "javascript") == 0 ? "Node.js " : "",
             out);
    return 0;
}

/* The data flavour's packages the host's Python has, asked of their
 * metadata without importing them.  The sandboxes run the host's
 * interpreter with the host's packages, whatever the flavour: the same
 * list for both.  Node.js: none (a program may import Node's built-ins). */
static const char local_pkg_script[] = "import importlib.metadata as m\n"
                                       "o = []\n"
                                       "for p in ('numpy', 'pandas', 'matplotlib'):\n"
                                       "    try:\n"
                                       "        o.append(p + ' ' + m.version(p))\n"
                                       "    except Exception:\n"
                                       "        pass\n"
                                       "print(', '.join(o))\n";

static int local_packages(void *state, const char *language, const char *flavour,
                          char *buf, size_t len, struct hutch_err *err)
{
    char interp[PATH_MAX], out[HUTCH_PACKAGES_MAX];
    char *argv[] = {interp, "-I", "-c", (char *)local_pkg_script, NULL};
    int r;

    (void)state;
    if (box_flavour(flavour, "local", err) < 0)
        return -EINVAL;
    r = find_interp(language, interp, sizeof(interp), err);
    if (r < 0)
        return r;
    if (strcmp(language, "python") != 0) {
        if (len)
            buf[0] = '\0';
        return 0;
    }
    r = first_line(argv, out, sizeof(out), err);
    if (r < 0)
        return r;
    snprintf(buf, len, "%s", out);
    return 0;
}

/* Whether the host's Python has every package of the data flavour: asked
 * once (the first data-flavour sandbox), kept.  1 yes, 0 no (`why` says
 * what to install), negative when it cannot be told. */
static int local_has_data(struct local_state *st, char *why, size_t why_len)
{
    int v = atomic_load(&st->data_ok);
    if (v == 0) {
        char pk[HUTCH_PACKAGES_MAX] = "";
        struct hutch_err err = HUTCH_ERR_INIT;
        v = local_packages(st, "python", "data", pk, sizeof(pk), &err) < 0 ? -1
            : strstr(pk, "numpy ") && strstr(pk, "pandas ") && strstr(pk, "matplotlib ")
                ? 1
                : 2;
        atomic_store(&st->data_ok, v);
    }
    if (v != 1)
        snprintf(why, why_len,
                 "the data flavour on the local executor runs the host's Python, "
                 "which lacks numpy, pandas or matplotlib: apt-get install -y "
                 "python3-numpy python3-pandas python3-matplotlib");
    return v == 1;
}

/* --- plugin operations ------------------------------------------------------ */

/* Cheap on purpose: every `hutch run` probes the plugins it loads.  The
 * real test (creating the namespaces) is `hutch doctor`'s, and start()
 * reports a failure with the same advice. */
static int read_long(const char *path, long *v)
{
    char buf[32];
    if (read_str(path, buf, sizeof(buf)) < 0)
        return -1;
    *v = strtol(buf, NULL, 10);
    return 0;
}

static int local_probe(const struct hutch_host *host, struct hutch_err *err)
{
    long v;
    if (read_long("/proc/sys/user/max_user_namespaces", &v) == 0 && v == 0)
        return hutch_err_set(err, -EPERM,
                             "user namespaces are disabled: run 'sysctl -w "
                             "user.max_user_namespaces=15000'");
    if (geteuid() != 0 &&
        read_long("/proc/sys/kernel/unprivileged_userns_clone", &v) == 0 && v == 0)
        return hutch_err_set(
            err, -EPERM,
            "unprivileged user namespaces are disabled: run 'sysctl -w "
            "kernel.unprivileged_userns_clone=1' or run hutch as root");
    if (geteuid() != 0 &&
        read_long("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", &v) == 0 &&
        v == 1)
        return hutch_err_set(
            err, -EPERM,
            "AppArmor restricts unprivileged user namespaces: run 'sysctl "
            "-w kernel.apparmor_restrict_unprivileged_userns=0' or run "
            "hutch as root");
    return 0;
}

static int local_open(const struct hutch_host *host, const struct hutch_config *cfg,
                      void **state, struct hutch_err *err)
{
    struct local_state *st = calloc(1, sizeof(*st));
    if (!st)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    st->host = host;
    pthread_mutex_init(&st->att_mu, NULL);
    pthread_cond_init(&st->att_cv, NULL);
    snprintf(st->instance, sizeof(st->instance), "%s",
             cfg && cfg->instance_id ? cfg->instance_id : "0");
    {
        char why[256];
        int r = filter_build(&st->bpf, &st->bpf_len, why, sizeof(why));
        if (r < 0) {
            free(st);
            return hutch_err_set(err, r, "seccomp filter: %s", why);
        }
    }
    snprintf(st->owner, sizeof(st->owner), "%d.%llu", (int)getpid(),
             box_proc_start(getpid()));
    cgroup_detect(&st->cg);
    cg_sweep_all(st);
    if (cfg && HUTCH_HAS_MEMBER(cfg, struct hutch_config, state_dir) &&
        cfg->state_dir && cfg->state_dir[0] == '/' &&
        strlen(cfg->state_dir) < PATH_MAX) {
        char parent[PATH_MAX];
        snprintf(parent, sizeof(parent), "%s", cfg->state_dir);
        *strrchr(parent, '/') = '\0';
        local_sweep(host, parent);
        cg_record(st, cfg->state_dir);
    }
    st->landlock = lsb_landlock_abi() >= 6;
    st->id_base = LSB_HOST_ID_BASE;
    {
        const char *env = opt_env(local_options, "uid_base");
        char *end;
        unsigned long v;
        if (env) {
            errno = 0;
            v = strtoul(env, &end, 0);
            if (errno || *end || v < 65536 || v > 0xfffffffeul - LSB_HOST_ID_RANGE) {
                free(st->bpf);
                free(st);
                return hutch_err_set(err, -EINVAL,
                                     "HUTCH_LOCAL_UID_BASE=%s: want a uid from 65536 "
                                     "to %lu, the first of %u unused host uids",
                                     env, 0xfffffffeul - LSB_HOST_ID_RANGE,
                                     LSB_HOST_ID_RANGE);
            }
            st->id_base = (uint32_t)v;
        }
    }
    {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", getpid(), getpid());
        st->late_attach = access(path, R_OK) == 0;
    }
    {
        int r = lsb_factory_init(&st->factory, host, err);
        if (r < 0) {
            lsb_factory_fini(&st->factory);
            free(st->bpf);
            free(st);
            return r;
        }
    }
    {
        /* The zygote starts with the first Python sandbox; without a
         * Python (or with HUTCH_LOCAL_ZYGOTE=false) there is none. */
        int on = opt_env_bool(local_options, "zygote", 1, err);
        char interp[PATH_MAX], dir[PATH_MAX];
        struct hutch_err e = HUTCH_ERR_INIT;
        if (on < 0) {
            lsb_factory_fini(&st->factory);
            free(st->bpf);
            free(st);
            return on;
        }
        if (on && find_interp("python", interp, sizeof(interp), &e) == 0 &&
            realpath(host->runner_dir, dir) &&
            lsb_factory_init_zygote(&st->zygote, host, interp, dir, &e) == 0)
            st->zygote_on = 1;
    }
    if (st->cg.version == 0)
        host->log(HUTCH_LOG_INFO, "local", "no cgroup limits: %s", st->cg.reason);
    *state = st;
    return 0;
}

static void local_close(void *state)
{
    struct local_state *st = state;
    if (st) {
        if (st->att_started) {
            pthread_mutex_lock(&st->att_mu);
            st->att_stop = 1;
            pthread_cond_broadcast(&st->att_cv);
            pthread_mutex_unlock(&st->att_mu);
            pthread_join(st->att_thread, NULL);
        }
        pthread_mutex_destroy(&st->att_mu);
        pthread_cond_destroy(&st->att_cv);
        lsb_factory_fini(&st->factory);
        if (st->zygote_on)
            lsb_factory_fini(&st->zygote);
        free(st->bpf);
    }
    free(st);
}

static int local_helper(const struct hutch_host *host, int argc, char **argv)
{
    return lsb_factory_main(host, argc, argv);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static void sandbox_free(struct local_sandbox *sb)
{
    close_fd(&sb->pub.chan_fd);
    close_fd(&sb->pub.stdout_fd);
    close_fd(&sb->pub.stderr_fd);
    close_fd(&sb->ctrl_fd);
    close_fd(&sb->init_pidfd);
    close_fd(&sb->c1_pidfd);
    cg_remove(sb->cg_mem);
    cg_remove(sb->cg_pids);
    cg_remove(sb->cg_cpu);
    free(sb);
}

static int wait_readable(int fd, int ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    int r;
    do
        r = poll(&pfd, 1, ms);
    while (r < 0 && errno == EINTR);
    return r;
}

/* wait_readable() for start(), in slices, asking how->cancelled() between
 * them: 1 readable, 0 not within ms (or poll failed), -ECANCELED. */
static int wait_start(int fd, int ms, const struct hutch_start *how)
{
    uint64_t deadline = mono_us() + (uint64_t)ms * 1000u;
    for (;;) {
        uint64_t now = mono_us();
        int r;
        if (plugin_start_cancelled(how))
            return -ECANCELED;
        if (now >= deadline)
            return 0;
        r = wait_readable(fd,
                          deadline - now > 50000 ? 50 : (int)((deadline - now) / 1000));
        if (r != 0)
            return r > 0 ? 1 : 0;
    }
}

static void local_kill(void *state, struct hutch_sandbox *pub)
{
    struct local_sandbox *sb = (struct local_sandbox *)pub;
    /* Killing pid 1 of the namespace kills every process in it. */
    if (sb->init_pidfd >= 0)
        syscall(SYS_pidfd_send_signal, sb->init_pidfd, SIGKILL, NULL, 0);
    if (sb->c1_pidfd >= 0)
        syscall(SYS_pidfd_send_signal, sb->c1_pidfd, SIGKILL, NULL, 0);
    sb->killed = 1;
}

static void local_destroy(void *state, struct hutch_sandbox *pub)
{
    struct local_state *st = state;
    struct local_sandbox *sb = (struct local_sandbox *)pub;
    if (!sb)
        return;
    attach_settle(state, sb, 1);
    /* A factory killed behind hutch's back (it may get no request for a
     * long time: the other one serves) is reaped here, not left a zombie
     * until its own next sandbox. */
    lsb_factory_poll(&st->factory);
    if (st->zygote_on)
        lsb_factory_poll(&st->zygote);
    if (sb->init_pidfd >= 0)
        syscall(SYS_pidfd_send_signal, sb->init_pidfd, SIGKILL, NULL, 0);
    if (sb->c1_pidfd >= 0) {
        /* C1 exits once init and with it the whole namespace is gone (the
         * factory reaps it; its pidfd says when it exited). */
        if (wait_readable(sb->c1_pidfd, 1000) == 0) {
            syscall(SYS_pidfd_send_signal, sb->c1_pidfd, SIGKILL, NULL, 0);
            wait_readable(sb->c1_pidfd, 1000);
        }
        sb->c1 = 0;
    }
    sandbox_free(sb);
}

static int write_map(pid_t pid, const char *file, const char *line)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
    return box_write_str(path, line);
}

static int local_start(void *state, const struct hutch_sandbox_class *cls,
                       const struct hutch_start *how, struct hutch_sandbox **out,
                       struct hutch_err *err)
{
    struct local_state *st = state;
    struct lsb_params p;
    struct local_sandbox *sb;
    struct lsb_factory *fac;
    int ctrl[2] = {-1, -1}, sync[2] = {-1, -1}, chan[2] = {-1, -1};
    int opipe[2] = {-1, -1}, epipe[2] = {-1, -1};
    struct lsb_hdr h;
    char *payload = NULL, map[128];
    int r, data, egress = -1;

    {
        /* One option: the flavour.  The sandboxes run the host's Python
         * either way; "data" asks that it have the data flavour's
         * packages, and fails saying what to install when it has not. */
        char fl[32], why[256];
        r = opt_get(local_options, "local", cls, "flavour", 0, fl, sizeof(fl), err);
        if (r == 0)
            r = box_flavour(fl, "local", err);
        if (r < 0)
            return r;
        if (r == 1 && !local_has_data(st, why, sizeof(why)))
            return hutch_err_set(err, -ENOENT, "%s", why);
        data = r;
    }
    memset(&p, 0, sizeof(p));
    p.preload = plugin_preload(cls, data, how);
    sb = calloc(1, sizeof(*sb));
    if (!sb)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    sb->pub.struct_size = sizeof(sb->pub);
    sb->pub.chan_fd = sb->pub.stdout_fd = sb->pub.stderr_fd = sb->pub.event_fd = -1;
    sb->pub.egress_fd = -1;
    sb->ctrl_fd = sb->init_pidfd = sb->c1_pidfd = -1;
    snprintf(sb->label, sizeof(sb->label), "%s", plugin_start_label(how, "-"));

    p.host = st->host;
    r = find_interp(cls->language, p.interp, sizeof(p.interp), err);
    if (r < 0)
        goto fail;
    snprintf(p.language, sizeof(p.language), "%s",
             strcmp(cls->language, "python") == 0 ? "python" : "javascript");
    snprintf(p.runner, sizeof(p.runner), "%s",
             strcmp(cls->language, "python") == 0 ? "runner.py" : "runner.js");
    if (!realpath(st->host->runner_dir, p.runner_dir)) {
        r = hutch_err_set(err, -errno,
                          "runner directory %s: %s (set HUTCH_RUNNER_DIR or reinstall)",
                          st->host->runner_dir, strerror(errno));
        goto fail;
    }
    p.is_root = geteuid() == 0;
    p.id_base = st->id_base;
    p.memory_bytes =
        cls->memory_bytes ? cls->memory_bytes : (uint64_t)HUTCH_DEFAULT_MEMORY_MB << 20;
    p.work_bytes =
        cls->work_bytes ? cls->work_bytes : (uint64_t)HUTCH_DEFAULT_WORK_MB << 20;
    p.tmp_bytes =
        cls->tmp_bytes ? cls->tmp_bytes : (uint64_t)HUTCH_DEFAULT_TMP_MB << 20;
    p.pids_max = cls->pids_max ? cls->pids_max : HUTCH_DEFAULT_PIDS;
    p.open_files = cls->open_files ? cls->open_files : HUTCH_DEFAULT_OPEN_FILES;

    uint64_t t0 = mono_us(), t_cg, t_fork, t_sync, t_ready;
    {
        /* One number per sandbox, even when executions start concurrently:
         * it names the sandbox's cgroups. */
        unsigned long seq = __atomic_add_fetch(&st->seq, 1, __ATOMIC_RELAXED);
        struct hutch_sandbox_class eff = *cls;
        eff.memory_bytes = p.memory_bytes;
        eff.pids_max = p.pids_max;
        r = cg_create(st, sb, seq, &eff, err);
        if (r < 0)
            goto fail;
    }
    p.have_memcg = p.have_pidscg = sb->cg_mem[0] != '\0';
    t_cg = mono_us();

    /* Python's runner is a fork of the zygote's interpreter when it can be
     * (zygote.c says what siblings share): not the data flavour's, whose
     * sandboxes import their own packages before a job.  The zygote's own
     * start (an exec of hutch, libpython, the runner compiled) costs more
     * than one interpreter: a process's first cold Python start (the only
     * one of `hutch run`) execs its interpreter, and the zygote starts with
     * the first pooled start or the second cold one. */
    fac = st->zygote_on && strcmp(p.language, "python") == 0 && !p.preload &&
                  strcmp(p.interp, st->zygote.interp) == 0 &&
                  ((how && how->pooled) || atomic_fetch_add(&st->cold_python, 1) > 0)
              ? &st->zygote
              : &st->factory;
    /* Twice at most: a factory that died while it had the request (it may
     * have forked a C1 that used these channels before it died with it)
     * is started again, with new channels. */
    for (int attempt = 0;; attempt++) {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctrl) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sync) < 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, chan) < 0 ||
            pipe2(opipe, O_CLOEXEC) < 0 || pipe2(epipe, O_CLOEXEC) < 0) {
            r = hutch_err_set(err, -errno, "creating sandbox channels: %s",
                              strerror(errno));
            goto fail;
        }
        p.landlock = st->landlock;
        p.bpf = st->bpf;
        p.bpf_len = st->bpf_len;
        p.ctrl_fd = ctrl[1];
        p.sync_fd = sync[1];
        p.chan_fd = chan[1];
        p.out_fd = opipe[1];
        p.err_fd = epipe[1];

        if (plugin_start_cancelled(how))
            goto cancelled;
        r = lsb_factory_spawn(fac, &p, &sb->c1, &sb->c1_pidfd, err);
        if (r == -ENOEXEC && fac == &st->zygote) {
            /* No zygote for now (no libpython, another version, a runner
             * being reinstalled; factory.c said why): the plain factory. */
            fac = &st->factory;
            r = lsb_factory_spawn(fac, &p, &sb->c1, &sb->c1_pidfd, err);
        }
        if (r != -EAGAIN || attempt > 0)
            break;
        for (int i = 0; i < 2; i++) {
            close_fd(&ctrl[i]);
            close_fd(&sync[i]);
            close_fd(&chan[i]);
            close_fd(&opipe[i]);
            close_fd(&epipe[i]);
        }
    }
    if (r < 0)
        goto fail;
    t_fork = mono_us();
    close_fd(&ctrl[1]);
    close_fd(&sync[1]);
    close_fd(&chan[1]);
    close_fd(&opipe[1]);
    close_fd(&epipe[1]);

    /* C1 has unshared: give it its ids and its cgroups, then let it go. */
    if ((r = wait_start(sync[0], START_TIMEOUT_MS, how)) == -ECANCELED)
        goto cancelled;
    if (r <= 0 || lsb_recv(sync[0], &h, &payload, HUTCH_ERR_MSG) < 0) {
        r = hutch_err_set(err, -EIO,
                          "sandbox did not start (no answer from its helper)");
        goto fail;
    }
    if (h.type == LSB_FAIL) {
        r = hutch_err_set(err, -EPERM, "%s",
                          payload ? payload : "sandbox set-up failed");
        goto fail;
    }
    free(payload);
    payload = NULL;
    /* Without /proc/PID/task/TID/children the runner cannot be found to be
     * attached later: attach C1 now, and with it everything it forks. */
    r = st->late_attach ? 0 : cg_enter(sb, sb->c1);
    if (r < 0) {
        hutch_err_set(err, r, "moving the sandbox into its cgroup: %s", strerror(-r));
        goto fail;
    }
    /* As root, the sandbox user is the host uid C1 switched to (see
     * LSB_HOST_ID_BASE); otherwise hutch's own user. */
    snprintf(map, sizeof(map), "%d %u 1\n", LSB_UID,
             p.is_root ? p.id_base + (unsigned)sb->c1 : (unsigned)geteuid());
    if ((r = write_map(sb->c1, "uid_map", map)) < 0 ||
        (r = write_map(sb->c1, "setgroups", "deny")) < 0 ||
        (snprintf(map, sizeof(map), "%d %u 1\n", LSB_GID,
                  p.is_root ? p.id_base + (unsigned)sb->c1 : (unsigned)getegid()),
         (r = write_map(sb->c1, "gid_map", map)) < 0)) {
        hutch_err_set(err, r, "writing the sandbox's uid/gid map: %s", strerror(-r));
        goto fail;
    }
    if (write(sync[0], "g", 1) != 1) {
        r = hutch_err_set(err, -EIO, "sandbox helper went away during start");
        goto fail;
    }
    if ((r = wait_start(sync[0], START_TIMEOUT_MS, how)) == -ECANCELED)
        goto cancelled;
    if (r <= 0 || lsb_recv(sync[0], &h, &payload, HUTCH_ERR_MSG) < 0 ||
        h.type != LSB_READY || h.len != sizeof(int32_t)) {
        r = hutch_err_set(err, -EIO, "sandbox did not start (%s)",
                          payload && h.type == LSB_FAIL ? payload : "no init process");
        goto fail;
    }
    {
        int32_t init;
        memcpy(&init, payload, sizeof(init));
        sb->init_pid = init;
        sb->init_pidfd = (int)syscall(SYS_pidfd_open, (pid_t)init, 0);
    }
    free(payload);
    payload = NULL;
    close_fd(&sync[0]);
    t_sync = mono_us();

    if ((r = wait_start(ctrl[0], START_TIMEOUT_MS, how)) == -ECANCELED)
        goto cancelled;
    if (r <= 0 || lsb_recv_fd(ctrl[0], &h, &payload, HUTCH_ERR_MSG, &egress) < 0) {
        r = hutch_err_set(err, -EIO, "sandbox did not report ready within %d ms",
                          START_TIMEOUT_MS);
        goto fail;
    }
    if (h.type != LSB_READY) {
        r = hutch_err_set(err, -EPERM, "%s",
                          payload ? payload : "sandbox set-up failed without a reason");
        goto fail;
    }
    free(payload);
    payload = NULL;
    t_ready = mono_us();
    if (st->late_attach && sb->cg_mem[0]) {
        /* A pool's sandbox is attached by the attacher before its job. */
        r = how && how->pooled && attach_later(st, sb) == 0 ? 0 : attach_late(sb);
        if (r < 0) {
            hutch_err_set(err, r, "moving the sandbox into its cgroup: %s",
                          strerror(-r));
            goto fail;
        }
    }
    st->host->log(HUTCH_LOG_DEBUG, "local",
                  "%s: start (ms): cgroups %.2f, fork %.2f, namespaces %.2f, root fs + "
                  "runner %.2f, attach %.2f%s",
                  sb->label, (t_cg - t0) / 1000.0, (t_fork - t_cg) / 1000.0,
                  (t_sync - t_fork) / 1000.0, (t_ready - t_sync) / 1000.0,
                  (mono_us() - t_ready) / 1000.0,
                  fac == &st->zygote ? " (the zygote's)" : "");
    sb->ctrl_fd = ctrl[0];
    sb->pub.chan_fd = chan[0];
    sb->pub.stdout_fd = opipe[0];
    sb->pub.stderr_fd = epipe[0];
    sb->pub.event_fd = ctrl[0];
    sb->pub.egress_fd = egress; /* the core's from here on */
    egress = -1;
    *out = &sb->pub;
    return 0;

cancelled:
    r = hutch_err_set(err, -ECANCELED, "%s: sandbox start cancelled", sb->label);
fail:
    /* local_destroy() kills C1 (and with it the whole sandbox), waits for
     * it and removes the cgroups: nothing of this start is left. */
    free(payload);
    close_fd(&ctrl[0]);
    close_fd(&ctrl[1]);
    close_fd(&sync[0]);
    close_fd(&sync[1]);
    close_fd(&chan[0]);
    close_fd(&chan[1]);
    close_fd(&opipe[0]);
    close_fd(&opipe[1]);
    close_fd(&epipe[0]);
    close_fd(&epipe[1]);
    close_fd(&egress);
    local_destroy(st, &sb->pub);
    return r;
}

/* Nothing in the sandbox depends on the job: only the log lines do. */
static int local_assign(void *state, struct hutch_sandbox *pub,
                        const struct hutch_job *job, struct hutch_err *err)
{
    struct local_state *st = state;
    struct local_sandbox *sb = (struct local_sandbox *)pub;
    const char *label = plugin_job_label(job, "-");
    int r = attach_settle(st, sb, 0);
    if (r < 0)
        return hutch_err_set(err, r, "moving the sandbox into its cgroup: %s",
                             strerror(-r));
    if (strcmp(label, sb->label) != 0)
        st->host->log(HUTCH_LOG_DEBUG, "local", "%s: runs job %s", sb->label, label);
    snprintf(sb->label, sizeof(sb->label), "%s", label);
    return 0;
}

#define F(t) (1u << (t))

/* Read control frames until one whose type is in the mask `want` arrives;
 * EXIT frames on the way are remembered. */
static int recv_until(struct local_sandbox *sb, uint32_t want, struct lsb_hdr *h,
                      char **payload, int timeout_ms)
{
    for (;;) {
        int r;
        if (wait_readable(sb->ctrl_fd, timeout_ms) <= 0)
            return -ETIMEDOUT;
        r = lsb_recv(sb->ctrl_fd, h, payload, LSB_FRAME_MAX);
        if (r < 0)
            return r;
        if (h->type == LSB_EXIT && h->len == sizeof(int32_t) && !sb->exited) {
            memcpy(&sb->status, *payload, sizeof(int32_t));
            sb->exited = 1;
        }
        if (h->type < 32 && (want & F(h->type)))
            return 0;
        free(*payload);
        *payload = NULL;
    }
}

static int local_put(void *state, struct hutch_sandbox *pub, const void *tar,
                     size_t len, struct hutch_err *err)
{
    struct local_sandbox *sb = (struct local_sandbox *)pub;
    struct lsb_hdr h;
    char *payload = NULL;
    int r;

    if (len > HUTCH_TAR_IN_MAX_BYTES)
        return hutch_err_set(err, -E2BIG, "files for the sandbox exceed %u bytes",
                             HUTCH_TAR_IN_MAX_BYTES);
    r = lsb_send(sb->ctrl_fd, LSB_PUT, tar, len);
    if (r < 0)
        return hutch_err_set(err, r, "sending files into the sandbox: %s",
                             strerror(-r));
    r = recv_until(sb, F(LSB_PUT_OK) | F(LSB_PUT_ERR), &h, &payload, 60000);
    if (r < 0)
        return hutch_err_set(err, r, "sandbox did not take the files: %s",
                             strerror(-r));
    if (h.type == LSB_PUT_ERR) {
        r = hutch_err_set(err, -EINVAL, "unpacking files into /work: %s",
                          payload ? payload : "failed");
        free(payload);
        return r;
    }
    free(payload);
    return 0;
}

static void fill_exit(struct local_sandbox *sb, struct hutch_exit *ex)
{
    if (sb->exited)
        plugin_exit_from_status(ex, sb->status, cg_oom(sb));
    else /* init is gone: everything was killed. */
        plugin_exit_set(ex, 128 + SIGKILL, SIGKILL, cg_oom(sb));
}

static int local_reap(void *state, struct hutch_sandbox *pub, struct hutch_exit *ex,
                      struct hutch_err *err)
{
    struct local_sandbox *sb = (struct local_sandbox *)pub;
    while (!sb->exited) {
        struct lsb_hdr h;
        char *payload = NULL;
        int r;
        if (wait_readable(sb->ctrl_fd, 0) <= 0)
            return -EAGAIN;
        r = lsb_recv(sb->ctrl_fd, &h, &payload, LSB_FRAME_MAX);
        if (r < 0)
            break; /* init died: treated as killed */
        if (h.type == LSB_EXIT && h.len == sizeof(int32_t)) {
            memcpy(&sb->status, payload, sizeof(int32_t));
            sb->exited = 1;
        }
        free(payload);
    }
    fill_exit(sb, ex);
    return 0;
}

static int local_get(void *state, struct hutch_sandbox *pub, hutch_write_fn write_fn,
                     void *arg, uint64_t max_bytes, struct hutch_err *err)
{
    struct local_sandbox *sb = (struct local_sandbox *)pub;
    uint64_t total = 0;
    int r;

    if (sb->killed)
        return hutch_err_set(err, -ESRCH, "the sandbox was killed; no files to fetch");
    r = lsb_send(sb->ctrl_fd, LSB_PACK, &max_bytes, sizeof(max_bytes));
    if (r < 0)
        return hutch_err_set(err, r, "asking the sandbox for /work/out: %s",
                             strerror(-r));
    for (;;) {
        struct lsb_hdr h;
        char *payload = NULL;
        r = recv_until(sb, F(LSB_DATA) | F(LSB_DATA_END) | F(LSB_DATA_ERR), &h,
                       &payload, 60000);
        if (r < 0)
            return hutch_err_set(err, r, "fetching /work/out: %s", strerror(-r));
        if (h.type == LSB_DATA_END)
            return 0;
        if (h.type == LSB_DATA_ERR) {
            r = hutch_err_set(err, -EINVAL, "packing /work/out: %s",
                              payload ? payload : "failed");
            free(payload);
            return r;
        }
        total += h.len;
        if (total > max_bytes + (16u << 20)) {
            free(payload);
            return hutch_err_set(err, -E2BIG, "files in /work/out exceed %llu bytes",
                                 (unsigned long long)max_bytes);
        }
        r = write_fn(arg, payload, h.len);
        free(payload);
        if (r < 0)
            return hutch_err_set(err, r,
                                 "files in /work/out exceed the %llu-byte limit",
                                 (unsigned long long)max_bytes);
    }
}

static const struct hutch_executor local_executor = {
    .abi = HUTCH_EXECUTOR_ABI,
    .struct_size = sizeof(struct hutch_executor),
    .name = "local",
    .summary = "Linux namespaces + seccomp + cgroups on this host; needs no daemon",
    .version = PACKAGE_VERSION,
    .caps = HUTCH_CAP_ARCHIVE | HUTCH_CAP_PRESTART | HUTCH_CAP_CONCURRENT |
            HUTCH_CAP_EGRESS,
    .probe = local_probe,
    .open = local_open,
    .start = local_start,
    .assign = local_assign,
    .put_archive = local_put,
    .reap = local_reap,
    .get_archive = local_get,
    .kill = local_kill,
    .destroy = local_destroy,
    .close = local_close,
    .runtime = local_runtime,
    .packages = local_packages,
    .sweep = local_sweep,
    .helper = local_helper,
    .cpu_weight = local_cpu_weight,
    .options = local_options,
};

HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void)
{
    return &local_executor;
}
