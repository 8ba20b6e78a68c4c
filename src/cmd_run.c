/* cmd_run.c — `hutch run`: one program, one fresh sandbox, from the shell. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bridge.h"
#include "caps.h"
#include "cli.h"
#include "exec.h"
#include "govern.h"
#include "hutch_archive.h"
#include "log.h"
#include "upstream.h"
#include "util.h"

static volatile int cancelled;

static void on_signal(int sig)
{
    cancelled = sig;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: hutch run [OPTIONS] --lang python|javascript (-e CODE | FILE | -)\n"
        "\n"
        "Runs the program in a fresh sandbox.  Its stdout and stderr are hutch's;\n"
        "hutch exits with its exit status, 124 on timeout, 137 when it was killed\n"
        "for memory, 125 when hutch itself failed.\n"
        "\n"
        "  -l, --lang LANG        python or javascript (default: from FILE's "
        "extension)\n"
        "  -e, --eval CODE        the program's source\n"
        "  -f, --file SRC[:DEST]  copy host file or directory SRC to /work/DEST\n"
        "                         (default DEST: SRC's base name); repeatable\n"
        "  -o, --out DIR          copy what the program writes under /work/out to DIR\n"
        "  -x, --executor NAME    executor plugin (default: $HUTCH_EXECUTOR or local)\n"
        "      --plugins DIR      plugin directory (default: $HUTCH_PLUGIN_DIR or\n"
        "                         %s)\n"
        "  -t, --timeout MS       wall-clock limit (default %d, max %u)\n"
        "  -m, --memory MB        memory limit (default %d)\n"
        "      --pids N           process limit (default %d)\n"
        "      --json             print one JSON object: exit_code, stdout, stderr,\n"
        "                         result, files, duration_ms, timed_out, …\n"
        "  -v, --verbose          log what hutch does on stderr\n"
        "  -h, --help             this text\n",
        HUTCH_PLUGIN_DIR, HUTCH_DEFAULT_TIMEOUT_MS, HUTCH_MAX_TIMEOUT_MS,
        HUTCH_DEFAULT_MEMORY_MB, HUTCH_DEFAULT_PIDS);
}

/* "--file SRC[:DEST]": DEST after the last ':' when there is one. */
/* With a policy file, a host input must lie in one of its `paths`; the
 * resolved path (not the string given) is what gets read. */
static int add_file_arg(struct hutch_tar *tar, const char *arg,
                        struct hutch_policy *policy, struct hutch_err *err)
{
    char resolved[PATH_MAX], dest_unused[PATH_MAX], reason[600];
    _cleanup_free_ char *src = strdup(arg);
    const char *dest;
    char *colon;

    if (!src)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    colon = strrchr(src, ':');
    if (colon && colon[1]) {
        *colon = '\0';
        dest = colon + 1;
    } else {
        if (colon)
            *colon = '\0';
        dest = strrchr(src, '/');
        dest = dest ? dest + 1 : src;
        while (*dest == '\0' && dest > src) /* "dir/" */
            dest = "input";
    }
    if (policy) {
        if (hutch_gov_input(policy, src, resolved, sizeof(resolved), dest_unused,
                            sizeof(dest_unused), reason, sizeof(reason)) < 0)
            return hutch_err_set(err, -EPERM, "refused by the policy: %s", reason);
        return hutch_tar_add_path(tar, resolved, dest, err);
    }
    return hutch_tar_add_path(tar, src, dest, err);
}

static const char *lang_from_path(const char *path)
{
    const char *dot = path ? strrchr(path, '.') : NULL;
    if (!dot)
        return NULL;
    if (!strcmp(dot, ".py"))
        return "python";
    if (!strcmp(dot, ".js") || !strcmp(dot, ".mjs") || !strcmp(dot, ".cjs"))
        return "javascript";
    return NULL;
}

static void print_result(const cJSON *result)
{
    char *s;
    if (!result || cJSON_IsNull(result))
        return;
    if (cJSON_IsString(result)) {
        printf("%s\n", result->valuestring);
        return;
    }
    s = cJSON_Print(result);
    if (s)
        printf("%s\n", s);
    free(s);
}

