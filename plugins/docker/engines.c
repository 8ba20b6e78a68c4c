/* engines.c — the Docker endpoints and their health (see engines.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box.h"
#include "caps.h"
#include "docker.h"
#include "engines.h"

static int name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof(((struct dk_engine *)0)->name))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
                    s[i]))
            return 0;
    return 1;
}

/* An engine from one entry "[NAME=]URL[,tls=/DIR]" of `len` bytes; `n` is
 * its place in its list (the default name). */
static struct dk_engine *engine_new(const char *entry, size_t len, int n,
                                    const char *said, struct hutch_err *err)
{
    struct dk_engine *e;
    const char *eq = memchr(entry, '=', len), *url = entry;
    size_t ulen = len;

    /* A NAME= prefix: an '=' before any "://". */
    if (eq) {
        const char *scheme = strstr(entry, "://");
        if (scheme && scheme < entry + len && scheme < eq)
            eq = NULL;
    }
    if (len >= sizeof(e->spec)) {
        hutch_err_set(err, -ENAMETOOLONG, "%s: an endpoint of %zu bytes is too long",
                      said, len);
        return NULL;
    }
    e = calloc(1, sizeof(*e));
    if (!e) {
        hutch_err_set(err, -ENOMEM, "out of memory");
        return NULL;
    }
    memcpy(e->spec, entry, len);
    if (eq) {
        if (!name_ok(entry, (size_t)(eq - entry))) {
            hutch_err_set(err, -EINVAL,
                          "%s: \"%.*s\" is not an endpoint name (letters, digits, '.', "
                          "'_', '-', at most 63)",
                          said, (int)(eq - entry > 80 ? 80 : eq - entry), entry);
            free(e);
            return NULL;
        }
        memcpy(e->name, entry, (size_t)(eq - entry));
        url = eq + 1;
        ulen = len - (size_t)(eq - entry) - 1;
    } else {
        snprintf(e->name, sizeof(e->name), "endpoint-%d", n);
    }
    if (dk_api_init_spec(&e->api, url, ulen, said, err) < 0) {
        free(e);
        return NULL;
    }
    snprintf(e->why, sizeof(e->why), "not asked yet");
    return e;
}

int dk_engines_init(struct dk_engines *es, struct hutch_err *err)
{
    /* The deployment's engines: the environment's value of the option
     * endpoints (a class's own come to dk_engines_pick()). */
    const char *list = opt_env(dk_options, "endpoints");
    struct dk_engine **tail = &es->list;

    memset(es, 0, sizeof(*es));
    pthread_mutex_init(&es->mu, NULL);
    if (!list || !*list) {
        struct dk_engine *e = calloc(1, sizeof(*e));
        int r;
        if (!e)
            return hutch_err_set(err, -ENOMEM, "out of memory");
        r = dk_api_init(&e->api, err);
        if (r < 0) {
            free(e);
            return r;
        }
        snprintf(e->name, sizeof(e->name), "docker");
        snprintf(e->why, sizeof(e->why), "not asked yet");
        es->list = e;
        es->n_env = 1;
        return 0;
    }
    for (const char *p = list; *p;) {
        size_t n;
        struct dk_engine *e;
        p += strspn(p, " \t\n");
        n = strcspn(p, " \t\n");
        if (!n)
            break;
        if (es->n_env == HUTCH_DOCKER_MAX_ENDPOINTS) {
            dk_engines_free(es);
            return hutch_err_set(err, -E2BIG,
                                 "HUTCH_DOCKER_ENDPOINTS: more than %d endpoints",
                                 HUTCH_DOCKER_MAX_ENDPOINTS);
        }
        e = engine_new(p, n, es->n_env + 1, "HUTCH_DOCKER_ENDPOINTS", err);
        if (!e) {
            dk_engines_free(es);
            return err->code ? err->code : -EINVAL;
        }
        for (struct dk_engine *o = es->list; o; o = o->next)
            if (strcmp(o->name, e->name) == 0) {
                hutch_err_set(err, -EINVAL,
                              "HUTCH_DOCKER_ENDPOINTS: two endpoints are named %s",
                              e->name);
                free(e);
                dk_engines_free(es);
                return -EINVAL;
            }
        *tail = e;
        tail = &e->next;
        es->n_env++;
        p += n;
    }
    if (!es->n_env)
        return hutch_err_set(err, -EINVAL,
                             "HUTCH_DOCKER_ENDPOINTS is set but names no endpoint");
    return 0;
}

