/* sandbox.c — the local executor's sandbox side: everything that runs after
 * fork() in the child processes.
 *
 *   factory ── fork ──> C1: hides its argv, opens the runners, becomes
 *                         the sandbox's host uid (as root), then
 *                         unshare(user, mount, pid, net, ipc, uts, cgroup);
 *                         waits for the host to write its uid/gid maps and
 *                         put it into the sandbox's cgroups
 *                     ── fork ──> init (pid 1): builds the root file system,
 *                                 drops every privilege, starts the runner,
 *                                 then serves the control socket (files in,
 *                                 exit status, files out) and reaps orphans
 *                                 ── fork/exec ──> runner (seccomp, rlimits)
 *
 * The factory (factory.c) is a fresh, single-threaded hutch: forks from it
 * may run hutch's code.  C1 stays behind only to tie the sandbox's life to
 * hutch's: the factory exits when hutch does, C1 dies with the factory
 * (PDEATHSIG) and init dies with C1, and when init dies the kernel
 * kills every process of the pid namespace.  Nothing here returns: errors
 * are reported on the control socket (init) or the sync socket (C1), then
 * the process _exit()s, so no atexit handler or sanitizer runs in a child.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "caps.h"
#include "env.h"
#include "filter.h"
#include "sandbox.h"
#include "zygote.h"

/* The new root is assembled on a tmpfs mounted over this directory, which
 * exists on every host; only the sandbox's mount namespace sees it. */
#define NEWROOT "/tmp"

static void set_argv(const char *const *args);

int lsb_send(int fd, uint32_t type, const void *data, size_t len)
{
    struct lsb_hdr h = {.type = type, .len = (uint32_t)len};
    struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)data, len}};
    size_t total = sizeof(h) + len, done = 0;

    while (done < total) {
        ssize_t n;
        struct iovec *v = iov;
        int cnt = 2;
        size_t skip = done;
        struct iovec tmp[2];
        memcpy(tmp, iov, sizeof(tmp));
        v = tmp;
        while (cnt > 0 && skip >= v->iov_len) {
            skip -= v->iov_len;
            v++;
            cnt--;
        }
        v->iov_base = (char *)v->iov_base + skip;
        v->iov_len -= skip;
        n = writev(fd, v, cnt);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        done += (size_t)n;
    }
    return 0;
}

static int read_full(int fd, void *buf, size_t len)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EPIPE;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int lsb_recv_payload(int fd, const struct lsb_hdr *h, char **payload, size_t max)
{
    int r;
    if (h->len > max)
        return -EMSGSIZE;
    if (h->len == 0)
        return 0;
    *payload = malloc((size_t)h->len + 1);
    if (!*payload)
        return -ENOMEM;
    r = read_full(fd, *payload, h->len);
    if (r < 0) {
        free(*payload);
        *payload = NULL;
        return r;
    }
    (*payload)[h->len] = '\0';
    return 0;
}

/* Writes all of buf (what a short sendmsg left). */
static int lsb_send_rest(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

int lsb_send_fd(int fd, uint32_t type, int pass)
{
    struct lsb_hdr h = {.type = type, .len = 0};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {&h, sizeof(h)};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = u.buf,
                       .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    ssize_t n;

    memset(&u, 0, sizeof(u));
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pass, sizeof(int));
    do
        n = sendmsg(fd, &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    /* The rest of the header, should the socket have taken only part. */
    return (size_t)n < sizeof(h)
               ? lsb_send_rest(fd, (char *)&h + n, sizeof(h) - (size_t)n)
               : 0;
}

static int recv_header(int fd, struct lsb_hdr *h, int *passed)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {h, sizeof(*h)};
    struct msghdr m = {.msg_iov = &iov,
                       .msg_iovlen = 1,
                       .msg_control = u.buf,
                       .msg_controllen = sizeof(u.buf)};
    ssize_t n;

    *passed = -1;
    do
        n = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    if (n == 0)
        return -EPIPE;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        /* One descriptor is expected; any more are closed. */
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
            int f;
            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*passed < 0)
                *passed = f;
            else
                close(f);
        }
    }
    if ((size_t)n < sizeof(*h)) {
        int r = read_full(fd, (char *)h + n, sizeof(*h) - (size_t)n);
        if (r < 0) {
            if (*passed >= 0)
                close(*passed);
            *passed = -1;
            return r;
        }
    }
    return 0;
}

int lsb_recv_fd(int fd, struct lsb_hdr *h, char **payload, size_t max, int *passed)
{
    int r = recv_header(fd, h, passed);
    *payload = NULL;
    if (r < 0)
        return r;
    r = lsb_recv_payload(fd, h, payload, max);
    if (r < 0 && *passed >= 0) {
        close(*passed);
        *passed = -1;
    }
    return r;
}

