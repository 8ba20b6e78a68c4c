/* cli.c — what the subcommands share: starting the upstream servers and
 * reading the limit flags, with the same messages everywhere (the executor
 * is opened by src/job.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "caps.h"
#include "cli.h"
#include "upstream.h"
#include "util.h"

int hutch_cli_start_upstreams(const char *servers, const char *who, bool wait,
                              cJSON **config, struct hutch_upstreams **ups,
                              struct hutch_err *err)
{
    struct hutch_upstream_opts uo = {.no_wait = !wait};
    struct hutch_upstream_status *st;
    size_t n;
    int r;

    r = hutch_upstreams_load(servers, config, err);
    if (r == 0)
        r = hutch_upstreams_start(*config, &uo, ups, err);
    if (r < 0 || !wait)
        return r;
    /* A server that did not come up is no reason to stop: say why, go on. */
    if (hutch_upstreams_snapshot(*ups, &st, &n) < 0)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *state = hutch_upstream_state_name(st[i].state);
        const char *why = st[i].error[0] ? st[i].error : NULL;
        const char *name = st[i].server;
        /* "skipped" was said when the file was loaded. */
        if (st[i].state == HUTCH_UPSTREAM_READY ||
            st[i].state == HUTCH_UPSTREAM_SKIPPED)
            continue;
        if (st[i].state == HUTCH_UPSTREAM_DISABLED)
            fprintf(stderr, "%s: upstream %s is disabled (not started)\n", who, name);
        else
            fprintf(stderr, "%s: upstream %s is %s: %s\n", who, name, state,
                    why ? why : "no reason given");
    }
    free(st);
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
        {"output-bytes", "bytes", 1, HUTCH_OUTPUT_MAX_BYTES},
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
