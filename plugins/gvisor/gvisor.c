/* gvisor.c — the gVisor executor: each sandbox is its own runsc sandbox,
 * run from an OCI bundle hutch writes itself (config.json with cJSON), over
 * a rootfs directory from `make images`.  No Docker involved.
 *
 * As with the Docker executor, pid 1 is hutch-init (plugins/init/init.c)
 * talking to hutch over unix sockets bind-mounted at /run/hutch/io, which
 * runsc lets it reach with --host-uds=open; among them the egress socket,
 * the core's listener for the program's connections to hutch's proxy,
 * which init forwards from 127.0.0.1:HUTCH_EGRESS_PORT of the sandbox's
 * own loopback (--network=none: no other interface).  /work is a host directory on a
 * tmpfs hutch mounts with the class's size (capped; the host's disk is never
 * touched), bind-mounted into the sandbox; files go in and out through the
 * core's tar code on the host side.  The rootfs is read-only and wrapped in
 * an in-memory overlay (--overlay2=root:memory), so it stays untouched.
 *
 * Each hutch process keeps its runsc state root and bundles in the state
 * directory the core gives it (/run/hutch/gvisor/PID.START/); open() removes
 * what hutch processes that are gone left beside it (runsc delete --force,
 * unmount, remove).
 *
 * Nothing a sandbox can reach writes to the host's disk without a cap:
 * `runsc run`'s stderr (runsc's and the sentry's log, and the sandbox
 * init's stdio until init replaces it with /dev/null) is a file on a tmpfs
 * of its own, HUTCH_GVISOR_LOG_MAX_BYTES big.  A file rather than a pipe
 * the plugin drains: nothing has to read it while the sandbox runs (a full
 * pipe would block runsc), and a full tmpfs makes runsc drop log lines
 * (ENOSPC), where RLIMIT_FSIZE would kill runsc with SIGXFSZ, or refuse
 * the gofer's writes to /work. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "abi.h"
#include "box.h"
#include "caps.h"
#include "sbio.h"

#define GV_READY_MS     60000 /* runsc run until init connected (loaded machines) */
#define GV_STOP_MS      5000  /* init killing the program's processes */
#define GV_CMD_MS       10000 /* one runsc kill/delete/list */
#define GV_CG_SETTLE_MS 10000 /* a try's cgroup to empty (cg_rmdir_settle) */
#define GV_EXIT_MS      3000  /* sandbox gone after init was told to end */
#define GV_MAX_FLAGS    16    /* words in HUTCH_RUNSC_FLAGS */
/* Host tasks (the host cgroup's pids limit) of one sandbox: a base for
 * runsc and the sentry, plus a share per process the sandbox may hold.
 * Every sandbox process costs host tasks of its own (on the ptrace
 * platform its stub process, the sentry threads tracing it, more sentry
 * threads blocked on its behalf): about 10 were counted per process of a
 * fork bomb at its limit, more while the machine is busy.  A flat 512 on
 * top of the class's limit was hit by a bomb of 62 processes, and hitting
 * the host limit kills the whole sandbox instead of failing fork() inside
 * it (the sandbox's kernel does that, at RLIMIT_NPROC). */
#define GV_HOST_PIDS      512 /* runsc and the sentry */
#define GV_HOST_PIDS_EACH 16  /* per process of the class's limit */
#define GV_BASE           "/run/hutch/gvisor"
#define GV_LOG_TAIL       600

#ifndef HUTCH_IMAGES_DIRS
#define HUTCH_IMAGES_DIRS "/var/lib/hutch/images"
#endif

/* The options, declared once (opts.h): the policy's executor_options.gvisor
 * and the environment variables of the process. */
static const struct hutch_option gv_options[] = {
    OPT_ROW("platform", HUTCH_OPTION_STRING, "HUTCH_GVISOR_PLATFORM", 0,
            "The platform of the sandboxes: ptrace (the default) or kvm (ptrace, "
            "with a warning, where /dev/kvm does not work)."),
    OPT_ROW("flavour", HUTCH_OPTION_STRING, NULL, 0,
            "The rootfs flavour: base (the default) or data (Python with numpy, "
            "pandas and matplotlib)."),
    OPT_ROW("runsc", HUTCH_OPTION_STRING, "HUTCH_RUNSC", HUTCH_OPTION_ENV_ONLY,
            "The runsc binary, a path or a name looked up in /usr/local/sbin, "
            "/usr/local/bin, /usr/sbin, /usr/bin, /sbin and /bin (default runsc)."),
    OPT_ROW("runsc_flags", HUTCH_OPTION_STRING, "HUTCH_RUNSC_FLAGS",
            HUTCH_OPTION_ENV_ONLY,
            "Flags added to every runsc command line, whitespace separated, each "
            "starting with '-' (at most 16)."),
    OPT_ROW("images_dir", HUTCH_OPTION_STRING, "HUTCH_IMAGES_DIR",
            HUTCH_OPTION_ENV_ONLY,
            "The directory of the rootfs directories (rootfs-python, rootfs-node, "
            "rootfs-python-data; default the installed ones, else the build "
            "tree's)."),
    OPT_ROW("cgroup_parent", HUTCH_OPTION_STRING, "HUTCH_CGROUP_PARENT",
            HUTCH_OPTION_ENV_ONLY,
            "The cgroup the sandboxes' cgroups are made in (default "
            "/hutch-gvisor)."),
    OPT_ROW("sandboxes_cpu_weight", HUTCH_OPTION_INT, "HUTCH_SANDBOXES_CPU_WEIGHT",
            HUTCH_OPTION_ENV_ONLY,
            "The CPU weight of the cgroup parent, all sandboxes together, on "
            "cgroup v2's scale (1-10000; unset: left as it is, the kernel's 100 "
            "for a parent runsc makes; set 100 to undo another value).  A host "
            "that serves many principals and runs nothing else CPU-bound "
            "wants 12: hutch's own threads (searches, tool calls) then come "
            "first while sandboxes use the CPU; other busy processes on the "
            "machine then come first too.  Idle CPU is not limited."),
    BOX_OPTION_INIT,
    OPT_END,
};

struct gv_state {
    const struct hutch_host *host;
    char dir[PATH_MAX];    /* cfg->state_dir (PID.START): this process's everything */
    char parent[PATH_MAX]; /* where the state dirs of other hutch processes are */
    char root[PATH_MAX + 8];
    char runsc[PATH_MAX];
    char init_path[PATH_MAX];
    char runner_dir[PATH_MAX];
    char images[PATH_MAX];
    char platform[16];
    char *flags_buf; /* HUTCH_RUNSC_FLAGS, split in place */
    const char *flags[GV_MAX_FLAGS + 1];
    unsigned long seq;
    /* Does kvm work here?  Tried once, when a policy first asks for it. */
    pthread_mutex_t kvm_mu;
    int kvm; /* 0 not tried, 1 works, -1 does not */
    char kvm_why[160];
};

struct gv_sandbox {
    struct hutch_sandbox pub; /* first: the core sees this */
    struct gv_state *st;
    char id[96]; /* hutch-PID.START.N-box: see gv_start */
    char bundle[PATH_MAX];
    char work[PATH_MAX + 8];
    char cgroup[PATH_MAX]; /* cgroupsPath given to runsc */
    char platform[16];     /* ptrace or kvm, for every runsc call about it */
    int work_mounted;
    int log_mounted;
    char log_dir[PATH_MAX + 8]; /* tmpfs holding runsc.log */
    pid_t runsc_pid;            /* `runsc run`, our child; 0 once reaped */
    int runsc_unclean;          /* it ended without deleting the sandbox */
    struct sbio io;
    int killed;
    int preload;    /* plugin_preload(): the runner's --preload */
    char label[64]; /* how->label, then the job's: for log lines */
};

/* --- small helpers ----------------------------------------------------- */

static int find_exec(const char *name, char *out, size_t len)
{
    static const char *const dirs[] = {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
                                       "/usr/bin",        "/sbin",          "/bin"};
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK) == 0 ? 0 : -errno;
    }
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        snprintf(out, len, "%s/%s", dirs[i], name);
        if (access(out, X_OK) == 0)
            return 0;
    }
    return -ENOENT;
}

/* $HUTCH_IMAGES_DIR, else the first of HUTCH_IMAGES_DIRS (the installed
 * place, then the build tree) that holds a rootfs; else the first.  Into
 * the caller's buffer (found, PATH_MAX bytes): no static state. */
