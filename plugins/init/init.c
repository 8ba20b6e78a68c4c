/* init.c — hutch-init, pid 1 of a Docker or gVisor sandbox.
 *
 * Linked statically and bind-mounted read-only at /run/hutch/init, so it
 * runs in any image whatever its libc.  The executor plugin listens on four
 * unix sockets in a directory bind-mounted at /run/hutch/io; init connects
 * to them, starts the runner with the program's stdout/stderr and the
 * protocol channel already in place (a Node.js runner could not dup2 them
 * itself), and stays pid 1 after the runner ends, so /work outlives the
 * program until the plugin has collected it:
 *
 *   ctl   init <-> plugin: "exit STATUS OOM\n" once the runner ended;
 *         "egress off\n" (with --egress) makes init stop listening on
 *         127.0.0.1:HUTCH_EGRESS_PORT, answered "egress off\n": the job
 *         has no egress, and its program's connections are refused;
 *         "stop\n" asks init to kill every other process, answered with
 *         "stopped OUT\n", OUT saying what /work/out is now that nothing
 *         can change it any more (ok, absent, symlink, notdir, owner, or
 *         errno=N: see sbio_out_check), just after "work MAJ:MIN INO
 *         SEC.NSEC\n" with --attach: /work's device, inode and change
 *         time, by which the Docker executor proves that the directory its
 *         engine names on the host is this /work (docker_get);
 *         "noview STEP ERRNO\n" (before hello, with --view) when the
 *         program runs without its view;
 *         "egress ok\n" or "egress ERRNO\n" (before hello, with --attach
 *         and --egress): whether init could connect to the egress socket
 *         once (see --egress below);
 *         end of file (the plugin closed it) ends init and so the
 *         sandbox.
 *   chan  the runner's fd 3 (wire protocol, see src/runners/PROTOCOL.md)
 *   out   the runner's fd 1
 *   err   the runner's fd 2
 *
 * Init is started as root with CAP_SETUID, CAP_SETGID, CAP_SETPCAP and
 * CAP_KILL, plus what the runner's view takes (CAP_SYS_ADMIN, and
 * CAP_SYS_CHROOT with --view; see "the program's view" below); the
 * executor's spec gives it no other.  The runner builds its view, then
 * drops to UID:GID with an empty bounding set and no capabilities before
 * it execs; init then keeps CAP_KILL alone, to end the program's
 * processes.  So the program, another uid without capabilities, can
 * neither signal init nor ptrace it, and /proc/1 is an empty directory in
 * its view (gVisor ignores non-dumpable: there any uid could read
 * /proc/1/environ, maps and fd otherwise).  Init's own stdio (the
 * container's log, runsc's stderr: files on the host) is /dev/null once
 * the sockets are connected, so nothing in the sandbox holds an fd that
 * writes to the host's disk; init erases its environment strings too.
 *
 * The runner gets the fixed environment of plugins/common/env.h, whatever
 * init itself was given: the plugin asks for the same one, but a container
 * engine adds its own (Docker sets HOSTNAME, an image may carry ENV lines).
 *
 * With --attach (the Docker executor) there is no socket directory: the
 * four streams travel as frames (plugins/common/mux.h) over init's own
 * stdin and stdout, the container's attach stream, which reaches hutch
 * whether the engine runs beside it or on another machine.  init says
 * "hello" on ctl once it runs, frames what the runner writes on chan, out
 * and err, and passes chan frames from the plugin to the runner.  The end
 * of its stdin (the plugin let go of the container) ends init, as the end
 * of ctl does with the sockets.
 *
 * usage: hutch-init [--seccomp] [--attach] [--view | --hide-init]
 *                   [--egress SOCKET] UID:GID NOFILE FSIZE INTERP [ARG]...
 *        (the sandbox user, its limits, the runner's command)
 *
 * --egress: init listens on 127.0.0.1:HUTCH_EGRESS_PORT, where the
 * program's HTTP_PROXY points, and carries each connection to the unix
 * socket SOCKET, hutch's proxy (forward.c), in the same poll loop as the
 * rest; before the runner is forked, so the port is init's, never the
 * program's.  The gVisor executor's SOCKET is in /run/hutch/io and stays
 * there for the sandbox's life; the docker executor's, where the engine
 * runs beside hutch, is in a directory of its own the engine bind-mounts:
 * with --attach init connects to it once before hello and says whether it
 * could ("egress" on ctl), which the plugin takes, with the connection its
 * own listener got, as the proof that the path the engine mounted is that
 * socket.
 *
 * --seccomp installs hutch's system call filter (plugins/common/filter.c,
 * the local executor's) in the runner, on top of the container runtime's
 * own profile: Docker's default allows socket families (vsock) hutch
 * refuses.  The gVisor executor does not ask for it: its kernel is gVisor's
 * own. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/caps.h"
#include "../common/env.h"
#include "filter.h"
#include "forward.h"
#include "masked.h"
#include "mux.h"

#define IO_DIR "/run/hutch/io"

enum { CTL, CHAN, OUT, ERR, NSOCK };
static const char *const sock_names[NSOCK] = {"ctl", "chan", "out", "err"};

/* Where init's own errors go: the container's stderr until the sockets
 * exist (the plugin shows its log when the sandbox fails to come up), then
 * the program's stderr socket. */
