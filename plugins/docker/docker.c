/* docker.c — the Docker executor: each sandbox is a fresh, hardened
 * container made through the Docker Engine API (api.c), never the CLI.
 *
 * Nothing is a path on hutch's host, so the daemon may run on another
 * machine (DOCKER_HOST=tcp://…, TLS) as well as beside hutch.  The
 * container's pid 1 is hutch-init (plugins/init/init.c, static): it and
 * the runners are uploaded with PUT /archive into a volume of the
 * container's own at /run/hutch before it starts (the root file system is
 * read-only; the volume's files are root's, the program's uid cannot
 * change them).  init speaks to hutch over the container's attach stream
 * (attach.c): the runner's channel, its stdout and stderr and init's ctl
 * lines travel framed (mux.h) over one connection, which the pump turns
 * back into the four fds the core reads as it does a local sandbox's.
 * /work is a volume backed by a tmpfs of the class's size: capped
 * (a full /work says ENOSPC, the host's disk is never touched), charged to
 * the container's memory, and — being a volume — reachable by Docker's
 * archive endpoints while the container runs.  Files go in with
 * PUT /archive once the runner waits, and come out with GET /archive after
 * init has killed every other process; init keeps the container (and so the
 * volume) alive until then.  When the engine runs beside hutch, the result
 * files are packed instead from the volume's directory on this host, once
 * it is proven to be the container's /work (docker_get): nothing needs a
 * path of the host, but a proven one saves the endpoint's round trip.
 * Egress needs one: only a container of an engine beside hutch gets it,
 * through a bind-mounted directory holding a socket of hutch's (see
 * "egress" below).
 *
 * Every container carries hutch.instance, hutch.execution and hutch.owner
 * (hostname:pid:start time), and is named hutch-INSTANCE-N (N: the
 * sandbox's number).  open() removes containers whose owner process is
 * gone (a crashed hutch), close() those of this instance, and an engine
 * that answers again after it was down (a daemon killed and restarted)
 * loses the containers and volumes of this instance that no live sandbox
 * holds (a removal that failed while it was down, a container created as
 * it died).  Those sweeps, and the registry of live sandboxes they
 * consult, live in sweep.c; hutch doctor's lines in doctor.c (docker.h
 * says what the three share).
 *
 * Each container's program runs as a host uid of its own (uid_take()):
 * without user-namespace remapping the kernel charges per-user quotas
 * (inotify instances, pending signals, epoll watches, pipe pages) to the
 * host uid, so a shared uid would let one sandbox exhaust them for all. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "abi.h"
#include "api.h"
#include "attach.h"
#include "box.h"
#include "caps.h"
#include "docker.h"
#include "engines.h"
#include "masked.h"
#include "sbio.h"

#define DK_READY_MS 60000 /* container start until init connected (loaded machines) */
#define DK_STOP_MS  5000  /* init killing the program's processes */
/* Where the container sees its egress socket's directory (egress_make). */
#define DK_EGRESS_DIR "/run/hutch/egress"

struct dk_boot {
    unsigned refs; /* atomic; st->boot holds one */
    uint64_t stamp;
    size_t len;
    char tar[];
};

/* --- /run/hutch: hutch-init and the runners ---------------------------- */

#define DK_BOOT_MAX (64u << 20) /* init and the runners, with room to spare */

static int copy_file(const char *from, const char *to, struct hutch_err *err)
{
    char buf[64 << 10];
    int in = open(from, O_RDONLY | O_CLOEXEC), out = -1, r = 0;
    ssize_t n;

    if (in < 0)
        return hutch_err_set(err, -errno, "%s: %s", from, strerror(errno));
    out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (out < 0) {
        r = hutch_err_set(err, -errno, "%s: %s", to, strerror(errno));
        goto out;
    }
    while ((n = read(in, buf, sizeof(buf))) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || write(out, buf, (size_t)n) != n) {
            r = hutch_err_set(err, -EIO, "copying %s to %s: %s", from, to,
                              strerror(errno ? errno : EIO));
            goto out;
        }
    }
out:
    close(in);
    if (out >= 0 && close(out) < 0 && r == 0)
        r = hutch_err_set(err, -errno, "%s: %s", to, strerror(errno));
    return r;
}

/* What hutch-init and the runner directory are on disk now: their names,
 * sizes and modification times, folded.  Asked at every start (a few
 * stat calls), so that an upgraded runner, or one taken away, is what the
 * next sandbox gets, as on the local executor. */
static uint64_t boot_stamp(const struct dk_state *st)
{
    uint64_t h = 1469598103934665603u;
    struct stat sb;
    DIR *d;
#define FOLD(v) (h = (h ^ (uint64_t)(v)) * 1099511628211u)
    if (stat(st->init_path, &sb) == 0) {
        FOLD(sb.st_size);
        FOLD(sb.st_mtim.tv_sec);
        FOLD(sb.st_mtim.tv_nsec);
    }
    d = opendir(st->runner_dir);
    for (struct dirent *de; d && (de = readdir(d));) {
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &sb, 0) < 0)
            continue;
        for (const char *c = de->d_name; *c; c++)
            FOLD(*c);
        FOLD(sb.st_size);
        FOLD(sb.st_mtim.tv_sec);
        FOLD(sb.st_mtim.tv_nsec);
    }
    if (d)
        closedir(d);
#undef FOLD
    return h;
}

static void boot_put(struct dk_boot *b)
{
    if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(b);
}

/* The tar PUT into every container's /run/hutch before it starts: init
 * (as box_command names it) and runner/, every entry root's, modes 0755 or
 * 0644.  Staged in the state directory, packed by the core's own packer,
 * then removed.  *out has one reference. */
static int make_boot(struct dk_state *st, uint64_t stamp, struct dk_boot **out,
                     struct hutch_err *err)
{
    struct hutch_archive_limits lim = {
        .struct_size = sizeof(lim),
        .max_bytes = DK_BOOT_MAX,
        .max_entries = HUTCH_TAR_MAX_ENTRIES,
        .max_path = HUTCH_TAR_MAX_PATH,
        .max_depth = HUTCH_TAR_MAX_DEPTH,
    };
    struct hutch_buf runners = HUTCH_BUF_INIT(2 * DK_BOOT_MAX),
                     packed = HUTCH_BUF_INIT(2 * DK_BOOT_MAX),
                     owned = HUTCH_BUF_INIT(2 * DK_BOOT_MAX);
    char stage[PATH_MAX + 48], path[PATH_MAX + 64];
    int r;

    *out = NULL;
    snprintf(stage, sizeof(stage), "%s/boot.%lu", st->dir,
             __atomic_add_fetch(&st->seq, 1, __ATOMIC_RELAXED));
    if (mkdir(stage, 0755) < 0)
        return hutch_err_set(err, -errno, "creating %s: %s", stage, strerror(errno));
    snprintf(path, sizeof(path), "%s/runner", stage);
    r = st->host->archive_pack_dir(st->runner_dir, hutch_buf_write, &runners, &lim,
                                   err);
    if (r == 0)
        r = st->host->archive_extract(runners.data, runners.len, path, &lim, err);
    snprintf(path, sizeof(path), "%s/init", stage);
    if (r == 0)
        r = copy_file(st->init_path, path, err);
    if (r == 0)
        r = st->host->archive_pack_dir(stage, hutch_buf_write, &packed, &lim, err);
    if (r == 0)
        r = st->host->archive_filter(packed.data, packed.len, hutch_buf_write, &owned,
                                     &lim, 0, 0, err);
    if (r == 0) {
        struct dk_boot *b = malloc(sizeof(*b) + owned.len);
        if (!b) {
            r = hutch_err_set(err, -ENOMEM, "out of memory");
        } else {
            b->refs = 1;
            b->stamp = stamp;
            b->len = owned.len;
            memcpy(b->tar, owned.data, owned.len);
            *out = b;
        }
    }
    hutch_buf_free(&runners);
    hutch_buf_free(&packed);
    hutch_buf_free(&owned);
    /* Only the tar is kept: nothing of it in the state directory, which a
     * sweep of a killed hutch's then finds empty. */
    box_remove_tree(stage);
    return r;
}

/* The tar for a start, with a reference (boot_put): the one made last,
 * or a new one when init or the runners changed on disk since. */
