/* cmd_plugins.c — `hutch plugins`: every executor plugin found, usable or
 * not, and why; as lines or (--json) one JSON document. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "plugin.h"

#define USAGE "Usage: hutch plugins [--plugins DIR] [--json]\n"

/* {"plugin_dir", "plugins": [{"name", "file", "path", "usable", "version"
 * (null before the ABI checked out), "summary" | "reason"}]} */
static char *plugins_json(const struct hutch_plugins *ps)
{
    cJSON *doc = cJSON_CreateObject(), *arr = cJSON_CreateArray();
    char *text = NULL;

    if (!doc || !arr || !cJSON_AddStringToObject(doc, "plugin_dir", ps->dir)) {
        cJSON_Delete(arr);
        goto out;
    }
    cJSON_AddItemToObject(doc, "plugins", arr);
    for (size_t i = 0; i < ps->n; i++) {
        const struct hutch_plugin *p = &ps->v[i];
        const char *file = strrchr(p->path, '/') ? strrchr(p->path, '/') + 1 : p->path;
        const char *version = p->ex && p->ex->version ? p->ex->version : NULL;
        cJSON *o = cJSON_CreateObject();
        if (!o)
            goto out;
        cJSON_AddItemToArray(arr, o);
        if (!cJSON_AddStringToObject(o, "name", p->name) ||
            !cJSON_AddStringToObject(o, "file", file) ||
            !cJSON_AddStringToObject(o, "path", p->path) ||
            !cJSON_AddBoolToObject(o, "usable", p->usable) ||
            !(version ? cJSON_AddStringToObject(o, "version", version)
                      : cJSON_AddNullToObject(o, "version")) ||
            !(p->usable ? cJSON_AddStringToObject(o, "summary",
                                                  p->ex->summary ? p->ex->summary : "")
                        : cJSON_AddStringToObject(o, "reason", p->reason)))
            goto out;
    }
    text = cJSON_Print(doc);
out:
    cJSON_Delete(doc);
    return text;
}

int hutch_cmd_plugins(int argc, char **argv)
{
    static const struct option opts[] = {
        {"plugins", required_argument, NULL, 'p'},
        {"json", no_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL;
    struct hutch_host host;
    struct hutch_plugins *ps = NULL;
    struct hutch_err err = {0};
    bool json = false;
    int c, rc = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "p:jh", opts, NULL)) != -1) {
        if (c == 'p') {
            dir = optarg;
        } else if (c == 'j') {
            json = true;
        } else if (c == 'h') {
            printf(USAGE
                   "\n"
                   "Lists the executor plugins in the plugin directory (default:\n"
                   "$HUTCH_PLUGIN_DIR or %s): usable ones with what they\n"
                   "are, the others with the reason they were skipped.\n"
                   "--json: one JSON object on stdout, {\"plugin_dir\", \"plugins\":\n"
                   "[{\"name\", \"file\", \"path\", \"usable\", \"version\",\n"
                   "\"summary\" (usable) or \"reason\" (not)}]}.\n",
                   HUTCH_PLUGIN_DIR);
            return 0;
        } else {
            fprintf(stderr, USAGE);
            return 2;
        }
    }
    hutch_host_init(&host, hutch_runner_dir());
    if (hutch_plugins_load(hutch_plugin_dir(dir), &host, &ps, &err) < 0) {
        fprintf(stderr, "hutch plugins: %s\n", err.msg);
        return 1;
    }
    if (json) {
        char *text = plugins_json(ps);
        if (text)
            printf("%s\n", text);
        else
            fprintf(stderr, "hutch plugins: out of memory\n");
        rc = text ? 0 : 1;
        free(text);
        hutch_plugins_free(ps);
        return rc;
    }
    printf("plugin directory: %s\n", ps->dir);
    if (ps->n == 0)
        printf("  (no *.so files)\n");
    for (size_t i = 0; i < ps->n; i++) {
        struct hutch_plugin *p = &ps->v[i];
        const char *file = strrchr(p->path, '/') ? strrchr(p->path, '/') + 1 : p->path;
        /* The version of a plugin whose ABI checked out, else "-". */
        const char *version = p->ex && p->ex->version ? p->ex->version : "-";
        if (p->usable)
            printf("  %-10s usable    %s %s — %s\n", p->name, file, version,
                   p->ex->summary ? p->ex->summary : "");
        else
            printf("  %-10s unusable  %s %s — %s\n", p->name, file, version, p->reason);
    }
    hutch_plugins_free(ps);
    return 0;
}
