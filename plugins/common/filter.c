/* filter.c — the system call filter of every runner (see filter.h): the
 * local executor's, and the one hutch-init adds to Docker's own profile.
 *
 * A deny list over an allow-by-default filter: the runtimes (CPython, Node)
 * use a wide and changing set of calls, while what must never be reachable
 * from a sandbox is a short, stable list.  Namespace creation is refused
 * both as unshare/setns and as clone flags; clone3 answers ENOSYS so libc
 * falls back to clone, whose flags a filter can see.  Socket families are
 * the exception, an allow list: unix, IPv4, IPv6 and netlink routing, and
 * EAFNOSUPPORT for every other family (vsock reaches the hypervisor, outside
 * any network namespace; packet, alg, bluetooth… are attack surface no
 * program here needs).  Foreign architectures (x32, i386 on x86_64) are
 * killed outright.
 *
 * What does not live here: Landlock (plugins/local/landlock.c), and when the
 * filter is installed (sandbox.c, init.c). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "filter.h"

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

/* Socket families a runner may create: everything else is refused with
 * EAFNOSUPPORT, as if the kernel had been built without it. */
static const unsigned allowed_families[] = {AF_UNIX, AF_INET, AF_INET6, AF_NETLINK};
#define FAMILY_LIMIT 64u /* families at or above: refused by one comparison */
static const int socket_calls[] = {SCMP_SYS(socket), SCMP_SYS(socketpair)};

static int family_allowed(unsigned f)
{
    for (size_t i = 0; i < sizeof(allowed_families) / sizeof(allowed_families[0]); i++)
        if (allowed_families[i] == f)
            return 1;
    return 0;
}

/* Refuse the families in [lo, hi] as aligned power-of-two blocks, one
 * masked comparison each, rather than one rule per value. */
static int deny_range(scmp_filter_ctx ctx, int sys, uint64_t lo, uint64_t hi)
{
    while (lo <= hi) {
        uint64_t size = 1;
        int r;
        while (lo % (size * 2) == 0 && lo + size * 2 - 1 <= hi)
            size *= 2;
        r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), sys, 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, ~(size - 1), lo));
        if (r < 0)
            return r;
        lo += size;
    }
    return 0;
}

/* The domain is an int but compared as 64 bits: anything with upper bits
 * set (a negative domain, garbage in the register) is above the limit and
 * refused too. */
static int deny_families(scmp_filter_ctx ctx, int sys)
{
    unsigned lo = 0;
    int r;
    for (unsigned f = 0; f <= FAMILY_LIMIT; f++) {
        if (f < FAMILY_LIMIT && !family_allowed(f))
            continue;
        if (f > lo && (r = deny_range(ctx, sys, lo, f - 1)) < 0)
            return r;
        lo = f + 1;
    }
    return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), sys, 1,
                            SCMP_A0(SCMP_CMP_GE, FAMILY_LIMIT, 0));
}

/* Compiled once and installed with one prctl: the local executor's runner
 * is a fork() of a threaded process and must not allocate (a sanitizer's
 * allocator lock held by another thread at fork time would never be
 * released in the child). */
int filter_build(void **bpf, size_t *bpf_len, char *errbuf, size_t len)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int r = 0, nr, fd = -1;
    off_t size;

    if (!ctx) {
        snprintf(errbuf, len, "seccomp_init failed");
        return -ENOMEM;
    }
    /* libseccomp offers KILL_PROCESS only where the kernel says it has it:
     * gVisor (Docker's runsc runtime, where hutch-init builds this filter)
     * does not say, and a foreign architecture's call killing the thread
     * that made it is as good. */
    r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r == -EINVAL)
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL);
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
    for (size_t i = 0; i < sizeof(socket_calls) / sizeof(socket_calls[0]); i++) {
        r = deny_families(ctx, socket_calls[i]);
        if (r < 0) {
            snprintf(errbuf, len, "filtering socket families: %s", strerror(-r));
            goto out;
        }
    }
    /* Netlink beyond NETLINK_ROUTE: sock_diag lists sockets, and other
     * protocols reach kernel subsystems (audit, netfilter, uevents) no
     * program here needs. */
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

int filter_apply(const void *bpf, size_t bpf_len)
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