static int boot_get(struct dk_state *st, struct dk_boot **out, struct hutch_err *err)
{
    uint64_t stamp = boot_stamp(st);
    struct dk_boot *b;
    int r;

    pthread_mutex_lock(&st->boot_mu);
    b = st->boot;
    if (b && b->stamp == stamp) {
        __atomic_add_fetch(&b->refs, 1, __ATOMIC_ACQ_REL);
        pthread_mutex_unlock(&st->boot_mu);
        *out = b;
        return 0;
    }
    pthread_mutex_unlock(&st->boot_mu);
    r = make_boot(st, stamp, &b, err);
    if (r < 0)
        return r;
    pthread_mutex_lock(&st->boot_mu);
    boot_put(st->boot);
    st->boot = b;
    __atomic_add_fetch(&b->refs, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&st->boot_mu);
    *out = b;
    return 0;
}

/* --- executor ---------------------------------------------------------- */

/* Usable when hutch-init is there and one endpoint at least can be
 * reached (a unix socket is tried; TCP is assumed, and asked at open). */
static int docker_probe(const struct hutch_host *host, struct hutch_err *err)
{
    struct dk_engines es;
    char init[PATH_MAX];
    int r = dk_engines_init(&es, err);
    if (r < 0)
        return r;
    r = -ECONNREFUSED;
    for (struct dk_engine *e = es.list; e && r < 0; e = e->next) {
        struct hutch_err perr = HUTCH_ERR_INIT;
        r = dk_api_reachable(&e->api, &perr);
        if (r < 0 && (e == es.list || !err->msg[0]))
            *err = perr; /* the first one's words */
    }
    dk_engines_free(&es);
    if (r == 0)
        r = box_find_init(dk_options, init, sizeof(init), err);
    return r;
}

static int docker_open(const struct hutch_host *host, const struct hutch_config *cfg,
                       void **state, struct hutch_err *err)
{
    struct dk_state *st = calloc(1, sizeof(*st));
    int r;

    if (!st)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    st->host = host;
    if (!HUTCH_HAS_MEMBER(host, struct hutch_host, archive_filter) ||
        !host->archive_filter) {
        free(st);
        return hutch_err_set(err, -ENOSYS,
                             "this hutch is older than the docker executor: install "
                             "matching versions");
    }
    snprintf(st->instance, sizeof(st->instance), "%s",
             cfg && cfg->instance_id ? cfg->instance_id : "hutch");
    {
        char hostname[256] = "";
        gethostname(hostname, sizeof(hostname) - 1);
        st->start = box_proc_start(getpid());
        snprintf(st->owner, sizeof(st->owner), "%s:%d:%llu", hostname, (int)getpid(),
                 st->start);
    }
    snprintf(st->runner_dir, sizeof(st->runner_dir), "%s", host->runner_dir);
    if (!realpath(host->runner_dir, st->runner_dir)) {
        r = hutch_err_set(err, -errno, "runner directory %s: %s", host->runner_dir,
                          strerror(errno));
        goto fail;
    }
    if (!cfg || !HUTCH_HAS_MEMBER(cfg, struct hutch_config, state_dir) ||
        !cfg->state_dir || cfg->state_dir[0] != '/' ||
        strlen(cfg->state_dir) >= sizeof(st->dir)) {
        r = hutch_err_set(err, -EINVAL,
                          "this hutch gives the docker executor no state directory: "
                          "install matching versions");
        goto fail;
    }
    snprintf(st->dir, sizeof(st->dir), "%s", cfg->state_dir);
    snprintf(st->parent, sizeof(st->parent), "%s", st->dir);
    *strrchr(st->parent, '/') = '\0';
    r = box_find_init(dk_options, st->init_path, sizeof(st->init_path), err);
    pthread_mutex_init(&st->boot_mu, NULL);
    pthread_mutex_init(&st->live_mu, NULL);
    pthread_mutex_init(&st->cg_mu, NULL);
    {
        const char *w = opt_env(dk_options, "sandboxes_cpu_weight");
        if (r == 0 && w)
            r = box_cpu_weight_parse(w, &st->cpu_weight, err);
    }
    if (r == 0)
        r = make_boot(st, boot_stamp(st), &st->boot, err);
    if (r == 0) {
        r = dk_engines_init(&st->engines, err);
        if (r == 0 && (r = dk_engines_probe(&st->engines, err)) < 0)
            dk_engines_free(&st->engines);
    }
    if (r < 0)
        goto fail;
    dk_sweep(st, 0);
    *state = st;
    return 0;
fail:
    boot_put(st->boot);
    free(st);
    return r;
}

static void docker_close(void *state)
{
    struct dk_state *st = state;
    if (!st)
        return;
    dk_sweep(st, 1);
    dk_engines_free(&st->engines);
    boot_put(st->boot);
    pthread_mutex_destroy(&st->live_mu);
    pthread_mutex_destroy(&st->cg_mu);
    free(st);
}

/* The container's definition (caller frees the string). */
/* The labels of a volume the engine makes for sandbox n's container: its
 * owner, and the instance and number by which a sweep of this hutch tells
 * a lost one (the engine restarted, removing the container without it)
 * from a live one. */
static void volume_labels(const struct dk_state *st, cJSON *mount, unsigned long n)
{
    cJSON *l = cJSON_AddObjectToObject(cJSON_AddObjectToObject(mount, "VolumeOptions"),
                                       "Labels");
    char num[24];
    snprintf(num, sizeof(num), "%lu", n);
    cJSON_AddStringToObject(l, DK_OWNER_LABEL, st->owner);
    cJSON_AddStringToObject(l, "hutch.instance", st->instance);
    cJSON_AddStringToObject(l, DK_SANDBOX_LABEL, num);
}

/* The engine's cgroup driver ("cgroupfs", "systemd"), from GET /info:
 * 0, or -errno with err saying why. */
static int engine_cgroup_driver(const struct dk_engine *e, char *out, size_t len,
                                struct hutch_err *err)
{
    struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
    cJSON *j, *d;
    int r = dk_json(&e->api, "GET", "/info", NULL, NULL, &b, err);

    if (r == 0) {
        j = cJSON_ParseWithLength(b.data, b.len);
        d = cJSON_GetObjectItem(j, "CgroupDriver");
        if (cJSON_IsString(d) && d->valuestring[0])
            snprintf(out, len, "%s", d->valuestring);
        else
            r = hutch_err_set(err, -EPROTO, "its /info names no cgroup driver");
        cJSON_Delete(j);
    }
    hutch_buf_free(&b);
    return r;
}

/* The cgroup parent of the containers on e (NULL: the daemon's default),
 * decided at e's first container: cgroup_parent as set.  With
 * sandboxes_cpu_weight, on an engine of this host (a unix socket) whose
 * cgroup driver is cgroupfs, that parent (/hutch-docker when unset) is
 * made here and weighs that much, all sandboxes of the engine together,
 * against dockerd, hutch's threads and every other process at its level,
 * as gVisor's does (gvisor.c, cpu_setup).  Elsewhere the weight is not
 * applied, and the log says why once: a remote engine's cgroups are on
 * another host; the systemd driver wants a slice, whose CPUWeight= is
 * systemd's to set. */
static const char *engine_cgroup_parent(struct dk_state *st, struct dk_engine *e)
{
    const char *opt = opt_env(dk_options, "cgroup_parent");
    const char *out;

    if (!st->cpu_weight)
        return opt;
    pthread_mutex_lock(&st->cg_mu);
    if (!e->cg_decided) {
        struct hutch_err why = HUTCH_ERR_INIT;
        char driver[32] = "", dir[PATH_MAX];
        const char *parent = opt ? opt : "/hutch-docker";
        snprintf(e->cg_parent, sizeof(e->cg_parent), "%s", opt ? opt : "");
        if (!e->api.unix_path[0])
            hutch_err_set(&why, -EREMOTE, "the engine %s is not on this host",
                          e->api.where);
        else if (engine_cgroup_driver(e, driver, sizeof(driver), &why) == 0 &&
                 strcmp(driver, "cgroupfs"))
            hutch_err_set(&why, -ENOTSUP,
                          "the engine %s uses the %s cgroup driver (set CPUWeight= on "
                          "the slice in cgroup_parent instead)",
                          e->api.where, driver);
        else if (!why.msg[0] && box_parent_cpu_weight(parent, st->cpu_weight, dir,
                                                      sizeof(dir), &why) == 0) {
            snprintf(e->cg_parent, sizeof(e->cg_parent), "%s", parent);
            st->host->log(HUTCH_LOG_DEBUG, "docker",
                          "the sandboxes on %s below %s weigh %u", e->api.where, dir,
                          st->cpu_weight);
        }
        if (why.msg[0])
            st->host->log(HUTCH_LOG_WARN, "docker",
                          "HUTCH_SANDBOXES_CPU_WEIGHT=%u not applied: %s",
                          st->cpu_weight, why.msg);
        e->cg_decided = 1;
    }
    out = e->cg_parent[0] ? e->cg_parent : NULL;
    pthread_mutex_unlock(&st->cg_mu);
    return out;
}