int lsb_recv(int fd, struct lsb_hdr *h, char **payload, size_t max)
{
    int r = read_full(fd, h, sizeof(*h));
    *payload = NULL;
    if (r < 0)
        return r;
    return lsb_recv_payload(fd, h, payload, max);
}

/* --- failure reporting ------------------------------------------------- */

__attribute__((noreturn, format(printf, 3, 4))) static void die(int fd, uint32_t frame,
                                                                const char *fmt, ...)
{
    char msg[HUTCH_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lsb_send(fd, frame, msg, strlen(msg));
    _exit(126);
}

#define fail(p, ...) die((p)->ctrl_fd, LSB_FAIL, __VA_ARGS__)

/* --- file system ------------------------------------------------------- */

static int write_file(const char *path, const char *data, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    int r = 0;
    if (fd < 0)
        return -errno;
    if (write(fd, data, strlen(data)) != (ssize_t)strlen(data))
        r = -EIO;
    close(fd);
    return r;
}

/* Flags the kernel keeps locked on a mount made in a less privileged user
 * namespace: a read-only remount has to repeat them or it fails. */
static unsigned long locked_flags(const char *path)
{
    struct statvfs sv;
    unsigned long f = 0;
    if (statvfs(path, &sv) < 0)
        return 0;
    if (sv.f_flag & ST_NOSUID)
        f |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV)
        f |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC)
        f |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME)
        f |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME)
        f |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME)
        f |= MS_RELATIME;
    return f;
}

static void bind_ro(struct lsb_params *p, const char *src, const char *dst)
{
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
        fail(p, "sandbox set-up: bind-mounting %s: %s", src, strerror(errno));
    if (mount(NULL, dst, NULL,
              MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | locked_flags(src),
              NULL) < 0)
        fail(p, "sandbox set-up: making %s read-only: %s", src, strerror(errno));
}

static void mount_tmpfs(struct lsb_params *p, const char *dst, uint64_t bytes,
                        const char *extra, unsigned long flags)
{
    char opts[256];
    snprintf(opts, sizeof(opts), "size=%llu%s%s", (unsigned long long)bytes,
             extra ? "," : "", extra ? extra : "");
    if (mount("tmpfs", dst, "tmpfs", MS_NOSUID | MS_NODEV | flags, opts) < 0)
        fail(p, "sandbox set-up: mounting tmpfs on %s: %s", dst, strerror(errno));
}

static void mkdir_or_die(struct lsb_params *p, const char *path, mode_t mode)
{
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        fail(p, "sandbox set-up: mkdir %s: %s", path, strerror(errno));
}

/* Top-level directories of the host that hold the runtime.  On a merged-/usr
 * host /bin, /lib… are symlinks into /usr and are recreated as such. */