static int diag_fd = 2;

__attribute__((noreturn)) static void die(const char *what)
{
    dprintf(diag_fd, "hutch-init: %s: %s\n", what, strerror(errno));
    _exit(126);
}

static int connect_to(const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    snprintf(sa.sun_path, sizeof(sa.sun_path), IO_DIR "/%s", name);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void write_all(int fd, const char *s)
{
    size_t len = strlen(s);
    while (len) {
        ssize_t n = write(fd, s, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        s += n;
        len -= (size_t)n;
    }
}

/* The memory cgroup's count of OOM kills (cgroup v1 oom_control, v2
 * memory.events), or -1 when it cannot be read here. */
static long oom_kills(void)
{
    static const char *const files[] = {"/sys/fs/cgroup/memory/memory.oom_control",
                                        "/sys/fs/cgroup/memory.events"};
    char buf[512];
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        int fd = open(files[i], O_RDONLY | O_CLOEXEC);
        ssize_t n;
        char *p;
        if (fd < 0)
            continue;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = 0;
        p = strstr(buf, "oom_kill ");
        if (p)
            return strtol(p + 9, NULL, 10);
    }
    return -1;
}

static void set_limit(int res, rlim_t v)
{
    struct rlimit rl = {v, v};
    setrlimit(res, &rl);
}

/* Sets this process's capabilities to `keep` (a mask of CAP_* bits below
 * 32) in the effective and permitted sets, none inheritable.  0 or -1. */
static int caps_set(uint32_t keep)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {{keep, keep, 0}, {0, 0, 0}};
    return (int)syscall(SYS_capset, &h, d);
}

/* 1 when this process holds any capability at all. */
static int caps_any(void)
{
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return 1;
    return (d[0].effective | d[0].permitted | d[0].inheritable | d[1].effective |
            d[1].permitted | d[1].inheritable) != 0;
}

static uid_t box_uid;
static gid_t box_gid;

/* Erases the environment init was given (the runner gets the fixed one):
 * gVisor lets any process read /proc/1/environ, which shows that memory. */
static int take_environment(void)
{
    extern char **environ;
    for (size_t i = 0; environ[i]; i++)
        memset(environ[i], 0, strlen(environ[i]));
    return 0;
}

/* Becomes the sandbox user for good: an empty bounding set (so nothing the
 * program execs can regain a capability), no supplementary groups, uid and
 * gid changed for real, saved and effective alike, which clears the
 * permitted and effective sets; then checks all of it. */