static char *create_body(struct dk_state *st, struct dk_sandbox *sb,
                         const struct hutch_sandbox_class *cls, unsigned long n)
{
    char tmpopt[96], workopt[128];
    unsigned long long work = box_work_bytes(cls), tmp = box_tmp_bytes(cls);
    cJSON *c = cJSON_CreateObject(), *hc, *labels, *mounts, *m, *vo, *dc, *opts, *tmpfs,
          *log;
    char *out;

    snprintf(tmpopt, sizeof(tmpopt), "rw,nosuid,nodev,size=%llu,mode=1777",
             (unsigned long long)tmp);
    snprintf(workopt, sizeof(workopt), "size=%llu,uid=%u,gid=%u,mode=0755,nosuid,nodev",
             (unsigned long long)work, sb->uid, sb->uid);

    cJSON_AddStringToObject(c, "Image", sb->image);
    cJSON_AddItemToObject(c, "Entrypoint", cJSON_CreateArray());
    /* hutch's own filter in the runner, over Docker's profile (which,
     * depending on the version, lets vsock and other families through);
     * init's frames over the attach stream; the program's view, where
     * nothing names the engine's host (plugins/init/init.c). */
    cJSON_AddItemToObject(
        c, "Cmd",
        box_command(
            cls, sb->uid, sb->uid,
            sb->egress_dir[0]
                ? (const char *const[]){"--seccomp", "--attach", "--view", "--egress",
                                        DK_EGRESS_DIR "/" SBIO_EGRESS, NULL}
                : (const char *const[]){"--seccomp", "--attach", "--view", NULL},
            sb->preload));
    cJSON_AddItemToObject(c, "Env", box_environment());
    /* hutch-init runs as root with the few capabilities it needs (CapAdd
     * below), and runs the program as the sandbox user with none (see
     * plugins/init/init.c): the program can neither signal nor ptrace it. */
    cJSON_AddStringToObject(c, "User", "0:0");
    cJSON_AddStringToObject(c, "WorkingDir", "/work");
    cJSON_AddStringToObject(c, "Hostname", "hutch");
    cJSON_AddBoolToObject(c, "NetworkDisabled", 1);
    /* init's stdin and stdout are the attach stream (attach.c); stdin
     * closes when hutch lets go of it, which ends init and the container. */
    cJSON_AddBoolToObject(c, "AttachStdin", 1);
    cJSON_AddBoolToObject(c, "AttachStdout", 1);
    cJSON_AddBoolToObject(c, "AttachStderr", 1);
    cJSON_AddBoolToObject(c, "OpenStdin", 1);
    cJSON_AddBoolToObject(c, "StdinOnce", 1);
    cJSON_AddBoolToObject(c, "Tty", 0);
    /* The engine removes the container (and its volumes) once it ends: a
     * hutch killed with SIGKILL, or by its client past its grace period
     * while it was still removing its containers or starting a pool's,
     * closes the attach stream, which ends init, and so the container —
     * nothing of it is left for a sweep to find.  Only a container created
     * but not yet started outlives a SIGKILL (until the next hutch's open
     * sweeps it: its owner is gone); shutdown cancels those starts first
     * (src/pool.c). */
    labels = cJSON_AddObjectToObject(c, "Labels");
    cJSON_AddStringToObject(labels, "hutch.instance", st->instance);
    /* The label start() was given: a pooled sandbox's job comes later. */
    cJSON_AddStringToObject(labels, "hutch.execution", sb->label);
    cJSON_AddStringToObject(labels, DK_OWNER_LABEL, st->owner);

    hc = cJSON_AddObjectToObject(c, "HostConfig");
    cJSON_AddStringToObject(hc, "NetworkMode", "none");
    cJSON_AddBoolToObject(hc, "AutoRemove", 1);
    if (sb->runtime[0])
        cJSON_AddStringToObject(hc, "Runtime", sb->runtime);
    cJSON_AddBoolToObject(hc, "ReadonlyRootfs", 1);
    /* Docker's default masked paths (which this list replaces), plus what
     * they leave readable of the host kernel (masked.h).  API 1.38 and
     * later; hutch-init masks the same in the program's view. */
    cJSON_AddItemToObject(hc, "MaskedPaths",
                          box_str_array((const char *[]){BOX_MASKED_PATHS, NULL}));
    cJSON_AddItemToObject(hc, "CapDrop", box_str_array((const char *[]){"ALL", NULL}));
    cJSON_AddItemToObject(
        hc, "CapAdd",
        box_str_array((const char *[]){BOX_INIT_CAPS, BOX_VIEW_CAPS, NULL}));
    cJSON_AddItemToObject(hc, "SecurityOpt",
                          box_str_array((const char *[]){"no-new-privileges", NULL}));
    cJSON_AddNumberToObject(hc, "PidsLimit", cls->pids_max ? cls->pids_max : 128);
    if (cls->memory_bytes) {
        cJSON_AddNumberToObject(hc, "Memory", (double)cls->memory_bytes);
        cJSON_AddNumberToObject(hc, "MemorySwap", (double)cls->memory_bytes);
    }
    if (cls->cpu_millis)
        cJSON_AddNumberToObject(hc, "NanoCpus", (double)cls->cpu_millis * 1e6);
    cJSON_AddNumberToObject(hc, "ShmSize", 16 << 20);
    {
        /* Deployments (and the hostile tests' outer guard) may want every
         * sandbox below a cgroup of their own. */
        const char *parent = engine_cgroup_parent(st, sb->eng);
        if (parent)
            cJSON_AddStringToObject(hc, "CgroupParent", parent);
    }
    /* A cgroup namespace of its own: /proc/self/cgroup and the cgroup
     * mounts say "/", not the host's path of the container's cgroup (on
     * cgroup v1 Docker's default is the host's namespace).  API 1.41 and
     * later; an older daemon ignores the field. */
    cJSON_AddStringToObject(hc, "CgroupnsMode", "private");
    tmpfs = cJSON_AddObjectToObject(hc, "Tmpfs");
    cJSON_AddStringToObject(tmpfs, "/tmp", tmpopt);
    mounts = cJSON_AddArrayToObject(hc, "Mounts");
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "Type", "volume");
    cJSON_AddStringToObject(m, "Target", "/work");
    if (sb->work_volume[0]) {
        /* Podman ignores a mount's volume options: the volume was made
         * beforehand (work_volume_create). */
        cJSON_AddStringToObject(m, "Source", sb->work_volume);
        cJSON_AddItemToArray(mounts, m);
        goto run_hutch;
    }
    /* Labelled like its container, so that a leftover is recognisable. */
    volume_labels(st, m, n);
    vo = cJSON_GetObjectItem(m, "VolumeOptions");
    dc = cJSON_AddObjectToObject(vo, "DriverConfig");
    cJSON_AddStringToObject(dc, "Name", "local");
    opts = cJSON_AddObjectToObject(dc, "Options");
    cJSON_AddStringToObject(opts, "type", "tmpfs");
    cJSON_AddStringToObject(opts, "device", "tmpfs");
    cJSON_AddStringToObject(opts, "o", workopt);
    cJSON_AddItemToArray(mounts, m);