static void add_toplevel(struct lsb_params *p, const char *name)
{
    char host[64], dst[128], target[PATH_MAX];
    struct stat st;
    ssize_t n;

    snprintf(host, sizeof(host), "/%s", name);
    snprintf(dst, sizeof(dst), NEWROOT "/%s", name);
    if (lstat(host, &st) < 0)
        return;
    if (S_ISLNK(st.st_mode)) {
        n = readlink(host, target, sizeof(target) - 1);
        if (n <= 0)
            return;
        target[n] = '\0';
        if (symlink(target, dst) < 0)
            fail(p, "sandbox set-up: symlink %s: %s", dst, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        mkdir_or_die(p, dst, 0755);
        bind_ro(p, host, dst);
    }
}

static void bind_dev(struct lsb_params *p, const char *name)
{
    char src[64], dst[128];
    snprintf(src, sizeof(src), "/dev/%s", name);
    snprintf(dst, sizeof(dst), NEWROOT "/dev/%s", name);
    if (write_file(dst, "", 0666) < 0)
        fail(p, "sandbox set-up: creating %s: %s", dst, strerror(errno));
    if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
        fail(p, "sandbox set-up: binding %s: %s", src, strerror(errno));
}

static int has_suffix(const char *name, const char *const *suffixes)
{
    size_t n = strlen(name);
    for (; *suffixes; suffixes++) {
        size_t k = strlen(*suffixes);
        if (n > k && strcmp(name + n - k, *suffixes) == 0)
            return 1;
    }
    return 0;
}

/* The runners are copied into the sandbox rather than bind-mounted: the
 * directory was opened by C1 in the host's mount namespace (as hutch's user,
 * before it became the sandbox's), which a bind mount from here may not
 * use, and a bind mount would show the host's path in
 * /proc/self/mountinfo.  Regular files only, and `depth` levels of
 * directories (__pycache__); only the language's own (a name ending in
 * one of `suffixes`: the TypeScript transpiler is most of the directory).
 * Nothing here allocates (see out_is_empty). */
static void copy_dir(struct lsb_params *p, int from, const char *to, int depth,
                     const char *const *suffixes)
{
    char buf[4096], path[PATH_MAX];
    int dfd = openat(from, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    long n;

    if (dfd < 0)
        fail(p, "sandbox set-up: reading the runner directory: %s", strerror(errno));
    while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
        for (long off = 0; off < n;) {
            struct {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *de = (void *)(buf + off);
            struct stat st;
            off += de->reclen;
            if (strcmp(de->name, ".") == 0 || strcmp(de->name, "..") == 0 ||
                fstatat(dfd, de->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue;
            if (snprintf(path, sizeof(path), "%s/%s", to, de->name) >=
                (int)sizeof(path))
                fail(p, "sandbox set-up: runner path too long: %s", de->name);
            if (S_ISDIR(st.st_mode) && depth > 0) {
                int sub = openat(dfd, de->name,
                                 O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub < 0 || mkdir(path, 0755) < 0)
                    fail(p, "sandbox set-up: copying %s: %s", de->name,
                         strerror(errno));
                copy_dir(p, sub, path, depth - 1, suffixes);
                close(sub);
            } else if (S_ISREG(st.st_mode) && has_suffix(de->name, suffixes)) {
                int in = openat(dfd, de->name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
                off_t left = st.st_size;
                ssize_t w = 0;
                while (in >= 0 && out >= 0 && left > 0 &&
                       (w = sendfile(out, in, NULL, (size_t)left)) > 0)
                    left -= w;
                if (in < 0 || out < 0 || w < 0)
                    fail(p, "sandbox set-up: copying the runner %s: %s", de->name,
                         strerror(errno));
                close(in);
                close(out);
            }
        }
    }
    if (n < 0)
        fail(p, "sandbox set-up: reading the runner directory: %s", strerror(errno));
    close(dfd);
}

/* What of /proc a Docker container hides, the sandbox does not see either
 * (masked: an empty read-only tmpfs over a directory, /dev/null over a
 * file; the rest read-only), plus what Docker leaves: the host kernel's
 * command line, its build configuration and the boot id.  Entries this
 * kernel lacks are skipped. */
static void mask_proc(struct lsb_params *p)
{
    static const char *const masked[] = {
        "acpi",          "asound",     "kcore",       "keys",
        "latency_stats", "timer_list", "timer_stats", "sched_debug",
        "scsi",          "cmdline",    "config.gz",   "sys/kernel/random/boot_id"};
    static const char *const read_only[] = {"bus", "fs", "irq", "sys", "sysrq-trigger"};
    char path[128];
    struct stat st;

    for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++) {
        snprintf(path, sizeof(path), NEWROOT "/proc/%s", masked[i]);
        if (lstat(path, &st) < 0)
            continue;
        if (S_ISDIR(st.st_mode)
                ? mount("tmpfs", path, "tmpfs",
                        MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                        "size=4k,mode=0555") < 0
                : mount(NEWROOT "/dev/null", path, NULL, MS_BIND, NULL) < 0)
            fail(p, "sandbox set-up: masking /proc/%s: %s", masked[i], strerror(errno));
    }
    for (size_t i = 0; i < sizeof(read_only) / sizeof(read_only[0]); i++) {
        snprintf(path, sizeof(path), NEWROOT "/proc/%s", read_only[i]);
        if (lstat(path, &st) < 0)
            continue;
        if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0 ||
            mount(NULL, path, NULL,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  NULL) < 0)
            fail(p, "sandbox set-up: making /proc/%s read-only: %s", read_only[i],
                 strerror(errno));
    }
}

static void build_root(struct lsb_params *p, int runner_fd)
{
    static const char *const top[] = {"usr",   "bin",   "sbin",  "lib",
                                      "lib32", "lib64", "libx32"};
    static const char *const devs[] = {"null", "zero", "full", "random", "urandom"};
    static const char *const etc_ro[] = {"alternatives", "matplotlibrc", "fonts"};
    char passwd[256], group[256];

    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        fail(p, "sandbox set-up: making mounts private: %s", strerror(errno));
    mount_tmpfs(p, NEWROOT, 4u << 20, "mode=0755", 0);
    for (size_t i = 0; i < sizeof(top) / sizeof(top[0]); i++)
        add_toplevel(p, top[i]);

    mkdir_or_die(p, NEWROOT "/etc", 0755);
    snprintf(passwd, sizeof(passwd),
             "root:x:0:0:root:/:/usr/sbin/nologin\n"
             "sandbox:x:%d:%d:hutch sandbox:/work:/usr/sbin/nologin\n"
             "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
             LSB_UID, LSB_GID);
    snprintf(group, sizeof(group), "root:x:0:\nsandbox:x:%d:\nnogroup:x:65534:\n",
             LSB_GID);
    if (write_file(NEWROOT "/etc/passwd", passwd, 0644) < 0 ||
        write_file(NEWROOT "/etc/group", group, 0644) < 0 ||
        write_file(NEWROOT "/etc/hostname", "hutch\n", 0644) < 0 ||
        write_file(NEWROOT "/etc/hosts", "127.0.0.1 localhost hutch\n::1 localhost\n",
                   0644) < 0 ||
        write_file(NEWROOT "/etc/nsswitch.conf",
                   "passwd: files\ngroup: files\nhosts: files\n", 0644) < 0)
        fail(p, "sandbox set-up: writing /etc: %s", strerror(errno));
    if (access("/etc/ld.so.cache", R_OK) == 0) {
        if (write_file(NEWROOT "/etc/ld.so.cache", "", 0644) < 0)
            fail(p, "sandbox set-up: /etc/ld.so.cache: %s", strerror(errno));
        bind_ro(p, "/etc/ld.so.cache", NEWROOT "/etc/ld.so.cache");
    }
    /* What host libraries under /usr read from /etc, read-only as /usr is:
     * Debian's alternatives (numpy reaches libblas.so.3 and liblapack.so.3
     * through them), matplotlib's defaults (Debian's refuses to start
     * without /etc/matplotlibrc) and fontconfig's configuration: the data
     * flavour's packages on the host.  Nothing there names the host. */
    for (size_t i = 0; i < sizeof(etc_ro) / sizeof(etc_ro[0]); i++) {
        char src[64], dst[96];
        struct stat st;
        snprintf(src, sizeof(src), "/etc/%s", etc_ro[i]);
        snprintf(dst, sizeof(dst), NEWROOT "/etc/%s", etc_ro[i]);
        if (stat(src, &st) < 0 || access(src, R_OK) < 0)
            continue;
        if (S_ISDIR(st.st_mode))
            mkdir_or_die(p, dst, 0755);
        else if (write_file(dst, "", 0644) < 0)
            fail(p, "sandbox set-up: %s: %s", dst, strerror(errno));
        bind_ro(p, src, dst);
    }

    mkdir_or_die(p, NEWROOT "/dev", 0755);
    mount_tmpfs(p, NEWROOT "/dev", 1u << 20, "mode=0755", MS_NOEXEC);
    for (size_t i = 0; i < sizeof(devs) / sizeof(devs[0]); i++)
        bind_dev(p, devs[i]);
    if (symlink("/proc/self/fd", NEWROOT "/dev/fd") < 0 ||
        symlink("/proc/self/fd/0", NEWROOT "/dev/stdin") < 0 ||
        symlink("/proc/self/fd/1", NEWROOT "/dev/stdout") < 0 ||
        symlink("/proc/self/fd/2", NEWROOT "/dev/stderr") < 0)
        fail(p, "sandbox set-up: /dev links: %s", strerror(errno));
    mkdir_or_die(p, NEWROOT "/dev/shm", 01777);
    mount_tmpfs(p, NEWROOT "/dev/shm", p->tmp_bytes, "mode=1777", MS_NOEXEC);

    mkdir_or_die(p, NEWROOT "/proc", 0555);
    if (mount("proc", NEWROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) <
        0)
        fail(p, "sandbox set-up: mounting /proc: %s", strerror(errno));

    mask_proc(p);

    mkdir_or_die(p, NEWROOT "/tmp", 01777);
    mount_tmpfs(p, NEWROOT "/tmp", p->tmp_bytes, "mode=1777", 0);

    {
        char opts[64];
        snprintf(opts, sizeof(opts), "mode=0755,uid=%d,gid=%d", LSB_UID, LSB_GID);
        mkdir_or_die(p, NEWROOT "/work", 0755);
        mount_tmpfs(p, NEWROOT "/work", p->work_bytes, opts, 0);
    }

    mkdir_or_die(p, NEWROOT "/run", 0755);
    mkdir_or_die(p, NEWROOT "/run/hutch", 0755);
    mount_tmpfs(p, NEWROOT "/run/hutch", LSB_RUNNER_BYTES, "mode=0755", MS_NOEXEC);
    {
        static const char *const py[] = {".py", ".pyc", NULL}, *const js[] = {".js",
                                                                              NULL};
        copy_dir(p, runner_fd, NEWROOT "/run/hutch", 1,
                 strcmp(p->language, "python") == 0 ? py : js);
    }
    close(runner_fd);
    if (mount(NULL, NEWROOT "/run/hutch", NULL,
              MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        fail(p, "sandbox set-up: making /run/hutch read-only: %s", strerror(errno));

    if (chdir(NEWROOT) < 0)
        fail(p, "sandbox set-up: chdir: %s", strerror(errno));
    /* pivot_root(".", ".") stacks the old root under the new one; detaching
     * it leaves nothing of the host but what was bound in. */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        fail(p, "sandbox set-up: pivot_root: %s", strerror(errno));
    if (umount2(".", MNT_DETACH) < 0)
        fail(p, "sandbox set-up: detaching the host root: %s", strerror(errno));
    if (chdir("/") < 0)
        fail(p, "sandbox set-up: chdir /: %s", strerror(errno));
    if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV,
              NULL) < 0)
        fail(p, "sandbox set-up: making / read-only: %s", strerror(errno));
}

/* --- network ------------------------------------------------------------ */

/* Each sandbox has a network namespace of its own, owned by its user
 * namespace: nothing but a loopback device, brought up so that a program
 * may talk to itself over 127.0.0.1 (as in a Docker container without a
 * network).  Nothing there is shared with the host or another sandbox. */
static void loopback_up(struct lsb_params *p)
{
    struct ifreq ifr;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        fail(p, "sandbox set-up: socket: %s", strerror(errno));
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0)
        fail(p, "sandbox set-up: loopback flags: %s", strerror(errno));
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
        fail(p, "sandbox set-up: bringing loopback up: %s", strerror(errno));
    close(fd);
}

/* --- privileges -------------------------------------------------------- */

static void drop_privileges(struct lsb_params *p)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3,
                                           .pid = 0};
    struct __user_cap_data_struct data[2];

    for (int cap = 0; cap <= 63; cap++)
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
            fail(p, "sandbox set-up: dropping capability %d: %s", cap, strerror(errno));
    if (setresgid(LSB_GID, LSB_GID, LSB_GID) < 0 ||
        setresuid(LSB_UID, LSB_UID, LSB_UID) < 0)
        fail(p, "sandbox set-up: switching to uid %d: %s", LSB_UID, strerror(errno));
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capset, &hdr, data) < 0)
        fail(p, "sandbox set-up: clearing capabilities: %s", strerror(errno));
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        fail(p, "sandbox set-up: no_new_privs: %s", strerror(errno));
}