static int drop_to_user(void)
{
    for (int cap = 0; cap < 64; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            return -1;
    if (setgroups(0, NULL) < 0 || setresgid(box_gid, box_gid, box_gid) < 0 ||
        setresuid(box_uid, box_uid, box_uid) < 0)
        return -1;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return -1;
    if (getuid() != box_uid || geteuid() != box_uid || getgid() != box_gid ||
        setresuid(0, 0, 0) == 0 || caps_any()) {
        errno = EPERM;
        return -1;
    }
    return 0;
}

/* --- the program's view of the file system ------------------------------ */

/* With --view (the docker executor) the runner gets a mount namespace of
 * its own where nothing names the engine's host: a container's mountinfo
 * shows the overlay's directories under the engine's data root (its
 * lowerdir, upperdir and workdir), and the host paths of the files and
 * volumes bind-mounted into it (/etc/hostname, /etc/hosts,
 * /etc/resolv.conf, /run/hutch).  In the view:
 *   /            a new read-only overlay whose only layers are the
 *                container's root and an empty directory (its options name
 *                those two, paths of the container), so the image's files,
 *                never the engine's directories;
 *   /proc /dev /sys /tmp /work   the container's own, bound (a bind keeps
 *                the engine's masks and read-only flags);
 *   /run         a tmpfs with a copy of the runners at /run/hutch/runner;
 *   /etc/hostname, hosts, resolv.conf   copies of what the engine wrote;
 *   BOX_MASKED_PATHS masked again (Podman ignores MaskedPaths), and /proc/1
 *                hidden under an empty directory;
 * and a cgroup namespace of its own (Podman ignores CgroupnsMode).
 * The runner chroots into it (the engine's seccomp profile refuses
 * pivot_root): the mounts outside its root are not shown in its mountinfo,
 * and the program, without CAP_SYS_CHROOT, cannot leave it.  Building it
 * takes CAP_SYS_ADMIN and CAP_SYS_CHROOT, which init has until the runner
 * is forked (then only CAP_KILL) and the runner until it becomes the
 * sandbox user.  Where the engine's security profile refuses mounts (an
 * AppArmor profile such as docker-default), the runner runs in the
 * container's own namespace, as before, and init says "noview STEP ERRNO"
 * on ctl (the plugin logs it): the masks of MaskedPaths still hold there.
 *
 * With --hide-init (the gVisor executor) the runner's mount namespace only
 * hides /proc/1: gVisor's kernel lets any process read /proc/1/environ,
 * maps and fd whatever its uid (it does not honour non-dumpable), so pid 1
 * is an empty directory there.  gVisor's mountinfo, /proc and /sys are its
 * own kernel's: nothing of the host to hide.  There a failure stops the
 * sandbox: nothing between it and the host can refuse. */
#define VIEW_DIR "/run/hutch/view" /* in /run/hutch's volume: init's own */

static int view_mode; /* --view */
static int hide_init; /* --hide-init, or --view */

static const char *const view_etc[] = {"hostname", "hosts", "resolv.conf"};
struct view_etc_copy {
    char data[HUTCH_SANDBOX_ETC_BYTES];
    ssize_t len; /* -1: not there */
};
static struct view_etc_copy etc_copy[3];

/* Copies regular files (and `depth` levels of directories) from `from` to
 * `to`, never following a link.  0 or -errno. */
static int copy_tree(const char *from, const char *to, int depth)
{
    char src[PATH_MAX], dst[PATH_MAX], buf[16384];
    DIR *d = opendir(from);
    struct dirent *de;
    int r = 0;

    if (!d)
        return -errno;
    while (r == 0 && (de = readdir(d))) {
        struct stat st;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (snprintf(src, sizeof(src), "%s/%s", from, de->d_name) >= (int)sizeof(src) ||
            snprintf(dst, sizeof(dst), "%s/%s", to, de->d_name) >= (int)sizeof(dst)) {
            r = -ENAMETOOLONG;
            break;
        }
        if (lstat(src, &st) < 0) {
            r = -errno;
        } else if (S_ISDIR(st.st_mode) && depth > 0) {
            if (mkdir(dst, 0755) < 0)
                r = -errno;
            else
                r = copy_tree(src, dst, depth - 1);
        } else if (S_ISREG(st.st_mode)) {
            int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
            ssize_t n = 0;
            while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
                if (write(out, buf, (size_t)n) != n) {
                    n = -1;
                    break;
                }
            if (in < 0 || out < 0 || n < 0)
                r = errno ? -errno : -EIO;
            if (in >= 0)
                close(in);
            if (out >= 0)
                close(out);
        }
    }
    closedir(d);
    return r;
}

static int write_small(const char *path, const char *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    int r = 0;
    if (fd < 0)
        return -errno;
    if (len && write(fd, data, len) != (ssize_t)len)
        r = errno ? -errno : -EIO;
    close(fd);
    return r;
}

/* 1 when the directory `path` holds nothing (an engine's mask already). */
static int dir_empty(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    int empty = 1;
    while (d && empty && (de = readdir(d)))
        empty = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
    if (d)
        closedir(d);
    return d && empty;
}

/* Mounts an empty read-only directory (a directory) or /dev/null (a file)
 * over `path` of the view's root `root`; 0 when there is no such path, or
 * when the engine masked it already. */
static int mask_one(const char *root, const char *path)
{
    char at[PATH_MAX], null[PATH_MAX];
    struct stat st;
    snprintf(at, sizeof(at), "%s%s", root, path);
    if (lstat(at, &st) < 0)
        return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
    if ((S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)) ||
        (S_ISDIR(st.st_mode) && dir_empty(at)))
        return 0;
    if (S_ISDIR(st.st_mode))
        return mount("hutch", at, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "size=4k,mode=0555") < 0
                   ? -errno
                   : 0;
    snprintf(null, sizeof(null), "%s/dev/null", root);
    return mount(null, at, NULL, MS_BIND, NULL) < 0 ? -errno : 0;
}

/* /proc/1 (init) as an empty read-only directory, below `root`. */
static int hide_pid1(const char *root)
{
    char at[PATH_MAX];
    snprintf(at, sizeof(at), "%s/proc/1", root);
    return mount("hutch", at, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "size=4k,mode=0555") < 0
               ? -errno
               : 0;
}

/* Reads what the engine wrote in /etc before the view hides it. */
static void view_read_etc(void)
{
    for (size_t i = 0; i < sizeof(view_etc) / sizeof(view_etc[0]); i++) {
        char path[64];
        int fd;
        snprintf(path, sizeof(path), "/etc/%s", view_etc[i]);
        etc_copy[i].len = -1;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        etc_copy[i].len = read(fd, etc_copy[i].data, sizeof(etc_copy[i].data));
        close(fd);
    }
}

/* Builds the --view (see above) in a mount namespace of this process's
 * own, and chroots into it.  0, or -errno with *step naming what failed;
 * then nothing of it is left and the process sees the container as it
 * is. */