run_hutch:
    /* /run/hutch: init and the runners, PUT before the start (the archive
     * endpoint writes into volumes, not into a read-only root).  The
     * engine's own disk, removed with the container. */
    m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "Type", "volume");
    cJSON_AddStringToObject(m, "Target", "/run/hutch");
    volume_labels(st, m, n);
    cJSON_AddItemToArray(mounts, m);
    if (sb->egress_dir[0]) {
        /* The egress socket's directory (egress_make): read-only, and
         * propagating nothing either way. */
        cJSON *bo;
        m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "Type", "bind");
        cJSON_AddStringToObject(m, "Source", sb->egress_dir);
        cJSON_AddStringToObject(m, "Target", DK_EGRESS_DIR);
        cJSON_AddBoolToObject(m, "ReadOnly", 1);
        bo = cJSON_AddObjectToObject(m, "BindOptions");
        cJSON_AddStringToObject(bo, "Propagation", "rprivate");
        cJSON_AddItemToArray(mounts, m);
    }
    /* Everything init says travels over the attach stream: nothing is
     * logged on the engine's disk. */
    log = cJSON_AddObjectToObject(hc, "LogConfig");
    cJSON_AddStringToObject(log, "Type", "none");
    out = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return out;
}

/* sbio_wait_hello's question: does the container still run? */
static int still_running(void *arg, struct hutch_err *err)
{
    struct dk_sandbox *sb = arg;
    struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
    char path[160], logs[700];
    cJSON *j, *state;
    long status = 0;
    int running;

    snprintf(path, sizeof(path), "/containers/%s/json", sb->id);
    if (dk_json(&sb->eng->api, "GET", path, NULL, &status, &b, err) < 0) {
        hutch_buf_free(&b);
        if (status != 404)
            return err->code ? err->code : -EIO;
        /* Ended, and removed by the engine already (AutoRemove): its
         * status went with it; what init said on its way out did not. */
        dk_attach_diag(sb->att, logs, sizeof(logs));
        hutch_err_set(err, -EIO,
                      "the container exited (and was removed) before its init said "
                      "hello%s%s",
                      logs[0] ? ": " : "", logs);
        return -ESRCH;
    }
    j = cJSON_ParseWithLength(b.data, b.len);
    state = cJSON_GetObjectItem(j, "State");
    running = cJSON_IsTrue(cJSON_GetObjectItem(state, "Running"));
    if (!running) {
        double code = cJSON_GetNumberValue(cJSON_GetObjectItem(state, "ExitCode"));
        dk_attach_diag(sb->att, logs, sizeof(logs));
        hutch_err_set(err, -EIO,
                      "the container exited (status %d) before its init "
                      "said hello%s%s",
                      (int)code, logs[0] ? ": " : "", logs);
    }
    cJSON_Delete(j);
    hutch_buf_free(&b);
    return running ? 0 : -ESRCH;
}

/* The OCI runtimes that run a container's processes on the engine's own
 * kernel, so that its /work is the very tmpfs the engine mounted on its
 * host (a VM's or gVisor's kernel sees its own file systems, and may hold
 * writes the host does not see yet). */
static const char *const same_kernel_runtimes[] = {"runc", "crun",
                                                   "io.containerd.runc.v2"};
static const size_t n_same =
    sizeof(same_kernel_runtimes) / sizeof(same_kernel_runtimes[0]);

/* Where sb's engine keeps /work on the host, when hutch may look there
 * (docker_get): an engine on this host (a unix socket) that runs the
 * container with runc or crun, and a /work volume whose Source (the local
 * driver's Mountpoint) is an absolute path.  Asked once, after hello, from
 * the engine's own description of the container: sb->work_host, else
 * sb->work_host_why.  Only a candidate: what a path of the engine's names
 * here may be another directory (a rootless daemon's or Docker Desktop's
 * are in another mount namespace or machine, and a daemon may lie), so
 * docker_get proves it is /work before it reads anything there. */
static void work_host_find(struct dk_sandbox *sb)
{
    struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
    struct hutch_err err = HUTCH_ERR_INIT;
    const char *runtime = NULL, *src = NULL;
    char path[160];
    cJSON *j = NULL, *m;
    int same = 0;

    sb->work_host[0] = '\0';
    if (!sb->eng->api.unix_path[0]) {
        snprintf(sb->work_host_why, sizeof(sb->work_host_why),
                 "the engine is not on this host");
        goto out;
    }
    snprintf(path, sizeof(path), "/containers/%s/json", sb->id);
    if (dk_json(&sb->eng->api, "GET", path, NULL, NULL, &b, &err) < 0) {
        snprintf(sb->work_host_why, sizeof(sb->work_host_why),
                 "the engine did not describe the container (%.100s)", err.msg);
        goto out;
    }
    j = cJSON_ParseWithLength(b.data, b.len);
    runtime = cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetObjectItem(j, "HostConfig"), "Runtime"));
    for (size_t i = 0; runtime && i < n_same; i++)
        same |= strcmp(runtime, same_kernel_runtimes[i]) == 0;
    if (!same) {
        snprintf(sb->work_host_why, sizeof(sb->work_host_why),
                 "the container's runtime (%.40s) may not run on this kernel",
                 runtime ? runtime : "unnamed");
        goto out;
    }
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(j, "Mounts"))
    {
        const char *dst = cJSON_GetStringValue(cJSON_GetObjectItem(m, "Destination"));
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(m, "Type"));
        if (dst && type && !strcmp(dst, "/work") && !strcmp(type, "volume"))
            src = cJSON_GetStringValue(cJSON_GetObjectItem(m, "Source"));
    }
    if (!src || src[0] != '/' || strlen(src) >= sizeof(sb->work_host))
        snprintf(sb->work_host_why, sizeof(sb->work_host_why),
                 "the engine names no host path of /work");
    else
        memcpy(sb->work_host, src, strlen(src) + 1);
out:
    cJSON_Delete(j);
    hutch_buf_free(&b);
}

/* A slot no live container of this process holds (the next free one after
 * the last taken, so a uid is not reused at once), or, when all are held,
 * the one after the last taken, shared.  Sets sb->uid_slot and sb->uid. */