int hutch_cmd_run(int argc, char **argv)
{
    enum { OPT_PLUGINS = 256, OPT_JSON, OPT_PIDS, OPT_AUDIT };
    static const struct option opts[] = {
        {"lang", required_argument, NULL, 'l'},
        {"eval", required_argument, NULL, 'e'},
        {"file", required_argument, NULL, 'f'},
        {"out", required_argument, NULL, 'o'},
        {"executor", required_argument, NULL, 'x'},
        {"plugins", required_argument, NULL, OPT_PLUGINS},
        {"servers", required_argument, NULL, 's'},
        {"policy", required_argument, NULL, 'p'},
        {"audit", required_argument, NULL, OPT_AUDIT},
        {"timeout", required_argument, NULL, 't'},
        {"memory", required_argument, NULL, 'm'},
        {"pids", required_argument, NULL, OPT_PIDS},
        {"json", no_argument, NULL, OPT_JSON},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct hutch_err err = {0};
    struct hutch_exec_req req = {0};
    struct hutch_exec_result res;
    struct hutch_host host;
    struct hutch_plugins *ps = NULL;
    struct hutch_plugin *plugin = NULL;
    struct hutch_tar *tar = NULL;
    const char *lang = NULL, *eval = NULL, *out_dir = NULL, *executor = NULL;
    const char *plugin_dir = NULL, *path = NULL, *servers = NULL, *policy_file = NULL,
               *audit_file = NULL;
    struct hutch_gov *gov = NULL;
    struct hutch_policy *policy = NULL;
    static char out_resolved[PATH_MAX];
    struct hutch_gov_exec gx = {0};
    struct hutch_policy_decision dec;
    int governed = 0, timeout_set = 0, memory_set = 0, pids_set = 0;
    struct hutch_upstreams *ups = NULL;
    struct hutch_bridge *bridge = NULL;
    cJSON *config = NULL;
    const char **files = NULL;
    size_t nfiles = 0;
    uint64_t timeout = HUTCH_DEFAULT_TIMEOUT_MS, memory = HUTCH_DEFAULT_MEMORY_MB,
             pids = HUTCH_DEFAULT_PIDS;
    int json = 0, c, rc = HUTCH_EXIT_ERROR, r;
    char *code = NULL;
    size_t code_len = 0;
    struct sigaction sa;

    hutch_exec_result_init(&res);
    files = calloc((size_t)argc, sizeof(*files));
    if (!files) {
        fprintf(stderr, "hutch run: out of memory\n");
        goto out;
    }
    optind = 1;
    while ((c = getopt_long(argc, argv, "l:e:f:o:x:s:p:t:m:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            lang = optarg;
            break;
        case 'e':
            eval = optarg;
            break;
        case 'f':
            files[nfiles++] = optarg;
            break;
        case 'o':
            out_dir = optarg;
            break;
        case 'x':
            executor = optarg;
            break;
        case OPT_PLUGINS:
            plugin_dir = optarg;
            break;
        case 's':
            servers = optarg;
            break;
        case 'p':
            policy_file = optarg;
            break;
        case OPT_AUDIT:
            audit_file = optarg;
            break;
        case 't':
            timeout_set = 1;
            if (hutch_cli_limit("hutch run", "timeout", optarg, &timeout) < 0) {
                rc = 2;
                goto out;
            }
            break;
        case 'm':
            memory_set = 1;
            if (hutch_cli_limit("hutch run", "memory", optarg, &memory) < 0) {
                rc = 2;
                goto out;
            }
            break;
        case OPT_PIDS:
            pids_set = 1;
            if (hutch_cli_limit("hutch run", "pids", optarg, &pids) < 0) {
                rc = 2;
                goto out;
            }
            break;
        case OPT_JSON:
            json = 1;
            break;
        case 'v':
            hutch_log_more();
            break;
        case 'h':
            usage(stdout);
            rc = 0;
            goto out;
        default:
            usage(stderr);
            rc = 2;
            goto out;
        }
    }
    if (optind < argc)
        path = argv[optind++];
    if (optind < argc || (eval && path) || (!eval && !path)) {
        fprintf(stderr,
                "hutch run: give the program as exactly one of -e CODE, FILE or - "
                "(see hutch run --help)\n");
        rc = 2;
        goto out;
    }
    if (!lang)
        lang = lang_from_path(path);
    if (!lang || (strcmp(lang, "python") && strcmp(lang, "javascript"))) {
        fprintf(stderr, "hutch run: --lang must be python or javascript\n");
        rc = 2;
        goto out;
    }
    if (eval) {
        if (strlen(eval) > HUTCH_MAX_CODE_BYTES) {
            fprintf(stderr, "hutch run: code is larger than %u bytes\n",
                    HUTCH_MAX_CODE_BYTES);
            goto out;
        }
        code = strdup(eval);
        code_len = code ? strlen(code) : 0;
    } else if (!strcmp(path, "-")) {
        r = hutch_read_fd(STDIN_FILENO, HUTCH_MAX_CODE_BYTES, &code, &code_len, &err);
        if (r < 0) {
            fprintf(stderr, "hutch run: reading the program from stdin: %s\n", err.msg);
            goto out;
        }
    } else {
        r = hutch_read_file(path, HUTCH_MAX_CODE_BYTES, &code, &code_len, &err);
        if (r < 0) {
            fprintf(stderr, "hutch run: %s\n", err.msg);
            goto out;
        }
    }
    if (!code) {
        fprintf(stderr, "hutch run: out of memory\n");
        goto out;
    }
    if (strlen(code) != code_len) {
        fprintf(stderr, "hutch run: the program contains a NUL byte\n");
        goto out;
    }
    if (policy_file || audit_file) {
        if (hutch_gov_new(policy_file, audit_file ? audit_file : "/dev/null", &gov,
                          &err) < 0) {
            fprintf(stderr, "hutch run: policy: %s\n", err.msg);
            goto out;
        }
        if (policy_file)
            policy = hutch_gov_policy(gov);
    }
    if (nfiles) {
        r = hutch_tar_new(&tar, HUTCH_TAR_IN_MAX_BYTES, &err);
        for (size_t i = 0; r == 0 && i < nfiles; i++)
            r = add_file_arg(tar, files[i], policy, &err);
        if (r == 0)
            r = hutch_tar_finish(tar, &req.tar, &req.tar_len, &err);
        if (r < 0) {
            fprintf(stderr, "hutch run: --file: %s\n", err.msg);
            goto out;
        }
    }
    if (out_dir && policy) {
        char reason[600];
        if (hutch_gov_output(policy, out_dir, out_resolved, sizeof(out_resolved),
                             reason, sizeof(reason)) < 0) {
            fprintf(stderr, "hutch run: --out: refused by the policy: %s\n", reason);
            goto out;
        }
        out_dir = out_resolved;
    }
    if (out_dir) {
        struct stat st;
        if (mkdir(out_dir, 0755) < 0 && errno != EEXIST) {
            fprintf(stderr, "hutch run: --out %s: %s\n", out_dir, strerror(errno));
            goto out;
        }
        if (lstat(out_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
            fprintf(stderr, "hutch run: --out %s is not a directory\n", out_dir);
            goto out;
        }
    }

    if (servers) {
        if (hutch_cli_start_upstreams(servers, "hutch run", &config, &ups, &err) < 0 ||
            hutch_bridge_new(ups, &bridge, &err) < 0) {
            fprintf(stderr, "hutch run: --servers: %s\n", err.msg);
            goto out;
        }
        if (!governed) {
            req.tool = hutch_bridge_tool;
            req.tool_arg = bridge;
        }
    }

    if (gov) {
        char reason[600];
        if (!bridge && hutch_bridge_new(NULL, &bridge, &err) < 0) {
            fprintf(stderr, "hutch run: %s\n", err.msg);
            goto out;
        }
        if (hutch_gov_begin(gov, &gx, bridge, "local", lang, code_len, nfiles, &dec,
                            reason, sizeof(reason)) < 0) {
            fprintf(stderr, "hutch run: refused by the policy: %s\n", reason);
            goto out;
        }
        governed = 1;
        if (!executor)
            executor = dec.executor;
        /* The policy's limits are ceilings: flags may only tighten them. */
        if (!timeout_set || timeout > dec.limits.timeout_ms)
            timeout = dec.limits.timeout_ms;
        if (!memory_set || memory > dec.limits.memory_mb)
            memory = dec.limits.memory_mb;
        if (!pids_set || pids > dec.limits.pids)
            pids = dec.limits.pids;
        req.cpu_millis = dec.limits.cpus_milli;
        req.executor_options = hutch_policy_executor_options(policy, executor);
        req.output_bytes = dec.limits.output_bytes;
        req.files_bytes = dec.limits.files_bytes;
        if (req.tar_len > dec.limits.files_bytes) {
            fprintf(stderr,
                    "hutch run: --file inputs exceed the policy's files_bytes (%llu)\n",
                    (unsigned long long)dec.limits.files_bytes);
            goto out;
        }
        req.tool = hutch_gov_tool;
        req.tool_arg = &gx;
    }
    r = hutch_cli_open_executor(plugin_dir, executor, &host, &ps, &plugin, &err);
    if (r < 0) {
        fprintf(stderr, "hutch run: %s\n", err.msg);
        goto out;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    req.language = lang;
    req.code = code;
    req.timeout_ms = timeout;
    req.memory_mb = memory;
    req.pids = (uint32_t)pids;
    req.label = "cli";
    req.out_dir = out_dir;
    /* Plain output without --out shows no files: save the round trip. */
    req.skip_files = !out_dir && !json;
    req.stream_fd_out = json ? -1 : STDOUT_FILENO;
    req.stream_fd_err = json ? -1 : STDERR_FILENO;
    req.cancel = &cancelled;

    r = hutch_exec_run(plugin, &req, &res, &err);
    if (governed) {
        hutch_gov_end(&gx, r < 0 ? NULL : &res, r < 0 ? err.msg : NULL);
        governed = 0;
    }
    if (r < 0) {
        fprintf(stderr, "hutch run: %s\n", err.msg);
        goto out;
    }
    if (cancelled) {
        fprintf(stderr, "hutch run: interrupted; the sandbox was killed\n");
        rc = 128 + cancelled;
        goto out;
    }
    if (json) {
        cJSON *o = hutch_exec_result_json(&res);
        char *s = cJSON_PrintUnformatted(o);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        fflush(stdout);
        print_result(res.result);
        if (res.message[0])
            fprintf(stderr, "hutch: %s\n", res.message);
    }
    rc = res.exit_code;
out:
    fflush(stdout);
    hutch_exec_result_free(&res);
    hutch_tar_free(tar);
    hutch_plugins_free(ps);
    if (governed)
        hutch_gov_end(&gx, NULL, "not run");
    hutch_policy_unref(policy);
    hutch_gov_free(gov);
    hutch_bridge_free(bridge);
    hutch_upstreams_free(ups);
    cJSON_Delete(config);
    free(code);
    free(files);
    return rc;
}