static int view_build(const char **step)
{
    static const char *const binds[] = {"/proc", "/dev", "/sys", "/tmp", "/work"};
    static const char *const masks[] = {BOX_MASKED_PATHS};
    const char *root = VIEW_DIR "/root";
    char path[PATH_MAX], opts[128];
    int r;

#define STEP(name, call)                                                               \
    do {                                                                               \
        *step = (name);                                                                \
        if ((call) < 0) {                                                              \
            r = -errno;                                                                \
            goto undo;                                                                 \
        }                                                                              \
    } while (0)
    view_read_etc();
    /* A cgroup namespace of its own too: Podman ignores CgroupnsMode, and
     * the runner's /proc/self/cgroup and cgroup mounts would name the
     * engine's cgroup path of the container (its root is its own cgroup
     * then, as with Docker's private cgroup namespace). */
    *step = "unshare";
    if (unshare(CLONE_NEWNS | CLONE_NEWCGROUP) < 0)
        return -errno;
    *step = "private";
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -errno;
    *step = "mkdir";
    if (mkdir(VIEW_DIR, 0700) < 0 && errno != EEXIST)
        return -errno;
    snprintf(opts, sizeof(opts), "size=%u,mode=0755", HUTCH_SANDBOX_VIEW_BYTES);
    *step = "tmpfs";
    if (mount("hutch", VIEW_DIR, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
        return -errno;
    STEP("mkdir", mkdir(root, 0755));
    STEP("mkdir", mkdir(VIEW_DIR "/empty", 0755));
    STEP("mkdir", mkdir(VIEW_DIR "/etc", 0755));
    STEP("mkdir", mkdir(VIEW_DIR "/run", 0755));
    STEP("mkdir", mkdir(VIEW_DIR "/run/hutch", 0755));
    STEP("mkdir", mkdir(VIEW_DIR "/run/hutch/runner", 0755));
    *step = "runner";
    r = copy_tree("/run/hutch/runner", VIEW_DIR "/run/hutch/runner", 1);
    if (r < 0)
        goto undo;
    for (size_t i = 0; i < sizeof(view_etc) / sizeof(view_etc[0]); i++) {
        if (etc_copy[i].len < 0)
            continue;
        snprintf(path, sizeof(path), VIEW_DIR "/etc/%s", view_etc[i]);
        *step = "etc";
        r = write_small(path, etc_copy[i].data, (size_t)etc_copy[i].len);
        if (r < 0)
            goto undo;
    }
    STEP("overlay", mount("overlay", root, "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV,
                          "lowerdir=/:" VIEW_DIR "/empty"));
    for (size_t i = 0; i < sizeof(binds) / sizeof(binds[0]); i++) {
        snprintf(path, sizeof(path), "%s%s", root, binds[i]);
        STEP(binds[i], mount(binds[i], path, NULL, MS_BIND | MS_REC, NULL));
    }
    snprintf(path, sizeof(path), "%s/run", root);
    STEP("/run", mount(VIEW_DIR "/run", path, NULL, MS_BIND, NULL));
    STEP("/run",
         mount(NULL, path, NULL,
               MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
               NULL));
    for (size_t i = 0; i < sizeof(view_etc) / sizeof(view_etc[0]); i++) {
        char from[PATH_MAX];
        struct stat st;
        snprintf(from, sizeof(from), VIEW_DIR "/etc/%s", view_etc[i]);
        snprintf(path, sizeof(path), "%s/etc/%s", root, view_etc[i]);
        if (etc_copy[i].len < 0 || lstat(path, &st) < 0 || !S_ISREG(st.st_mode))
            continue; /* the image has none: nothing to stand in for */
        STEP("etc", mount(from, path, NULL, MS_BIND, NULL));
        STEP("etc",
             mount(NULL, path, NULL,
                   MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   NULL));
    }
    for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
        *step = masks[i];
        r = mask_one(root, masks[i]);
        if (r < 0)
            goto undo;
    }
    *step = "/proc/1";
    r = hide_pid1(root);
    if (r < 0)
        goto undo;
    STEP("chroot", chroot(root));
    if (chdir("/") < 0)
        _exit(127); /* inside already: there is no way back */
    return 0;
#undef STEP
undo:
    /* Everything made so far is below VIEW_DIR: it goes as one. */
    umount2(VIEW_DIR, MNT_DETACH);
    return r;
}

/* The runner's view (before it becomes the sandbox user): --view, or
 * --hide-init's hidden /proc/1.  With --view, what happened is written on
 * `report` ("ok\n", or "STEP ERRNO\n"); --hide-init fails the runner. */
static void runner_view(int report)
{
    char line[128];
    const char *step = "";
    int r;

    if (view_mode) {
        r = view_build(&step);
        if (r == 0)
            snprintf(line, sizeof(line), "ok\n");
        else
            snprintf(line, sizeof(line), "%.40s %d\n", step, -r);
        write_all(report, line);
        close(report);
        return;
    }
    if (!hide_init)
        return;
    if (unshare(CLONE_NEWNS) < 0 || hide_pid1("") < 0) {
        dprintf(2, "hutch sandbox: hiding pid 1 from the program: %s\n",
                strerror(errno));
        _exit(127);
    }
}

static const void *filter_bpf; /* set by --seccomp */
static size_t filter_len;

/* dup2() for the runner's fds: when fd already is `to`, dup2 does nothing
 * and the fd would keep its close-on-exec flag. */
static int give_fd(int fd, int to)
{
    if (fd == to)
        return fcntl(fd, F_SETFD, 0);
    return dup2(fd, to);
}

__attribute__((noreturn)) static void exec_runner(int fds[NSOCK], char **argv,
                                                  int report)
{
    sigset_t none;
    int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (devnull < 0 || dup2(devnull, 0) < 0 || give_fd(fds[OUT], 1) < 0 ||
        give_fd(fds[ERR], 2) < 0 || give_fd(fds[CHAN], 3) < 0)
        _exit(127);
    runner_view(report);
    syscall(SYS_close_range, 4, ~0U, 0);
    setsid();
    /* While still root: once the uid changed, /proc/self belongs to root
     * until exec. */
    {
        int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
            write_all(fd, "1000");
            close(fd);
        }
    }
    set_limit(RLIMIT_CORE, 0);
    set_limit(RLIMIT_NOFILE, strtoul(argv[2], NULL, 10));
    set_limit(RLIMIT_FSIZE, strtoull(argv[3], NULL, 10));
    /* As the local executor's runner: timers and queued signals take kernel
     * memory, and under Docker the count is the host uid's (of this
     * container alone, see the docker executor's uid_take()). */
    set_limit(RLIMIT_SIGPENDING, HUTCH_SANDBOX_SIGPENDING);
    if (drop_to_user() < 0) {
        dprintf(2, "hutch sandbox: cannot become uid %u: %s\n", (unsigned)box_uid,
                strerror(errno));
        _exit(127);
    }
    if (chdir("/work") < 0 || (mkdir("/work/out", 0755) < 0 && errno != EEXIST)) {
        dprintf(2, "hutch sandbox: /work: %s\n", strerror(errno));
        _exit(127);
    }
    if (filter_bpf) {
        int r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0
                    ? -errno
                    : filter_apply(filter_bpf, filter_len);
        if (r < 0) {
            dprintf(2, "hutch sandbox: installing the seccomp filter: %s\n",
                    strerror(-r));
            _exit(127);
        }
    }
    execve(argv[4], argv + 4, (char *const *)hutch_sandbox_env);
    dprintf(2, "hutch sandbox: cannot start %s: %s\n", argv[4], strerror(errno));
    _exit(127);
}

