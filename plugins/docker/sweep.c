/* sweep.c — what sandboxes leave on the engines, and who removes it (see
 * docker.h).  Every container carries hutch.instance, hutch.execution and
 * hutch.owner (hostname:pid:start time) and is named hutch-INSTANCE-N; a
 * Podman /work volume is hutch-INSTANCE-N-work with the same labels.
 *
 *   open()         removes what hutch processes that are gone left: their
 *                  containers and volumes, and their socket directories
 *   close()        removes everything of this instance
 *   the ABI sweep  the same as open(), without open (hutch's own sweep)
 *   a comeback     an engine that answers again after it was down loses
 *                  what of this instance no live sandbox holds (a removal
 *                  that failed while it was down, a container created as
 *                  it died): dk_lost_sweep, from a start on that engine
 *
 * The registry of live sandboxes (st->live, under st->live_mu) is what a
 * comeback must not take.  Sweeps run on the caller's thread, one API call
 * at a time, and hold live_mu only to ask the registry.  A sandbox's own
 * life (creating and removing its container) lives in docker.c. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "api.h"
#include "box.h"
#include "docker.h"
#include "engines.h"
#include "sbio.h"

/* --- owners: is the hutch that made a container still alive? ----------- */

/* 1 when `owner` names a process of this host that no longer runs. */
static int owner_dead(const char *owner)
{
    char host[256] = "", mine[256] = "";
    unsigned long long start = 0;
    int pid = 0;
    const char *colon = strrchr(owner, ':');

    if (!colon || sscanf(colon + 1, "%llu", &start) != 1)
        return 0;
    {
        const char *c2 = colon - 1;
        while (c2 > owner && *c2 != ':')
            c2--;
        if (c2 <= owner || sscanf(c2 + 1, "%d", &pid) != 1 ||
            (size_t)(c2 - owner) >= sizeof(host))
            return 0;
        memcpy(host, owner, (size_t)(c2 - owner));
    }
    gethostname(mine, sizeof(mine) - 1);
    if (strcmp(host, mine) != 0)
        return 0; /* another machine's hutch: not ours to judge */
    return box_process_gone(pid, start);
}

/* 0, or the last error's code (dk_engine_failure() tells the engine's
 * absence). */
int dk_remove_container(struct dk_state *st, const struct dk_api *api, const char *id)
{
    struct hutch_err err = {0};
    char path[160];
    long status = 0;

    snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
    /* A container that stops by itself while the engine kills it (its init
     * ended) can make the removal fail once (Podman: "could not be
     * stopped ... state improper"): asked again, a few times.  404: gone;
     * 409: another removal of it is under way. */
    for (int i = 0; i < 3; i++) {
        err = (struct hutch_err){0};
        status = 0;
        if (dk_json(api, "DELETE", path, NULL, &status, NULL, &err) == 0 ||
            status == 404 || status == 409)
            return 0;
        if (status != 500)
            break;
        usleep(100000);
    }
    st->host->log(HUTCH_LOG_WARN, "docker", "removing container %.12s: %s", id,
                  err.msg);
    /* An answer (a status) is not the engine's absence. */
    return status ? -EPROTO : err.code ? err.code : -EIO;
}

/* The registry of live sandboxes (st->live): a sandbox is in it from
 * before its container is asked for until after its container is gone. */
void dk_live_set(struct dk_state *st, struct dk_sandbox *sb, unsigned long n)
{
    pthread_mutex_lock(&st->live_mu);
    if (!sb->n) {
        sb->live_prev = NULL;
        sb->live_next = st->live;
        if (st->live)
            st->live->live_prev = sb;
        st->live = sb;
    }
    sb->n = n;
    pthread_mutex_unlock(&st->live_mu);
}

void dk_live_del(struct dk_state *st, struct dk_sandbox *sb)
{
    pthread_mutex_lock(&st->live_mu);
    if (sb->n) {
        if (sb->live_prev)
            sb->live_prev->live_next = sb->live_next;
        else
            st->live = sb->live_next;
        if (sb->live_next)
            sb->live_next->live_prev = sb->live_prev;
        sb->n = 0;
    }
    pthread_mutex_unlock(&st->live_mu);
}

static int live_has(struct dk_state *st, unsigned long n)
{
    int r = 0;
    pthread_mutex_lock(&st->live_mu);
    for (struct dk_sandbox *i = st->live; i && !r; i = i->live_next)
        r = i->n == n;
    pthread_mutex_unlock(&st->live_mu);
    return r;
}