/* --- the runner -------------------------------------------------------- */

static void set_limit(int res, rlim_t v)
{
    struct rlimit rl = {v, v};
    setrlimit(res, &rl);
}

/* Runs in the runner's process after fork(); reports failures on stderr,
 * which is the program's stderr pipe, then exits 127 like a shell would. */
__attribute__((noreturn)) static void exec_runner(struct lsb_params *p, int devnull)
{
    char script[128], errbuf[256];
    char *argv[6];
    int argc = 0, r;

    if (dup2(devnull, 0) < 0 || dup2(p->out_fd, 1) < 0 || dup2(p->err_fd, 2) < 0 ||
        dup2(p->chan_fd, 3) < 0)
        _exit(127);
    syscall(SYS_close_range, 4, ~0U, 0);
    setsid();
    signal(SIGPIPE, SIG_DFL);
    write_file("/proc/self/oom_score_adj", "1000", 0);

    set_limit(RLIMIT_CORE, 0);
    set_limit(RLIMIT_NOFILE, p->open_files);
    /* Above the tmpfs sizes, so a full /work says ENOSPC, not EFBIG. */
    set_limit(RLIMIT_FSIZE,
              (p->work_bytes > p->tmp_bytes ? p->work_bytes : p->tmp_bytes) +
                  (1u << 20));
    set_limit(RLIMIT_MSGQUEUE, 0);
    set_limit(RLIMIT_SIGPENDING, HUTCH_SANDBOX_SIGPENDING);
    if (!p->have_pidscg)
        set_limit(RLIMIT_NPROC, p->pids_max);
    if (!p->have_memcg && p->memory_bytes)
        /* Without a memory cgroup the address space is all we can cap;
         * V8 reserves far more than it uses, so JavaScript gets slack. */
        set_limit(RLIMIT_AS, strcmp(p->language, "javascript") == 0
                                 ? p->memory_bytes + (8ull << 30)
                                 : p->memory_bytes);

    if (p->zygote) {
        /* Show what an exec'd runner would (ps, /proc/PID/cmdline), and be
         * inspectable as it would be (init is not dumpable; an exec makes
         * a process dumpable again). */
        const char *const args[] = {p->interp, "-I", "-S", "/run/hutch/runner.py",
                                    NULL};
        const char *base = strrchr(p->interp, '/');
        set_argv(args);
        prctl(PR_SET_NAME, base ? base + 1 : p->interp);
        prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
    }
    if (p->landlock && lsb_landlock_scope(errbuf, sizeof(errbuf)) < 0) {
        dprintf(2, "hutch sandbox: landlock: %s\n", errbuf);
        _exit(127);
    }
    r = filter_apply(p->bpf, p->bpf_len);
    if (r < 0) {
        dprintf(2, "hutch sandbox: installing the seccomp filter: %s\n", strerror(-r));
        _exit(127);
    }
    snprintf(script, sizeof(script), "/run/hutch/%s", p->runner);
    argv[argc++] = p->interp;
    if (strcmp(p->language, "python") == 0) {
        argv[argc++] = "-I";
        argv[argc++] = "-S";
    }
    argv[argc++] = script;
    if (p->preload)
        argv[argc++] = "--preload";
    argv[argc] = NULL;
    if (chdir("/work") < 0)
        _exit(127);
    if (p->zygote)
        lsb_zygote_run();
    execve(p->interp, argv, (char *const *)hutch_sandbox_env);
    dprintf(2, "hutch sandbox: cannot start %s: %s\n", p->interp, strerror(errno));
    _exit(127);
}