static void uid_take(struct dk_sandbox *sb)
{
    struct dk_state *st = sb->st;
    unsigned start = (unsigned)__atomic_load_n(&st->seq, __ATOMIC_RELAXED);
    unsigned k = start % DK_UID_SLOTS;

    for (unsigned i = 0; i < DK_UID_SLOTS; i++) {
        unsigned want = 0, c = (start + i) % DK_UID_SLOTS;
        if (__atomic_compare_exchange_n(&st->uid_users[c], &want, 1, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            k = c;
            goto taken;
        }
    }
    __atomic_add_fetch(&st->uid_users[k], 1, __ATOMIC_ACQ_REL);
    st->host->log(HUTCH_LOG_WARN, "docker",
                  "more than %u live containers: two share host uid %u", DK_UID_SLOTS,
                  DK_UID_BASE + ((unsigned)getpid() << 8 | k));
taken:
    sb->uid_slot = (int)k;
    sb->uid = DK_UID_BASE + ((unsigned)getpid() << 8 | k);
}

/* Podman's service ignores the options of a volume a container's mount
 * asks for (/work would be an uncapped directory the sandbox user cannot
 * write): on Podman, /work is a volume made first, with the same tmpfs
 * options (the size in pages: Podman reads "size=" as an XFS quota),
 * labelled like the container, and removed after it. */
static int work_volume_create(struct dk_state *st, struct dk_sandbox *sb,
                              const struct hutch_sandbox_class *cls, unsigned long n,
                              struct hutch_err *err)
{
    char o[160], *body;
    cJSON *v = cJSON_CreateObject(), *opts, *labels;
    int r;

    snprintf(sb->work_volume, sizeof(sb->work_volume), "hutch-%s-%lu-work",
             st->instance, n);
    snprintf(o, sizeof(o), "nr_blocks=%llu,uid=%u,gid=%u,mode=0755,nosuid,nodev",
             (box_work_bytes(cls) + 4095) / 4096, sb->uid, sb->uid);
    cJSON_AddStringToObject(v, "Name", sb->work_volume);
    cJSON_AddStringToObject(v, "Driver", "local");
    opts = cJSON_AddObjectToObject(v, "DriverOpts");
    cJSON_AddStringToObject(opts, "type", "tmpfs");
    cJSON_AddStringToObject(opts, "device", "tmpfs");
    cJSON_AddStringToObject(opts, "o", o);
    labels = cJSON_AddObjectToObject(v, "Labels");
    cJSON_AddStringToObject(labels, DK_OWNER_LABEL, st->owner);
    cJSON_AddStringToObject(labels, "hutch.instance", st->instance);
    body = cJSON_PrintUnformatted(v);
    cJSON_Delete(v);
    if (!body) {
        sb->work_volume[0] = '\0';
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    r = dk_json(&sb->eng->api, "POST", "/volumes/create", body, NULL, NULL, err);
    free(body);
    if (r < 0)
        sb->work_volume[0] = '\0';
    return r;
}

static void work_volume_remove(struct dk_sandbox *sb)
{
    struct hutch_err err = {0};
    char path[256];
    long status = 0;

    if (!sb->work_volume[0])
        return;
    snprintf(path, sizeof(path), "/volumes/%s?force=1", sb->work_volume);
    if (dk_json(&sb->eng->api, "DELETE", path, NULL, &status, NULL, &err) < 0 &&
        status != 404)
        sb->st->host->log(HUTCH_LOG_WARN, "docker", "removing volume %s: %s",
                          sb->work_volume, err.msg);
    sb->work_volume[0] = '\0';
}

/* --- egress ------------------------------------------------------------ */

/* Egress reaches a container only through a unix socket on this host that
 * its engine bind-mounts: the attach stream carries init's four streams,
 * not connections.  So on an engine of this host (a unix socket) each
 * sandbox gets a directory of its own, st->dir/N, holding the egress
 * socket (sbio_egress_listen), mounted read-only at DK_EGRESS_DIR; init's
 * forwarder (--egress) connects to it once per connection of the
 * program's to 127.0.0.1:HUTCH_EGRESS_PORT.  A remote engine's sandboxes
 * get none (egress_fd -1), and the log says why.
 *
 * What the container gains: that directory, with one socket in it.  The
 * program does not see it in its view (plugins/init/init.c: /run there is
 * a tmpfs of its own); where the engine refused the view, it sees it, and
 * the directory's host path in its mountinfo, but the socket is root's,
 * mode 0600, and the program's uid is another one, without capabilities
 * (had it a way to connect, it would reach the same proxy, with the same
 * judge and caps).  A hutch that is not root makes it 0666: the container's
 * root, without CAP_DAC_OVERRIDE, is not its owner then, and only the view
 * stands between the program and the socket.
 *
 * A path of the engine's may be another directory than hutch's (a
 * rootless daemon's or Docker Desktop's mount namespace or machine), or
 * the socket may not be reachable from the container (gVisor as Docker's
 * runtime, a user-namespace remap): init connects once before hello and
 * says whether it could, and egress_prove takes it only with the
 * connection that reached this very listener. */

/* Drops sb's egress directory and listener (a start that failed, or the
 * sandbox's end; the listener is the core's once start() returned). */
static void egress_drop(struct dk_sandbox *sb)
{
    char path[PATH_MAX + 16];

    if (sb->egress_lfd >= 0)
        close(sb->egress_lfd);
    sb->egress_lfd = -1;
    if (!sb->egress_dir[0])
        return;
    snprintf(path, sizeof(path), "%s/" SBIO_EGRESS, sb->egress_dir);
    unlink(path);
    rmdir(sb->egress_dir);
    sb->egress_dir[0] = '\0';
}

/* sb's egress directory and listener, on an engine of this host; a
 * failure costs egress, not the sandbox. */
static void egress_make(struct dk_state *st, struct dk_sandbox *sb, unsigned long n)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    int fd;

    if (!sb->eng->api.unix_path[0]) {
        st->host->log(HUTCH_LOG_DEBUG, "docker",
                      "%s: no egress: the engine %s is not on this host (its "
                      "containers cannot reach a socket of hutch's)",
                      sb->label, sb->eng->name);
        return;
    }
    snprintf(sb->egress_dir, sizeof(sb->egress_dir), "%s/%lu", st->dir, n);
    if (mkdir(sb->egress_dir, 0755) < 0) {
        st->host->log(HUTCH_LOG_WARN, "docker", "%s: no egress: creating %s: %s",
                      sb->label, sb->egress_dir, strerror(errno));
        sb->egress_dir[0] = '\0';
        return;
    }
    chmod(sb->egress_dir, 0755); /* whatever the umask: init must search it */
    fd = sbio_egress_listen(sb->egress_dir, geteuid() == 0 ? 0600 : 0666, &err);
    if (fd < 0) {
        st->host->log(HUTCH_LOG_WARN, "docker", "%s: no egress: %s", sb->label,
                      err.msg);
        egress_drop(sb);
        return;
    }
    sb->egress_lfd = fd;
    sb->egress_init = 1; /* create_body gives init --egress */
}

/* Closes init's port 127.0.0.1:HUTCH_EGRESS_PORT, where init listens
 * (--egress), so that the program's connections are refused: the job has
 * no egress (the core closed the listener already), or the sandbox none. */
static int egress_off(struct dk_sandbox *sb, struct hutch_err *err)
{
    int r;

    if (!sb->egress_init)
        return 0;
    r = sbio_egress_off(&sb->io, DK_STOP_MS);
    if (r < 0)
        return hutch_err_set(err, r,
                             "%s: the container's init did not close its egress port: "
                             "%s",
                             sb->label, strerror(-r));
    sb->egress_init = 0;
    return 0;
}

/* After hello: egress stands when init could connect and this listener got
 * that connection (then taken off it: the core must not see it); else
 * init stops listening.  0, or init did not answer. */
static int egress_prove(struct dk_state *st, struct dk_sandbox *sb,
                        struct hutch_err *err)
{
    int fd;

    if (sb->egress_lfd < 0)
        return 0;
    fd = sb->io.egress == 1 ? accept4(sb->egress_lfd, NULL, NULL, SOCK_CLOEXEC) : -1;
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    st->host->log(HUTCH_LOG_DEBUG, "docker", "%s: no egress: the container on %s %s",
                  sb->label, sb->eng->name,
                  sb->io.egress == 1  ? "reached another socket at its path (is the "
                                        "engine in another mount namespace?)"
                  : sb->io.egress < 0 ? "cannot connect to its socket"
                                      : "did not say whether it reaches its socket");
    if (sb->io.egress < 0)
        st->host->log(HUTCH_LOG_DEBUG, "docker", "%s: (init's connect: %s)", sb->label,
                      strerror(-sb->io.egress));
    egress_drop(sb);
    return egress_off(sb, err);
}

static void sandbox_free(struct dk_sandbox *sb)
{
    if (!sb)
        return;
    /* The container first, the attach stream after: closing it ends init
     * (StdinOnce), which would race the removal's kill. */
    if (sb->id[0]) {
        int r = dk_remove_container(sb->st, &sb->eng->api, sb->id);
        /* The engine is gone: its comeback sweeps what is left of this. */
        if (r < 0 && dk_engine_failure(r))
            dk_engine_down(&sb->st->engines, sb->eng, "a container's removal failed");
    }
    dk_attach_close(sb->att);
    sbio_close(&sb->io);
    egress_drop(sb);
    if (sb->eng)
        work_volume_remove(sb);
    dk_live_del(sb->st, sb);
    dk_engine_release(sb->eng);
    /* After the removal: the container's processes, charged to the uid,
     * are gone. */
    if (sb->uid_slot >= 0)
        __atomic_sub_fetch(&sb->st->uid_users[sb->uid_slot], 1, __ATOMIC_ACQ_REL);
    free(sb);
}

/* Creates and starts sb's container on sb->eng: 0 with sb ready, or an
 * error, after which sandbox_free() leaves nothing. */
static int start_on(struct dk_state *st, struct dk_sandbox *sb,
                    const struct hutch_sandbox_class *cls,
                    const struct hutch_start *how, struct hutch_err *err)
{
    const struct dk_api *api = &sb->eng->api;
    struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
    char path[PATH_MAX + 64];
    unsigned long n = __atomic_add_fetch(&st->seq, 1, __ATOMIC_RELAXED);
    long status = 0;
    char *body = NULL;
    cJSON *j;
    int r;

    /* Registered before anything of it exists on the engine (a sweep of
     * lost containers must not take it); a second attempt's number
     * replaces the first's, whose leftovers the failed engine's comeback
     * sweeps. */
    dk_live_set(st, sb, n);
    if (dk_engine_came_back(&st->engines, sb->eng))
        dk_lost_sweep(st, sb->eng);
    /* Between API calls: has the core given up on this start? */
    if (plugin_start_cancelled(how))
        goto cancelled;
    if (api->podman && (r = work_volume_create(st, sb, cls, n, err)) < 0)
        goto out;
    egress_make(st, sb, n);
    body = create_body(st, sb, cls, n);
    if (!body) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    snprintf(path, sizeof(path), "/containers/create?name=hutch-%s-%lu", st->instance,
             n);
    r = dk_json(api, "POST", path, body, &status, &b, err);
    if (r < 0 && status == 404) {
        r = hutch_err_set(
            err, -ENOENT,
            "the Docker image %s is missing%s%s: build it with 'make images' "
            "(as root, offline), or 'docker build --build-arg RUNTIME=\"%s\" "
            "-t %s images/' from hutch's source",
            sb->image, st->engines.n_env > 1 || sb->endpoints[0] ? " on " : "",
            st->engines.n_env > 1 || sb->endpoints[0] ? sb->eng->name : "",
            strcmp(cls->language, "python") ? "nodejs"
            : strstr(sb->image, "python-data:")
                ? "python3 python3-numpy python3-pandas "
                  "python3-matplotlib python3-munkres"
                : "python3",
            sb->image);
        goto out;
    }
    if (r < 0)
        goto out;
    j = cJSON_ParseWithLength(b.data, b.len);
    {
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(j, "Id"));
        if (id && strlen(id) < sizeof(sb->id) &&
            strspn(id, "0123456789abcdef") == strlen(id))
            memcpy(sb->id, id, strlen(id) + 1);
    }
    cJSON_Delete(j);
    if (!sb->id[0]) {
        r = hutch_err_set(err, -EPROTO, "Docker created a container without an Id");
        goto out;
    }
    if (plugin_start_cancelled(how))
        goto cancelled;
    /* init and the runners into /run/hutch, then the attach stream (before
     * the start: nothing init says is lost), then the start. */
    snprintf(path, sizeof(path), "/containers/%s/archive?path=/run/hutch", sb->id);
    {
        struct dk_boot *boot;
        r = boot_get(st, &boot, err);
        if (r == 0) {
            r = dk_call(api, "PUT", path, "application/x-tar", boot->tar, boot->len,
                        DK_CALL_MS, NULL, NULL, NULL, NULL, err);
            boot_put(boot);
        }
    }
    if (r == 0)
        r = dk_attach_open(&sb->att, api, sb->id, &sb->io, err);
    if (r < 0)
        goto out;
    if (plugin_start_cancelled(how))
        goto cancelled;
    snprintf(path, sizeof(path), "/containers/%s/start", sb->id);
    r = dk_json(api, "POST", path, NULL, NULL, NULL, err);
    if (r < 0)
        goto out;
    r = sbio_wait_hello(&sb->io, DK_READY_MS, still_running, sb, how, err);
    if (r == 0)
        work_host_find(sb);
    if (r == 0)
        r = egress_prove(st, sb, err);
    if (r == 0 && sb->io.noview[0] &&
        !__atomic_exchange_n(&st->noview_said, 1, __ATOMIC_RELAXED)) {
        char step[48] = "?";
        int e = 0;
        sscanf(sb->io.noview, "%47s %d", step, &e);
        st->host->log(HUTCH_LOG_WARN, "docker",
                      "the engine %s refused the program's view (%s: %s; a security "
                      "profile that forbids mounts, such as AppArmor's "
                      "docker-default?): its programs see the engine's paths in "
                      "/proc/self/mountinfo",
                      sb->eng->name, step, e > 0 ? strerror(e) : "unknown error");
    }
    goto out;
cancelled:
    r = hutch_err_set(err, -ECANCELED, "%s: sandbox start cancelled", sb->label);
out:
    free(body);
    hutch_buf_free(&b);
    return r;
}