static const char *images_dir(char found[PATH_MAX])
{
    const char *env = opt_env(gv_options, "images_dir"), *p = HUTCH_IMAGES_DIRS;
    if (env && *env) {
        snprintf(found, PATH_MAX, "%s", env);
        return found;
    }
    while (*p) {
        size_t n = strcspn(p, ":");
        char probe[PATH_MAX + 32];
        snprintf(found, PATH_MAX, "%.*s", (int)n, p);
        snprintf(probe, sizeof(probe), "%s/rootfs-python", found);
        if (access(probe, F_OK) == 0)
            return found;
        snprintf(probe, sizeof(probe), "%s/rootfs-node", found);
        if (access(probe, F_OK) == 0)
            return found;
        p += n + (p[n] == ':');
    }
    snprintf(found, PATH_MAX, "%.*s", (int)strcspn(HUTCH_IMAGES_DIRS, ":"),
             HUTCH_IMAGES_DIRS);
    return found;
}

static const char *rootfs_name(const char *lang, int data)
{
    if (strcmp(lang, "python") == 0)
        return data ? "rootfs-python-data" : "rootfs-python";
    return "rootfs-node";
}

/* Removes a tree without following links or crossing mounts; mounts below
 * it (a /work tmpfs) are detached first by the caller. */
static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (flag == FTW_DP || flag == FTW_D)
        rmdir(path);
    else
        unlink(path);
    return 0;
}

static void rm_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* --- runsc ------------------------------------------------------------- */

/* argv for runsc: the global flags (identical on every subcommand, or
 * runsc refuses), then `tail`.  Returns the count. */
static int runsc_argv(const struct gv_state *st, const char *root, const char *platform,
                      const char **argv, size_t max, char *rootflag, size_t rootlen,
                      char *platflag, size_t platlen, const char *const *tail)
{
    size_t n = 0;
    snprintf(rootflag, rootlen, "--root=%s", root ? root : st->root);
    snprintf(platflag, platlen, "--platform=%s", platform ? platform : st->platform);
    argv[n++] = st->runsc;
    argv[n++] = rootflag;
    argv[n++] = "--network=none";
    argv[n++] = "--overlay2=root:memory";
    argv[n++] = "--host-uds=open";
    argv[n++] = platflag;
    for (size_t i = 0; st->flags[i] && n + 1 < max; i++)
        argv[n++] = st->flags[i];
    for (size_t i = 0; tail[i] && n + 1 < max; i++)
        argv[n++] = tail[i];
    argv[n] = NULL;
    return (int)n;
}

/* fork/exec runsc with stdio on /dev/null but stderr on `log_fd` (-1:
 * /dev/null).  root and platform: NULL for the state's own. */
static pid_t runsc_spawn(const struct gv_state *st, const char *root,
                         const char *platform, const char *const *tail, int log_fd)
{
    const char *argv[GV_MAX_FLAGS + 24];
    char rootflag[PATH_MAX + 16], platflag[32];
    pid_t pid;

    runsc_argv(st, root, platform, argv, sizeof(argv) / sizeof(argv[0]), rootflag,
               sizeof(rootflag), platflag, sizeof(platflag), tail);
    pid = fork();
    if (pid == 0) {
        sigset_t none;
        int devnull = open("/dev/null", O_RDWR);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(log_fd >= 0 ? log_fd : devnull, 2);
        }
        /* Its own process group: a ^C to hutch is hutch's to handle. */
        setpgid(0, 0);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Wait for `pid` at most ms; kill it past that.  0 with its wait status
 * in *status when it ended by itself, -1 when it was killed (or is not
 * our child). */
static int wait_for(pid_t pid, int ms, int *status)
{
    uint64_t deadline = box_now_ms() + (uint64_t)ms;
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
        if (box_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, status, 0);
            return -1;
        }
        usleep(2000);
    }
}

/* A wait status as a shell shows it: the exit status, or 128 + signal. */
static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A runsc subcommand run to completion.  Its exit status, or -1. */
static int runsc_cmd(const struct gv_state *st, const char *root, const char *platform,
                     const char *const *tail, int ms)
{
    pid_t pid = runsc_spawn(st, root, platform, tail, -1);
    int status;
    return pid < 0 || wait_for(pid, ms, &status) < 0 ? -1 : exit_code(status);
}

/* `runsc run` of sb was reaped with `status`: it deleted its sandbox
 * unless a signal ended it. */
static void runsc_reaped(struct gv_sandbox *sb, int status)
{
    sb->runsc_pid = 0;
    sb->runsc_unclean = WIFSIGNALED(status);
}

/* Waits for `runsc run` of sb to end, at most GV_EXIT_MS (killed past
 * that, and then it deleted nothing): 0 with its wait status, or -1. */
static int end_runsc(struct gv_sandbox *sb, int *status)
{
    if (wait_for(sb->runsc_pid, GV_EXIT_MS, status) < 0) {
        sb->runsc_pid = 0;
        sb->runsc_unclean = 1;
        return -1;
    }
    runsc_reaped(sb, *status);
    return 0;
}

static void read_tail(const char *path, char *out, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    off_t size;
    ssize_t n = 0;

    out[0] = '\0';
    if (fd < 0)
        return;
    size = lseek(fd, 0, SEEK_END);
    if (size > 0) {
        off_t from = size > (off_t)len - 1 ? size - (off_t)len + 1 : 0;
        n = pread(fd, out, len - 1, from);
    }
    close(fd);
    out[n > 0 ? n : 0] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r'))
        out[--n] = '\0';
}

/* --- leftovers ----------------------------------------------------------- */

/* Everything a gone hutch process left in `dir` (its state directory,
 * PID.START), or this one's at close. */
static void clean_dir(const struct gv_state *st, const char *dir)
{
    char sub[PATH_MAX + 300], root[PATH_MAX + 8];
    DIR *d;

    snprintf(root, sizeof(root), "%s/root", dir);
    d = opendir(dir);
    if (d) {
        for (struct dirent *de; (de = readdir(d));) {
            const char *tail[] = {"delete", "--force", NULL, NULL};
            char id[96];
            size_t len = strlen(de->d_name);
            if (!len || len > 20 || strspn(de->d_name, "0123456789") != len)
                continue; /* not a bundle: root */
            /* bundle N holds sandbox hutch-PID.START.N-box */
            snprintf(id, sizeof(id), "hutch-%s.%s-box", strrchr(dir, '/') + 1,
                     de->d_name);
            tail[2] = id;
            runsc_cmd(st, root, NULL, tail, GV_CMD_MS);
            snprintf(sub, sizeof(sub), "%s/%s/work", dir, de->d_name);
            umount2(sub, MNT_DETACH);
            snprintf(sub, sizeof(sub), "%s/%s/log", dir, de->d_name);
            umount2(sub, MNT_DETACH);
        }
        closedir(d);
    }
    rm_tree(dir);
}

/* The cgroup parent of the sandboxes (runsc's cgroupsPath is PARENT/ID):
 * HUTCH_CGROUP_PARENT, else /hutch-gvisor. */
static const char *cg_parent(void)
{
    const char *parent = opt_env(gv_options, "cgroup_parent");
    return parent ? parent : "/hutch-gvisor";
}

/* Calls fn(dir) for `rel` (a cgroup path) in every hierarchy: v2's one, or
 * each v1 controller's. */
static void cg_each(const char *rel,
                    void (*fn)(const struct gv_state *st, const char *dir),
                    const struct gv_state *st)
{
    const char *slash = rel[0] == '/' ? "" : "/";
    char path[PATH_MAX * 2];
    DIR *d;

    if (strstr(rel, ".."))
        return; /* not a path hutch would have given runsc */
    if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0) {
        snprintf(path, sizeof(path), "/sys/fs/cgroup%s%s", slash, rel);
        fn(st, path);
        return;
    }
    d = opendir("/sys/fs/cgroup");
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.' || de->d_type != DT_DIR)
            continue; /* cpu,cpuacct's links lead to a directory seen anyway */
        snprintf(path, sizeof(path), "/sys/fs/cgroup/%s%s%s", de->d_name, slash, rel);
        fn(st, path);
    }
    if (d)
        closedir(d);
}

