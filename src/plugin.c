/* plugin.c — the plugin loader.
 *
 * Loading hygiene: absolute paths inside the plugin directory only,
 * RTLD_NOW | RTLD_LOCAL so a broken plugin fails here and not mid-run, the
 * ABI version and struct size checked before any function pointer is
 * touched, and every failure kept as a reason for `hutch plugins`. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_lib.h"
#include "caps.h"
#include "hutch_archive.h"
#include "knobs.h"
#include "log.h"
#include "plugin.h"
/* Process identity is one helper, shared with the plugins' sweeps. */
#include "../plugins/common/proc.h"
#include "util.h"

void hutch_host_init(struct hutch_host *host, const char *runner_dir)
{
    memset(host, 0, sizeof(*host));
    host->abi = HUTCH_EXECUTOR_ABI;
    host->struct_size = sizeof(*host);
    host->version = PACKAGE_VERSION;
    host->runner_dir = runner_dir;
    host->log = hutch_log;
    host->archive_extract = hutch_archive_extract;
    host->archive_pack_dir = hutch_archive_pack_dir;
    host->archive_filter = hutch_archive_filter;
    /* This process's own binary, even when the file was replaced or
     * removed since (an upgrade): a helper runs the same code as hutch. */
    host->helper_exe = "/proc/self/exe";
}

const char *hutch_plugin_dir(const char *flag)
{
    const char *env = hutch_knob_str(HUTCH_KNOB_PLUGIN_DIR);
    if (flag && *flag)
        return flag;
    if (env)
        return env;
    return HUTCH_PLUGIN_DIR;
}

const char *hutch_runner_dir(void)
{
    const char *env = hutch_knob_str(HUTCH_KNOB_RUNNER_DIR);
    return env ? env : HUTCH_RUNNER_DIR;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n > m && strcmp(s + n - m, suffix) == 0;
}

/* Everything a struct hutch_executor of this ABI must have, checked without
 * calling anything.  Only `abi` is read before it is known to match: the
 * rest of an ABI 1 struct is laid out differently. */