static pid_t runner;
static int runner_done, ctl_fd = -1;
static long oom_before;

/* --- attach mode: frames over stdin and stdout ---------------------------- */

/* Frames waiting for stdout.  Program output is read only while a whole
 * frame fits with CTL_RESERVE to spare, so ctl lines always find room. */
#define OBUF_SIZE   (4 * (MUX_MAX_PAYLOAD + MUX_HDR))
#define CTL_RESERVE 1024
/* Tool answers from the plugin the runner has not read yet: beyond this,
 * init stops reading its stdin until the runner catches up. */
#define CHAN_PENDING_MAX (16u << 20)

static int attach_mode;
static unsigned char obuf[OBUF_SIZE];
static size_t obuf_len;
/* Attach mode: the runner's "exit" line, held until what the runner wrote
 * before it ended is framed ahead of it (see flush_exit). */
static char exit_line[64];
/* Init's ends of the runner's chan, out and err (attach mode), -1 once
 * ended. */
static int mine[NSOCK] = {-1, -1, -1, -1};

static void queue_frame(int stream, const void *data, size_t len)
{
    if (obuf_len + MUX_HDR + len > sizeof(obuf))
        return; /* cannot happen for ctl lines: CTL_RESERVE keeps room */
    mux_header(obuf + obuf_len, stream, (uint32_t)len);
    if (len)
        memcpy(obuf + obuf_len + MUX_HDR, data, len);
    obuf_len += MUX_HDR + len;
}

/* A line to the plugin on ctl, whichever way ctl travels. */
static void ctl_say(const char *line)
{
    if (attach_mode)
        queue_frame(MUX_CTL, line, strlen(line));
    else
        write_all(ctl_fd, line);
}

/* Says how the runner ended, once: a program killed with SIGKILL while the
 * cgroup's OOM-kill count went up was killed for memory. */
static void reaped(pid_t pid, int status)
{
    char line[64];
    int oom;
    if (pid != runner || runner_done)
        return;
    runner_done = 1;
    oom = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && oom_before >= 0 &&
          oom_kills() > oom_before;
    snprintf(line, sizeof(line), "exit %d %d\n", status, oom);
    if (attach_mode)
        memcpy(exit_line, line, sizeof(exit_line)); /* flush_exit() says it */
    else
        ctl_say(line);
}

static void kill_all_others(void)
{
    int status;
    pid_t pid;
    kill(-1, SIGKILL);
    while ((pid = waitpid(-1, &status, 0)) > 0 || errno == EINTR)
        if (pid > 0)
            reaped(pid, status);
}

/* Attach mode: frames what runner stream i holds now, as far as obuf has
 * room.  1 when it would block or ended (nothing more to take now), 0 when
 * obuf is full. */