/* The sandboxes' parent weighs sandboxes_cpu_weight on the cpu
 * controller, all sandboxes together (runsc puts each one's gofer and
 * sentry in PARENT/ID, its cgroupsPath), against hutch's own threads, the
 * runsc commands and every other process at the parent's level.
 *
 * Unset, the parent's weight is left as it is (the kernel's 100 for a
 * parent runsc makes; set 100 to undo another value).  Measured by `make
 * bench-tenants` on cgroup v1 with hutch in the root cgroup, a principal
 * flooding gVisor executions made the others' searches wait 9.9x their
 * quiet p99; at 12, 0.8x.  But at 12, four busy loops elsewhere on the
 * machine took the others' execute_code p50 from 1.7 s to 17 s: the
 * weight favours hutch and every other process alike, so it is the
 * operator's choice (the option's doc).  The runsc commands stay in
 * hutch's cgroup: below the parent they made starts crawl under the same
 * loops (27-29 s, and starts that failed).  Without a writable cpu
 * controller nothing changes (a warning).  -EINVAL for a weight out of
 * range. */
static int cpu_setup(struct gv_state *st, struct hutch_err *err)
{
    const char *env = opt_env(gv_options, "sandboxes_cpu_weight");
    struct hutch_err why = HUTCH_ERR_INIT;
    char dir[PATH_MAX];
    uint32_t w;
    int r;

    /* Unset, nothing is written: a `hutch run` beside a `hutch serve` that
     * set a weight must not undo it (both use the same parent). */
    if (!env)
        return 0;
    if ((r = box_cpu_weight_parse(env, &w, err)) < 0)
        return r;
    if (box_parent_cpu_weight(cg_parent(), w, dir, sizeof(dir), &why) < 0) {
        st->host->log(HUTCH_LOG_WARN, "gvisor",
                      "HUTCH_SANDBOXES_CPU_WEIGHT=%s not applied: %s", env, why.msg);
        return 0;
    }
    st->host->log(HUTCH_LOG_DEBUG, "gvisor", "the sandboxes below %s weigh %u", dir, w);
    return 0;
}

static void cg_rmdir(const struct gv_state *st, const char *dir)
{
    (void)st;
    (void)rmdir(dir); /* gone already, or still busy: left as it is */
}

/* rmdir of a doctor's try sandbox's cgroup, waiting while it is busy: the
 * sandbox's processes leave it a moment after `runsc run` ends, and later
 * still after a try killed for hanging (kvm on a VM without nested
 * virtualisation) and `runsc delete --force`.  Without the wait, a CI run
 * of the sanitizer build left one try's cgroups behind.  At most
 * GV_CG_SETTLE_MS per hierarchy; a cgroup still busy then is left, and
 * swept once its doctor is gone (cg_sweep_dir). */
static void cg_rmdir_settle(const struct gv_state *st, const char *dir)
{
    uint64_t deadline = box_now_ms() + GV_CG_SETTLE_MS;

    (void)st;
    while (rmdir(dir) < 0 && errno == EBUSY && box_now_ms() < deadline)
        usleep(5000);
}

/* Whether the cgroup `name` is a leftover whose hutch is gone: a
 * sandbox's (hutch-PID.START.N-box, below the parent) or a doctor's try
 * sandbox's (hutch-try-PID-XXXXXX, at the top).  A try's pid reused since
 * keeps its cgroup until a sweep after that process ends. */
static int cg_leftover(const char *name)
{
    unsigned long long start;
    unsigned long n;
    int pid;

    if (sscanf(name, "hutch-%d.%llu.%lu", &pid, &start, &n) == 3)
        return box_process_gone(pid, start);
    if (sscanf(name, "hutch-try-%d-", &pid) == 1 && pid > 0)
        return kill(pid, 0) < 0 && errno == ESRCH;
    return 0;
}

/* runsc removes a sandbox's cgroups when it deletes the sandbox, but not
 * when it was killed first (a hutch whose processes were all killed, a
 * `runsc run` killed for not ending in time), and a try's may still be
 * busy past cg_rmdir_settle: the empty ones whose hutch is gone are
 * removed here. */
static void cg_sweep_dir(const struct gv_state *st, const char *dir)
{
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        char path[PATH_MAX * 3];
        if (!cg_leftover(de->d_name))
            continue; /* not hutch's, or its hutch still runs */
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (rmdir(path) == 0)
            st->host->log(HUTCH_LOG_INFO, "gvisor", "removed leftover cgroup %s", path);
    }
    if (d)
        closedir(d);
}

static void sweep(struct gv_state *st)
{
    DIR *d;

    cg_each(cg_parent(), cg_sweep_dir, st);
    cg_each("", cg_sweep_dir, st);
    d = opendir(st->parent);
    if (!d)
        return;
    for (struct dirent *de; (de = readdir(d));) {
        char path[PATH_MAX * 2];
        unsigned long long start;
        int pid;
        if (sscanf(de->d_name, "%d.%llu", &pid, &start) != 2)
            continue;
        if (!box_process_gone(pid, start))
            continue; /* that hutch still runs */
        snprintf(path, sizeof(path), "%s/%s", st->parent, de->d_name);
        st->host->log(HUTCH_LOG_INFO, "gvisor", "removing what a gone hutch left in %s",
                      path);
        clean_dir(st, path);
    }
    closedir(d);
}

static int try_platform(const struct gv_state *st, const char *platform,
                        const char *rootfs, char *why, size_t whylen);

/* The platform a sandbox runs on: the policy's executor_options.gvisor
 * .platform, else HUTCH_GVISOR_PLATFORM, else ptrace.  kvm is tried once
 * per process (on VMs without nested virtualisation it hangs): when it
 * does not work, ptrace, with a warning. */
static int pick_platform(struct gv_state *st, const struct hutch_sandbox_class *cls,
                         const char *rootfs, char *out, size_t len,
                         struct hutch_err *err)
{
    char want[32];
    /* The environment's platform was checked by open(), into st->platform. */
    int r = opt_get(gv_options, "gvisor", cls, "platform", 0, want, sizeof(want), err);

    if (r < 0)
        return r;
    if (!want[0])
        snprintf(want, sizeof(want), "%s", st->platform);
    if (strcmp(want, "ptrace") != 0 && strcmp(want, "kvm") != 0)
        return hutch_err_set(err, -EINVAL,
                             "the policy's executor_options.gvisor.platform is \"%s\": "
                             "choose ptrace or kvm",
                             want);
    if (strcmp(want, "kvm") == 0) {
        pthread_mutex_lock(&st->kvm_mu);
        if (st->kvm == 0) {
            if (access("/dev/kvm", R_OK | W_OK) < 0)
                snprintf(st->kvm_why, sizeof(st->kvm_why), "/dev/kvm: %s",
                         strerror(errno));
            st->kvm =
                st->kvm_why[0] == '\0' && try_platform(st, "kvm", rootfs, st->kvm_why,
                                                       sizeof(st->kvm_why)) == 0
                    ? 1
                    : -1;
        }
        if (st->kvm < 0) {
            st->host->log(HUTCH_LOG_WARN, "gvisor",
                          "the policy asks for the kvm platform, but it does not work "
                          "here (%s): using ptrace",
                          st->kvm_why);
            snprintf(want, sizeof(want), "ptrace");
        }
        pthread_mutex_unlock(&st->kvm_mu);
    }
    snprintf(out, len, "%s", want);
    return 0;
}

/* --- executor ---------------------------------------------------------- */

static int gv_probe(const struct hutch_host *host, struct hutch_err *err)
{
    const char *env = opt_env(gv_options, "runsc");
    char path[PATH_MAX], init[PATH_MAX];

    if (find_exec(env ? env : "runsc", path, sizeof(path)) < 0)
        return hutch_err_set(
            err, -ENOENT,
            "runsc is not installed: 'apt-get install -y runsc' (Debian), "
            "or set HUTCH_RUNSC to its path");
    if (geteuid() != 0)
        return hutch_err_set(err, -EPERM,
                             "the gvisor executor needs root (runsc makes namespaces "
                             "and cgroups; rootless runsc is not supported)");
    return box_find_init(gv_options, init, sizeof(init), err);
}

/* What open() and sweep() both need: runsc, its platform and the
 * operator's flags (every runsc call repeats them).  On error, st holds
 * nothing to free but flags_buf. */
