/* cli.c — what the subcommands share: opening the executor and starting
 * the upstream servers, with the same messages everywhere. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "caps.h"
#include "cli.h"
#include "upstream.h"
#include "util.h"

int hutch_cli_open_executor(const char *plugin_dir, const char *name,
                            struct hutch_host *host, struct hutch_plugins **ps,
                            struct hutch_plugin **p, struct hutch_err *err)
{
    int r;

    if (!name || !*name)
        name = getenv("HUTCH_EXECUTOR");
    if (!name || !*name)
        name = "local";
    hutch_host_init(host, hutch_runner_dir());
    r = hutch_plugins_load(hutch_plugin_dir(plugin_dir), host, ps, err);
    if (r < 0)
        return r;
    *p = hutch_plugins_find(*ps, name);
    if (!*p) {
        r = hutch_err_set(
            err, -ENOENT,
            "no executor named \"%s\" in %s (run 'hutch plugins' to see what "
            "is there)",
            name, (*ps)->dir);
        goto fail;
    }
    if (!(*p)->usable) {
        r = hutch_err_set(err, -ENOENT, "executor \"%s\" is not usable: %s", name,
                          (*p)->reason);
        goto fail;
    }
    r = hutch_plugin_open(*p, host, err);
    if (r < 0)
        goto fail;
    return 0;
fail:
    hutch_plugins_free(*ps);
    *ps = NULL;
    *p = NULL;
    return r;
}

int hutch_cli_start_upstreams(const char *servers, const char *who, bool wait,
                              cJSON **config, struct hutch_upstreams **ups,
                              struct hutch_err *err)
{
    struct hutch_upstream_opts uo = {.no_wait = !wait};
    cJSON *st, *it;
    int r;

    r = hutch_upstreams_load(servers, config, err);
    if (r == 0)
        r = hutch_upstreams_start(*config, &uo, ups, err);
    if (r < 0 || !wait)
        return r;
    /* A server that did not come up is no reason to stop: say why, go on. */
    st = hutch_upstreams_status(*ups);
    cJSON_ArrayForEach(it, st)
    {
        const char *state = cJSON_GetStringValue(cJSON_GetObjectItem(it, "state"));
        const char *why = cJSON_GetStringValue(cJSON_GetObjectItem(it, "error"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(it, "server"));
        /* "skipped" was said when the file was loaded. */
        if (!state || !strcmp(state, "ready") || !strcmp(state, "skipped"))
            continue;
        if (!strcmp(state, "disabled"))
            fprintf(stderr, "%s: upstream %s is disabled (not started)\n", who, name);
        else
            fprintf(stderr, "%s: upstream %s is %s: %s\n", who, name, state,
                    why ? why : "no reason given");
    }
    cJSON_Delete(st);
    return 0;
}

int hutch_cli_start_tools(const char *servers, const char *who, bool wait,
                          cJSON **config, struct hutch_upstreams **ups,
                          struct hutch_bridge **bridge, struct hutch_err *err)
{
    int r =
        servers ? hutch_cli_start_upstreams(servers, who, wait, config, ups, err) : 0;
    return r < 0 ? r : hutch_bridge_new(*ups, bridge, err);
}

int hutch_cli_limit(const char *who, const char *flag, const char *arg, uint64_t *val)
{
    static const struct {
        const char *flag, *unit;
        uint64_t min, max;
    } limits[] = {
        {"timeout", "milliseconds", 1, HUTCH_MAX_TIMEOUT_MS},
        {"memory", "megabytes", 16, HUTCH_MAX_MEMORY_MB},
        {"pids", "a number", 8, 65536},
    };
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        if (strcmp(flag, limits[i].flag) != 0)
            continue;
        if (hutch_parse_u64(arg, limits[i].min, limits[i].max, val) == 0)
            return 0;
        fprintf(stderr, "%s: --%s wants %s, %llu to %llu\n", who, flag, limits[i].unit,
                (unsigned long long)limits[i].min, (unsigned long long)limits[i].max);
        return -1;
    }
    fprintf(stderr, "%s: no limit named --%s\n", who, flag);
    return -1;
}