static int take_stream(int i)
{
    while (mine[i] >= 0) {
        ssize_t r;
        if (obuf_len + MUX_HDR + MUX_MAX_PAYLOAD + CTL_RESERVE > sizeof(obuf))
            return 0;
        r = recv(mine[i], obuf + obuf_len + MUX_HDR, MUX_MAX_PAYLOAD, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno == EAGAIN)
            return 1;
        if (r <= 0) {
            queue_frame(i, NULL, 0); /* its end */
            close(mine[i]);
            mine[i] = -1;
            return 1;
        }
        mux_header(obuf + obuf_len, i, (uint32_t)r);
        obuf_len += MUX_HDR + (size_t)r;
    }
    return 1;
}

/* The runner's exit, said after what it wrote before it ended: the plugin
 * hands the core its streams in frame order, and the core takes an exit as
 * "the program's output is in the pipes" (as it is with sockets the runner
 * writes itself).  Without `force` the line waits while obuf is too full
 * to take the rest; with it (everything is dead) it goes now. */
static void flush_exit(int force)
{
    int drained = 1;
    if (!exit_line[0])
        return;
    for (int i = CHAN; i <= ERR; i++)
        drained &= take_stream(i);
    if (!drained && !force)
        return;
    queue_frame(MUX_CTL, exit_line, strlen(exit_line));
    exit_line[0] = '\0';
}

/* What /work/out is, once every other process is gone and nothing can
 * change it any more: the plugin may then let a daemon that follows
 * symbolic links as root (Docker's archive endpoint) fetch it.  With
 * --attach, what /work is first: nothing changes it any more either, so
 * its change time too is what the host will find, if the host sees it. */
static void say_stopped(void)
{
    flush_exit(1);
    struct stat st, work;
    char line[48], wline[HUTCH_SANDBOX_CTL_LINE];
    const char *what = "ok";

    if (lstat("/work/out", &st) < 0)
        what = errno == ENOENT ? "absent" : NULL;
    else if (S_ISLNK(st.st_mode))
        what = "symlink";
    else if (!S_ISDIR(st.st_mode))
        what = "notdir";
    else if (st.st_uid != box_uid)
        what = "owner";
    if (what)
        snprintf(line, sizeof(line), "stopped %s\n", what);
    else
        snprintf(line, sizeof(line), "stopped errno=%d\n", errno);
    if (attach_mode && lstat("/work", &work) == 0 && S_ISDIR(work.st_mode)) {
        snprintf(wline, sizeof(wline), "work %u:%u %llu %lld.%09ld\n",
                 major(work.st_dev), minor(work.st_dev),
                 (unsigned long long)work.st_ino, (long long)work.st_ctim.tv_sec,
                 (long)work.st_ctim.tv_nsec);
        ctl_say(wline);
    }
    ctl_say(line);
}

/* UID:GID, neither of them root. */
static int parse_user(const char *s)
{
    char *end;
    unsigned long u = strtoul(s, &end, 10), g;
    if (end == s || *end != ':')
        return -1;
    s = end + 1;
    g = strtoul(s, &end, 10);
    if (end == s || *end || u == 0 || g == 0 || u > 0x7fffffff || g > 0x7fffffff)
        return -1;
    box_uid = (uid_t)u;
    box_gid = (gid_t)g;
    return 0;
}

/* Reaps what ended (SIGCHLD is read from a signalfd). */
static void on_sigchld(int sfd)
{
    struct signalfd_siginfo si;
    int status;
    pid_t pid;
    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        ;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        reaped(pid, status);
}

/* The sockets' loop: commands on ctl, the runner's streams are its own;
 * the egress forwarder's connections. */