static int gv_setup(struct gv_state *st, const struct hutch_host *host,
                    struct hutch_err *err)
{
    const char *env_runsc = opt_env(gv_options, "runsc"),
               *flags = opt_env(gv_options, "runsc_flags"),
               *plat = opt_env(gv_options, "platform");
    st->host = host;
    if (find_exec(env_runsc ? env_runsc : "runsc", st->runsc, sizeof(st->runsc)) < 0) {
        return hutch_err_set(err, -ENOENT,
                             "runsc is not installed: 'apt-get install -y "
                             "runsc', or set HUTCH_RUNSC");
    }
    snprintf(st->platform, sizeof(st->platform), "%s", plat ? plat : "ptrace");
    if (strcmp(st->platform, "ptrace") != 0 && strcmp(st->platform, "kvm") != 0) {
        return hutch_err_set(
            err, -EINVAL,
            "HUTCH_GVISOR_PLATFORM=%s: choose ptrace (the default) or kvm",
            st->platform);
    }
    if (strcmp(st->platform, "kvm") == 0 && access("/dev/kvm", R_OK | W_OK) < 0) {
        return hutch_err_set(err, -ENODEV,
                             "HUTCH_GVISOR_PLATFORM=kvm but /dev/kvm is not usable "
                             "(%s): use ptrace",
                             strerror(errno));
    }
    if (flags) {
        size_t n = 0;
        st->flags_buf = strdup(flags);
        if (!st->flags_buf)
            return hutch_err_set(err, -ENOMEM, "out of memory");
        for (char *save = NULL, *w = strtok_r(st->flags_buf, " \t", &save); w;
             w = strtok_r(NULL, " \t", &save)) {
            if (n == GV_MAX_FLAGS || w[0] != '-')
                return hutch_err_set(err, -EINVAL,
                                     "HUTCH_RUNSC_FLAGS: at most %d flags, each "
                                     "starting with '-' (\"%s\")",
                                     GV_MAX_FLAGS, w);
            st->flags[n++] = w;
        }
    }
    return 0;
}

/* sweep() of the ABI, without open(): what the gone hutch processes left
 * in their state directories below `parent` (see clean_dir). */
static void gv_sweep(const struct hutch_host *host, const char *parent)
{
    struct gv_state *st = calloc(1, sizeof(*st));
    struct hutch_err err = HUTCH_ERR_INIT;

    if (!st)
        return;
    if (gv_setup(st, host, &err) == 0) {
        snprintf(st->parent, sizeof(st->parent), "%s", parent);
        sweep(st);
    } else {
        host->log(HUTCH_LOG_WARN, "gvisor",
                  "cannot remove what gone hutch processes left in %s: %s", parent,
                  err.msg);
    }
    free(st->flags_buf);
    free(st);
}

static int gv_open(const struct hutch_host *host, const struct hutch_config *cfg,
                   void **state, struct hutch_err *err)
{
    struct gv_state *st = calloc(1, sizeof(*st));
    int r;

    if (!st)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    r = gv_setup(st, host, err);
    if (r < 0)
        goto fail;
    if (!realpath(host->runner_dir, st->runner_dir)) {
        r = hutch_err_set(err, -errno, "runner directory %s: %s", host->runner_dir,
                          strerror(errno));
        goto fail;
    }
    images_dir(st->images);
    r = box_find_init(gv_options, st->init_path, sizeof(st->init_path), err);
    if (r < 0)
        goto fail;
    if (!cfg || !HUTCH_HAS_MEMBER(cfg, struct hutch_config, state_dir) ||
        !cfg->state_dir || cfg->state_dir[0] != '/' ||
        strlen(cfg->state_dir) >= sizeof(st->dir)) {
        r = hutch_err_set(err, -EINVAL,
                          "this hutch gives the gvisor executor no state directory: "
                          "install matching versions");
        goto fail;
    }
    /* Sandbox ids are hutch-<its name>.N, and clean_dir() finds them from
     * it: a gone hutch's sandboxes are found from its directory alone. */
    snprintf(st->dir, sizeof(st->dir), "%s", cfg->state_dir);
    snprintf(st->parent, sizeof(st->parent), "%s", st->dir);
    *strrchr(st->parent, '/') = '\0';
    st->host = host;
    pthread_mutex_init(&st->kvm_mu, NULL);
    if ((r = cpu_setup(st, err)) < 0)
        goto fail;
    sweep(st);
    snprintf(st->root, sizeof(st->root), "%s/root", st->dir);
    if (mkdir(st->root, 0700) < 0 && errno != EEXIST) {
        r = hutch_err_set(err, -errno, "creating %s: %s", st->root, strerror(errno));
        goto fail;
    }
    *state = st;
    return 0;
fail:
    free(st->flags_buf);
    free(st);
    return r;
}

static void gv_close(void *state)
{
    struct gv_state *st = state;
    if (!st)
        return;
    /* Every sandbox was destroyed; what is left is the state root. */
    clean_dir(st, st->dir);
    free(st->flags_buf);
    free(st);
}

static void add_mount(cJSON *mounts, const char *dest, const char *type,
                      const char *source, const char *const *options)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "destination", dest);
    cJSON_AddStringToObject(m, "type", type);
    cJSON_AddStringToObject(m, "source", source);
    cJSON_AddItemToObject(m, "options", box_str_array(options));
    cJSON_AddItemToArray(mounts, m);
}