/* --- init ---------------------------------------------------------------- */

static int send_data(void *arg, const void *buf, size_t len)
{
    int fd = *(int *)arg;
    const char *c = buf;
    while (len > 0) {
        size_t n = len > LSB_DATA_CHUNK ? LSB_DATA_CHUNK : len;
        int r = lsb_send(fd, LSB_DATA, c, n);
        if (r < 0)
            return r;
        c += n;
        len -= n;
    }
    return 0;
}

/* An empty /work/out sends no tar at all: the core then needs no
 * libarchive for the common run that writes no files.  getdents64 on the
 * stack, not opendir(): nothing in init's common path may allocate (see
 * filter_build). */
static int out_is_empty(void)
{
    int fd = open("/work/out", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char buf[4096];
    long n;
    int empty = 1;
    if (fd < 0)
        return 0; /* let the packer say what is wrong */
    while (empty && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
        for (long off = 0; off < n;) {
            struct {
                uint64_t ino;
                int64_t off;
                unsigned short reclen;
                unsigned char type;
                char name[];
            } *de = (void *)(buf + off);
            if (strcmp(de->name, ".") != 0 && strcmp(de->name, "..") != 0) {
                empty = 0;
                break;
            }
            off += de->reclen;
        }
    }
    close(fd);
    return empty;
}

/* Control frames in init: payloads in their own mapping rather than from
 * malloc (see out_is_empty). */
static int recv_mapped(int fd, struct lsb_hdr *h, char **payload)
{
    int r = read_full(fd, h, sizeof(*h));
    *payload = NULL;
    if (r < 0)
        return r;
    if (h->len > LSB_FRAME_MAX)
        return -EMSGSIZE;
    if (h->len == 0)
        return 0;
    *payload = mmap(NULL, (size_t)h->len + 1, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (*payload == MAP_FAILED) {
        *payload = NULL;
        return -ENOMEM;
    }
    r = read_full(fd, *payload, h->len);
    if (r < 0) {
        munmap(*payload, (size_t)h->len + 1);
        *payload = NULL;
    }
    return r;
}

static void unmap(char *payload, uint32_t len)
{
    if (payload)
        munmap(payload, (size_t)len + 1);
}

/* Kill everything but init, and wait until it is gone, so that nothing
 * changes /work/out while it is packed. */
static void kill_all_others(void)
{
    kill(-1, SIGKILL);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
}

static void reap(pid_t runner, int ctrl, int *runner_done)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        if (pid == runner && !*runner_done) {
            int32_t s = status;
            *runner_done = 1;
            lsb_send(ctrl, LSB_EXIT, &s, sizeof(s));
        }
    }
}

