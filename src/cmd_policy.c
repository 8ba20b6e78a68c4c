/* cmd_policy.c — `hutch policy`: check a policy file before deploying it,
 * ask it one decision, and measure what its decisions cost.  The engine
 * itself lives in policy.c; this file only parses options and prints. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "log.h"
#include "plugin.h"
#include "policy.h"
#include "util.h"
#include "wire.h"

int hutch_cmd_policy(int argc, char **argv);

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: hutch policy check FILE...\n"
            "       hutch policy test FILE --tool NAME [--args JSON] [--principal P]\n"
            "       hutch policy test FILE --execute [--lang L] [--principal P]\n"
            "       hutch policy test FILE --path PATH [--mode ro|rw]\n"
            "       hutch policy bench FILE [--tool NAME] [--args JSON] [--n N]\n"
            "                               [--threads T]\n"
            "\n"
            "Validate a Lua policy file, ask it for one decision, or measure the cost\n"
            "of its tool-call decisions.  See hutch-policy(5) for the file's fields.\n"
            "COMMAND --help for each command's options.\n");
}

static void usage_check(FILE *f)
{
    fprintf(
        f, "Usage: hutch policy check FILE...\n"
           "\n"
           "Loads each FILE as hutch serve --policy would (every field checked, host\n"
           "paths resolved, the file run once in the restricted Lua state) and prints\n"
           "\"ok: FILE\", or \"FILE:LINE: message\" on stderr.  A valid policy that\n"
           "denies every tool call (no tools.allow glob, or a tools.deny glob such as\n"
           "\"*\") gets \"FILE: warning: ...\" on stderr.  executor_options are\n"
           "checked against what each executor's plugin declares (hutch plugins\n"
           "lists it; plugins from $HUTCH_PLUGIN_DIR or the install directory):\n"
           "an option it does not declare, an environment-only one or a value\n"
           "not of its type is an error; options of an executor whose plugin is\n"
           "not installed get a warning.  Exit 0 when every file is valid, 1\n"
           "when one is not, 2 on usage errors.\n");
}

static void usage_test(FILE *f)
{
    fprintf(
        f,
        "Usage: hutch policy test FILE --tool NAME [--args JSON] [--principal P]\n"
        "                              [--execution ID] [--tainted-by SOURCE]\n"
        "       hutch policy test FILE --execute [--lang L] [--code-bytes N]\n"
        "                              [--files N] [--principal P]\n"
        "       hutch policy test FILE --path PATH [--mode ro|rw]\n"
        "\n"
        "Asks FILE for one decision and prints \"allow\" or \"deny: reason\".\n"
        "  --tool NAME       a tool call, NAME is server.tool (tools.allow/deny and\n"
        "                    on_tool_call); --args is its arguments as a JSON object;\n"
        "                    --tainted-by: the program has read from SOURCE (taint)\n"
        "  --execute         an execution (on_execute); prints the executor and the\n"
        "                    limits it would get\n"
        "  --path PATH       hutch.path_allowed(PATH, MODE); prints the resolved path\n"
        "  --principal P     who asks (default \"local\", the stdio principal)\n"
        "Exit 0 allow, 3 deny, 4 ask (on_tool_call asks the user), 2 usage or load "
        "error.\n");
}

static void usage_bench(FILE *f)
{
    fprintf(
        f,
        "Usage: hutch policy bench FILE [--tool NAME] [--args JSON] [--principal P]\n"
        "                               [--n N] [--threads T]\n"
        "\n"
        "Measures check_tool decisions in this process: N decisions (default\n"
        "100000) for tool NAME (default fs.read_file) on T threads (default 1),\n"
        "and prints p50, p99 and max in microseconds.\n");
}

static int load(const char *file, struct hutch_policy **p)
{
    struct hutch_err err = {0};
    if (hutch_policy_load(file, p, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    return 0;
}

/* executor_options against the plugins' declarations.  Without `warn`:
 * -1 after printing "FILE: message" for the first error.  With it: the
 * warnings (no such plugin, one that does not load or declares nothing:
 * those options are not checked, and the policy passes).  `ps` NULL: the
 * plugin directory could not be read. */
