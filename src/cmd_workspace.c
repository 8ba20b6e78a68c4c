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

/* What the store and the archive report, as rows: sorted and printed as
 * text or JSON here, never read back from JSON. */
struct ws_row {
    char *principal, *name, *path; /* list: principal, name; show: path */
    uint64_t bytes;
    int64_t mtime;
    int tainted;
};

struct ws_rows {
    struct ws_row *v;
    size_t n, cap;
    int oom;
};

static struct ws_row *row_add(struct ws_rows *rs)
{
    if (rs->n == rs->cap) {
        size_t cap = rs->cap ? 2 * rs->cap : 16;
        struct ws_row *v = realloc(rs->v, cap * sizeof(*v));
        if (!v) {
            rs->oom = 1;
            return NULL;
        }
        rs->v = v;
        rs->cap = cap;
    }
    memset(&rs->v[rs->n], 0, sizeof(rs->v[0]));
    return &rs->v[rs->n++];
}

static void rows_free(struct ws_rows *rs)
{
    for (size_t i = 0; i < rs->n; i++) {
        free(rs->v[i].principal);
        free(rs->v[i].name);
        free(rs->v[i].path);
    }
    free(rs->v);
}

static void add_entry(void *arg, const char *principal, const char *name,
                      uint64_t bytes, int64_t mtime, int tainted)
{
    struct ws_rows *rs = arg;
    struct ws_row *r = row_add(rs);
    if (!r)
        return;
    r->principal = strdup(principal);
    r->name = strdup(name);
    r->bytes = bytes;
    r->mtime = mtime;
    r->tainted = tainted;
    if (!r->principal || !r->name)
        rs->oom = 1;
}

static int add_file(void *arg, const char *path, int is_dir, uint64_t size)
{
    struct ws_rows *rs = arg;
    struct ws_row *r;
    if (is_dir)
        return 0;
    if (!(r = row_add(rs)) || !(r->path = strdup(path))) {
        rs->oom = 1;
        return -ENOMEM;
    }
    r->bytes = size;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    const struct ws_row *x = a, *y = b;
    int c = strcmp(x->principal, y->principal);
    return c ? c : strcmp(x->name, y->name);
}

static void print_json(cJSON *arr)
{
    char *s = arr ? cJSON_Print(arr) : NULL;
    if (s)
        printf("%s\n", s);
    free(s);
    cJSON_Delete(arr);
}

static void print_list(struct ws_rows *rs, int json, int all)
{
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    qsort(rs->v, rs->n, sizeof(rs->v[0]), by_name);
    for (size_t i = 0; i < rs->n; i++) {
        const struct ws_row *r = &rs->v[i];
        char when[32];
        time_t t = (time_t)r->mtime;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "principal", r->principal);
            cJSON_AddStringToObject(o, "name", r->name);
            cJSON_AddNumberToObject(o, "bytes", (double)r->bytes);
            cJSON_AddStringToObject(o, "last_used", when);
            cJSON_AddBoolToObject(o, "tainted", r->tainted);
            cJSON_AddItemToArray(arr, o);
        } else {
            char *who = hutch_text_escape(r->principal, HUTCH_ESCAPE_NAME);
            char *name = hutch_text_escape(r->name, HUTCH_ESCAPE_NAME);
            if (who && name) {
                if (all)
                    printf("%s\t", who);
                printf("%s\t%.0f bytes\tlast used %s%s\n", name, (double)r->bytes, when,
                       r->tainted ? "\ttainted" : "");
            }
            free(who);
            free(name);
        }
    }
    if (json)
        print_json(arr);
}

/* 0, or 1 when a name could not be escaped. */
static int print_files(const struct ws_rows *rs, int json)
{
    cJSON *arr = json ? cJSON_CreateArray() : NULL;
    int rc = 0;
    for (size_t i = 0; i < rs->n; i++) {
        const struct ws_row *r = &rs->v[i];
        if (json) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "path", r->path);
            cJSON_AddNumberToObject(o, "size", (double)r->bytes);
            cJSON_AddItemToArray(arr, o);
        } else {
            char *p = hutch_text_escape(r->path, HUTCH_ESCAPE_NAME);
            if (p)
                printf("%s\t%.0f bytes\n", p, (double)r->bytes);
            else
                rc = 1;
            free(p);
        }
    }
    if (json)
        print_json(arr);
    return rc;
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
        struct ws_rows rs = {0};
        if (policy_file ? hutch_policy_load(policy_file, &pol, &err) < 0
                        : hutch_policy_default(&pol, &err) < 0) {
            fprintf(stderr, "hutch workspace list: %s\n", err.msg);
            return 1;
        }
        if (hutch_ws_list(store, all ? NULL : principal,
                          hutch_policy_workspaces(pol)->idle_s, add_entry, &rs,
                          &err) < 0) {
            fprintf(stderr, "hutch workspace list: %s\n", err.msg);
        } else if (rs.oom) {
            fprintf(stderr, "hutch workspace list: out of memory\n");
        } else {
            print_list(&rs, json, all);
            rc = 0;
        }
        rows_free(&rs);
    } else if (!strcmp(verb, "delete")) {
        if (hutch_ws_delete(store, principal, name, &err) < 0)
            fprintf(stderr, "hutch workspace delete: %s\n", err.msg);
        else
            rc = 0;
    } else {
        char *tar = NULL;
        size_t len = 0;
        struct ws_rows rs = {0};
        if (hutch_ws_read(store, principal, name, &tar, &len, &err) < 0 ||
            (len && hutch_archive_list(tar, len, NULL, add_file, &rs, &err) < 0))
            fprintf(stderr, "hutch workspace show: %s\n",
                    rs.oom ? "out of memory" : err.msg);
        else
            rc = print_files(&rs, json);
        free(tar);
        rows_free(&rs);
    }
    hutch_policy_unref(pol);
    return rc;
}