static int check_executor(const struct hutch_executor *ex, char *reason, size_t len)
{
    size_t need = offsetof(struct hutch_executor, close) + sizeof(ex->close);
    if (ex->abi == 1) {
        snprintf(reason, len,
                 "built for executor ABI 1: ABI 1 is no longer loaded (this hutch "
                 "speaks ABI %u); rebuild the plugin against this hutch's "
                 "hutch-executor.h",
                 HUTCH_EXECUTOR_ABI);
        return -EPROTO;
    }
    if (ex->abi != HUTCH_EXECUTOR_ABI) {
        snprintf(reason, len,
                 "built for executor ABI %u, this hutch speaks ABI %u: rebuild the "
                 "plugin against this hutch's hutch-executor.h",
                 ex->abi, HUTCH_EXECUTOR_ABI);
        return -EPROTO;
    }
    if (ex->struct_size < need) {
        snprintf(reason, len, "struct hutch_executor is %u bytes, ABI %u needs %zu",
                 ex->struct_size, HUTCH_EXECUTOR_ABI, need);
        return -EPROTO;
    }
    if (!ex->name || !*ex->name || strlen(ex->name) > HUTCH_MAX_EXECUTOR_NAME ||
        strspn(ex->name,
               "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
            strlen(ex->name)) {
        /* It names the plugin's state directory: no '/', no "..". */
        snprintf(reason, len, "the executor has no valid name");
        return -EPROTO;
    }
    if (!ex->probe || !ex->open || !ex->start || !ex->assign || !ex->put_archive ||
        !ex->reap || !ex->get_archive || !ex->kill || !ex->destroy || !ex->close) {
        snprintf(reason, len, "the executor leaves a required operation NULL");
        return -EPROTO;
    }
    return hutch_plugin_options_check_table(ex, reason, len);
}

static void load_one(struct hutch_plugins *ps, struct hutch_plugin *p,
                     const struct hutch_host *host, int probe)
{
    hutch_executor_entry_fn entry;
    const struct hutch_executor *ex;
    struct hutch_err err = {0};

    dlerror();
    p->dl = dlopen(p->path, RTLD_NOW | RTLD_LOCAL);
    if (!p->dl) {
        const char *e = dlerror();
        snprintf(p->reason, sizeof(p->reason), "cannot load: %s",
                 e ? e : "dlopen failed");
        return;
    }
    *(void **)&entry = dlsym(p->dl, HUTCH_EXECUTOR_ENTRY);
    if (!entry) {
        snprintf(p->reason, sizeof(p->reason),
                 "not a hutch executor: no symbol %s() (see hutch-executor.h)",
                 HUTCH_EXECUTOR_ENTRY);
        return;
    }
    ex = entry();
    if (!ex) {
        snprintf(p->reason, sizeof(p->reason), "%s() returned NULL",
                 HUTCH_EXECUTOR_ENTRY);
        return;
    }
    if (check_executor(ex, p->reason, sizeof(p->reason)) < 0)
        return;
    for (size_t i = 0; i < ps->n; i++) {
        struct hutch_plugin *o = &ps->v[i];
        if (o != p && o->ex && strcmp(o->ex->name, ex->name) == 0) {
            snprintf(p->reason, sizeof(p->reason),
                     "executor name \"%s\" is already provided by %s", ex->name,
                     o->path);
            return;
        }
    }
    free(p->name);
    p->name = strdup(ex->name);
    p->ex = ex;
    if (!probe) {
        snprintf(p->reason, sizeof(p->reason), "not probed");
        return;
    }
    if (ex->probe(host, &err) < 0) {
        snprintf(p->reason, sizeof(p->reason), "%s",
                 err.msg[0] ? err.msg : "probe failed without a reason");
        return;
    }
    p->usable = 1;
}

static int load_dir(const char *dir, const struct hutch_host *host, int probe,
                    struct hutch_plugins **out, struct hutch_err *err)
{
    struct hutch_plugins *ps = NULL;
    char absdir[PATH_MAX];
    char **names = NULL;
    size_t nnames = 0;
    DIR *d = NULL;
    struct dirent *de;
    int r = 0;

    if (!realpath(dir, absdir))
        return hutch_err_set(err, -errno,
                             "plugin directory %s: %s (set --plugins DIR or "
                             "HUTCH_PLUGIN_DIR, or reinstall hutch)",
                             dir, strerror(errno));
    d = opendir(absdir);
    if (!d) {
        r = hutch_err_set(err, -errno, "cannot read plugin directory %s: %s", absdir,
                          strerror(errno));
        goto out;
    }
    names = calloc(HUTCH_MAX_PLUGINS, sizeof(*names));
    ps = calloc(1, sizeof(*ps));
    if (!names || !ps || !(ps->dir = strdup(absdir))) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.' || !has_suffix(de->d_name, ".so"))
            continue;
        if (nnames == HUTCH_MAX_PLUGINS) {
            hutch_warn("more than %d plugins in %s; ignoring the rest",
                       HUTCH_MAX_PLUGINS, absdir);
            break;
        }
        if (!(names[nnames] = strdup(de->d_name))) {
            r = hutch_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        nnames++;
    }
    qsort(names, nnames, sizeof(*names), by_name);
    ps->v = calloc(nnames ? nnames : 1, sizeof(*ps->v));
    if (!ps->v) {
        r = hutch_err_set(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < nnames; i++) {
        struct hutch_plugin *p = &ps->v[ps->n++];
        struct stat st;
        size_t len = strlen(absdir) + strlen(names[i]) + 2;
        p->path = malloc(len);
        p->name = strndup(names[i], strlen(names[i]) - 3);
        if (!p->path || !p->name) {
            r = hutch_err_set(err, -ENOMEM, "out of memory");
            goto out;
        }
        snprintf(p->path, len, "%s/%s", absdir, names[i]);
        if (stat(p->path, &st) < 0 || !S_ISREG(st.st_mode)) {
            snprintf(p->reason, sizeof(p->reason), "not a regular file");
            continue;
        }
        load_one(ps, p, host, probe);
        if (!p->usable && probe)
            hutch_debug("plugin %s: %s", p->path, p->reason);
    }
    *out = hutch_steal(&ps);
out:
    if (d)
        closedir(d);
    for (size_t i = 0; names && i < nnames; i++)
        free(names[i]);
    free(names);
    hutch_plugins_free(ps);
    return r;
}

int hutch_plugins_load(const char *dir, const struct hutch_host *host,
                       struct hutch_plugins **out, struct hutch_err *err)
{
    return load_dir(dir, host, 1, out, err);
}

int hutch_plugins_load_declared(const char *dir, const struct hutch_host *host,
                                struct hutch_plugins **out, struct hutch_err *err)
{
    return load_dir(dir, host, 0, out, err);
}

struct hutch_plugin *hutch_plugins_find(struct hutch_plugins *ps, const char *name)
{
    for (size_t i = 0; ps && i < ps->n; i++)
        if (ps->v[i].ex && strcmp(ps->v[i].ex->name, name) == 0)
            return &ps->v[i];
    for (size_t i = 0; ps && i < ps->n; i++)
        if (strcmp(ps->v[i].name, name) == 0)
            return &ps->v[i];
    return NULL;
}

/* --- the configuration open() gets ----------------------------------------- */

static pthread_once_t instance_once = PTHREAD_ONCE_INIT;
static char instance[17];

static void instance_init(void)
{
    hutch_random_id(instance);
}

const char *hutch_instance_id(void)
{
    pthread_once(&instance_once, instance_init);
    return instance;
}

/* mkdir if needed; then it must be a real directory of ours (or root's)
 * that nobody else can write: /tmp/hutch-UID could have been made by
 * another user first. */
static int own_dir(const char *path, mode_t mode, struct hutch_err *err)
{
    struct stat st;
    if (mkdir(path, mode) < 0 && errno != EEXIST)
        return hutch_err_set(err, -errno, "creating %s: %s", path, strerror(errno));
    if (lstat(path, &st) < 0)
        return hutch_err_set(err, -errno, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode) || (st.st_uid != geteuid() && st.st_uid != 0) ||
        (st.st_mode & 022))
        return hutch_err_set(err, -EPERM,
                             "%s is not a directory that only this user can write: "
                             "remove it (or set XDG_RUNTIME_DIR)",
                             path);
    return 0;
}

/* State directories of hutch processes that are gone and left them empty.
 * Non-empty ones are the plugin's to clean (it knows what is in them). */
static void remove_empty_leftovers(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    if (!d)
        return;
    while ((de = readdir(d))) {
        unsigned long long start;
        int pid;
        if (sscanf(de->d_name, "%d.%llu", &pid, &start) != 2 || pid <= 0)
            continue;
        if (box_process_gone(pid, start))
            (void)unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
    }
    closedir(d);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP || flag == FTW_DNR)
        (void)rmdir(path);
    else
        (void)unlink(path);
    return 0;
}