static int docker_start(void *state, const struct hutch_sandbox_class *cls,
                        const struct hutch_start *how, struct hutch_sandbox **out,
                        struct hutch_err *err)
{
    struct dk_state *st = state;
    struct dk_sandbox *sb;
    struct dk_engine *failed = NULL;
    int r, preload;

    *out = NULL;
    if (strcmp(cls->language, "python") != 0 &&
        strcmp(cls->language, "javascript") != 0)
        return hutch_err_set(err, -EINVAL,
                             "the docker executor runs python and "
                             "javascript, not %s",
                             cls->language);
    {
        char fl[32], image[256], runtime[64], endpoints[1024];
        r = opt_get(dk_options, "docker", cls, "flavour", 0, fl, sizeof(fl), err);
        if (r == 0)
            r = box_flavour(fl, "docker", err);
        preload = plugin_preload(cls, r, how);
        if (r >= 0)
            dk_image_for(st->host->version, cls->language, r, image, sizeof(image));
        if (r >= 0)
            r = opt_get(dk_options, "docker", cls, "runtime", 0, runtime,
                        sizeof(runtime), err);
        if (r == 0 && strspn(runtime, "abcdefghijklmnopqrstuvwxyz0123456789._-") !=
                          strlen(runtime))
            r = hutch_err_set(
                err, -EINVAL,
                "the policy's executor_options.docker.runtime \"%s\" is not "
                "a runtime name (see 'hutch doctor' for the daemon's)",
                runtime);
        /* The class's own engines; without them, the registry's
         * (HUTCH_DOCKER_ENDPOINTS, read by dk_engines_init()). */
        if (r >= 0)
            r = opt_get(dk_options, "docker", cls, "endpoints", 0, endpoints,
                        sizeof(endpoints), err);
        if (r < 0)
            return r;
        sb = calloc(1, sizeof(*sb));
        if (!sb)
            return hutch_err_set(err, -ENOMEM, "out of memory");
        memcpy(sb->image, image, sizeof(image));
        memcpy(sb->runtime, runtime, sizeof(runtime));
        memcpy(sb->endpoints, endpoints, sizeof(endpoints));
        sb->preload = preload;
    }
    sb->st = st;
    sb->uid_slot = -1;
    sb->egress_lfd = -1;
    sb->pub.struct_size = sizeof(sb->pub);
    sb->pub.chan_fd = sb->pub.stdout_fd = sb->pub.stderr_fd = sb->pub.event_fd = -1;
    sb->pub.egress_fd = -1;
    snprintf(sb->label, sizeof(sb->label), "%s", plugin_start_label(how, ""));
    {
        static const int none[SBIO_NSOCK] = {-1, -1, -1, -1};
        sbio_adopt(&sb->io, none);
    }
    uid_take(sb);
    /* An engine that fails as a connection failure is marked down and the
     * start goes to another one, once: a start never waits on a dead
     * engine twice. */
    for (int attempt = 0;; attempt++) {
        struct hutch_err first = *err;
        int rp = dk_engines_pick(&st->engines, sb->endpoints, failed, &sb->eng, err);
        if (rp == -ENODEV) {
            *err = first; /* no other engine: the failure stands as it was */
            goto fail;
        }
        if (rp < 0) {
            r = rp;
            goto fail;
        }
        r = start_on(st, sb, cls, how, err);
        if (r == 0)
            break;
        /* A failure that may be the engine's absence: is it up at all?
         * (A slow start or a dead container is not the engine's fault.) */
        if (attempt == 1 || !dk_engine_failure(r) ||
            dk_engine_check(&st->engines, sb->eng) == 0)
            goto fail;
        st->host->log(HUTCH_LOG_WARN, "docker",
                      "%s: endpoint %s is down (%s): trying another", sb->label,
                      sb->eng->name, err->msg);
        failed = sb->eng;
        /* What the failed start left goes with the engine's comeback
         * (lost_sweep). */
        dk_attach_close(sb->att);
        sb->att = NULL;
        sbio_close(&sb->io);
        {
            static const int none[SBIO_NSOCK] = {-1, -1, -1, -1};
            sbio_adopt(&sb->io, none);
        }
        egress_drop(sb);
        sb->egress_init = 0;
        sb->id[0] = '\0';
        sb->work_volume[0] = '\0';
        dk_engine_release(sb->eng);
        sb->eng = NULL;
    }
    sb->pub.chan_fd = sb->io.fd[SBIO_CHAN];
    sb->pub.stdout_fd = sb->io.fd[SBIO_OUT];
    sb->pub.stderr_fd = sb->io.fd[SBIO_ERR];
    sb->pub.event_fd = sb->io.fd[SBIO_CTL];
    /* The core's from now on: egress_drop leaves it alone. */
    sb->pub.egress_fd = sb->egress_lfd;
    sb->egress_lfd = -1;
    *out = &sb->pub;
    return 0;
fail:
    /* sandbox_free() stops the pump and removes the container (with its
     * volumes): nothing of this start is left. */
    sandbox_free(sb);
    return r;
}

