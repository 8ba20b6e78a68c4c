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
 *         "stop\n" asks init to kill every other process, answered with
 *         "stopped\n"; end of file (the plugin closed it) ends init and so
 *         the sandbox.
 *   chan  the runner's fd 3 (wire protocol, see src/runners/PROTOCOL.md)
 *   out   the runner's fd 1
 *   err   the runner's fd 2
 *
 * usage: hutch-init [--seccomp] NOFILE FSIZE INTERP [ARG]...
 *
 * --seccomp installs hutch's system call filter (plugins/common/filter.c,
 * the local executor's) in the runner, on top of the container runtime's
 * own profile: Docker's default allows socket families (vsock) hutch
 * refuses.  The gVisor executor does not ask for it: its kernel is gVisor's
 * own. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "filter.h"

#define IO_DIR "/run/hutch/io"

enum { CTL, CHAN, OUT, ERR, NSOCK };
static const char *const sock_names[NSOCK] = {"ctl", "chan", "out", "err"};

__attribute__((noreturn)) static void die(const char *what)
{
    /* Before the sockets exist, the container's own stderr is all there
     * is: the plugin shows its log when the sandbox fails to come up. */
    fprintf(stderr, "hutch-init: %s: %s\n", what, strerror(errno));
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

static const void *filter_bpf; /* set by --seccomp */
static size_t filter_len;

__attribute__((noreturn)) static void exec_runner(int fds[NSOCK], char **argv)
{
    sigset_t none;
    int devnull = open("/dev/null", O_RDWR);

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(fds[OUT], 1) < 0 ||
        dup2(fds[ERR], 2) < 0 || dup2(fds[CHAN], 3) < 0)
        _exit(127);
    syscall(SYS_close_range, 4, ~0U, 0);
    setsid();
    {
        int fd = open("/proc/self/oom_score_adj", O_WRONLY);
        if (fd >= 0) {
            write_all(fd, "1000");
            close(fd);
        }
    }
    set_limit(RLIMIT_CORE, 0);
    set_limit(RLIMIT_NOFILE, strtoul(argv[1], NULL, 10));
    set_limit(RLIMIT_FSIZE, strtoull(argv[2], NULL, 10));
    if (chdir("/work") < 0) {
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
    execv(argv[3], argv + 3);
    dprintf(2, "hutch sandbox: cannot start %s: %s\n", argv[3], strerror(errno));
    _exit(127);
}

static pid_t runner;
static int runner_done, ctl_fd;
static long oom_before;

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
    write_all(ctl_fd, line);
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

int main(int argc, char **argv)
{
    int fds[NSOCK], sfd;
    sigset_t mask;

    if (argc > 1 && strcmp(argv[1], "--seccomp") == 0) {
        char why[256];
        void *bpf;
        if (filter_build(&bpf, &filter_len, why, sizeof(why)) < 0) {
            fprintf(stderr, "hutch-init: seccomp filter: %s\n", why);
            return 126;
        }
        filter_bpf = bpf;
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: hutch-init [--seccomp] NOFILE FSIZE INTERP [ARG]...\n");
        return 2;
    }
    for (int i = 0; i < NSOCK; i++) {
        fds[i] = connect_to(sock_names[i]);
        if (fds[i] < 0)
            die("connecting to " IO_DIR);
    }
    ctl_fd = fds[CTL];
    /* The program runs as the same uid: it must not ptrace init or read
     * its memory, and it cannot signal it (pid 1 of its namespace). */
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        die("signalfd");
    if (mkdir("/work/out", 0755) < 0 && errno != EEXIST)
        die("mkdir /work/out");
    oom_before = oom_kills();

    runner = fork();
    if (runner < 0)
        die("fork");
    if (runner == 0)
        exec_runner(fds, argv);
    close(fds[CHAN]);
    close(fds[OUT]);
    close(fds[ERR]);

    for (;;) {
        struct pollfd p[2] = {{fds[CTL], POLLIN, 0}, {sfd, POLLIN, 0}};
        char cmd[16];
        ssize_t n;

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        if (p[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            int status;
            pid_t pid;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                ;
            while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                reaped(pid, status);
        }
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        n = read(fds[CTL], cmd, sizeof(cmd) - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0; /* the plugin is done with this sandbox */
        cmd[n] = 0;
        if (strcmp(cmd, "stop\n") == 0) {
            kill_all_others();
            write_all(fds[CTL], "stopped\n");
        }
    }
}
