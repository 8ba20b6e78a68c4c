/* seccomp.c — the system call filter of the local executor's runner.
 *
 * A deny list over an allow-by-default filter: the runtimes (CPython, Node)
 * use a wide and changing set of calls, while what must never be reachable
 * from a sandbox is a short, stable list.  Namespace creation is refused
 * both as unshare/setns and as clone flags; clone3 answers ENOSYS so libc
 * falls back to clone, whose flags a filter can see.  Foreign architectures
 * (x32, i386 on x86_64) are killed outright. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox.h"

static const char *const denied[] = {
    /* debugging other processes */
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    /* file systems and the root */
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "quotactl",
    "quotactl_fd",
    "open_by_handle_at",
    "name_to_handle_at",
    "swapon",
    "swapoff",
    /* namespaces */
    "unshare",
    "setns",
    /* kernel keyring, eBPF, perf, modules, kexec */
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    /* the machine */
    "reboot",
    "acct",
    "syslog",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "iopl",
    "ioperm",
    "vhangup",
    "lookup_dcookie",
    "uselib",
    "nfsservctl",
    "_sysctl",
    /* attack surface with a long CVE record */
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "fanotify_init",
    "personality",
};

static const unsigned long ns_flags[] = {CLONE_NEWUSER,   CLONE_NEWNS,  CLONE_NEWPID,
                                         CLONE_NEWNET,    CLONE_NEWIPC, CLONE_NEWUTS,
                                         CLONE_NEWCGROUP, 0x00000080 /* NEWTIME */};

/* The filter is compiled once, in hutch's process, and installed in each
 * runner with one prctl: after fork() the child must not allocate (a
 * sanitizer's allocator lock held by another thread at fork time would
 * never be released in the child). */
int lsb_seccomp_build(void **bpf, size_t *bpf_len, char *errbuf, size_t len)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int r = 0, nr, fd = -1;
    off_t size;

    if (!ctx) {
        snprintf(errbuf, len, "seccomp_init failed");
        return -ENOMEM;
    }
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0) {
        snprintf(errbuf, len, "setting the bad-arch action: %s", strerror(-r));
        goto out;
    }
    for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
        nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0);
        if (r < 0) {
            snprintf(errbuf, len, "denying %s: %s", denied[i], strerror(-r));
            goto out;
        }
    }
    for (size_t i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]));
        if (r < 0) {
            snprintf(errbuf, len, "filtering clone flags: %s", strerror(-r));
            goto out;
        }
    }
    nr = seccomp_syscall_resolve_name("clone3");
    if (nr != __NR_SCMP_ERROR) {
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
        if (r < 0) {
            snprintf(errbuf, len, "denying clone3: %s", strerror(-r));
            goto out;
        }
    }
    /* Netlink beyond NETLINK_ROUTE (sock_diag would list the sockets of other
     * sandboxes sharing the empty network namespace; user-defined families
     * would let them talk). */
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
                         SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0),
                         SCMP_A2(SCMP_CMP_NE, 0, 0));
    if (r < 0) {
        snprintf(errbuf, len, "filtering netlink: %s", strerror(-r));
        goto out;
    }
    /* Pushing keystrokes into a terminal the sandbox shares. */
    r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                         SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI));
    if (r < 0) {
        snprintf(errbuf, len, "filtering ioctl: %s", strerror(-r));
        goto out;
    }
    fd = memfd_create("hutch-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        r = -errno;
        snprintf(errbuf, len, "memfd_create: %s", strerror(errno));
        goto out;
    }
    r = seccomp_export_bpf(ctx, fd);
    if (r < 0) {
        snprintf(errbuf, len, "compiling the filter: %s", strerror(-r));
        goto out;
    }
    size = lseek(fd, 0, SEEK_END);
    if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
        !(*bpf = malloc((size_t)size)) || pread(fd, *bpf, (size_t)size, 0) != size) {
        r = -EIO;
        snprintf(errbuf, len, "reading the compiled filter back");
        goto out;
    }
    *bpf_len = (size_t)size;
    r = 0;
out:
    if (fd >= 0)
        close(fd);
    seccomp_release(ctx);
    return r;
}

int lsb_seccomp_apply(const void *bpf, size_t bpf_len)
{
    struct sock_fprog prog = {
        .len = (unsigned short)(bpf_len / sizeof(struct sock_filter)),
        .filter = (struct sock_filter *)bpf,
    };
    if (!bpf || !bpf_len || bpf_len / sizeof(struct sock_filter) > 0xffff)
        return -EINVAL;
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
        return -errno;
    return 0;
}

/* Landlock scoping (ABI 6, Linux 6.12).  Debian 12's headers predate it, so
 * the attribute struct and flags are spelled out here. */
struct lsb_landlock_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};
#define LSB_LANDLOCK_CREATE_RULESET_VERSION     (1u << 0)
#define LSB_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ull << 0)
#define LSB_LANDLOCK_SCOPE_SIGNAL               (1ull << 1)

int lsb_landlock_abi(void)
{
#ifdef SYS_landlock_create_ruleset
    return (int)syscall(SYS_landlock_create_ruleset, NULL, 0,
                        LSB_LANDLOCK_CREATE_RULESET_VERSION);
#else
    return -1;
#endif
}

int lsb_landlock_scope(char *errbuf, size_t len)
{
#if defined(SYS_landlock_create_ruleset) && defined(SYS_landlock_restrict_self)
    struct lsb_landlock_attr attr = {
        .scoped = LSB_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LSB_LANDLOCK_SCOPE_SIGNAL,
    };
    int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
    if (fd < 0) {
        snprintf(errbuf, len, "landlock_create_ruleset: %s", strerror(errno));
        return -errno;
    }
    if (syscall(SYS_landlock_restrict_self, fd, 0) < 0) {
        int e = errno;
        close(fd);
        snprintf(errbuf, len, "landlock_restrict_self: %s", strerror(e));
        return -e;
    }
    close(fd);
    return 0;
#else
    snprintf(errbuf, len, "built without Landlock support");
    return -ENOSYS;
#endif
}