static int check_executor_options(const char *file, const struct hutch_policy *p,
                                  struct hutch_plugins *ps, const char *dir, int warn)
{
    const char *name;
    for (size_t i = 0; (name = hutch_policy_executor_options_name(p, i)); i++) {
        struct hutch_plugin *pl = ps ? hutch_plugins_find(ps, name) : NULL;
        struct hutch_err err = {0};
        if (!pl) {
            if (warn)
                fprintf(stderr,
                        "%s: warning: executor_options.%s: no %s executor plugin in "
                        "%s; its options are not checked\n",
                        file, name, name, dir);
        } else if (!pl->ex) {
            if (warn)
                fprintf(stderr,
                        "%s: warning: executor_options.%s: the %s plugin does not "
                        "load (%s); its options are not checked\n",
                        file, name, name, pl->reason);
        } else if (!hutch_plugin_option(pl->ex, 0)) {
            if (warn)
                fprintf(stderr,
                        "%s: warning: executor_options.%s: the %s plugin declares no "
                        "options; they are not checked\n",
                        file, name, name);
        } else if (!warn &&
                   hutch_plugin_check_options(
                       pl->ex, hutch_policy_executor_options(p, name), &err) < 0) {
            fprintf(stderr, "%s: %s\n", file, err.msg);
            return -1;
        }
    }
    return 0;
}