void dk_engines_free(struct dk_engines *es)
{
    struct dk_engine *e = es->list, *next;
    for (; e; e = next) {
        next = e->next;
        free(e);
    }
    es->list = NULL;
    pthread_mutex_destroy(&es->mu);
}

int dk_engine_failure(int code)
{
    return code == -ECONNREFUSED || code == -ETIMEDOUT || code == -EIO ||
           code == -ECONNRESET || code == -EPIPE || code == -EHOSTUNREACH;
}

/* Asks e (GET /version), unlocked: fills a copy, so that calls of other
 * threads on e never see its api change.  0 or the error. */
static int ask(struct dk_engine *e, char *version, size_t vlen, char *api_version,
               size_t alen, int *podman, struct hutch_err *err)
{
    struct dk_api probe = e->api;
    int r = dk_api_negotiate(&probe, version, vlen, err);
    if (r == 0) {
        snprintf(api_version, alen, "%s", probe.version);
        *podman = probe.podman;
    }
    return r;
}

/* Asks e now and records the answer.  Called without the lock. */
static int probe_one(struct dk_engines *es, struct dk_engine *e, struct hutch_err *err)
{
    char version[32] = "", apiv[sizeof(e->api.version)] = "";
    int podman = 0;
    int r = ask(e, version, sizeof(version), apiv, sizeof(apiv), &podman, err);

    pthread_mutex_lock(&es->mu);
    e->next_probe_ms = box_now_ms() + DK_ENGINE_REPROBE_MS;
    if (r == 0) {
        /* The version is written once, before anyone may use e. */
        if (!e->ever_up) {
            memcpy(e->api.version, apiv, sizeof(apiv));
            e->api.podman = podman;
        }
        snprintf(e->version, sizeof(e->version), "%s", version);
        if (e->ever_up && !e->up)
            e->comebacks++;
        e->up = e->ever_up = 1;
        e->why[0] = '\0';
    } else {
        e->up = 0;
        snprintf(e->why, sizeof(e->why), "%s", err->msg);
    }
    pthread_mutex_unlock(&es->mu);
    return r;
}

int dk_engines_probe(struct dk_engines *es, struct hutch_err *err)
{
    struct hutch_err first = HUTCH_ERR_INIT;
    int up = 0, i = 0;

    for (struct dk_engine *e = es->list; e && i < es->n_env; e = e->next, i++) {
        struct hutch_err perr = HUTCH_ERR_INIT;
        if (probe_one(es, e, &perr) == 0)
            up++;
        else if (!first.msg[0])
            first = perr;
    }
    if (up)
        return 0;
    if (es->n_env == 1) {
        *err = first;
        return first.code ? first.code : -ECONNREFUSED;
    }
    return hutch_err_set(err, first.code ? first.code : -ECONNREFUSED,
                         "no Docker endpoint answers (of %d; the first: %s)", es->n_env,
                         first.msg);
}

/* The engine a policy's entry names, joined to the registry when new
 * (locked). */
static struct dk_engine *find_or_add(struct dk_engines *es, const char *entry,
                                     size_t len, struct hutch_err *err)
{
    struct dk_engine *e, **tail = &es->list;
    int n = 0;
    for (e = es->list; e; e = e->next, n++) {
        if (strlen(e->spec) == len && memcmp(e->spec, entry, len) == 0)
            return e;
        tail = &e->next;
    }
    if (n >= 4 * HUTCH_DOCKER_MAX_ENDPOINTS) {
        hutch_err_set(err, -E2BIG, "more than %d Docker endpoints named by policies",
                      4 * HUTCH_DOCKER_MAX_ENDPOINTS);
        return NULL;
    }
    e = engine_new(entry, len, n + 1, "executor_options.docker.endpoints", err);
    if (e)
        *tail = e;
    return e;
}

int dk_engines_pick(struct dk_engines *es, const char *list,
                    const struct dk_engine *avoid, struct dk_engine **out,
                    struct hutch_err *err)
{
    struct dk_engine *cand[4 * HUTCH_DOCKER_MAX_ENDPOINTS];
    int n = 0, r;
    char why[HUTCH_ERR_MSG];
    size_t o = 0;