/* The OCI runtime spec of one sandbox (caller frees). */
static char *oci_spec(struct gv_state *st, struct gv_sandbox *sb,
                      const struct hutch_sandbox_class *cls, const char *rootfs)
{
    char tmpsize[48];
    static const char *const ns[] = {"pid", "network", "ipc", "uts", "mount", NULL};
    static const char *const init_caps[] = {BOX_INIT_CAPS, NULL};
    cJSON *c = cJSON_CreateObject(), *proc, *user, *caps, *root, *mounts, *lnx, *res,
          *mem, *pids, *nsa, *rl, *r1;
    unsigned nproc;
    char *out;

    snprintf(tmpsize, sizeof(tmpsize), "size=%llu", box_tmp_bytes(cls));

    cJSON_AddStringToObject(c, "ociVersion", "1.0.2");
    proc = cJSON_AddObjectToObject(c, "process");
    cJSON_AddBoolToObject(proc, "terminal", 0);
    /* hutch-init runs as root with the few capabilities it needs, and runs
     * the program as the sandbox user with none (see plugins/init/init.c). */
    user = cJSON_AddObjectToObject(proc, "user");
    cJSON_AddNumberToObject(user, "uid", 0);
    cJSON_AddNumberToObject(user, "gid", 0);
    /* --hide-init: gVisor shows /proc/1 to any uid (plugins/init/init.c).
     * --egress: init's forwarder on 127.0.0.1:HUTCH_EGRESS_PORT carries the
     * program's connections to the egress socket (gv_start). */
    cJSON_AddItemToObject(
        proc, "args",
        box_command(cls, BOX_UID, BOX_GID,
                    (const char *const[]){"--hide-init", "--egress",
                                          BOX_IO "/" SBIO_EGRESS, NULL},
                    sb->preload));
    cJSON_AddItemToObject(proc, "env", box_environment());
    cJSON_AddStringToObject(proc, "cwd", "/work");
    caps = cJSON_AddObjectToObject(proc, "capabilities");
    cJSON_AddItemToObject(caps, "bounding", box_str_array(init_caps));
    cJSON_AddItemToObject(caps, "effective", box_str_array(init_caps));
    cJSON_AddArrayToObject(caps, "inheritable");
    cJSON_AddItemToObject(caps, "permitted", box_str_array(init_caps));
    cJSON_AddArrayToObject(caps, "ambient");
    cJSON_AddBoolToObject(proc, "noNewPrivileges", 1);
    rl = cJSON_AddArrayToObject(proc, "rlimits");
    r1 = cJSON_CreateObject();
    cJSON_AddStringToObject(r1, "type", "RLIMIT_NOFILE");
    cJSON_AddNumberToObject(r1, "hard", cls->open_files ? cls->open_files : 256);
    cJSON_AddNumberToObject(r1, "soft", cls->open_files ? cls->open_files : 256);
    cJSON_AddItemToArray(rl, r1);
    /* The sandbox's own kernel counts its processes against RLIMIT_NPROC;
     * the host cgroup's pids limit (below) counts the sentry's threads and
     * ptrace stubs too, and hitting it kills the whole sandbox.  The
     * class's limit counts every process of the sandbox, as Docker's
     * PidsLimit does: init and the runner are not counted against the
     * sandbox user (init is root's, and gVisor charges a task to the uid
     * that created it, so the runner, forked by init before it dropped to
     * the sandbox user, is root's too), so the user gets two fewer. */
    nproc = cls->pids_max ? cls->pids_max : 128;
    nproc = nproc > 3 ? nproc - 2 : 1;
    r1 = cJSON_CreateObject();
    cJSON_AddStringToObject(r1, "type", "RLIMIT_NPROC");
    cJSON_AddNumberToObject(r1, "hard", nproc);
    cJSON_AddNumberToObject(r1, "soft", nproc);
    cJSON_AddItemToArray(rl, r1);

    root = cJSON_AddObjectToObject(c, "root");
    cJSON_AddStringToObject(root, "path", rootfs);
    cJSON_AddBoolToObject(root, "readonly", 1);
    cJSON_AddStringToObject(c, "hostname", "hutch");

    mounts = cJSON_AddArrayToObject(c, "mounts");
    add_mount(mounts, "/proc", "proc", "proc", (const char *[]){NULL});
    add_mount(
        mounts, "/dev", "tmpfs", "tmpfs",
        (const char *[]){"nosuid", "strictatime", "mode=755", "size=65536k", NULL});
    add_mount(mounts, "/sys", "sysfs", "sysfs",
              (const char *[]){"nosuid", "noexec", "nodev", "ro", NULL});
    add_mount(mounts, "/tmp", "tmpfs", "tmpfs",
              (const char *[]){"nosuid", "nodev", "mode=1777", tmpsize, NULL});
    add_mount(mounts, "/work", "bind", sb->work, (const char *[]){"rbind", "rw", NULL});
    add_mount(mounts, "/run/hutch/io", "bind", sb->io.dir,
              (const char *[]){"rbind", "ro", NULL});
    add_mount(mounts, "/run/hutch/runner", "bind", st->runner_dir,
              (const char *[]){"rbind", "ro", NULL});
    add_mount(mounts, "/run/hutch/init", "bind", st->init_path,
              (const char *[]){"bind", "ro", NULL});

    lnx = cJSON_AddObjectToObject(c, "linux");
    cJSON_AddStringToObject(lnx, "cgroupsPath", sb->cgroup);
    res = cJSON_AddObjectToObject(lnx, "resources");
    if (cls->memory_bytes) {
        mem = cJSON_AddObjectToObject(res, "memory");
        cJSON_AddNumberToObject(mem, "limit", (double)cls->memory_bytes);
        cJSON_AddNumberToObject(mem, "swap", (double)cls->memory_bytes);
    }
    pids = cJSON_AddObjectToObject(res, "pids");
    cJSON_AddNumberToObject(pids, "limit",
                            (double)(cls->pids_max ? cls->pids_max : 128) *
                                    GV_HOST_PIDS_EACH +
                                GV_HOST_PIDS);
    if (cls->cpu_millis) {
        cJSON *cpu = cJSON_AddObjectToObject(res, "cpu");
        cJSON_AddNumberToObject(cpu, "period", 100000);
        cJSON_AddNumberToObject(cpu, "quota", (double)cls->cpu_millis * 100);
    }
    nsa = cJSON_AddArrayToObject(lnx, "namespaces");
    for (size_t i = 0; ns[i]; i++) {
        cJSON *n = cJSON_CreateObject();
        cJSON_AddStringToObject(n, "type", ns[i]);
        cJSON_AddItemToArray(nsa, n);
    }
    out = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return out;
}

static int write_file(const char *path, const char *data, struct hutch_err *err)
{
    size_t len = strlen(data);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600),
        r = 0;
    if (fd < 0)
        return hutch_err_set(err, -errno, "creating %s: %s", path, strerror(errno));
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            r = hutch_err_set(err, -errno, "writing %s: %s", path, strerror(errno));
            break;
        }
        data += n;
        len -= (size_t)n;
    }
    close(fd);
    return r;
}

/* sbio_accept's question: is `runsc run` still there? */
static int still_running(void *arg, struct hutch_err *err)
{
    struct gv_sandbox *sb = arg;
    char log[PATH_MAX + 32], tail[GV_LOG_TAIL];
    int status;

    if (waitpid(sb->runsc_pid, &status, WNOHANG) != sb->runsc_pid)
        return 0;
    runsc_reaped(sb, status);
    snprintf(log, sizeof(log), "%s/runsc.log", sb->log_dir);
    read_tail(log, tail, sizeof(tail));
    return hutch_err_set(err, -EIO,
                         "runsc ended (status %d) before the sandbox came up%s%s",
                         exit_code(status), tail[0] ? ": " : "", tail);
}

/* The memory cgroup of the sandbox counted an OOM kill (v1, else v2). */
static int cgroup_oom(const struct gv_sandbox *sb)
{
    char path[PATH_MAX + 64], buf[512], *p;

    snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.oom_control",
             sb->cgroup);
    if (box_read_file(path, buf, sizeof(buf)) <= 0) {
        snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.events", sb->cgroup);
        if (box_read_file(path, buf, sizeof(buf)) <= 0)
            return 0;
    }
    p = strstr(buf, "oom_kill ");
    return p && strtol(p + 9, NULL, 10) > 0;
}

/* The sandbox's memory cgroup is still there (v1, else v2). */
static int cgroup_exists(const struct gv_sandbox *sb)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s", sb->cgroup);
    if (access(path, F_OK) == 0)
        return 1;
    snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.events", sb->cgroup);
    return access(path, F_OK) == 0;
}

static void sandbox_free(struct gv_sandbox *sb)
{
    struct gv_state *st;
    if (!sb)
        return;
    st = sb->st;
    /* Closing ctl ends init, and with it the sandbox: `runsc run` returns
     * and deletes it.  A sandbox that does not go is killed and deleted.
     * Only then: runsc takes an id it does not find as the prefix of one it
     * does, so a delete of a sandbox that is gone used to delete another
     * (hutch-P.S.1 took hutch-P.S.10; ids are prefix-free now, see
     * gv_start, and a sandbox that is gone is not named either). */
    sbio_close(&sb->io);
    if (sb->runsc_pid > 0) {
        int status;
        if (end_runsc(sb, &status) < 0)
            st->host->log(HUTCH_LOG_WARN, "gvisor", "sandbox %s did not end; killed",
                          sb->id);
    }
    if (sb->runsc_unclean) {
        const char *tail[] = {"delete", "--force", sb->id, NULL};
        runsc_cmd(st, NULL, sb->platform, tail, GV_CMD_MS);
    }
    /* What runsc left of its cgroups, were it killed (empty by now). */
    if (sb->cgroup[0])
        cg_each(sb->cgroup, cg_rmdir, st);
    if (sb->work_mounted)
        umount2(sb->work, MNT_DETACH);
    if (sb->log_mounted)
        umount2(sb->log_dir, MNT_DETACH);
    if (sb->bundle[0])
        rm_tree(sb->bundle);
    free(sb);
}

static int gv_start(void *state, const struct hutch_sandbox_class *cls,
                    const struct hutch_start *how, struct hutch_sandbox **out,
                    struct hutch_err *err)
{
    struct gv_state *st = state;
    struct gv_sandbox *sb;
    char rootfs[PATH_MAX], real_rootfs[PATH_MAX], path[PATH_MAX + 32], opts[128];
    uint64_t work;
    unsigned long n;
    char *json = NULL;
    int r, log_fd, data, egress = -1;
    struct stat sst;