/* The egress listener (hutch-executor.h, egress_fd): 127.0.0.1:3128 of the
 * sandbox's network namespace, made by init before the program exists and
 * handed to hutch with READY; init keeps no copy, so hutch alone accepts,
 * and the port is taken before the program could bind it. */
static int egress_listener(struct lsb_params *p)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(HUTCH_EGRESS_PORT),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        listen(fd, LSB_EGRESS_BACKLOG) < 0)
        fail(p, "sandbox set-up: the egress listener on 127.0.0.1:%d: %s",
             HUTCH_EGRESS_PORT, strerror(errno));
    return fd;
}

__attribute__((noreturn)) static void init_main(struct lsb_params *p)
{
    struct hutch_archive_limits lim_in = {
        .struct_size = sizeof(lim_in),
        .max_bytes = HUTCH_TAR_IN_MAX_BYTES,
        .max_entries = HUTCH_TAR_MAX_ENTRIES,
        .max_path = HUTCH_TAR_MAX_PATH,
        .max_depth = HUTCH_TAR_MAX_DEPTH,
    };
    struct hutch_err err = HUTCH_ERR_INIT;
    int ctrl = p->ctrl_fd, devnull, sfd, egress, runner_done = 0;
    sigset_t mask;
    pid_t runner;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        fail(p, "sandbox set-up: signalfd: %s", strerror(errno));
    sethostname("hutch", 5);
    loopback_up(p);
    egress = egress_listener(p);
    /* Become the sandbox user now: files and mounts made below must belong
     * to an id mapped in this user namespace (host root is not).  The
     * capabilities of the namespace stay until drop_privileges(). */
    if (setresgid(LSB_GID, LSB_GID, LSB_GID) < 0 ||
        setresuid(LSB_UID, LSB_UID, LSB_UID) < 0)
        fail(p, "sandbox set-up: switching to uid %d: %s", LSB_UID, strerror(errno));
    build_root(p, p->runner_fd);
    drop_privileges(p);
    /* Not dumpable: the program runs as the same uid and must not be able
     * to ptrace init or read its memory through /proc. */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (mkdir("/work/out", 0755) < 0)
        fail(p, "sandbox set-up: mkdir /work/out: %s", strerror(errno));
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull < 0)
        fail(p, "sandbox set-up: /dev/null: %s", strerror(errno));

    runner = fork();
    if (runner < 0)
        fail(p, "sandbox set-up: fork: %s", strerror(errno));
    if (runner == 0) {
        /* hutch blocks signals in its threads (SIGHUP for reloads): the
         * program starts with none blocked. */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        exec_runner(p, devnull);
    }
    close(p->chan_fd);
    close(p->out_fd);
    close(p->err_fd);
    close(devnull);
    lsb_send_fd(ctrl, LSB_READY, egress);
    close(egress);

    for (;;) {
        struct pollfd fds[2] = {{ctrl, POLLIN, 0}, {sfd, POLLIN, 0}};
        struct lsb_hdr h;
        char *payload = NULL;
        int r;

        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            _exit(1);
        }
        if (fds[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
            reap(runner, ctrl, &runner_done);
        }
        if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        r = recv_mapped(ctrl, &h, &payload);
        if (r < 0)
            _exit(0); /* host went away: the sandbox goes with it */
        err = (struct hutch_err)HUTCH_ERR_INIT;
        switch (h.type) {
        case LSB_PUT:
            r = p->host->archive_extract(payload, h.len, "/work", &lim_in, &err);
            if (r < 0)
                lsb_send(ctrl, LSB_PUT_ERR, err.msg, strlen(err.msg));
            else
                lsb_send(ctrl, LSB_PUT_OK, NULL, 0);
            break;
        case LSB_PACK: {
            struct hutch_archive_limits lim_out = {
                .struct_size = sizeof(lim_out),
                .max_bytes = HUTCH_TAR_OUT_MAX_BYTES,
                .max_entries = HUTCH_TAR_MAX_ENTRIES,
                .max_path = HUTCH_TAR_MAX_PATH,
                .max_depth = HUTCH_TAR_MAX_DEPTH,
            };
            uint64_t max = 0;
            if (payload && h.len == sizeof(max))
                memcpy(&max, payload, sizeof(max));
            if (max && max < lim_out.max_bytes)
                lim_out.max_bytes = max;
            kill_all_others();
            reap(runner, ctrl, &runner_done);
            r = out_is_empty() ? 0
                               : p->host->archive_pack_dir("/work/out", send_data,
                                                           &ctrl, &lim_out, &err);
            if (r < 0)
                lsb_send(ctrl, LSB_DATA_ERR, err.msg, strlen(err.msg));
            else
                lsb_send(ctrl, LSB_DATA_END, NULL, 0);
            break;
        }
        default:
            unmap(payload, h.len);
            _exit(1);
        }
        unmap(payload, h.len);
    }
}

