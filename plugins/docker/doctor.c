/* doctor.c — the Docker executor's answers to hutch doctor, hutch
 * runtime and the packages question (see docker.h): each endpoint, whether
 * it answers, its runtimes, and the images with the runtime and packages
 * their labels record (images/build.sh sets them).  Read-only: nothing
 * here creates anything on an engine.  The executor itself lives in
 * docker.c. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "api.h"
#include "box.h"
#include "docker.h"
#include "engines.h"

/* --- the images ---------------------------------------------------------- */

/* The image of a language: hutch-LANG:VERSION (`version` is hutch's), or
 * the one HUTCH_DOCKER_IMAGE_* names.  `data`: the data flavour, which
 * only Python has (hutch-python-data, HUTCH_DOCKER_IMAGE_PYTHON_DATA). */
const char *dk_image_for(const char *version, const char *lang, int data, char *buf,
                         size_t len)
{
    int py = strcmp(lang, "python") == 0;
    const char *env =
        opt_env(dk_options, py ? (data ? "image_python_data" : "image_python")
                               : "image_javascript");
    if (env)
        snprintf(buf, len, "%s", env);
    else
        snprintf(buf, len, "hutch-%s:%s",
                 py ? (data ? "python-data" : "python") : "node", version);
    return buf;
}

/* --- doctor ------------------------------------------------------------ */

/* The label `key` of `image` (images/build.sh sets org.hutch.runtime and
 * org.hutch.packages), asked of any engine that is up: the environment's
 * engines carry the same images.  A label that is missing or empty is ""
 * with 0 when `may_be_empty`, else -ENOENT. */
static int image_label(struct dk_state *st, const char *image, const char *key,
                       int may_be_empty, char *buf, size_t len, struct hutch_err *err)
{
    struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
    struct dk_engine *e;
    char path[320];
    long status = 0;
    cJSON *j = NULL;
    int r;

    snprintf(path, sizeof(path), "/images/%s/json", image);
    r = dk_engines_pick(&st->engines, NULL, NULL, &e, err);
    if (r < 0)
        return r;
    r = dk_json(&e->api, "GET", path, NULL, &status, &b, err);
    dk_engine_release(e);
    if (r == 0) {
        j = cJSON_ParseWithLength(b.data, b.len);
        if (box_runtime_line(
                cJSON_GetStringValue(cJSON_GetObjectItem(
                    cJSON_GetObjectItem(cJSON_GetObjectItem(j, "Config"), "Labels"),
                    key)),
                buf, len) < 0) {
            if (len)
                buf[0] = '\0';
            if (!may_be_empty)
                r = hutch_err_set(err, -ENOENT,
                                  "image %s: %s not recorded: run 'make images' again",
                                  image, key);
        }
    } else if (status == 404) {
        r = hutch_err_set(err, -ENOENT, "image %s is missing: run 'make images'",
                          image);
    }
    cJSON_Delete(j);
    hutch_buf_free(&b);
    return r;
}

/* The org.hutch.runtime label of the image `language` runs in. */
int docker_runtime(void *state, const char *language, char *buf, size_t len,
                   struct hutch_err *err)
{
    struct dk_state *st = state;
    char image[256];

    if (strcmp(language, "python") != 0 && strcmp(language, "javascript") != 0)
        return hutch_err_set(err, -EINVAL, "unknown language \"%s\"", language);
    dk_image_for(st->host->version, language, 0, image, sizeof(image));
    return image_label(st, image, "org.hutch.runtime", 0, buf, len, err);
}

/* The org.hutch.packages label of the image `language` runs in under
 * `flavour` (only the data flavour's Python image records any). */
int docker_packages(void *state, const char *language, const char *flavour, char *buf,
                    size_t len, struct hutch_err *err)
{
    struct dk_state *st = state;
    char image[256];
    int data;

    if (strcmp(language, "python") != 0 && strcmp(language, "javascript") != 0)
        return hutch_err_set(err, -EINVAL, "unknown language \"%s\"", language);
    data = box_flavour(flavour, "docker", err);
    if (data < 0)
        return data;
    dk_image_for(st->host->version, language, data, image, sizeof(image));
    return image_label(st, image, "org.hutch.packages", 1, buf, len, err);
}

/* A doctor line's subject: `what`, or "what (NAME)" when several engines. */
static const char *label(char *buf, size_t len, const char *what, const char *name)
{
    if (!name)
        return what;
    snprintf(buf, len, "%s (%s)", what, name);
    return buf;
}

/* What the doctor checks on one engine that answers: its runtimes and the
 * images.  `name` is NULL when it is the only one. */
