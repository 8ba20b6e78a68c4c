/* landlock.c — Landlock scoping of the local executor's runner (abstract
 * unix sockets and signals stay inside the sandbox).  The system call
 * filter lives in plugins/common/filter.c. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox.h"

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