/* --- C1 ------------------------------------------------------------------ */

/* Close every descriptor but stdio and `keep` (ascending after the sort).
 * hutch starts sandboxes on several threads at once: a fork() here also
 * copied the descriptors another thread holds for *its* sandbox (the write
 * ends of its output pipes, its control socket).  They are close-on-exec,
 * but C1 and init never exec: kept, they would hold the other sandbox's
 * pipes open (no EOF there until this sandbox ends) and give this
 * sandbox's init a handle on another's channel. */
static void close_others(int *keep, size_t n)
{
    unsigned from = 3;
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    for (size_t i = 0; i <= n; i++) {
        unsigned to = i < n ? (unsigned)keep[i] : ~0U;
        if (i < n && (keep[i] < 3 || (unsigned)keep[i] < from))
            continue;
        if (to > from && syscall(SYS_close_range, from, to - 1, 0) < 0)
            for (unsigned fd = from; fd < to && fd < 65536; fd++)
                close((int)fd);
        if (i < n)
            from = (unsigned)keep[i] + 1;
    }
}

/* init is a fork of hutch (the factory) that never execs (it unpacks and
 * packs files with hutch's code): its /proc/PID/cmdline, which every
 * process of the sandbox may read, would be the factory's argv (paths of
 * the plugin and of hutch).  Those strings live in this process's private copy of
 * hutch's stack, between the arg_start and arg_end of /proc/self/stat:
 * overwrite them here, in C1, before init is forked.  Overwriting is what
 * works unprivileged too (PR_SET_MM needs CAP_SYS_RESOURCE), and an exec
 * would lose hutch's code.  The environment is not shown: init is not
 * dumpable, so /proc/1/environ is closed. */