    *out = NULL;
    if (strcmp(cls->language, "python") != 0 &&
        strcmp(cls->language, "javascript") != 0)
        return hutch_err_set(err, -EINVAL,
                             "the gvisor executor runs python and javascript, not %s",
                             cls->language);
    {
        char fl[32];
        r = opt_get(gv_options, "gvisor", cls, "flavour", 0, fl, sizeof(fl), err);
        if (r == 0)
            r = box_flavour(fl, "gvisor", err);
        if (r < 0)
            return r;
        data = r;
    }
    snprintf(rootfs, sizeof(rootfs), "%s/%s", st->images,
             rootfs_name(cls->language, data));
    if (data && strcmp(cls->language, "python") == 0 &&
        (!realpath(rootfs, real_rootfs) || stat(real_rootfs, &sst) < 0 ||
         !S_ISDIR(sst.st_mode)))
        return hutch_err_set(err, -ENOENT,
                             "the gVisor root file system %s (the data flavour the "
                             "policy's executor_options.gvisor.flavour names) is "
                             "missing: build it with 'make images' (root, no registry "
                             "needed)",
                             rootfs);
    if (!realpath(rootfs, real_rootfs) || stat(real_rootfs, &sst) < 0 ||
        !S_ISDIR(sst.st_mode))
        return hutch_err_set(err, -ENOENT,
                             "the gVisor root file system %s is missing: build it with "
                             "'make images' (root, no registry needed), or point "
                             "HUTCH_IMAGES_DIR at the directory holding rootfs-python "
                             "and rootfs-node",
                             rootfs);
    {
        const char *interp =
            strcmp(cls->language, "python") == 0 ? "usr/bin/python3" : "usr/bin/node";
        snprintf(path, sizeof(path), "%s/%s", real_rootfs, interp);
        if (access(path, X_OK) < 0)
            return hutch_err_set(err, -ENOEXEC,
                                 "the root file system %s is damaged: it has no "
                                 "executable /%s (rebuild it with 'make images')",
                                 real_rootfs, interp);
    }

    sb = calloc(1, sizeof(*sb));
    if (!sb)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    sb->st = st;
    sb->preload = plugin_preload(cls, data, how);
    sb->pub.struct_size = sizeof(sb->pub);
    sb->pub.chan_fd = sb->pub.stdout_fd = sb->pub.stderr_fd = sb->pub.event_fd = -1;
    sb->pub.egress_fd = -1;
    for (int i = 0; i < SBIO_NSOCK; i++)
        sb->io.fd[i] = sb->io.lfd[i] = -1;
    snprintf(sb->label, sizeof(sb->label), "%s", plugin_start_label(how, "-"));
    r = pick_platform(st, cls, real_rootfs, sb->platform, sizeof(sb->platform), err);
    if (r < 0) {
        free(sb);
        return r;
    }
    st->host->log(HUTCH_LOG_DEBUG, "gvisor", "%s: sandbox on platform %s over %s",
                  sb->label, sb->platform, real_rootfs);
    n = __atomic_add_fetch(&st->seq, 1, __ATOMIC_RELAXED);
    /* runsc takes an id it does not find as the prefix of one it does (a
     * kill or delete racing a sandbox's end would reach another one), so
     * the ids of one state root are prefix-free: the number ends with a
     * fixed suffix that does not start with a digit. */
    snprintf(sb->id, sizeof(sb->id), "hutch-%s.%lu-box", strrchr(st->dir, '/') + 1, n);
    snprintf(sb->bundle, sizeof(sb->bundle), "%s/%lu", st->dir, n);
    {
        snprintf(sb->cgroup, sizeof(sb->cgroup), "%s/%s", cg_parent(), sb->id);
    }
    if (mkdir(sb->bundle, 0711) < 0) {
        r = hutch_err_set(err, -errno, "creating %s: %s", sb->bundle, strerror(errno));
        sb->bundle[0] = '\0';
        goto fail;
    }
    /* /work: a tmpfs of its own, so its size is capped and the host's disk
     * is never touched. */
    snprintf(sb->work, sizeof(sb->work), "%s/work", sb->bundle);
    work = box_work_bytes(cls);
    snprintf(opts, sizeof(opts), "size=%llu,mode=0755,uid=1000,gid=1000",
             (unsigned long long)work);
    if (mkdir(sb->work, 0755) < 0 ||
        mount("tmpfs", sb->work, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
        r = hutch_err_set(err, -errno, "mounting a tmpfs at %s: %s", sb->work,
                          strerror(errno));
        goto fail;
    }
    sb->work_mounted = 1;
    snprintf(sb->log_dir, sizeof(sb->log_dir), "%s/log", sb->bundle);
    snprintf(opts, sizeof(opts), "size=%u,mode=0700", HUTCH_GVISOR_LOG_MAX_BYTES);
    if (mkdir(sb->log_dir, 0700) < 0 ||
        mount("tmpfs", sb->log_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) <
            0) {
        r = hutch_err_set(err, -errno, "mounting a tmpfs at %s: %s", sb->log_dir,
                          strerror(errno));
        goto fail;
    }
    sb->log_mounted = 1;
    snprintf(path, sizeof(path), "%s/io", sb->bundle);
    r = sbio_open(&sb->io, path, err);
    if (r < 0)
        goto fail;
    /* The egress socket, beside init's four in /run/hutch/io, stays for the
     * sandbox's life: init connects to it once per connection the program
     * makes to 127.0.0.1:HUTCH_EGRESS_PORT.  The program sees it there,
     * but it is root's, mode 0600, and the program's uid has no
     * capabilities: only init connects (and had the program a way to, it
     * would reach the same proxy, which judges every request alike, with
     * the same caps).  Nothing else of the directory is left to reach:
     * init's four sockets are removed once it connected (sbio_accept), and
     * the mount is read-only. */
    egress = sbio_egress_listen(sb->io.dir, 0600, err);
    if (egress < 0) {
        r = egress;
        goto fail;
    }
    json = oci_spec(st, sb, cls, real_rootfs);
    if (!json) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto fail;
    }
    snprintf(path, sizeof(path), "%s/config.json", sb->bundle);
    r = write_file(path, json, err);
    if (r < 0)
        goto fail;
    if (plugin_start_cancelled(how)) {
        r = hutch_err_set(err, -ECANCELED, "%s: sandbox start cancelled", sb->label);
        goto fail;
    }
    snprintf(path, sizeof(path), "%s/runsc.log", sb->log_dir);
    log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    {
        const char *tail[] = {"run", "--bundle", sb->bundle, sb->id, NULL};
        sb->runsc_pid = runsc_spawn(st, NULL, sb->platform, tail, log_fd);
    }
    if (log_fd >= 0)
        close(log_fd);
    if (sb->runsc_pid < 0) {
        r = hutch_err_set(err, -errno, "starting %s: %s", st->runsc, strerror(errno));
        sb->runsc_pid = 0;
        goto fail;
    }
    r = sbio_accept(&sb->io, GV_READY_MS, still_running, sb, how, err);
    if (r < 0)
        goto fail;
    sb->pub.chan_fd = sb->io.fd[SBIO_CHAN];
    sb->pub.stdout_fd = sb->io.fd[SBIO_OUT];
    sb->pub.stderr_fd = sb->io.fd[SBIO_ERR];
    sb->pub.event_fd = sb->io.fd[SBIO_CTL];
    sb->pub.egress_fd = egress; /* the core's from now on */
    free(json);
    *out = &sb->pub;
    return 0;
fail:
    /* Cancelled or failed: `runsc run` is told to end, then sandbox_free()
     * waits for it (killing it past GV_EXIT_MS), runs `runsc delete
     * --force`, unmounts /work and removes the bundle: nothing is left. */
    free(json);
    if (egress >= 0)
        close(egress);
    if (sb->runsc_pid > 0)
        kill(sb->runsc_pid, SIGTERM);
    sandbox_free(sb);
    return r;
}

/* The log lines depend on the job, and whether init keeps listening on
 * 127.0.0.1:HUTCH_EGRESS_PORT: a job without egress has the port closed
 * before its program runs, so that the program's connections are refused
 * (the core closed the egress socket's listener already). */
static int gv_assign(void *state, struct hutch_sandbox *pub,
                     const struct hutch_job *job, struct hutch_err *err)
{
    struct gv_sandbox *sb = (struct gv_sandbox *)pub;
    const char *label = plugin_job_label(job, "-");
    int r;
    if (strcmp(label, sb->label) != 0)
        sb->st->host->log(HUTCH_LOG_DEBUG, "gvisor", "%s (%s): runs job %s", sb->label,
                          sb->id, label);
    snprintf(sb->label, sizeof(sb->label), "%s", label);
    if (!plugin_job_egress(job) && (r = sbio_egress_off(&sb->io, GV_STOP_MS)) < 0)
        return hutch_err_set(err, r,
                             "%s: the sandbox's init did not close its egress "
                             "port: %s",
                             sb->label, strerror(-r));
    return 0;
}

