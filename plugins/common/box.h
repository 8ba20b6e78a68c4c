/* box.h — what the Docker and gVisor executors share beyond the sockets
 * (sbio.h): where hutch-init is, the runner's command line and environment
 * inside the sandbox, and process start times (is a hutch still alive?). */
#ifndef HUTCH_BOX_H
#define HUTCH_BOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "hutch-executor.h"
#include "opts.h"
#include "proc.h"

/* Inside every sandbox: hutch-init, the runners, the sockets. */
#define BOX_INIT   "/run/hutch/init"
#define BOX_RUNNER "/run/hutch/runner"
#define BOX_IO     "/run/hutch/io"
#define BOX_UID    1000
#define BOX_GID    1000
/* What hutch-init needs as root: to become the sandbox user (SETUID,
 * SETGID), to empty the program's bounding set (SETPCAP), to end the
 * program's processes (KILL), to give the runner a mount namespace of its
 * own where pid 1 is hidden (SYS_ADMIN).  Their names, for OCI and Docker
 * alike.  BOX_VIEW_CAPS: what --view takes on top (a chroot into it). */
#define BOX_INIT_CAPS                                                                  \
    "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL", "CAP_SYS_ADMIN"
#define BOX_VIEW_CAPS "CAP_SYS_CHROOT"

/* hutch-init sits next to the plugin directory: lib/hutch/hutch-init for
 * lib/hutch/plugins/X.so, build/plugins/hutch-init for
 * build/plugins/.libs/X.so.  The option "init" of `table` (BOX_OPTION_INIT:
 * $HUTCH_INIT) overrides.  0, or why not. */
int box_find_init(const struct hutch_option *table, char *out, size_t len,
                  struct hutch_err *err);
#define BOX_OPTION_INIT                                                                \
    OPT_ROW("init", HUTCH_OPTION_STRING, "HUTCH_INIT", HUTCH_OPTION_ENV_ONLY,          \
            "The hutch-init binary (default: hutch-init beside the plugin "            \
            "directory).")

/* box_proc_start, box_process_gone: proc.h. */

/* Removes `path` and everything below it, never following a symbolic
 * link; 0, or -1 with errno (what could be removed is). */
int box_remove_tree(const char *path);

/* Up to len-1 bytes of a small file, NUL-terminated: the count, or -1. */
ssize_t box_read_file(const char *path, char *buf, size_t len);

/* A runtime line from an image (its label, its /etc/hutch-runtime): the
 * first line of raw, control characters made spaces, cut to len-1 bytes;
 * 0, or -ENOENT when nothing is left ("" in out). */
int box_runtime_line(const char *raw, char *out, size_t len);

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t box_now_ms(void);

/* The sandbox's command (hutch-init, its `flags` (NULL-terminated, may be
 * NULL), the user it runs the program as, its limits, the runner) and
 * environment, as JSON string arrays (caller frees).  The command runs as
 * root with the capabilities BOX_INIT_CAPS, and nothing else; hutch-init
 * drops them all for the program.  `preload` (python): the runner imports
 * the data flavour's packages before it says ready (plugin_preload()). */
cJSON *box_command(const struct hutch_sandbox_class *cls, unsigned uid, unsigned gid,
                   const char *const *flags, int preload);
cJSON *box_environment(void);

/* A JSON array of the NULL-terminated strings v (caller frees). */
cJSON *box_str_array(const char *const *v);

/* The image flavour the policy's executor_options.EXECUTOR.flavour names:
 * 0 for the base images ("" or "base"), 1 for "data" (Python with Debian's
 * numpy, pandas and matplotlib: images/build.sh's python-data; JavaScript
 * has one image).  -EINVAL naming the flavours for another value. */
int box_flavour(const char *value, const char *executor, struct hutch_err *err);

/* Default sizes when the class says 0. */
/* cpu_weight()'s argument: 0 when in range (HUTCH_CPU_WEIGHT_MIN..MAX),
 * else -EINVAL with err saying so. */
int box_cpu_weight_check(uint32_t weight, struct hutch_err *err);
/* Writes the string s to the file at path (a cgroup's or /proc's, which
 * take one write): 0, or -errno (-EIO for a short write). */
int box_write_str(const char *path, const char *s);
/* The cgroup v1 cpu.shares of a weight on v2's scale: 1024 for the default
 * 100, never below v1's minimum of 2. */
uint32_t box_cpu_shares(uint32_t weight);
/* HUTCH_SANDBOXES_CPU_WEIGHT's text as a weight (HUTCH_CPU_WEIGHT_MIN..MAX,
 * v2's scale): 0, or -EINVAL saying what is wanted. */
int box_cpu_weight_parse(const char *value, uint32_t *weight, struct hutch_err *err);
/* Where the cpu controller is mounted: 2 for cgroup v2 (/sys/fs/cgroup), 1
 * for v1 (/sys/fs/cgroup/cpu, or cpu,cpuacct and cpuacct,cpu where that is
 * the directory), with the path in out; -ENOENT for none. */
int box_cpu_root(char *out, size_t len);
/* The sandboxes' cgroup parent `parent` (a cgroup path, as runsc
 * and Docker's cgroupfs driver take it) made in the cpu hierarchy (and the
 * directories above it), and its weight set: cpu.weight on v2, cpu.shares
 * (box_cpu_shares) on v1.  0 with the directory in dir; else -errno and err
 * says what failed (no cpu controller, not writable, a bad path). */
int box_parent_cpu_weight(const char *parent, uint32_t weight, char *dir, size_t len,
                          struct hutch_err *err);
/* The weight of the cgroup `cgroup` (a cgroup path, which exists) in the
 * cpu hierarchy, as box_parent_cpu_weight sets it: 0, or -errno (-ENOENT
 * without a cpu controller or that cgroup) and err says what failed. */
int box_cgroup_cpu_weight(const char *cgroup, uint32_t weight, struct hutch_err *err);
unsigned long long box_work_bytes(const struct hutch_sandbox_class *cls);
unsigned long long box_tmp_bytes(const struct hutch_sandbox_class *cls);

#endif