/* Everything under `dir` and `dir`: never following a symlink, never
 * crossing into another file system (a mount left there stays). */
static void remove_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    if (access(dir, F_OK) == 0)
        hutch_warn("could not remove all of %s", dir);
}

/* BASE (see plugin.h): /run/hutch as root, else $XDG_RUNTIME_DIR/hutch,
 * else /tmp/hutch-UID. */
static void state_base(char *base, size_t len)
{
    /* XDG_RUNTIME_DIR is not a knob (knobs.c): the session's own. */
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (geteuid() == 0)
        snprintf(base, len, "/run/hutch");
    else if (xdg && xdg[0] == '/' && strlen(xdg) + 8 < len)
        snprintf(base, len, "%s/hutch", xdg);
    else
        snprintf(base, len, "/tmp/hutch-%u", (unsigned)geteuid());
}

/* BASE/EXECUTOR/PID.START (see plugin.h), or PID.START.N when the same
 * executor is opened twice in one process. */
static int make_state_dir(struct hutch_plugin *p, struct hutch_err *err)
{
    char base[PATH_MAX], exdir[PATH_MAX + 80], path[PATH_MAX + 160];
    unsigned long long start = box_proc_start(getpid());
    int r;

    state_base(base, sizeof(base));
    snprintf(exdir, sizeof(exdir), "%s/%s", base, p->ex->name);
    r = own_dir(base, 0711, err);
    if (r == 0)
        r = own_dir(exdir, 0700, err);
    if (r < 0)
        return r;
    remove_empty_leftovers(exdir);
    for (unsigned n = 1;; n++) {
        if (n == 1)
            snprintf(path, sizeof(path), "%s/%d.%llu", exdir, (int)getpid(), start);
        else
            snprintf(path, sizeof(path), "%s/%d.%llu.%u", exdir, (int)getpid(), start,
                     n);
        if (mkdir(path, 0700) == 0)
            break;
        if (errno != EEXIST || n == 1000)
            return hutch_err_set(err, -errno, "creating %s: %s", path, strerror(errno));
    }
    p->state_dir = strdup(path);
    if (!p->state_dir) {
        (void)rmdir(path);
        return hutch_err_set(err, -ENOMEM, "out of memory");
    }
    return 0;
}

/* 1 when `dir` is a directory only this user (or root) can write, holding
 * the state directory of a hutch process that is gone. */
static int holds_gone(const char *dir)
{
    struct stat st;
    DIR *d;
    struct dirent *de;
    int gone = 0;

    if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) ||
        (st.st_uid != geteuid() && st.st_uid != 0) || (st.st_mode & 022))
        return 0;
    d = opendir(dir);
    while (d && !gone && (de = readdir(d))) {
        unsigned long long start;
        int pid;
        gone = sscanf(de->d_name, "%d.%llu", &pid, &start) == 2 && pid > 0 &&
               box_process_gone(pid, start);
    }
    if (d)
        closedir(d);
    return gone;
}

