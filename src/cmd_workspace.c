/* cmd_workspace.c — `hutch workspace list|show|delete`: the operator's view
 * of the workspace store (workspace.c has the rules and the store).  The
 * names it prints were chosen by programs and agents: the text listings
 * show them through hutch_text_escape (a newline cannot forge a line, an
 * escape sequence cannot reach the terminal); --json leaves them to JSON's
 * own escaping. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "caps.h"
#include "cli.h"
#include "hutch_archive.h"
#include "log.h"
#include "policy.h"
#include "util.h"
#include "workspace.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: hutch workspace list [OPTIONS]\n"
        "       hutch workspace show NAME [OPTIONS]\n"
        "       hutch workspace delete NAME [OPTIONS]\n"
        "\n"
        "Lists, shows the files of, or deletes the workspaces executions keep\n"
        "their files in (execute_code's \"workspace\", hutch run -w NAME).\n"
        "list first removes the workspaces unused for the policy's\n"
        "workspaces.idle_s.\n"
        "\n"
        "      --principal NAME   whose workspaces (default: local, the principal\n"
        "                         of hutch run and of serve over stdio)\n"
        "      --all              list: every principal's\n"
        "      --workspaces DIR   where workspaces are kept (default:\n"
        "                         $HUTCH_WORKSPACES, else /var/lib/hutch/workspaces\n"
        "                         for root, else $XDG_STATE_HOME/hutch/workspaces)\n"
        "  -p, --policy FILE      the policy whose workspaces.idle_s applies\n"
        "      --json             print JSON\n"
        "  -h, --help             this text\n");
}

static void add_entry(void *arg, const char *principal, const char *name,
                      uint64_t bytes, int64_t mtime)
{
    cJSON *o = cJSON_CreateObject();
    char when[32];
    time_t t = (time_t)mtime;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    cJSON_AddStringToObject(o, "principal", principal);
    cJSON_AddStringToObject(o, "name", name);
    cJSON_AddNumberToObject(o, "bytes", (double)bytes);
    cJSON_AddStringToObject(o, "last_used", when);
    cJSON_AddItemToArray(arg, o);
}

static int add_file(void *arg, const char *path, int is_dir, uint64_t size)
{
    cJSON *o;
    if (is_dir)
        return 0;
    o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddNumberToObject(o, "size", (double)size);
    cJSON_AddItemToArray(arg, o);
    return 0;
}

static int by_name(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    int c = strcmp(cJSON_GetObjectItem(x, "principal")->valuestring,
                   cJSON_GetObjectItem(y, "principal")->valuestring);
    return c ? c
             : strcmp(cJSON_GetObjectItem(x, "name")->valuestring,
                      cJSON_GetObjectItem(y, "name")->valuestring);
}

static void print_list(cJSON *arr, int json, int all)
{
    int n = cJSON_GetArraySize(arr), i = 0;
    cJSON **v = calloc(n ? (size_t)n : 1, sizeof(*v)), *it, *sorted;
    if (!v)
        return;
    cJSON_ArrayForEach(it, arr) v[i++] = it;
    qsort(v, (size_t)n, sizeof(*v), by_name);
    sorted = cJSON_CreateArray();
    for (i = 0; i < n; i++)
        cJSON_AddItemReferenceToArray(sorted, v[i]);
    if (json) {
        char *s = cJSON_Print(sorted);
        if (s)
            printf("%s\n", s);
        free(s);
    } else {
        for (i = 0; i < n; i++) {
            char *who = hutch_text_escape(
                cJSON_GetObjectItem(v[i], "principal")->valuestring, HUTCH_ESCAPE_NAME);
            char *name = hutch_text_escape(
                cJSON_GetObjectItem(v[i], "name")->valuestring, HUTCH_ESCAPE_NAME);
            if (who && name) {
                if (all)
                    printf("%s\t", who);
                printf("%s\t%.0f bytes\tlast used %s\n", name,
                       cJSON_GetObjectItem(v[i], "bytes")->valuedouble,
                       cJSON_GetObjectItem(v[i], "last_used")->valuestring);
            }
            free(who);
            free(name);
        }
    }
    cJSON_Delete(sorted);
    free(v);
}

int hutch_cmd_workspace(int argc, char **argv)
{
    enum { OPT_PRINCIPAL = 256, OPT_ALL, OPT_WORKSPACES, OPT_JSON };
    static const struct option opts[] = {
        {"principal", required_argument, NULL, OPT_PRINCIPAL},
        {"all", no_argument, NULL, OPT_ALL},
        {"workspaces", required_argument, NULL, OPT_WORKSPACES},
        {"policy", required_argument, NULL, 'p'},
        {"json", no_argument, NULL, OPT_JSON},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *principal = "local", *dir = NULL, *policy_file = NULL, *verb,
               *name = NULL;
    struct hutch_err err = HUTCH_ERR_INIT;
    struct hutch_policy *pol = NULL;
    char store[4096];
    int all = 0, json = 0, c, rc = 1;

    optind = 1;
    while ((c = getopt_long(argc, argv, "p:h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_PRINCIPAL:
            principal = optarg;
            break;
        case OPT_ALL:
            all = 1;
            break;
        case OPT_WORKSPACES:
            dir = optarg;
            break;
        case 'p':
            policy_file = optarg;
            break;
        case OPT_JSON:
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
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    verb = argv[optind++];
    if (!strcmp(verb, "show") || !strcmp(verb, "delete")) {
        if (optind >= argc) {
            fprintf(stderr, "hutch workspace %s: name the workspace\n", verb);
            return 2;
        }
        name = argv[optind++];
        if (hutch_ws_check_name(name, &err) < 0) {
            fprintf(stderr, "hutch workspace %s: %s\n", verb, err.msg);
            return 2;
        }
    } else if (strcmp(verb, "list")) {
        fprintf(stderr,
                "hutch workspace: unknown command \"%s\" (list, show NAME or delete "
                "NAME)\n",
                verb);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "hutch workspace %s: unexpected argument \"%s\"\n", verb,
                argv[optind]);
        return 2;
    }
    if (hutch_ws_store(dir, 0, store, sizeof(store), &err) < 0) {
        fprintf(stderr, "hutch workspace: %s\n", err.msg);
        return 1;
    }

    if (!strcmp(verb, "list")) {
        cJSON *arr = cJSON_CreateArray();
        if (policy_file ? hutch_policy_load(policy_file, &pol, &err) < 0
                        : hutch_policy_default(&pol, &err) < 0) {
            fprintf(stderr, "hutch workspace list: %s\n", err.msg);
            cJSON_Delete(arr);
            return 1;
        }
        if (hutch_ws_list(store, all ? NULL : principal,
                          hutch_policy_workspaces(pol)->idle_s, add_entry, arr,
                          &err) < 0) {
            fprintf(stderr, "hutch workspace list: %s\n", err.msg);
        } else {
            print_list(arr, json, all);
            rc = 0;
        }
        cJSON_Delete(arr);
    } else if (!strcmp(verb, "delete")) {
        if (hutch_ws_delete(store, principal, name, &err) < 0)
            fprintf(stderr, "hutch workspace delete: %s\n", err.msg);
        else
            rc = 0;
    } else {
        char *tar = NULL;
        size_t len = 0;
        cJSON *files = cJSON_CreateArray();
        if (hutch_ws_read(store, principal, name, &tar, &len, &err) < 0 ||
            (len && hutch_archive_list(tar, len, NULL, add_file, files, &err) < 0)) {
            fprintf(stderr, "hutch workspace show: %s\n", err.msg);
        } else if (json) {
            char *s = cJSON_Print(files);
            if (s)
                printf("%s\n", s);
            free(s);
            rc = 0;
        } else {
            const cJSON *f;
            rc = 0;
            cJSON_ArrayForEach(f, files)
            {
                char *p = hutch_text_escape(cJSON_GetObjectItem(f, "path")->valuestring,
                                            HUTCH_ESCAPE_NAME);
                if (p)
                    printf("%s\t%.0f bytes\n", p,
                           cJSON_GetObjectItem(f, "size")->valuedouble);
                else
                    rc = 1;
                free(p);
            }
        }
        free(tar);
        cJSON_Delete(files);
    }
    hutch_policy_unref(pol);
    return rc;
}