/* The N of "hutch-INSTANCE-N" + `suffix` (a leading '/' allowed), or 0. */
static unsigned long number_of(const struct dk_state *st, const char *name,
                               const char *suffix)
{
    size_t li = strlen(st->instance), ls = strlen(suffix), len;
    unsigned long n = 0;
    if (!name)
        return 0;
    name += name[0] == '/';
    len = strlen(name);
    if (len <= 6 + li + 1 + ls || strncmp(name, "hutch-", 6) != 0 ||
        strncmp(name + 6, st->instance, li) != 0 || name[6 + li] != '-' ||
        strcmp(name + len - ls, suffix) != 0)
        return 0;
    for (const char *c = name + 7 + li; c < name + len - ls; c++) {
        if (*c < '0' || *c > '9' || n > 1000000000000ul)
            return 0;
        n = n * 10 + (unsigned long)(*c - '0');
    }
    return n;
}

/* What sweep_engine() removes on one engine. */
enum sweep_what {
    SWEEP_GONE, /* what hutch processes that are gone left */
    SWEEP_MINE, /* everything of this instance (at close) */
    SWEEP_LOST, /* what of this instance no live sandbox holds (a comeback) */
};

/* Remove `what` on one engine: the containers and volumes removed. */
static unsigned sweep_engine(struct dk_state *st, const struct dk_api *api,
                             enum sweep_what what)
{
    struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
    struct hutch_err err = {0};
    char path[512];
    cJSON *list, *c;
    unsigned removed = 0;

    if (what != SWEEP_GONE)
        snprintf(path, sizeof(path),
                 "/containers/json?all=1&filters=%%7B%%22label%%22%%3A%%5B%%22"
                 "hutch.instance%%3D%s%%22%%5D%%7D",
                 st->instance);
    else
        snprintf(path, sizeof(path),
                 "/containers/json?all=1&filters=%%7B%%22label%%22"
                 "%%3A%%5B%%22" DK_OWNER_LABEL "%%22%%5D%%7D");
    if (dk_json(api, "GET", path, NULL, NULL, &b, &err) < 0) {
        st->host->log(HUTCH_LOG_WARN, "docker", "listing leftover containers: %s",
                      err.msg);
        hutch_buf_free(&b);
        return 0;
    }
    list = cJSON_ParseWithLength(b.data, b.len);
    cJSON_ArrayForEach(c, list)
    {
        const char *id = cJSON_GetStringValue(cJSON_GetObjectItem(c, "Id"));
        cJSON *labels = cJSON_GetObjectItem(c, "Labels");
        const char *owner =
            cJSON_GetStringValue(cJSON_GetObjectItem(labels, DK_OWNER_LABEL));
        unsigned long n = number_of(st,
                                    cJSON_GetStringValue(cJSON_GetArrayItem(
                                        cJSON_GetObjectItem(c, "Names"), 0)),
                                    "");
        if (!id || strlen(id) > 64)
            continue;
        if (what == SWEEP_GONE   ? !(owner && owner_dead(owner))
            : what == SWEEP_LOST ? !n || live_has(st, n)
                                 : 0)
            continue;
        if (what != SWEEP_LOST)
            st->host->log(HUTCH_LOG_INFO, "docker", "removing leftover container %.12s",
                          id);
        removed += dk_remove_container(st, api, id) == 0;
    }
    cJSON_Delete(list);

    /* Volumes labelled by a hutch that is gone (Podman's /work volumes are
     * named, and outlive a container removed without them), or by this
     * instance at its close or its engine's comeback. */
    hutch_buf_reset(&b);
    if (dk_json(api, "GET",
                "/volumes?filters=%7B%22label%22%3A%5B%22" DK_OWNER_LABEL "%22%5D%7D",
                NULL, NULL, &b, &err) < 0) {
        hutch_buf_free(&b);
        return removed;
    }
    list = cJSON_ParseWithLength(b.data, b.len);
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(list, "Volumes"))
    {
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "Name"));
        cJSON *labels = cJSON_GetObjectItem(c, "Labels");
        const char *owner =
            cJSON_GetStringValue(cJSON_GetObjectItem(labels, DK_OWNER_LABEL));
        const char *inst =
            cJSON_GetStringValue(cJSON_GetObjectItem(labels, "hutch.instance"));
        const char *num =
            cJSON_GetStringValue(cJSON_GetObjectItem(labels, DK_SANDBOX_LABEL));
        unsigned long n = number_of(st, name, "-work");
        char vpath[300];
        /* An anonymous volume (the engine named it) says its sandbox in a
         * label: the engine's restart removes an auto-removed container
         * without its volumes. */
        if (!n && num && strlen(num) < 14 && strspn(num, "0123456789") == strlen(num))
            n = strtoul(num, NULL, 10);
        long status = 0;
        if (!name || strlen(name) > 200 ||
            strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(name))
            continue;
        if (what == SWEEP_GONE ? !(owner && owner_dead(owner))
                               : !(inst && strcmp(inst, st->instance) == 0) ||
                                     (what == SWEEP_LOST && (!n || live_has(st, n))))
            continue;
        snprintf(vpath, sizeof(vpath), "/volumes/%s?force=1", name);
        if (dk_json(api, "DELETE", vpath, NULL, &status, NULL, &err) == 0)
            removed++;
        else if (status != 404 && status != 409)
            st->host->log(HUTCH_LOG_WARN, "docker", "removing leftover volume %s: %s",
                          name, err.msg);
    }
    cJSON_Delete(list);
    hutch_buf_free(&b);
    return removed;
}