void hutch_plugins_sweep(struct hutch_plugins *ps, const struct hutch_host *host,
                         int always)
{
    char base[PATH_MAX], exdir[PATH_MAX + 80];

    state_base(base, sizeof(base));
    for (size_t i = 0; ps && i < ps->n; i++) {
        const struct hutch_plugin *p = &ps->v[i];
        if (!p->usable || !HUTCH_HAS_MEMBER(p->ex, struct hutch_executor, sweep) ||
            !p->ex->sweep)
            continue;
        snprintf(exdir, sizeof(exdir), "%s/%s", base, p->ex->name);
        if (!always && !holds_gone(exdir))
            continue;
        hutch_debug("executor %s: removing what gone hutch processes left (%s)",
                    p->ex->name, exdir);
        p->ex->sweep(host, exdir);
        remove_empty_leftovers(exdir);
    }
}

int hutch_plugin_open(struct hutch_plugin *p, const struct hutch_host *host,
                      struct hutch_err *err)
{
    struct hutch_config cfg = {.struct_size = sizeof(cfg)};
    int r;
    if (!p->usable)
        return hutch_err_set(err, -ENOENT, "executor \"%s\" is not usable: %s", p->name,
                             p->reason);
    if (p->opened)
        return 0;
    r = make_state_dir(p, err);
    if (r < 0) {
        char why[HUTCH_ERR_MSG];
        snprintf(why, sizeof(why), "%s", err->msg);
        return hutch_err_set(err, r, "executor \"%s\": its state directory: %s",
                             p->name, why);
    }
    cfg.instance_id = hutch_instance_id();
    cfg.state_dir = p->state_dir;
    /* libarchive is loaded before the first sandbox can exist, not by the
     * first result on whichever thread gets there.  A failure is kept and
     * reported, the same, at the first use. */
    {
        struct hutch_err lerr = HUTCH_ERR_INIT;
        (void)hutch_libarchive_load(&lerr);
    }
    r = p->ex->open(host, &cfg, &p->state, err);
    if (r < 0) {
        if (!err->msg[0])
            hutch_err_set(err, r, "executor \"%s\" failed to open", p->name);
        remove_tree(p->state_dir);
        free(p->state_dir);
        p->state_dir = NULL;
        return r;
    }
    p->opened = 1;
    return 0;
}

void hutch_plugins_free(struct hutch_plugins *ps)
{
    if (!ps)
        return;
    for (size_t i = 0; i < ps->n; i++) {
        struct hutch_plugin *p = &ps->v[i];
        if (p->opened)
            p->ex->close(p->state);
        if (p->state_dir)
            remove_tree(p->state_dir);
        free(p->state_dir);
        /* No dlclose(): a plugin may have left atexit handlers or threads
         * (libcurl, libseccomp); unmapping under them is worse than a
         * mapping that lives until exit. */
        free(p->path);
        free(p->name);
    }
    free(ps->v);
    free(ps->dir);
    free(ps);
}

int hutch_plugin_helper_main(int argc, char **argv)
{
    hutch_executor_entry_fn entry = NULL;
    const struct hutch_executor *ex = NULL;
    struct hutch_host host;
    struct hutch_err lerr = HUTCH_ERR_INIT;
    char reason[HUTCH_ERR_MSG] = "";
    void *dl;

    if (argc < 3 || argv[2][0] != '/') {
        fprintf(stderr,
                "hutch: %s wants an absolute plugin path (executor plugins "
                "run it, not people)\n",
                HUTCH_HELPER_VERB);
        return 2;
    }
    dl = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (dl)
        *(void **)&entry = dlsym(dl, HUTCH_EXECUTOR_ENTRY);
    if (entry)
        ex = entry();
    if (!ex || check_executor(ex, reason, sizeof(reason)) < 0) {
        fprintf(stderr, "hutch: %s %s: %s\n", HUTCH_HELPER_VERB, argv[2],
                reason[0] ? reason
                : !dl     ? dlerror()
                          : "not a hutch executor");
        return 2;
    }
    if (!HUTCH_HAS_MEMBER(ex, struct hutch_executor, helper) || !ex->helper) {
        fprintf(stderr, "hutch: %s %s: the executor has no helper()\n",
                HUTCH_HELPER_VERB, argv[2]);
        return 2;
    }
    hutch_host_init(&host, hutch_runner_dir());
    /* Loaded once here, so that the helper's children find it loaded. */
    (void)hutch_libarchive_load(&lerr);
    return ex->helper(&host, argc - 3, argv + 3);
}
