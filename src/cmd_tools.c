/* cmd_tools.c — `hutch tools`: the upstream tool catalog from the command
 * line, the same that search_tools serves. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bridge.h"
#include "catalog.h"
#include "cli.h"
#include "upstream.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: hutch tools --servers FILE [--detail names|signatures|full] [--json]\n"
        "                   [--limit N] [search QUERY…]\n"
        "\n"
        "Starts the upstream MCP servers of FILE and prints their tools as code sees\n"
        "them (tools.server.tool), with Python and TypeScript signatures; `search`\n"
        "ranks them against QUERY like the search_tools tool does.  --limit N\n"
        "prints at most N tools (search: default 10).  Servers that do not start,\n"
        "and broken entries of FILE (skipped), are listed with their reason on\n"
        "stderr, and the exit status is then 1 (the tools of the others are still\n"
        "printed); disabled entries, and types hutch does not run, are listed but\n"
        "do not count.\n");
}

/* Started servers that are not ready (each was named on stderr): their
 * tools are missing from what was printed.  Disabled and skipped entries
 * do not count. */
static int down_servers(struct hutch_upstreams *ups)
{
    struct hutch_upstream_status *st;
    size_t n;
    int down = 0, all = 0;

    if (hutch_upstreams_snapshot(ups, &st, &n) < 0) {
        fprintf(stderr, "hutch tools: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!hutch_upstream_started(st[i].state))
            continue;
        all++;
        down += st[i].state != HUTCH_UPSTREAM_READY;
    }
    free(st);
    if (down)
        fprintf(stderr,
                "hutch tools: %d of %d servers did not start; their tools are "
                "not listed\n",
                down, all);
    return down;
}

int hutch_cmd_tools(int argc, char **argv)
{
    static const struct option opts[] = {
        {"servers", required_argument, NULL, 's'},
        {"detail", required_argument, NULL, 'd'},
        {"limit", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *servers = NULL, *detail_s = "signatures";
    enum hutch_detail detail;
    struct hutch_upstreams *ups = NULL;
    struct hutch_catalog *cat = NULL;
    struct hutch_err err = {0};
    cJSON *config = NULL, *tools = NULL, *found = NULL;
    char query[1024] = "";
    int json = 0, c, rc = 1;
    size_t limit = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "s:d:n:jh", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            servers = optarg;
            break;
        case 'd':
            detail_s = optarg;
            break;
        case 'n':
            limit = (size_t)strtoul(optarg, NULL, 10);
            break;
        case 'j':
            json = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!strcmp(detail_s, "names"))
        detail = HUTCH_DETAIL_NAMES;
    else if (!strcmp(detail_s, "signatures"))
        detail = HUTCH_DETAIL_SIGNATURES;
    else if (!strcmp(detail_s, "full"))
        detail = HUTCH_DETAIL_FULL;
    else {
        fprintf(stderr, "hutch tools: --detail must be names, signatures or full\n");
        return 2;
    }
    if (optind < argc) {
        if (strcmp(argv[optind], "search") != 0) {
            fprintf(stderr,
                    "hutch tools: unknown argument \"%s\" (see hutch tools --help)\n",
                    argv[optind]);
            return 2;
        }
        for (int i = optind + 1; i < argc; i++) {
            size_t n = strlen(query);
            snprintf(query + n, sizeof(query) - n, "%s%s", n ? " " : "", argv[i]);
        }
        if (!limit)
            limit = 10;
    }
    if (!servers) {
        fprintf(stderr,
                "hutch tools: --servers FILE is required (the mcpServers JSON of "
                "Claude Desktop / Claude Code)\n");
        return 2;
    }
    if (hutch_cli_start_upstreams(servers, "hutch tools", true, &config, &ups, &err) <
        0) {
        fprintf(stderr, "hutch tools: %s\n", err.msg);
        goto out;
    }
    tools = hutch_upstreams_tools(ups);
    if (hutch_catalog_build(tools, &cat, &err) < 0) {
        fprintf(stderr, "hutch tools: %s\n", err.msg);
        goto out;
    }
    size_t max = limit ? limit : hutch_catalog_count(cat) + 1;
    if (json) {
        char *s;
        found = hutch_catalog_search(cat, query, max, detail);
        s = cJSON_Print(found);
        printf("%s\n", s ? s : "[]");
        free(s);
    } else {
        const struct hutch_catalog_entry **hits = NULL;
        size_t n = 0;
        if (hutch_catalog_rank(cat, query, max, &hits, &n) < 0) {
            fprintf(stderr, "hutch tools: out of memory\n");
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            char *call = hutch_catalog_call(hits[i]);
            char *desc = hutch_catalog_description(hits[i], detail);
            printf("%s\n", call ? call : "");
            if (desc)
                printf("    %s\n", desc);
            if (detail != HUTCH_DETAIL_NAMES) {
                printf("    python:     %s\n", hits[i]->python_sig);
                printf("    typescript: %s\n", hits[i]->ts_decl);
            }
            free(call);
            free(desc);
        }
        free(hits);
        if (!n)
            printf(query[0] ? "no tool matches \"%s\"\n" : "no tools\n", query);
    }
    rc = down_servers(ups) ? 1 : 0;
    if (hutch_upstreams_broken(config)) {
        fprintf(stderr, "hutch tools: %zu broken entr%s of %s skipped (see above)\n",
                hutch_upstreams_broken(config),
                hutch_upstreams_broken(config) == 1 ? "y" : "ies", servers);
        rc = 1;
    }
out:
    cJSON_Delete(found);
    cJSON_Delete(tools);
    hutch_catalog_free(cat);
    hutch_upstreams_free(ups);
    cJSON_Delete(config);
    return rc;
}