/* Gives what extract made to the sandbox user (extract writes as root). */
static int chown_entry(const char *path, const struct stat *s, int flag, struct FTW *f)
{
    (void)s;
    (void)flag;
    (void)f;
    return lchown(path, 1000, 1000) < 0 ? -1 : 0;
}

static int gv_put(void *state, struct hutch_sandbox *pub, const void *tar, size_t len,
                  struct hutch_err *err)
{
    struct gv_sandbox *sb = (struct gv_sandbox *)pub;
    int r;

    /* The runner waits for its job: nothing in the sandbox touches /work
     * while this runs. */
    r = sb->st->host->archive_extract(tar, len, sb->work, NULL, err);
    if (r == 0 && nftw(sb->work, chown_entry, 16, FTW_PHYS | FTW_MOUNT) != 0)
        r = hutch_err_set(err, -errno, "giving %s to the sandbox user: %s", sb->work,
                          strerror(errno));
    return r;
}

static int gv_reap(void *state, struct hutch_sandbox *pub, struct hutch_exit *ex,
                   struct hutch_err *err)
{
    struct gv_sandbox *sb = (struct gv_sandbox *)pub;
    char log[PATH_MAX + 32], tail[GV_LOG_TAIL];
    int r = sbio_poll_exit(&sb->io);

    if (r == 0)
        return -EAGAIN;
    if (r == 1) {
        sbio_exit_from_status(sb->io.status,
                              sb->io.oom || (WIFSIGNALED(sb->io.status) &&
                                             WTERMSIG(sb->io.status) == SIGKILL &&
                                             cgroup_oom(sb)),
                              ex);
        return 0;
    }
    /* init is gone without a word: the sandbox died under the program. */
    if (sb->killed || cgroup_oom(sb)) {
        sbio_exit_from_status(SIGKILL, !sb->killed, ex);
        return 0;
    }
    /* Its memory cgroup tells an OOM kill only while it exists, and
     * `runsc run` removes it as the sandbox ends: a reap after that finds
     * none.  A sandbox that died whole, not by our kill, had everything in
     * it killed (under a memory limit, by the OOM killer; else from
     * outside): reported as killed (137), not as hutch's failure.  (A CI
     * run under load saw the memory bomb reach this.) */
    /* What runsc said, for the message (its stderr: runsc's and the
     * sentry's log lines, on the sandbox's log tmpfs until destroy). */
    snprintf(log, sizeof(log), "%s/runsc.log", sb->log_dir);
    read_tail(log, tail, sizeof(tail));
    if (!cgroup_exists(sb)) {
        sb->st->host->log(HUTCH_LOG_INFO, "gvisor",
                          "sandbox %s died whole and its cgroup is gone: reported as "
                          "killed (an OOM kill cannot be told any more)%s%s",
                          sb->id, tail[0] ? "; runsc said: " : "", tail);
        sbio_exit_from_status(SIGKILL, 0, ex);
        return 0;
    }
    /* How `runsc run` ended says who ended it (init's exit status, or a
     * signal to runsc), and its last words come as it ends. */
    {
        char how[64] = "";
        int status;
        if (sb->runsc_pid > 0) {
            if (end_runsc(sb, &status) < 0)
                snprintf(how, sizeof(how), "; runsc run did not end and was killed");
            else
                snprintf(how, sizeof(how), "; runsc run ended with status %d",
                         exit_code(status));
            read_tail(log, tail, sizeof(tail));
        }
        return hutch_err_set(err, -EIO,
                             "the gVisor sandbox %s ended under the program (killed "
                             "from outside?)%s%s%s",
                             sb->id, how, tail[0] ? "; runsc said: " : "", tail);
    }
}

static int gv_get(void *state, struct hutch_sandbox *pub, hutch_write_fn write_fn,
                  void *arg, uint64_t max_bytes, struct hutch_err *err)
{
    struct gv_sandbox *sb = (struct gv_sandbox *)pub;
    struct hutch_archive_limits lim = {
        .struct_size = sizeof(lim),
        .max_bytes = max_bytes,
        .max_entries = HUTCH_TAR_MAX_ENTRIES,
        .max_path = HUTCH_TAR_MAX_PATH,
        .max_depth = HUTCH_TAR_MAX_DEPTH,
    };
    char out[PATH_MAX + 8];
    int r = sbio_stop(&sb->io, GV_STOP_MS);

    /* A sandbox that is gone (killed for memory) has no process left that
     * could change /work, which lives on the host: collect it all the same. */
    if (r < 0 && r != -EPIPE)
        return hutch_err_set(err, r,
                             "the sandbox did not stop its processes before its files "
                             "were collected (%s)",
                             strerror(-r));
    snprintf(out, sizeof(out), "%s/out", sb->work);
    return sb->st->host->archive_pack_dir(out, write_fn, arg, &lim, err);
}

/* runsc made the sandbox's cgroup in every hierarchy (cgroupsPath): its
 * weight is v2's cpu.weight there, or v1's cpu.shares (1024 for the
 * default 100). */
static int gv_cpu_weight(void *state, struct hutch_sandbox *pub, uint32_t weight,
                         struct hutch_err *err)
{
    struct gv_sandbox *sb = (struct gv_sandbox *)pub;
    int r;

    (void)state;
    if ((r = box_cpu_weight_check(weight, err)) < 0)
        return r;
    if (!sb->cgroup[0])
        return hutch_err_set(err, -ENOTSUP, "the sandbox has no cgroup");
    r = box_cgroup_cpu_weight(sb->cgroup, weight, err);
    if (r == -ENOENT)
        return hutch_err_set(err, -ENOTSUP, "no cpu controller for %s", sb->cgroup);
    return r;
}

static void gv_kill(void *state, struct hutch_sandbox *pub)
{
    struct gv_sandbox *sb = (struct gv_sandbox *)pub;
    const char *tail[] = {"kill", "--all", sb->id, "KILL", NULL};

    if (sb->killed)
        return;
    sb->killed = 1;
    runsc_cmd(sb->st, NULL, sb->platform, tail, GV_CMD_MS);
}

static void gv_destroy(void *state, struct hutch_sandbox *pub)
{
    sandbox_free((struct gv_sandbox *)pub);
}

/* --- doctor ------------------------------------------------------------ */

/* Runs /bin/true in a throwaway sandbox on `platform`, with a state root
 * of its own: 0 when it works, else why not.  Its cgroup (/hutch-try-…, in
 * every hierarchy) is removed after it: runsc leaves it behind even when
 * the sandbox ran and ended, one per `hutch doctor`. */
static int try_platform(const struct gv_state *st, const char *platform,
                        const char *rootfs, char *why, size_t whylen)
{
    char dir[PATH_MAX], path[PATH_MAX + 16], id[64], root[PATH_MAX + 8];
    const char *tail[] = {"run", "--bundle", dir, id, NULL};
    char *json;
    cJSON *c;
    int r;

    /* In the state directory when there is one (`hutch doctor` has none). */
    snprintf(dir, sizeof(dir), "%s/try.XXXXXX", st->dir[0] ? st->dir : GV_BASE);
    if (!mkdtemp(dir)) {
        snprintf(why, whylen, "mkdtemp: %s", strerror(errno));
        return -1;
    }
    snprintf(id, sizeof(id), "hutch-try-%d-%s", (int)getpid(), dir + strlen(dir) - 6);
    snprintf(root, sizeof(root), "%s/root", dir);
    mkdir(root, 0700);
    c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "ociVersion", "1.0.2");
    {
        cJSON *proc = cJSON_AddObjectToObject(c, "process"), *user;
        user = cJSON_AddObjectToObject(proc, "user");
        cJSON_AddNumberToObject(user, "uid", 1000);
        cJSON_AddNumberToObject(user, "gid", 1000);
        cJSON_AddItemToObject(proc, "args",
                              box_str_array((const char *[]){"/bin/true", NULL}));
        cJSON_AddStringToObject(proc, "cwd", "/");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "root"), "path", rootfs);
        cJSON_AddBoolToObject(cJSON_GetObjectItem(c, "root"), "readonly", 1);
        snprintf(path, sizeof(path), "/%s", id);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(c, "linux"), "cgroupsPath",
                                path);
    }
    json = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    snprintf(path, sizeof(path), "%s/config.json", dir);
    {
        struct hutch_err err = {0};
        r = json ? write_file(path, json, &err) : -1;
    }
    free(json);
    if (r == 0) {
        pid_t pid = runsc_spawn(st, root, platform, tail, -1);
        int status;
        r = pid < 0 || wait_for(pid, 5000, &status) < 0 ? -1 : exit_code(status);
        if (r != 0)
            snprintf(
                why, whylen,
                r < 0 ? "did not finish within 5 s (hangs here)" : "exit status %d", r);
        if (r != 0) {
            const char *del[] = {"delete", "--force", id, NULL};
            runsc_cmd(st, root, platform, del, GV_CMD_MS);
        }
        cg_each(id, cg_rmdir_settle, st);
    } else {
        snprintf(why, whylen, "cannot write the bundle");
    }
    rm_tree(dir);
    return r;
}