static int cmd_check(int argc, char **argv)
{
    struct hutch_plugins *ps = NULL;
    struct hutch_host host;
    const char *dir = hutch_plugin_dir(NULL);
    int bad = 0;
    if (argc < 2) {
        usage_check(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage_check(stdout);
        return 0;
    }
    hutch_host_init(&host, hutch_runner_dir());
    {
        struct hutch_err err = {0};
        if (hutch_plugins_load_declared(dir, &host, &ps, &err) < 0)
            ps = NULL; /* every executor's options get the warning */
    }
    for (int i = 1; i < argc; i++) {
        struct hutch_policy *p = NULL;
        char why[512];
        if (load(argv[i], &p) < 0) {
            bad = 1;
            continue;
        }
        if (check_executor_options(argv[i], p, ps, dir, 0) < 0) {
            bad = 1;
            hutch_policy_unref(p);
            continue;
        }
        printf("ok: %s\n", argv[i]);
        fflush(stdout); /* warnings after the "ok:" line on a terminal */
        if (hutch_policy_denies_every_tool(p, why, sizeof(why)))
            fprintf(stderr, "%s: warning: %s\n", argv[i], why);
        check_executor_options(argv[i], p, ps, dir, 1);
        hutch_policy_unref(p);
    }
    hutch_plugins_free(ps);
    return bad;
}

struct test_opts {
    const char *file, *tool, *args, *principal, *execution, *lang, *path, *mode;
    const char *tainted_by; /* --tainted-by: the execution read from it */
    int execute;
    uint64_t code_bytes, files, n, threads;
};

/* Options shared by test and bench; returns -1 on a usage error (printed),
 * 1 for --help. */
static int parse_opts(int argc, char **argv, struct test_opts *o, void (*help)(FILE *))
{
    static const struct option opts[] = {
        {"tool", required_argument, NULL, 't'},
        {"args", required_argument, NULL, 'a'},
        {"principal", required_argument, NULL, 'p'},
        {"execution", required_argument, NULL, 'x'},
        {"execute", no_argument, NULL, 'e'},
        {"lang", required_argument, NULL, 'l'},
        {"code-bytes", required_argument, NULL, 'c'},
        {"files", required_argument, NULL, 'f'},
        {"path", required_argument, NULL, 'P'},
        {"mode", required_argument, NULL, 'm'},
        {"n", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 'T'},
        {"tainted-by", required_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        uint64_t *num = NULL, max = 0;
        const char *name = NULL;
        switch (c) {
        case 't':
            o->tool = optarg;
            break;
        case 'a':
            o->args = optarg;
            break;
        case 'p':
            o->principal = optarg;
            break;
        case 'x':
            o->execution = optarg;
            break;
        case 'S':
            o->tainted_by = optarg;
            break;
        case 'e':
            o->execute = 1;
            break;
        case 'l':
            o->lang = optarg;
            break;
        case 'P':
            o->path = optarg;
            break;
        case 'm':
            o->mode = optarg;
            break;
        case 'c':
            num = &o->code_bytes, max = UINT32_MAX, name = "code-bytes";
            break;
        case 'f':
            num = &o->files, max = UINT32_MAX, name = "files";
            break;
        case 'n':
            num = &o->n, max = 100000000, name = "n";
            break;
        case 'T':
            num = &o->threads, max = 256, name = "threads";
            break;
        case 'h':
            help(stdout);
            return 1;
        default:
            help(stderr);
            return -1;
        }
        if (num && hutch_parse_u64(optarg, 0, max, num) < 0) {
            fprintf(stderr, "hutch policy: --%s wants a number up to %llu\n", name,
                    (unsigned long long)max);
            return -1;
        }
    }
    if (optind != argc - 1) {
        help(stderr);
        return -1;
    }
    o->file = argv[optind];
    if (o->mode && strcmp(o->mode, "ro") && strcmp(o->mode, "rw")) {
        fprintf(stderr, "hutch policy: --mode is ro or rw\n");
        return -1;
    }
    return 0;
}

static int parse_args(const char *json, cJSON **out)
{
    char where[160];
    *out = NULL;
    if (!json)
        return 0;
    *out = cJSON_Parse(json);
    if (!*out || !cJSON_IsObject(*out)) {
        fprintf(stderr, "hutch policy: --args must be a JSON object, like "
                        "'{\"path\": \"/srv/data/a.csv\"}'\n");
        cJSON_Delete(*out);
        *out = NULL;
        return -1;
    }
    /* As hutch serve refuses it: "/srv/data\u0000/../x" is no "/srv/data". */
    if (hutch_json_find_nul(*out, json, strlen(json), where, sizeof(where)) != 0) {
        fprintf(stderr,
                "hutch policy: --args: %s holds a NUL character (\\u0000), which "
                "hutch refuses in any request\n",
                where[0] ? where : "a string");
        cJSON_Delete(*out);
        *out = NULL;
        return -1;
    }
    return 0;
}

static int cmd_test(int argc, char **argv)
{
    struct test_opts o = {0};
    struct hutch_policy *p = NULL;
    cJSON *args = NULL;
    char reason[1024], resolved[4096];
    int r, modes = 0;

    r = parse_opts(argc, argv, &o, usage_test);
    if (r)
        return r > 0 ? 0 : 2;
    modes = !!o.tool + !!o.execute + !!o.path;
    if (modes != 1) {
        fprintf(stderr, "hutch policy test: give one of --tool, --execute or --path\n");
        return 2;
    }
    if (parse_args(o.args, &args) < 0 || load(o.file, &p) < 0) {
        cJSON_Delete(args);
        return 2;
    }
    if (!o.principal)
        o.principal = "local";
    if (o.tool) {
        r = hutch_policy_check_tool(p, o.principal, o.execution, NULL, o.tool, args,
                                    reason, sizeof(reason));
        r = hutch_policy_check_taint(p, NULL, o.tool, o.tainted_by, r, reason,
                                     sizeof(reason), NULL);
        if (r == 0)
            printf("allow\n");
        else if (r == HUTCH_POLICY_ASK)
            printf("ask: %s\n", reason);
        else
            printf("deny: %s\n", reason);
    } else if (o.execute) {
        struct hutch_policy_exec req = {
            .principal = o.principal,
            .execution = o.execution ? o.execution : "test",
            /* What a run would show the policy: js is javascript, and
             * so is TypeScript; another name as given. */
            .language = !o.lang ? "python"
                        : hutch_lang_canon(o.lang)
                            ? hutch_lang_runtime(hutch_lang_canon(o.lang))
                            : o.lang,
            .code_bytes = (size_t)o.code_bytes,
            .nfiles = (size_t)o.files,
        };
        struct hutch_policy_decision d;
        r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
        if (r == 0) {
            printf("allow\n"
                   "executor: %s\n"
                   "timeout_ms: %llu\n"
                   "memory_mb: %llu\n"
                   "cpus: %g\n"
                   "pids: %u\n"
                   "output_bytes: %llu\n"
                   "files_bytes: %llu\n",
                   d.executor, (unsigned long long)d.limits.timeout_ms,
                   (unsigned long long)d.limits.memory_mb, d.limits.cpus_milli / 1000.0,
                   d.limits.pids, (unsigned long long)d.limits.output_bytes,
                   (unsigned long long)d.limits.files_bytes);
        } else {
            printf("deny: %s\n", reason);
        }
    } else {
        r = hutch_policy_path_allowed(p, o.path, o.mode ? o.mode : "ro", resolved,
                                      sizeof(resolved))
                ? 0
                : -EPERM;
        if (r == 0)
            printf("allow\nresolved: %s\n", resolved);
        else
            printf("deny: %s is not inside a %s entry of paths\n", o.path,
                   o.mode ? o.mode : "ro");
    }
    cJSON_Delete(args);
    hutch_policy_unref(p);
    return r == 0 ? 0 : r == HUTCH_POLICY_ASK ? 4 : 3;
}

struct bench_thread {
    pthread_t t;
    struct hutch_policy *p;
    const struct test_opts *o;
    const cJSON *args;
    uint64_t *ns; /* one per decision */
    size_t n;
    int last;
};

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *bench_run(void *arg)
{
    struct bench_thread *b = arg;
    char reason[512];
    for (size_t i = 0; i < b->n; i++) {
        uint64_t t0 = mono_ns();
        b->last = hutch_policy_check_tool(b->p, b->o->principal, "bench", NULL,
                                          b->o->tool, b->args, reason, sizeof(reason));
        b->ns[i] = mono_ns() - t0;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmd_bench(int argc, char **argv)
{
    struct test_opts o = {0};
    struct hutch_policy *p = NULL;
    struct bench_thread *th = NULL;
    uint64_t *all = NULL, t0, wall;
    cJSON *args = NULL;
    size_t n, per, total;
    char reason[512];
    int r, rc = 2;

    r = parse_opts(argc, argv, &o, usage_bench);
    if (r)
        return r > 0 ? 0 : 2;
    if (!o.tool)
        o.tool = "fs.read_file";
    if (!o.principal)
        o.principal = "local";
    n = o.n ? (size_t)o.n : 100000;
    if (!o.threads)
        o.threads = 1;
    if (parse_args(o.args, &args) < 0 || load(o.file, &p) < 0)
        goto out;
    per = (n + o.threads - 1) / o.threads;
    total = per * o.threads;
    all = calloc(total, sizeof(*all));
    th = calloc(o.threads, sizeof(*th));
    if (!all || !th) {
        fprintf(stderr, "hutch policy bench: out of memory\n");
        goto out;
    }
    /* Warm up: every thread's Lua state exists before measuring. */
    for (int i = 0; i < 1000; i++)
        hutch_policy_check_tool(p, o.principal, "bench", NULL, o.tool, args, reason,
                                sizeof(reason));
    t0 = mono_ns();
    for (size_t i = 0; i < o.threads; i++) {
        th[i] = (struct bench_thread){
            .p = p, .o = &o, .args = args, .ns = all + i * per, .n = per};
        if (pthread_create(&th[i].t, NULL, bench_run, &th[i])) {
            fprintf(stderr, "hutch policy bench: cannot start a thread\n");
            for (size_t k = 0; k < i; k++)
                pthread_join(th[k].t, NULL);
            goto out;
        }
    }
    for (size_t i = 0; i < o.threads; i++)
        pthread_join(th[i].t, NULL);
    wall = mono_ns() - t0;
    qsort(all, total, sizeof(*all), cmp_u64);
    r = hutch_policy_check_tool(p, o.principal, "bench", NULL, o.tool, args, reason,
                                sizeof(reason));
    printf("policy %s, tool %s: %s%s\n", o.file, o.tool,
           r == HUTCH_POLICY_ASK ? "ask: "
           : r                   ? "deny: "
                                 : "allow",
           r ? reason : "");
    printf("%zu decisions on %llu thread%s: p50 %.2f us, p99 %.2f us, max %.2f us, "
           "%.0f decisions/s\n",
           total, (unsigned long long)o.threads, o.threads == 1 ? "" : "s",
           all[total / 2] / 1000.0, all[(size_t)(total * 0.99)] / 1000.0,
           all[total - 1] / 1000.0, wall ? total * 1e9 / (double)wall : 0.0);
    rc = 0;
out:
    free(all);
    free(th);
    cJSON_Delete(args);
    hutch_policy_unref(p);
    return rc;
}

int hutch_cmd_policy(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "check"))
        return cmd_check(argc - 1, argv + 1);
    if (!strcmp(argv[1], "test"))
        return cmd_test(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench"))
        return cmd_bench(argc - 1, argv + 1);
    fprintf(stderr, "hutch policy: unknown command \"%s\" (check, test or bench)\n",
            argv[1]);
    return 2;
}