    *out = NULL;
    pthread_mutex_lock(&es->mu);
    if (list && *list) {
        for (const char *p = list; *p;) {
            size_t len;
            struct dk_engine *e;
            p += strspn(p, " \t\n");
            len = strcspn(p, " \t\n");
            if (!len)
                break;
            if (n == HUTCH_DOCKER_MAX_ENDPOINTS) {
                pthread_mutex_unlock(&es->mu);
                return hutch_err_set(err, -E2BIG,
                                     "executor_options.docker.endpoints: more than %d",
                                     HUTCH_DOCKER_MAX_ENDPOINTS);
            }
            e = find_or_add(es, p, len, err);
            if (!e) {
                pthread_mutex_unlock(&es->mu);
                return err->code ? err->code : -EINVAL;
            }
            cand[n++] = e;
            p += len;
        }
    } else {
        int i = 0;
        for (struct dk_engine *e = es->list; e && i < es->n_env; e = e->next, i++)
            cand[n++] = e;
    }
    pthread_mutex_unlock(&es->mu);
    {
        int others = 0;
        for (int i = 0; i < n; i++)
            others += cand[i] != avoid;
        if (!others)
            return -ENODEV; /* nothing else to try: the caller's error stands */
    }

    /* Down engines whose time has come are asked again, unlocked. */
    for (int i = 0; i < n; i++) {
        struct hutch_err perr = HUTCH_ERR_INIT;
        int due;
        pthread_mutex_lock(&es->mu);
        due =
            !cand[i]->up && box_now_ms() >= cand[i]->next_probe_ms && cand[i] != avoid;
        pthread_mutex_unlock(&es->mu);
        if (due)
            probe_one(es, cand[i], &perr);
    }

    pthread_mutex_lock(&es->mu);
    for (int i = 0; i < n; i++) {
        struct dk_engine *e = cand[i];
        if (!e->up || e == avoid)
            continue;
        if (!*out || __atomic_load_n(&e->live, __ATOMIC_RELAXED) <
                         __atomic_load_n(&(*out)->live, __ATOMIC_RELAXED))
            *out = e;
    }
    if (*out) {
        __atomic_add_fetch(&(*out)->live, 1, __ATOMIC_ACQ_REL);
        pthread_mutex_unlock(&es->mu);
        return 0;
    }
    why[0] = '\0';
    for (int i = 0; i < n && o < sizeof(why) - 1; i++) {
        int k =
            snprintf(why + o, sizeof(why) - o, "%s%s (%s): %s", i ? "; " : "",
                     cand[i]->name, cand[i]->api.where,
                     cand[i] == avoid && cand[i]->up ? "just failed" : cand[i]->why);
        if (k < 0)
            break;
        o += (size_t)k < sizeof(why) - o ? (size_t)k : sizeof(why) - o - 1;
    }
    pthread_mutex_unlock(&es->mu);
    r = n == 1 && !avoid ? -ECONNREFUSED : -EHOSTUNREACH;
    if (n == 1 && !avoid)
        return hutch_err_set(err, r, "%s", cand[0]->why);
    return hutch_err_set(err, r, "no Docker endpoint can take the sandbox: %s", why);
}

void dk_engine_release(struct dk_engine *e)
{
    if (e)
        __atomic_sub_fetch(&e->live, 1, __ATOMIC_ACQ_REL);
}

int dk_engine_check(struct dk_engines *es, struct dk_engine *e)
{
    struct hutch_err perr = HUTCH_ERR_INIT;
    return probe_one(es, e, &perr);
}

int dk_engine_came_back(struct dk_engines *es, struct dk_engine *e)
{
    int r;
    pthread_mutex_lock(&es->mu);
    r = e->up && e->swept != e->comebacks;
    e->swept = e->comebacks;
    pthread_mutex_unlock(&es->mu);
    return r;
}

void dk_engine_down(struct dk_engines *es, struct dk_engine *e, const char *why)
{
    pthread_mutex_lock(&es->mu);
    if (e->up)
        snprintf(e->why, sizeof(e->why), "%s", why);
    e->up = 0;
    e->next_probe_ms = box_now_ms() + DK_ENGINE_REPROBE_MS;
    pthread_mutex_unlock(&es->mu);
}

void dk_engines_each(struct dk_engines *es, void (*fn)(void *arg, struct dk_engine *e),
                     void *arg)
{
    pthread_mutex_lock(&es->mu);
    for (struct dk_engine *e = es->list; e; e = e->next)
        fn(arg, e);
    pthread_mutex_unlock(&es->mu);
}