static void doctor_engine(const struct hutch_host *host, void *ctx,
                          void (*report)(void *ctx, const char *status,
                                         const char *what, const char *detail),
                          const struct dk_api *api, const char *name)
{
    struct hutch_err err = {0};
    struct hutch_buf b = HUTCH_BUF_INIT(DK_MAX_REPLY);
    char detail[1200], lb[128];
    cJSON *j;

    if (dk_json(api, "GET", "/info", NULL, NULL, &b, &err) == 0) {
        cJSON *rt, *it;
        size_t o = 0;
        j = cJSON_ParseWithLength(b.data, b.len);
        rt = cJSON_GetObjectItem(j, "Runtimes");
        detail[0] = '\0';
        cJSON_ArrayForEach(it, rt)
        {
            int n = snprintf(detail + o, sizeof(detail) - o, "%s%s", o ? ", " : "",
                             it->string);
            if (n < 0 || (size_t)n >= sizeof(detail) - o)
                break;
            o += (size_t)n;
        }
        report(ctx, "ok", label(lb, sizeof(lb), "docker runtimes", name), detail);
        cJSON_Delete(j);
    }
    hutch_buf_free(&b);

    for (int i = 0; i < 2; i++) {
        static const char *const langs[] = {"python", "javascript"};
        char image[256], path[320];
        long status = 0;
        struct hutch_buf ib = HUTCH_BUF_INIT(DK_MAX_REPLY);
        dk_image_for(host->version, langs[i], 0, image, sizeof(image));
        snprintf(path, sizeof(path), "/images/%s/json", image);
        if (dk_json(api, "GET", path, NULL, &status, &ib, &err) == 0) {
            /* The runtime it carries (images/build.sh's label), which may
             * not be the host's that the local executor runs. */
            cJSON *ij = cJSON_ParseWithLength(ib.data, ib.len);
            char rt[65];
            int known =
                box_runtime_line(cJSON_GetStringValue(cJSON_GetObjectItem(
                                     cJSON_GetObjectItem(
                                         cJSON_GetObjectItem(ij, "Config"), "Labels"),
                                     "org.hutch.runtime")),
                                 rt, sizeof(rt)) == 0;
            snprintf(detail, sizeof(detail), "%s (%s)", image,
                     known ? rt
                           : "runtime version not recorded: run 'make images' again");
            report(ctx, "ok", label(lb, sizeof(lb), "docker image", name), detail);
            cJSON_Delete(ij);
        } else {
            snprintf(detail, sizeof(detail),
                     "%s is missing: build it with 'make images' (root, no registry "
                     "needed) or 'docker build --build-arg RUNTIME=%s -t %s images/'",
                     image, i == 0 ? "python3" : "nodejs", image);
            report(ctx, "FAIL", label(lb, sizeof(lb), "docker image", name),
                   status == 404 ? detail : err.msg);
        }
        hutch_buf_free(&ib);
    }
    /* The data flavour (executor_options.docker.flavour = "data"): the
     * Python packages its image's label records.  Optional: warn. */
    {
        char image[256], path[320];
        long status = 0;
        struct hutch_buf ib = HUTCH_BUF_INIT(DK_MAX_REPLY);
        dk_image_for(host->version, "python", 1, image, sizeof(image));
        snprintf(path, sizeof(path), "/images/%s/json", image);
        if (dk_json(api, "GET", path, NULL, &status, &ib, &err) == 0) {
            cJSON *ij = cJSON_ParseWithLength(ib.data, ib.len);
            char pk[160];
            int known =
                box_runtime_line(cJSON_GetStringValue(cJSON_GetObjectItem(
                                     cJSON_GetObjectItem(
                                         cJSON_GetObjectItem(ij, "Config"), "Labels"),
                                     "org.hutch.packages")),
                                 pk, sizeof(pk)) == 0;
            snprintf(detail, sizeof(detail),
                     "docker: base image: none of numpy, pandas, matplotlib; flavour "
                     "\"data\" (%s): %s",
                     image,
                     known ? pk : "packages not recorded: run 'make images' again");
            report(ctx, "ok", label(lb, sizeof(lb), "python packages", name), detail);
            cJSON_Delete(ij);
        } else {
            snprintf(detail, sizeof(detail),
                     "docker: base image: none of numpy, pandas, matplotlib; flavour "
                     "\"data\": %s is missing (build it with 'make images')",
                     image);
            report(ctx, "warn", label(lb, sizeof(lb), "python packages", name), detail);
        }
        hutch_buf_free(&ib);
    }
}

void docker_doctor(const struct hutch_host *host, void *ctx,
                   void (*report)(void *ctx, const char *status, const char *what,
                                  const char *detail))
{
    struct dk_engines es;
    struct hutch_err err = {0};
    char detail[1400], init[PATH_MAX], lb[128];
    int n = 0;

    if (box_find_init(dk_options, init, sizeof(init), &err) < 0)
        report(ctx, "FAIL", "docker init", err.msg);
    if (dk_engines_init(&es, &err) < 0) {
        report(ctx, "FAIL", "docker daemon", err.msg);
        return;
    }
    /* Each endpoint: does it answer, and what it has.  One line per
     * endpoint, named when there are several. */
    for (struct dk_engine *e = es.list; e; e = e->next, n++) {
        const char *name = es.n_env > 1 ? e->name : NULL;
        if (dk_engine_check(&es, e) < 0) {
            report(ctx, "FAIL", label(lb, sizeof(lb), "docker daemon", name), e->why);
            continue;
        }
        snprintf(detail, sizeof(detail), "%s: Engine %s, API %s", e->api.where,
                 e->version, e->api.version);
        report(ctx, "ok", label(lb, sizeof(lb), "docker daemon", name), detail);
        doctor_engine(host, ctx, report, &e->api, name);
    }
    dk_engines_free(&es);
}
