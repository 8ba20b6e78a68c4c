/* masked.h — what a container sandbox must not read of the kernel that
 * runs it, masked as Docker masks its default list: an empty read-only
 * tmpfs over a directory, /dev/null over a file.  Docker's default masked
 * paths (which a container's MaskedPaths replaces), plus what they leave
 * readable of the host: the kernel's command line, build configuration,
 * boot id and build information (its BTF type data, its notes with the
 * build id, vmcoreinfo), and which CPU vulnerabilities it mitigates.
 *
 * The docker executor sends it as MaskedPaths (docker.c); hutch-init masks
 * the same in the program's view (init.c), for the engines that ignore
 * MaskedPaths (Podman).  The local executor mounts no /sys and masks /proc
 * with its own list (plugins/local/sandbox.c); gVisor's /proc and /sys are
 * its own kernel's. */
#ifndef HUTCH_SANDBOX_MASKED_H
#define HUTCH_SANDBOX_MASKED_H

/* clang-format off */
#define BOX_MASKED_PATHS                                                              \
    "/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",  \
    "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",        \
    "/sys/firmware", "/sys/devices/virtual/powercap", "/proc/cmdline",                 \
    "/proc/config.gz", "/proc/sys/kernel/random/boot_id", "/sys/kernel/btf",           \
    "/sys/kernel/notes", "/sys/kernel/vmcoreinfo",                                     \
    "/sys/devices/system/cpu/vulnerabilities"
/* clang-format on */

#endif