static void set_argv(const char *const *args)
{
    char buf[2048], *c;
    unsigned long start = 0, end = 0;
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), field = 2;
    ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);

    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    c = strrchr(buf, ')'); /* the command name may hold spaces */
    for (; c && *c; c++) {
        if (*c != ' ')
            continue;
        field++;
        if (field == 48)
            start = strtoul(c + 1, NULL, 10);
        else if (field == 49)
            end = strtoul(c + 1, NULL, 10);
    }
    if (start && end > start) {
        char *at = (char *)start;
        size_t room = end - start;
        memset(at, 0, room);
        for (; *args && room > 1; args++) {
            size_t len = strlen(*args) + 1;
            if (len > room)
                len = room - 1; /* cut, and still NUL-ended */
            memcpy(at, *args, len);
            at += len;
            room -= len;
        }
    }
}

static void hide_argv(void)
{
    static const char *const init[] = {"init", NULL};
    set_argv(init);
}

/* C1 and init are forks of hutch and would keep its signal handlers
 * (hutch run and serve catch SIGINT, SIGTERM, SIGHUP; a sanitizer catches
 * more).  In a pid namespace the kernel drops a signal sent to init from
 * inside unless init handles it: with a handler left, the program could
 * signal pid 1 (interrupting its system calls, running hutch's code).  So
 * every handled signal goes back to SIG_DFL first thing after the fork,
 * before init exists; ignored ones stay ignored (SIGPIPE: the runner resets
 * it for the program). */
static void reset_handlers(void)
{
    struct sigaction dfl = {.sa_handler = SIG_DFL}, old;

    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP || sigaction(sig, NULL, &old) < 0)
            continue;
        if ((old.sa_flags & SA_SIGINFO) ||
            (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN))
            sigaction(sig, &dfl, NULL);
    }
}

void lsb_child_main(struct lsb_params *p)
{
    pid_t init;
    int status;
    char go;

    reset_handlers();
    {
        int keep[] = {p->ctrl_fd, p->sync_fd, p->chan_fd, p->out_fd, p->err_fd};
        close_others(keep, sizeof(keep) / sizeof(keep[0]));
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != p->parent)
        _exit(126); /* the factory died before the line above */
    hide_argv();
    /* The runner directory may live under NEWROOT on the host (a build tree
     * in /tmp) or under a directory the sandbox user cannot search (/root):
     * hold it by fd while still hutch's user, before the tmpfs hides it. */
    p->runner_fd = open(p->runner_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (p->runner_fd < 0)
        die(p->sync_fd, LSB_FAIL, "sandbox set-up: runner directory %s: %s",
            p->runner_dir, strerror(errno));
    if (p->is_root) {
        uid_t id = p->id_base + (uid_t)getpid();
        if (setgroups(0, NULL) < 0 || setresgid(id, id, id) < 0 ||
            setresuid(id, id, id) < 0)
            die(p->sync_fd, LSB_FAIL, "sandbox set-up: switching to host uid %u: %s",
                (unsigned)id, strerror(errno));
        /* A change of uid clears the parent-death signal. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != p->parent)
            _exit(126);
    }
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC |
                CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP) < 0)
        die(p->sync_fd, LSB_FAIL,
            "cannot create namespaces: %s (is kernel.unprivileged_userns_clone or "
            "user.max_user_namespaces disabled? see 'hutch doctor')",
            strerror(errno));
    if (lsb_send(p->sync_fd, LSB_READY, NULL, 0) < 0 ||
        read_full(p->sync_fd, &go, 1) < 0)
        _exit(126);
    init = fork();
    if (init < 0)
        die(p->sync_fd, LSB_FAIL, "sandbox set-up: fork: %s", strerror(errno));
    if (init == 0) {
        close(p->sync_fd);
        init_main(p);
    }
    {
        int32_t pid = init;
        lsb_send(p->sync_fd, LSB_READY, &pid, sizeof(pid));
    }
    close(p->ctrl_fd);
    close(p->chan_fd);
    close(p->out_fd);
    close(p->err_fd);
    close(p->runner_fd);
    while (waitpid(init, &status, 0) < 0 && errno == EINTR)
        ;
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}
