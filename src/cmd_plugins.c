/* cmd_plugins.c — `hutch plugins`: every executor plugin found, usable or
 * not, and why. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "plugin.h"

int hutch_cmd_plugins(int argc, char **argv)
{
    static const struct option opts[] = {
        {"plugins", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *dir = NULL;
    struct hutch_host host;
    struct hutch_plugins *ps = NULL;
    struct hutch_err err = {0};
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
        if (c == 'p') {
            dir = optarg;
        } else if (c == 'h') {
            printf("Usage: hutch plugins [--plugins DIR]\n\n"
                   "Lists the executor plugins in the plugin directory (default:\n"
                   "$HUTCH_PLUGIN_DIR or %s): usable ones with what they\n"
                   "are, the others with the reason they were skipped.\n",
                   HUTCH_PLUGIN_DIR);
            return 0;
        } else {
            fprintf(stderr, "Usage: hutch plugins [--plugins DIR]\n");
            return 2;
        }
    }
    hutch_host_init(&host, hutch_runner_dir());
    if (hutch_plugins_load(hutch_plugin_dir(dir), &host, &ps, &err) < 0) {
        fprintf(stderr, "hutch plugins: %s\n", err.msg);
        return 1;
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