/* What the rootfs of `language` records (images/build.sh writes it). */
static int gv_runtime(void *state, const char *language, char *buf, size_t len,
                      struct hutch_err *err)
{
    struct gv_state *st = state;
    char file[PATH_MAX + 64], raw[128];

    if (strcmp(language, "python") != 0 && strcmp(language, "javascript") != 0)
        return hutch_err_set(err, -EINVAL, "unknown language \"%s\"", language);
    snprintf(file, sizeof(file), "%s/%s/etc/hutch-runtime", st->images,
             rootfs_name(language, 0));
    if (box_read_file(file, raw, sizeof(raw)) < 0 ||
        box_runtime_line(raw, buf, len) < 0)
        return hutch_err_set(
            err, -ENOENT, "%s: runtime version not recorded: run 'make images' again",
            file);
    return 0;
}

/* What images/build.sh recorded of the rootfs's packages: only the data
 * flavour's Python rootfs has a list; every other one has none. */
static int gv_packages(void *state, const char *language, const char *flavour,
                       char *buf, size_t len, struct hutch_err *err)
{
    struct gv_state *st = state;
    char dir[PATH_MAX + 64], file[PATH_MAX + 96], raw[HUTCH_PACKAGES_MAX];
    struct stat s;
    int data;

    if (strcmp(language, "python") != 0 && strcmp(language, "javascript") != 0)
        return hutch_err_set(err, -EINVAL, "unknown language \"%s\"", language);
    data = box_flavour(flavour, "gvisor", err);
    if (data < 0)
        return data;
    snprintf(dir, sizeof(dir), "%s/%s", st->images, rootfs_name(language, data));
    if (stat(dir, &s) < 0 || !S_ISDIR(s.st_mode))
        return hutch_err_set(err, -ENOENT, "%s is missing: run 'make images'", dir);
    snprintf(file, sizeof(file), "%s/etc/hutch-packages", dir);
    if (box_read_file(file, raw, sizeof(raw)) < 0 ||
        box_runtime_line(raw, buf, len) < 0)
        if (len)
            buf[0] = '\0';
    return 0;
}

static void gv_doctor(const struct hutch_host *host, void *ctx,
                      void (*report)(void *ctx, const char *status, const char *what,
                                     const char *detail))
{
    struct gv_state st = {.host = host};
    struct hutch_err err = {0};
    char detail[PATH_MAX + 256], rootfs[PATH_MAX + 32], images[PATH_MAX], why[160];
    const char *env = opt_env(gv_options, "runsc");
    int have_rootfs = 0;

    if (gv_probe(host, &err) < 0) {
        report(ctx, "FAIL", "gvisor", err.msg);
        return;
    }
    find_exec(env ? env : "runsc", st.runsc, sizeof(st.runsc));
    images_dir(images);
    box_find_init(gv_options, st.init_path, sizeof(st.init_path), &err);
    for (int i = 0; i < 2; i++) {
        const char *lang = i == 0 ? "python" : "javascript";
        struct stat s;
        snprintf(rootfs, sizeof(rootfs), "%s/%s", images, rootfs_name(lang, 0));
        if (stat(rootfs, &s) == 0 && S_ISDIR(s.st_mode)) {
            /* The runtime it carries (images/build.sh wrote it down),
             * which may not be the host's that the local executor runs. */
            char rt[80] = "", file[PATH_MAX + 32];
            FILE *f;
            snprintf(file, sizeof(file), "%s/etc/hutch-runtime", rootfs);
            if ((f = fopen(file, "re"))) {
                if (!fgets(rt, sizeof(rt), f))
                    rt[0] = '\0';
                fclose(f);
            }
            rt[strcspn(rt, "\r\n")] = '\0';
            for (char *c = rt; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                    *c = ' ';
            snprintf(detail, sizeof(detail), "%s (%s)", rootfs,
                     rt[0] ? rt
                           : "runtime version not recorded: run 'make images' again");
            report(ctx, "ok", "gvisor rootfs", detail);
            have_rootfs = 1;
        } else {
            snprintf(detail, sizeof(detail),
                     "%s is missing: build it with 'make images' (root), or set "
                     "HUTCH_IMAGES_DIR",
                     rootfs);
            report(ctx, "FAIL", "gvisor rootfs", detail);
        }
    }
    /* The data flavour (executor_options.gvisor.flavour = "data"): what
     * images/build.sh recorded of its Python packages.  Optional: warn. */
    {
        char pk[160] = "", file[PATH_MAX + 64];
        snprintf(file, sizeof(file), "%s/%s/etc/hutch-packages", images,
                 rootfs_name("python", 1));
        if (box_read_file(file, pk, sizeof(pk)) > 0 && pk[0]) {
            pk[strcspn(pk, "\r\n")] = '\0';
            for (char *c = pk; *c; c++)
                if ((unsigned char)*c < 0x20 || *c == 0x7f)
                    *c = ' ';
            snprintf(detail, sizeof(detail),
                     "gvisor: base rootfs-python: none of numpy, pandas, matplotlib; "
                     "flavour \"data\" (%s/%s): %s",
                     images, rootfs_name("python", 1), pk);
            report(ctx, "ok", "python packages", detail);
        } else {
            snprintf(detail, sizeof(detail),
                     "gvisor: base rootfs-python: none of numpy, pandas, matplotlib; "
                     "flavour \"data\": %s/%s is missing (build it with 'make images')",
                     images, rootfs_name("python", 1));
            report(ctx, "warn", "python packages", detail);
        }
    }
    if (!have_rootfs)
        return;
    snprintf(rootfs, sizeof(rootfs), "%s/%s", images, rootfs_name("python", 0));
    if (access(rootfs, F_OK) < 0)
        snprintf(rootfs, sizeof(rootfs), "%s/%s", images, rootfs_name("js", 0));
    mkdir("/run/hutch", 0711);
    mkdir(GV_BASE, 0700);
    for (int i = 0; i < 2; i++) {
        const char *plat = i == 0 ? "ptrace" : "kvm";
        if (i == 1 && access("/dev/kvm", R_OK | W_OK) < 0) {
            report(ctx, "warn", "gvisor platform kvm", "/dev/kvm is not usable here");
            continue;
        }
        snprintf(detail, sizeof(detail), "gvisor platform %s", plat);
        if (try_platform(&st, plat, rootfs, why, sizeof(why)) == 0)
            report(ctx, "ok", detail,
                   i == 0 ? "works (the default)"
                          : "works (HUTCH_GVISOR_PLATFORM=kvm)");
        else
            report(ctx, i == 0 ? "FAIL" : "warn", detail, why);
    }
}

static const struct hutch_executor gvisor_executor = {
    .abi = HUTCH_EXECUTOR_ABI,
    .struct_size = sizeof(struct hutch_executor),
    .name = "gvisor",
    .summary = "a gVisor sandbox (runsc, user-space kernel) per execution; needs root",
    .version = PACKAGE_VERSION,
    .caps = HUTCH_CAP_ARCHIVE | HUTCH_CAP_PRESTART | HUTCH_CAP_CONCURRENT |
            HUTCH_CAP_EGRESS,
    .probe = gv_probe,
    .open = gv_open,
    .start = gv_start,
    .assign = gv_assign,
    .put_archive = gv_put,
    .reap = gv_reap,
    .get_archive = gv_get,
    .kill = gv_kill,
    .destroy = gv_destroy,
    .close = gv_close,
    .doctor = gv_doctor,
    .runtime = gv_runtime,
    .packages = gv_packages,
    .sweep = gv_sweep,
    .cpu_weight = gv_cpu_weight,
    .options = gv_options,
};

HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void)
{
    return &gvisor_executor;
}