/* The log lines and the deadline depend on the job, and whether init
 * keeps listening on 127.0.0.1:HUTCH_EGRESS_PORT (egress_off). */
static int docker_assign(void *state, struct hutch_sandbox *pub,
                         const struct hutch_job *job, struct hutch_err *err)
{
    struct dk_sandbox *sb = (struct dk_sandbox *)pub;
    const char *label = plugin_job_label(job, "-");
    if (strcmp(label, sb->label) != 0)
        sb->st->host->log(HUTCH_LOG_DEBUG, "docker",
                          "%s (container %.12s): runs job %s", sb->label, sb->id,
                          label);
    snprintf(sb->label, sizeof(sb->label), "%s", label);
    sb->deadline_ms = plugin_job_deadline(job);
    return plugin_job_egress(job) ? 0 : egress_off(sb, err);
}

/* How long PUT or GET /archive may take.  Not a constant: the time an
 * archive takes is set by its size (capped: HUTCH_TAR_IN_MAX_BYTES in,
 * max_bytes and HUTCH_TAR_MAX_ENTRIES out) and by how busy the machine is,
 * and a fixed deadline that fits a small tar on an idle machine fails a
 * legitimate 10,000-file result under load.  The execution's own deadline
 * is the budget the agent gave it: a transfer may use what is left of it,
 * and never less than an ordinary API call (DK_CALL_MS), so a program that
 * ended just before its deadline still gets its files.  A daemon that
 * hangs is still given up on, at that bound. */
static long archive_ms(const struct dk_sandbox *sb)
{
    uint64_t now = box_now_ms();
    uint64_t left = sb->deadline_ms > now ? sb->deadline_ms - now : 0;
    return left > DK_CALL_MS ? (long)left : DK_CALL_MS;
}

static int docker_put(void *state, struct hutch_sandbox *pub, const void *tar,
                      size_t len, struct hutch_err *err)
{
    struct dk_sandbox *sb = (struct dk_sandbox *)pub;
    struct hutch_buf owned = HUTCH_BUF_INIT(len + (1u << 20));
    char path[160];
    int r;

    /* The daemon keeps the owners written in the tar: re-pack the core's
     * tar with the sandbox user as owner (copyUIDGID would look the user up
     * on the host).  Uncompressed only: a compressed upload makes the
     * daemon run a decompressor as host root (GHSA-x86f-5xw2-fm2r). */
    struct hutch_archive_limits lim = {
        .struct_size = sizeof(lim),
        .max_bytes = len, /* file data cannot exceed the tar holding it */
        .max_entries = HUTCH_TAR_MAX_ENTRIES,
        .max_path = HUTCH_TAR_MAX_PATH,
        .max_depth = HUTCH_TAR_MAX_DEPTH,
    };
    r = sb->st->host->archive_filter(tar, len, hutch_buf_write, &owned, &lim, sb->uid,
                                     sb->uid, err);
    if (r == 0) {
        snprintf(path, sizeof(path), "/containers/%s/archive?path=/work", sb->id);
        r = dk_call(&sb->eng->api, "PUT", path, "application/x-tar", owned.data,
                    owned.len, archive_ms(sb), NULL, NULL, NULL, NULL, err);
    }
    hutch_buf_free(&owned);
    return r;
}

static int docker_reap(void *state, struct hutch_sandbox *pub, struct hutch_exit *ex,
                       struct hutch_err *err)
{
    struct dk_sandbox *sb = (struct dk_sandbox *)pub;
    int r = sbio_poll_exit(&sb->io);

    if (r == 0)
        return -EAGAIN;
    if (r == 1) {
        sbio_exit_from_status(sb->io.status, sb->io.oom, ex);
        return 0;
    }
    if (sb->killed) {
        /* We killed it (timeout, cancellation): the core knows why. */
        sbio_exit_from_status(9, 0, ex);
        return 0;
    }
    /* init is gone without a word: the container was killed from outside
     * or the daemon restarted under it.  That is hutch's failure, not the
     * program's: an error (the core ends the run with exit 125). */
    {
        struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
        struct hutch_err ierr = {0};
        char path[160];
        /* Which engine, when there is a choice: its daemon, its containers
         * and their processes may die in any order (a crash), so either
         * message may be the one that explains it. */
        int named = sb->st->engines.n_env > 1 || sb->endpoints[0];
        const char *sp = named ? " " : "", *eng = named ? sb->eng->name : "";
        long status = 0;
        int rj;
        snprintf(path, sizeof(path), "/containers/%s/json", sb->id);
        rj = dk_json(&sb->eng->api, "GET", path, NULL, &status, &b, &ierr);
        if (rj < 0 && status == 404) {
            /* The engine removed it as it ended (AutoRemove): whether it
             * was killed for memory went with it. */
            r = hutch_err_set(err, -EIO,
                              "the container %.12s ended under the program and is "
                              "gone: was it stopped from outside, or the Docker "
                              "daemon%s%s restarted?",
                              sb->id, sp, eng);
        } else if (rj == 0) {
            cJSON *j = cJSON_ParseWithLength(b.data, b.len);
            cJSON *s = cJSON_GetObjectItem(j, "State");
            const char *err_s = cJSON_GetStringValue(cJSON_GetObjectItem(s, "Error"));
            int oom = cJSON_IsTrue(cJSON_GetObjectItem(s, "OOMKilled"));
            if (oom) {
                sbio_exit_from_status(SIGKILL, 1, ex);
                r = 0;
            } else {
                r = hutch_err_set(
                    err, -EIO,
                    "the container %.12s ended under the program%s%s: was "
                    "it stopped from outside, or the Docker daemon%s%s restarted?",
                    sb->id, err_s && *err_s ? ": " : "", err_s ? err_s : "", sp, eng);
            }
            cJSON_Delete(j);
        } else {
            r = hutch_err_set(err, -EIO,
                              "the container %.12s ended under the program and the "
                              "Docker daemon%s%s no longer answers (%s)",
                              sb->id, sp, eng, ierr.msg);
            if (dk_engine_failure(ierr.code))
                dk_engine_down(&sb->st->engines, sb->eng, ierr.msg);
        }
        hutch_buf_free(&b);
    }
    return r;
}

/* After sbio_stop: the container's /work, opened through the host path
 * its engine named (work_host_find), when that is /work itself: the same
 * device and inode as init said (io.work), the same change time to the
 * nanosecond, owned by the sandbox's uid and gid; and its out reachable
 * as /proc/self/fd/FD/out, the path the packer is given.  The fd, or -1
 * with `why` saying why not.
 *
 * On one kernel a device number names one mounted file system and an
 * inode number one file of it, so equal numbers are the same directory,
 * whatever the path that led to it, and the fd holds that directory
 * whatever the path names later.  The change time and the owner make a
 * match by chance (another kernel's numbers: an engine in a VM whose
 * socket is forwarded here) or by a lying engine (one naming a directory
 * of this host it cannot see) hopeless: the uid is one no account of the
 * host has (DK_UID_BASE), the time the one /work took when the program
 * last changed it. */