static int socket_loop(int ctl, int sfd)
{
    for (;;) {
        struct pollfd p[2 + FWD_POLLFDS] = {{ctl, POLLIN, 0}, {sfd, POLLIN, 0}};
        size_t nf = fwd_poll_fill(p + 2, FWD_POLLFDS);
        char cmd[16];
        ssize_t n;

        if (poll(p, 2 + nf, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        fwd_poll_done(p + 2, nf);
        if (p[1].revents & POLLIN)
            on_sigchld(sfd);
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        n = read(ctl, cmd, sizeof(cmd) - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0; /* the plugin is done with this sandbox */
        cmd[n] = 0;
        if (strcmp(cmd, "stop\n") == 0) {
            kill_all_others();
            say_stopped();
        } else if (strcmp(cmd, "egress off\n") == 0) {
            fwd_close();
            ctl_say("egress off\n");
        }
    }
}

/* A command line the plugin sent on ctl. */
static void on_ctl_line(const char *line)
{
    if (strcmp(line, "stop") == 0) {
        kill_all_others();
        say_stopped();
    } else if (strcmp(line, "egress off") == 0) {
        fwd_close();
        ctl_say("egress off\n");
    }
}

/* The attach loop: frames in on stdin, frames out on stdout; `mine` are
 * init's ends of the runner's chan, out and err socket pairs (-1 once
 * their end was passed on). */
static int attach_loop(int sfd)
{
    static unsigned char in[MUX_MAX_PAYLOAD];
    struct mux_reader rd = {0};
    unsigned char *pend = NULL; /* chan bytes for the runner, not yet taken */
    size_t pend_len = 0, pend_cap = 0;
    char ctl_line[64];
    size_t ctl_len = 0;
    int in_eof = 0;

    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);
    fcntl(1, F_SETFL, fcntl(1, F_GETFL) | O_NONBLOCK);
    for (;;) {
        struct pollfd p[6 + FWD_POLLFDS];
        int idx[6], n = 0;
        size_t nf;
        int room;

        flush_exit(0);
        room = obuf_len + MUX_HDR + MUX_MAX_PAYLOAD + CTL_RESERVE <= sizeof(obuf);

        if (!in_eof && pend_len < CHAN_PENDING_MAX)
            idx[n] = -1, p[n++] = (struct pollfd){0, POLLIN, 0};
        if (obuf_len)
            idx[n] = -2, p[n++] = (struct pollfd){1, POLLOUT, 0};
        idx[n] = -3, p[n++] = (struct pollfd){sfd, POLLIN, 0};
        for (int i = CHAN; i <= ERR; i++) {
            short ev = 0;
            if (mine[i] < 0)
                continue;
            if (room)
                ev |= POLLIN;
            if (i == CHAN && pend_len)
                ev |= POLLOUT;
            if (ev)
                idx[n] = i, p[n++] = (struct pollfd){mine[i], ev, 0};
        }
        if (in_eof && !obuf_len)
            return 0; /* the plugin let go, and everything said is out */
        /* The forwarder's after init's own (idx covers those alone). */
        nf = fwd_poll_fill(p + n, FWD_POLLFDS);
        if (poll(p, (nfds_t)n + nf, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        fwd_poll_done(p + n, nf);
        for (int k = 0; k < n; k++) {
            if (!p[k].revents)
                continue;
            if (idx[k] == -3) {
                on_sigchld(sfd);
            } else if (idx[k] == -2) {
                ssize_t w = write(1, obuf, obuf_len);
                if (w < 0 && errno != EAGAIN && errno != EINTR)
                    return 1; /* nobody reads us any more */
                if (w > 0) {
                    memmove(obuf, obuf + w, obuf_len - (size_t)w);
                    obuf_len -= (size_t)w;
                }
            } else if (idx[k] == -1) {
                ssize_t r = read(0, in, sizeof(in));
                const unsigned char *q = in;
                size_t left;
                struct mux_piece pc;
                if (r < 0 && (errno == EAGAIN || errno == EINTR))
                    continue;
                if (r <= 0) {
                    in_eof = 1;
                    kill_all_others();
                    continue;
                }
                left = (size_t)r;
                while (left) {
                    int f = mux_feed(&rd, &q, &left, &pc);
                    if (f < 0)
                        return 1; /* not frames: not our plugin */
                    if (f == 0)
                        break;
                    if (pc.stream == MUX_CTL) {
                        for (size_t j = 0; j < pc.len; j++) {
                            char c = (char)pc.data[j];
                            if (c == '\n') {
                                ctl_line[ctl_len] = 0;
                                on_ctl_line(ctl_line);
                                ctl_len = 0;
                            } else if (ctl_len < sizeof(ctl_line) - 1) {
                                ctl_line[ctl_len++] = c;
                            }
                        }
                    } else if (pc.stream == MUX_CHAN && mine[CHAN] >= 0) {
                        if (!pc.data) {
                            shutdown(mine[CHAN], SHUT_WR);
                        } else {
                            if (pend_len + pc.len > pend_cap) {
                                size_t cap = pend_cap ? pend_cap * 2 : 65536;
                                unsigned char *np;
                                while (cap < pend_len + pc.len)
                                    cap *= 2;
                                np = realloc(pend, cap);
                                if (!np)
                                    return 1;
                                pend = np;
                                pend_cap = cap;
                            }
                            memcpy(pend + pend_len, pc.data, pc.len);
                            pend_len += pc.len;
                        }
                    }
                }
            } else {
                int i = idx[k];
                if ((p[k].revents & POLLOUT) && i == CHAN && pend_len) {
                    ssize_t w =
                        send(mine[CHAN], pend, pend_len, MSG_DONTWAIT | MSG_NOSIGNAL);
                    if (w > 0) {
                        memmove(pend, pend + w, pend_len - (size_t)w);
                        pend_len -= (size_t)w;
                    } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                        pend_len = 0; /* the runner is gone: nobody to answer */
                    }
                }
                if ((p[k].revents & (POLLIN | POLLHUP | POLLERR)) && room) {
                    take_stream(i);
                    if (i == CHAN && mine[CHAN] < 0)
                        pend_len = 0;
                    room = obuf_len + MUX_HDR + MUX_MAX_PAYLOAD + CTL_RESERVE <=
                           sizeof(obuf);
                }
            }
        }
    }
}

int main(int argc, char **argv)
{
    int fds[NSOCK], sfd, devnull, report[2] = {-1, -1};
    const char *egress_path = NULL; /* --egress */
    sigset_t mask;

    for (;;) {
        if (argc > 1 && strcmp(argv[1], "--seccomp") == 0) {
            char why[256];
            void *bpf;
            if (filter_build(&bpf, &filter_len, why, sizeof(why)) < 0) {
                fprintf(stderr, "hutch-init: seccomp filter: %s\n", why);
                return 126;
            }
            filter_bpf = bpf;
        } else if (argc > 1 && strcmp(argv[1], "--attach") == 0) {
            attach_mode = 1;
        } else if (argc > 1 && strcmp(argv[1], "--view") == 0) {
            view_mode = hide_init = 1;
        } else if (argc > 1 && strcmp(argv[1], "--hide-init") == 0) {
            hide_init = 1;
        } else if (argc > 2 && strcmp(argv[1], "--egress") == 0) {
            /* Before anything else, so that a failure is said where the
             * plugin looks while the sandbox comes up (init's stderr). */
            int r = fwd_open(argv[2]);
            egress_path = argv[2];
            if (r < 0) {
                fprintf(stderr, "hutch-init: listening on 127.0.0.1:%d: %s\n",
                        HUTCH_EGRESS_PORT, strerror(-r));
                return 126;
            }
            argv[2] = argv[0];
            argv += 2;
            argc -= 2;
            continue;
        } else {
            break;
        }
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    if (argc < 5 || parse_user(argv[1]) < 0) {
        fprintf(stderr,
                "usage: hutch-init [--seccomp] [--attach] [--view | --hide-init] "
                "[--egress SOCKET] UID:GID NOFILE FSIZE INTERP [ARG]...\n");
        return 2;
    }
    if (take_environment() < 0)
        die("copying the environment");
    for (int i = 0; i < NSOCK; i++)
        fds[i] = -1;
    if (attach_mode) {
        /* The runner's three streams are socket pairs init reads and writes;
         * ctl is frames alone. */
        for (int i = CHAN; i <= ERR; i++) {
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                die("socketpair");
            fds[i] = sv[0];
            mine[i] = sv[1];
        }
        /* stdin and stdout are the attach stream; stderr (the engine's
         * stream 2) keeps init's own errors until the runner starts. */
        devnull = open("/dev/null", O_RDWR);
        if (devnull < 0)
            die("/dev/null");
    } else {
        for (int i = 0; i < NSOCK; i++) {
            fds[i] = connect_to(sock_names[i]);
            if (fds[i] < 0)
                die("connecting to " IO_DIR);
        }
        ctl_fd = fds[CTL];
        diag_fd = fds[ERR];
        /* Init's stdio reaches files on the host (the container's log,
         * runsc's stderr): from now on nothing in the sandbox holds them. */
        devnull = open("/dev/null", O_RDWR);
        if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(devnull, 1) < 0 ||
            dup2(devnull, 2) < 0)
            die("/dev/null");
    }
    /* Defence in depth: the program runs as another uid, so it can neither
     * ptrace init nor signal it; non-dumpable on top, where the kernel
     * honours it. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        die("signalfd");
    oom_before = oom_kills();
    if (view_mode) {
        /* Above the four stream fds the runner places at 0 to 3. */
        if (pipe2(report, O_CLOEXEC) < 0)
            die("pipe");
        for (int i = 0; i < 2; i++)
            if (report[i] < 4) {
                int fd = fcntl(report[i], F_DUPFD_CLOEXEC, 4);
                if (fd < 0)
                    die("pipe");
                close(report[i]);
                report[i] = fd;
            }
    }

    runner = fork();
    if (runner < 0)
        die("fork");
    if (runner == 0) {
        if (report[0] >= 0)
            close(report[0]);
        exec_runner(fds, argv, report[1]);
    }
    if (view_mode) {
        /* The runner's view is built (or refused) before it becomes the
         * program: say so before hello, so the plugin knows it first. */
        char line[128];
        ssize_t n = 0, got;
        close(report[1]);
        while (n < (ssize_t)sizeof(line) - 1 &&
               ((got = read(report[0], line + n, sizeof(line) - 1 - (size_t)n)) > 0 ||
                (got < 0 && errno == EINTR)))
            n += got > 0 ? got : 0;
        close(report[0]);
        line[n] = '\0';
        if (strcmp(line, "ok\n") != 0 && n > 0) {
            char say[80];
            line[strcspn(line, "\n")] = '\0';
            snprintf(say, sizeof(say), "noview %.50s\n", line); /* < sbio's 64 */
            ctl_say(say);
        }
    }
    if (attach_mode && egress_path) {
        char say[32];
        int r = fwd_probe();
        if (r == 0)
            snprintf(say, sizeof(say), "egress ok\n");
        else
            snprintf(say, sizeof(say), "egress %d\n", -r);
        ctl_say(say);
    }
    if (attach_mode)
        ctl_say("hello\n");
    close(fds[CHAN]);
    close(fds[OUT]);
    close(fds[ERR]);
    /* From now on init's own errors go nowhere. */
    if (dup2(devnull, 2) < 0)
        die("/dev/null");
    if (devnull > 2)
        close(devnull);
    diag_fd = 2;
    /* What init still needs: to kill the program's processes.  Should this
     * fail, init keeps capabilities that no other process can use. */
    caps_set(1u << CAP_KILL);
    return attach_mode ? attach_loop(sfd) : socket_loop(fds[CTL], sfd);
}