/* e answers again after it was down: remove the containers and volumes of
 * this instance on it that no live sandbox holds (their removal failed
 * while it was down, or they were created as it died). */
void dk_lost_sweep(struct dk_state *st, struct dk_engine *e)
{
    unsigned removed = sweep_engine(st, &e->api, SWEEP_LOST);
    if (removed)
        st->host->log(HUTCH_LOG_INFO, "docker",
                      "endpoint %s answers again: removed %u containers and volumes "
                      "of this hutch it had lost",
                      e->name, removed);
}

struct sweep_arg {
    struct dk_state *st;
    int mine_only;
};

static void sweep_one(void *arg, struct dk_engine *e)
{
    struct sweep_arg *a = arg;
    if (e->up)
        sweep_engine(a->st, &e->api, a->mine_only ? SWEEP_MINE : SWEEP_GONE);
}

/* Remove what dead hutch processes left (mine_only: this instance's), on
 * every engine that answers, and the socket directories older versions
 * kept beside ours. */
void dk_sweep(struct dk_state *st, int mine_only)
{
    struct sweep_arg a = {st, mine_only};
    dk_engines_each(&st->engines, sweep_one, &a);

    /* Socket directories of dead hutch processes: the state directory of
     * each (PID.START, beside ours) holds one per sandbox.  Older hutch
     * versions put the socket directories there directly (PID.START.N.X):
     * removed the same way. */
    if (!mine_only) {
        DIR *d = opendir(st->parent);
        if (!d)
            return;
        for (struct dirent *de; (de = readdir(d));) {
            char sub[PATH_MAX * 2];
            int pid;
            unsigned long long start;
            DIR *sd;
            if (sscanf(de->d_name, "%d.%llu", &pid, &start) != 2 ||
                !box_process_gone(pid, start))
                continue;
            snprintf(sub, sizeof(sub), "%s/%s", st->parent, de->d_name);
            sd = opendir(sub);
            for (struct dirent *se; sd && (se = readdir(sd));) {
                char sock[PATH_MAX * 3];
                if (se->d_name[0] == '.' || se->d_type != DT_DIR)
                    continue;
                snprintf(sock, sizeof(sock), "%s/%s", sub, se->d_name);
                sbio_remove_leftover(sock);
            }
            if (sd)
                closedir(sd);
            sbio_remove_leftover(sub);
        }
        closedir(d);
    }
}

/* sweep() of the ABI, without open(): what gone hutch processes left on
 * every engine of the environment that answers, and their state
 * directories below `parent`.  (open() does the same for the engines it
 * is given.) */
void docker_sweep(const struct hutch_host *host, const char *parent)
{
    struct dk_state *st = calloc(1, sizeof(*st));
    struct hutch_err err = HUTCH_ERR_INIT;

    if (!st)
        return;
    st->host = host;
    snprintf(st->parent, sizeof(st->parent), "%s", parent);
    if (dk_engines_init(&st->engines, &err) == 0) {
        /* With no engine up, the state directories stay too: they are
         * what tells the next hutch that there is something to sweep. */
        if (dk_engines_probe(&st->engines, &err) < 0)
            host->log(HUTCH_LOG_INFO, "docker",
                      "no engine answers (%s): what gone hutch processes left "
                      "there stays until one does",
                      err.msg);
        else
            dk_sweep(st, 0);
        dk_engines_free(&st->engines);
    }
    free(st);
}
