/* plugin.c — the plugin loader.
 *
 * Loading hygiene: absolute paths inside the plugin directory only,
 * RTLD_NOW | RTLD_LOCAL so a broken plugin fails here and not mid-run, the
 * ABI version and struct size checked before any function pointer is
 * touched, and every failure kept as a reason for `hutch plugins`. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "caps.h"
#include "hutch_archive.h"
#include "log.h"
#include "plugin.h"
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
}

const char *hutch_plugin_dir(const char *flag)
{
    const char *env = getenv("HUTCH_PLUGIN_DIR");
    if (flag && *flag)
        return flag;
    if (env && *env)
        return env;
    return HUTCH_PLUGIN_DIR;
}

const char *hutch_runner_dir(void)
{
    const char *env = getenv("HUTCH_RUNNER_DIR");
    return env && *env ? env : HUTCH_RUNNER_DIR;
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

/* Everything a struct hutch_executor of ABI 1 must have, checked without
 * calling anything. */
static int check_executor(const struct hutch_executor *ex, char *reason, size_t len)
{
    size_t need = offsetof(struct hutch_executor, close) + sizeof(ex->close);
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
    if (!ex->name || !*ex->name || strlen(ex->name) > HUTCH_MAX_EXECUTOR_NAME) {
        snprintf(reason, len, "the executor has no valid name");
        return -EPROTO;
    }
    if (!ex->probe || !ex->open || !ex->start || !ex->put_archive || !ex->reap ||
        !ex->get_archive || !ex->kill || !ex->destroy || !ex->close) {
        snprintf(reason, len, "the executor leaves a required operation NULL");
        return -EPROTO;
    }
    return 0;
}

static void load_one(struct hutch_plugins *ps, struct hutch_plugin *p,
                     const struct hutch_host *host)
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
    if (ex->probe(host, &err) < 0) {
        snprintf(p->reason, sizeof(p->reason), "%s",
                 err.msg[0] ? err.msg : "probe failed without a reason");
        return;
    }
    p->usable = 1;
}

int hutch_plugins_load(const char *dir, const struct hutch_host *host,
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
        load_one(ps, p, host);
        if (!p->usable)
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

int hutch_plugin_open(struct hutch_plugin *p, const struct hutch_host *host,
                      const struct hutch_config *cfg, struct hutch_err *err)
{
    int r;
    if (!p->usable)
        return hutch_err_set(err, -ENOENT, "executor \"%s\" is not usable: %s", p->name,
                             p->reason);
    if (p->opened)
        return 0;
    r = p->ex->open(host, cfg, &p->state, err);
    if (r < 0) {
        if (!err->msg[0])
            hutch_err_set(err, r, "executor \"%s\" failed to open", p->name);
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
