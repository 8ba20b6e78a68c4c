/* sandbox.h — what the local executor's host side (local.c) and sandbox side
 * (sandbox.c, landlock.c) share: the parameters of one sandbox and the
 * framing of the control channel between the plugin and the sandbox's init.
 */
#ifndef HUTCH_LOCAL_SANDBOX_H
#define HUTCH_LOCAL_SANDBOX_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "caps.h"
#include "hutch-executor.h"

/* uid/gid of the program inside the sandbox. */
#define LSB_UID 1000
#define LSB_GID 1000
/* When hutch runs as root, the sandbox user is a host uid (and gid) of its
 * own: LSB_HOST_ID_BASE plus the host pid of the sandbox's first process
 * (C1), unique among the sandboxes alive on the host.  C1 becomes that uid
 * before it creates the user namespace, so the kernel charges the
 * sandbox's per-user counts (inotify instances, pending signals, user
 * namespaces…) to it, never to root nor to another sandbox.  The default
 * base is in a range no distribution allocates (systemd's "unused"
 * 0x70000000…); HUTCH_LOCAL_UID_BASE moves it. */
#define LSB_HOST_ID_BASE  0x70000000u
#define LSB_HOST_ID_RANGE 4194304u /* PID_MAX_LIMIT on 64-bit Linux */

/* Size of the tmpfs the runners are copied into, at /run/hutch. */
#define LSB_RUNNER_BYTES (16u << 20)

/* Control frames: a fixed header then `len` payload bytes. */
enum lsb_frame {
    LSB_READY = 1, /* init -> host: sandbox set up, runner started; carries
                      the egress listener (lsb_send_fd) */
    LSB_FAIL,      /* init -> host: set-up failed; payload: message */
    LSB_PUT,       /* host -> init: payload: tar to unpack into /work */
    LSB_PUT_OK,    /* init -> host */
    LSB_PUT_ERR,   /* init -> host; payload: message */
    LSB_EXIT,      /* init -> host; payload: int32 wait status */
    LSB_PACK,      /* host -> init; payload: uint64 max bytes */
    LSB_DATA,      /* init -> host; payload: tar bytes */
    LSB_DATA_END,  /* init -> host */
    LSB_DATA_ERR,  /* init -> host; payload: message */
};
struct lsb_hdr {
    uint32_t type;
    uint32_t len;
};
#define LSB_FRAME_MAX  (HUTCH_TAR_IN_MAX_BYTES + 4096u)
#define LSB_DATA_CHUNK (256u * 1024u)
/* Connections the sandbox's egress listener queues before hutch takes
 * them (listen(2)'s backlog). */
#define LSB_EGRESS_BACKLOG 64

/* Everything the sandbox side needs, prepared by the host so the child
 * does no path lookups of its own on the host; sent to the factory
 * (factory.c), which forks C1 with it (the pointers are the factory's). */
struct lsb_params {
    const struct hutch_host *host;
    char interp[PATH_MAX];     /* real interpreter binary, under /usr */
    char runner[64];           /* runner file name inside /run/hutch */
    char runner_dir[PATH_MAX]; /* host dir bound at /run/hutch */
    char language[16];         /* "python" | "javascript" */
    pid_t parent;              /* the factory: C1's parent */
    int is_root;               /* hutch runs as host root */
    uint32_t id_base;          /* with is_root: see LSB_HOST_ID_BASE */
    int runner_fd;             /* C1 opens runner_dir (O_PATH) for init */
    int ctrl_fd;               /* child end of the control socket */
    int sync_fd;               /* child end of the start-up sync socket */
    int chan_fd;               /* runner end of the wire channel */
    int out_fd, err_fd;        /* write ends of stdout/stderr pipes */
    uint64_t memory_bytes;
    uint64_t work_bytes;
    uint64_t tmp_bytes;
    uint32_t pids_max;
    uint32_t open_files;
    int landlock;    /* scope the runner with Landlock */
    const void *bpf; /* the compiled seccomp filter */
    size_t bpf_len;
    int have_memcg;  /* memory limit enforced by a cgroup */
    int have_pidscg; /* pids limit enforced by a cgroup */
    int preload;     /* plugin_preload(): the runner's --preload */
    int zygote;      /* the factory's: the runner is a fork of its
                        interpreter (zygote.c), not an exec */
};

/* Child side of fork(): never returns. */
__attribute__((noreturn)) void lsb_child_main(struct lsb_params *p);

/* Scope the runner with Landlock so it can neither connect to abstract unix
 * sockets nor signal processes outside its own sandbox (its network and pid
 * namespaces already say so: a second wall).  0 or -errno. */
int lsb_landlock_scope(char *errbuf, size_t len);
/* The Landlock ABI version of the running kernel, or <= 0 without it. */
int lsb_landlock_abi(void);

/* Framed I/O on the control socket (blocking). */
int lsb_send(int fd, uint32_t type, const void *data, size_t len);
/* An empty frame of `type` carrying descriptor `pass` (SCM_RIGHTS on its
 * first byte): init's READY hands the sandbox's egress listener over. */
int lsb_send_fd(int fd, uint32_t type, int pass);
/* lsb_recv that also takes a descriptor passed with the frame: *passed is
 * it (close-on-exec), or -1 when none came. */
int lsb_recv_fd(int fd, struct lsb_hdr *h, char **payload, size_t max, int *passed);
/* Reads one frame; *payload is malloc'd (NUL-terminated) or NULL when len is
 * 0; caller frees.  Payloads over max are an error. */
int lsb_recv(int fd, struct lsb_hdr *h, char **payload, size_t max);

#endif