static int work_host_open(struct dk_sandbox *sb, char *why, size_t len)
{
    const struct sbio_work *w = &sb->io.work;
    char out[48];
    struct stat st, a, b;
    int fd;

    if (!sb->work_host[0]) {
        snprintf(why, len, "%s", sb->work_host_why);
        return -1;
    }
    if (!w->known) {
        snprintf(why, len, "the sandbox's init did not say what /work is");
        return -1;
    }
    fd = open(sb->work_host, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "%.600s: %s", sb->work_host, strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) < 0 || major(st.st_dev) != w->major ||
        minor(st.st_dev) != w->minor || (unsigned long long)st.st_ino != w->ino ||
        (long long)st.st_ctim.tv_sec != w->ctime_sec ||
        (long)st.st_ctim.tv_nsec != w->ctime_nsec || st.st_uid != sb->uid ||
        st.st_gid != sb->uid) {
        snprintf(why, len,
                 "%.600s is not the container's /work (device, inode, change time "
                 "or owner differ)",
                 sb->work_host);
        close(fd);
        return -1;
    }
    snprintf(out, sizeof(out), "/proc/self/fd/%d/out", fd);
    if (fstatat(fd, "out", &a, AT_SYMLINK_NOFOLLOW) < 0 || stat(out, &b) < 0 ||
        !S_ISDIR(a.st_mode) || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
        snprintf(why, len, "/work/out cannot be reached through /proc/self/fd");
        close(fd);
        return -1;
    }
    return fd;
}

/* Packs /work/out from the container's /work open at fd (work_host_open)
 * as the gVisor executor packs its own: the core's packer, which never
 * follows a symbolic link and skips what is not a file or a directory,
 * within `lim`.  Nothing in the container can change /work meanwhile: init
 * has killed (and reaped) every other process, and itself never touches
 * /work, so what was proven is what is packed; the walk starts from the
 * fd, not from the engine's path, and no link is followed below it, so
 * nothing outside /work is read.  Owners 0:0 and modes 0644/0755, as
 * archive_filter gives the API's tar. */
static int pack_from_host(struct dk_sandbox *sb, int fd, hutch_write_fn write_fn,
                          void *arg, const struct hutch_archive_limits *lim,
                          struct hutch_err *err)
{
    char out[48];
    char *p;
    int r;

    snprintf(out, sizeof(out), "/proc/self/fd/%d/out", fd);
    r = sb->st->host->archive_pack_dir(out, write_fn, arg, lim, err);
    /* The packer names the path it was given: say the program's. */
    if (r < 0 && (p = strstr(err->msg, out))) {
        char tail[sizeof(err->msg)];
        snprintf(tail, sizeof(tail), "%s", p + strlen(out));
        snprintf(p, sizeof(err->msg) - (size_t)(p - err->msg), "/work/out%s", tail);
    }
    return r;
}

static int docker_get(void *state, struct hutch_sandbox *pub, hutch_write_fn write_fn,
                      void *arg, uint64_t max_bytes, struct hutch_err *err)
{
    struct dk_sandbox *sb = (struct dk_sandbox *)pub;
    struct hutch_archive_limits lim = {
        .struct_size = sizeof(lim),
        .max_bytes = max_bytes,
        .max_entries = HUTCH_TAR_MAX_ENTRIES,
        .max_path = HUTCH_TAR_MAX_PATH,
        .max_depth = HUTCH_TAR_MAX_DEPTH,
    };
    /* Tar headers and padding on top of the file data. */
    struct hutch_buf b =
        HUTCH_BUF_INIT((size_t)max_bytes + (max_bytes >> 3) + (16u << 20));
    char path[160], why[HUTCH_ERR_MSG];
    long status = 0, ms;
    int r, fd;

    r = sbio_stop(&sb->io, DK_STOP_MS);
    if (r < 0)
        return hutch_err_set(err, r,
                             "the sandbox ended before its files could be collected "
                             "(%s)",
                             strerror(-r));
    /* The daemon resolves the path as root, following symbolic links: a
     * /work/out the program turned into a link to /etc would hand over
     * the image's /etc/shadow.  init looked at it after it killed every
     * other process, so what it saw is what the daemon will find. */
    r = sbio_out_check(&sb->io, err);
    if (r != 0)
        return r < 0 ? r : 0;
    /* On this host, without the endpoint's round trip (tens of ms) when the
     * engine's directory behind /work is proven to be it. */
    fd = work_host_open(sb, why, sizeof(why));
    if (fd >= 0) {
        r = pack_from_host(sb, fd, write_fn, arg, &lim, err);
        close(fd);
        sb->st->host->log(HUTCH_LOG_DEBUG, "docker",
                          "%s (container %.12s): result files packed from /work on "
                          "this host (%s)",
                          sb->label, sb->id, sb->work_host);
        return r;
    }
    sb->st->host->log(HUTCH_LOG_DEBUG, "docker",
                      "%s (container %.12s): result files through the engine's "
                      "archive endpoint: %s",
                      sb->label, sb->id, why);
    snprintf(path, sizeof(path), "/containers/%s/archive?path=/work/out/.", sb->id);
    ms = archive_ms(sb);
    r = dk_call(&sb->eng->api, "GET", path, NULL, NULL, 0, ms, &status, &b, NULL, NULL,
                err);
    if (r < 0 && status == 404) {
        r = 0; /* no /work/out: no files */
    } else if (r == -ETIMEDOUT) {
        r = hutch_err_set(err, -ETIMEDOUT,
                          "Docker did not hand over the result files within %ld ms "
                          "(what was left of the execution's timeout, or at least %d "
                          "ms)",
                          ms, DK_CALL_MS);
    } else if (r == -E2BIG) {
        r = hutch_err_set(err, -E2BIG, "the result files exceed %llu bytes",
                          (unsigned long long)max_bytes);
    } else if (r == 0 && b.len) {
        r = sb->st->host->archive_filter(b.data, b.len, write_fn, arg, &lim, 0, 0, err);
    }
    hutch_buf_free(&b);
    return r;
}

static void docker_kill(void *state, struct hutch_sandbox *pub)
{
    struct dk_sandbox *sb = (struct dk_sandbox *)pub;
    struct hutch_err err = {0};
    char path[160];
    long status = 0;

    if (sb->killed)
        return;
    sb->killed = 1;
    snprintf(path, sizeof(path), "/containers/%s/kill?signal=KILL", sb->id);
    if (dk_json(&sb->eng->api, "POST", path, NULL, &status, NULL, &err) < 0 &&
        status != 409 && status != 404)
        sb->st->host->log(HUTCH_LOG_WARN, "docker", "killing container %.12s: %s",
                          sb->id, err.msg);
}

/* The container's CpuShares (the engine writes its cgroup's cpu.shares or
 * cpu.weight): one update request, 1024 for the default weight of 100. */
static int docker_cpu_weight(void *state, struct hutch_sandbox *pub, uint32_t weight,
                             struct hutch_err *err)
{
    struct dk_sandbox *sb = (struct dk_sandbox *)pub;
    char path[160], body[64];
    long status = 0;
    int r;

    (void)state;
    if ((r = box_cpu_weight_check(weight, err)) < 0)
        return r;
    snprintf(path, sizeof(path), "/containers/%s/update", sb->id);
    snprintf(body, sizeof(body), "{\"CpuShares\":%u}", box_cpu_shares(weight));
    return dk_json(&sb->eng->api, "POST", path, body, &status, NULL, err);
}

static void docker_destroy(void *state, struct hutch_sandbox *pub)
{
    sandbox_free((struct dk_sandbox *)pub);
}

static const struct hutch_executor docker_executor = {
    .abi = HUTCH_EXECUTOR_ABI,
    .struct_size = sizeof(struct hutch_executor),
    .name = "docker",
    .summary =
        "a fresh hardened container per execution, through the Docker Engine API",
    .version = PACKAGE_VERSION,
    .caps = HUTCH_CAP_ARCHIVE | HUTCH_CAP_PRESTART | HUTCH_CAP_CONCURRENT |
            HUTCH_CAP_EGRESS,
    .probe = docker_probe,
    .open = docker_open,
    .start = docker_start,
    .assign = docker_assign,
    .put_archive = docker_put,
    .reap = docker_reap,
    .get_archive = docker_get,
    .kill = docker_kill,
    .destroy = docker_destroy,
    .close = docker_close,
    .doctor = docker_doctor,
    .runtime = docker_runtime,
    .packages = docker_packages,
    .sweep = docker_sweep,
    .cpu_weight = docker_cpu_weight,
    .options = dk_options,
};

HUTCH_EXECUTOR_EXPORT const struct hutch_executor *hutch_executor_entry(void)
{
    return &docker_executor;
}
