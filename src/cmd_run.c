/* cmd_run.c — `hutch run`: one program, one fresh sandbox, from the shell. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "approval.h"
#include "audit.h"
#include "bridge.h"
#include "caps.h"
#include "cli.h"
#include "exec.h"
#include "govern.h"
#include "hutch_archive.h"
#include "job.h"
#include "knobs.h"
#include "log.h"
#include "result_json.h"
#include "upstream.h"
#include "util.h"
#include "workspace.h"

static atomic_int cancelled;

static void on_signal(int sig)
{
    atomic_store(&cancelled, sig);
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: hutch run [OPTIONS] --lang python|javascript|typescript\n"
        "                 (-e CODE | FILE | -)\n"
        "\n"
        "Runs the program in a fresh sandbox.  Its stdout and stderr are hutch's;\n"
        "hutch exits with its exit status, 124 on timeout, 137 when it was killed\n"
        "for memory, 125 when hutch itself failed.\n"
        "\n"
        "  -l, --lang LANG        python (py, python3), javascript (js, node) or\n"
        "                         typescript (ts)\n"
        "                         (default: from FILE's extension)\n"
        "  -e, --eval CODE        the program's source\n"
        "  -f, --file SRC[:DEST]  copy host file or directory SRC to /work/DEST\n"
        "                         (default DEST: SRC's base name); repeatable\n"
        "  -o, --out DIR          copy what the program writes under /work/out to DIR\n"
        "  -w, --workspace NAME   /work/out/workspace starts with what the last\n"
        "                         successful run of workspace NAME left there, and\n"
        "                         is saved when this one succeeds\n"
        "      --workspaces DIR   where workspaces are kept (default:\n"
        "                         $HUTCH_WORKSPACES, else /var/lib/hutch/workspaces\n"
        "                         for root, else $XDG_STATE_HOME/hutch/workspaces)\n"
        "  -x, --executor NAME    executor plugin (default: $HUTCH_EXECUTOR or local)\n"
        "      --flavour NAME     base (default) or data: Python with numpy, pandas\n"
        "                         and matplotlib\n"
        "      --plugins DIR      plugin directory (default: $HUTCH_PLUGIN_DIR or\n"
        "                         %s)\n"
        "  -t, --timeout MS       wall-clock limit (default %d, max %u)\n"
        "  -m, --memory MB        memory limit (default %d)\n"
        "      --pids N           process limit (default %d)\n"
        "      --output-bytes N   stdout and stderr kept, each: the first and last\n"
        "                         bytes, with a note of what was left out between\n"
        "                         (default and max %u)\n"
        "  -s, --servers FILE     upstream MCP servers the program may call (the\n"
        "                         mcpServers JSON format, as for hutch serve)\n"
        "  -p, --policy FILE      a policy (Lua; see hutch-policy(5)) for the run\n"
        "      --audit FILE       audit log, JSON lines (default: none)\n"
        "      --audit-values     write tool-call argument values into it (default:\n"
        "                         their names and sizes only)\n"
        "      --json             print one JSON object: exit_code, stdout, stderr,\n"
        "                         result, files, duration_ms, timed_out, a summary\n"
        "                         of tool_calls, …\n"
        "      --trace            with --json: every tool call in \"trace\"\n"
        "  -v, --verbose          log what hutch does on stderr\n"
        "  -h, --help             this text\n",
        HUTCH_PLUGIN_DIR, HUTCH_DEFAULT_TIMEOUT_MS, HUTCH_MAX_TIMEOUT_MS,
        HUTCH_DEFAULT_MEMORY_MB, HUTCH_DEFAULT_PIDS, HUTCH_OUTPUT_MAX_BYTES);
    hutch_knobs_help(f, HUTCH_CMD_RUN);
}

/* "--file SRC[:DEST]": DEST after the last ':' when there is one, else
 * SRC's base name. */
static int file_arg(char *arg, struct hutch_job_input *in)
{
    char *colon = strrchr(arg, ':'), *base;
    in->src = arg;
    if (colon && colon[1]) {
        *colon = '\0';
        in->dest = colon + 1;
        return *in->src ? 0 : -EINVAL;
    }
    if (colon)
        *colon = '\0';
    base = strrchr(arg, '/');
    in->dest = base ? base + 1 : arg;
    if (!*in->dest) /* "dir/" */
        in->dest = "input";
    return *in->src ? 0 : -EINVAL;
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
    if (!strcmp(dot, ".ts") || !strcmp(dot, ".mts") || !strcmp(dot, ".cts"))
        return "typescript";
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

/* hutch run's answer to the policy's questions (on_tool_call's "ask"): the
 * question on the terminal (/dev/tty, so the program's own stdout and
 * stderr stay as they are), y to allow; one question at a time.  No
 * terminal: nobody can be asked (the call is denied, saying so). */
static int tty_ask(void *arg, const char *tool, const char *question, const cJSON *args,
                   unsigned ms, char *why, size_t why_len)
{
    static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER;
    /* Every argument's head and tail, escaped (approval.c), as an MCP
     * client's user is shown them; the tool's name and the question (which
     * may quote the arguments) escaped too. */
    char *shown = hutch_approval_args_text(args);
    char *qtool = hutch_text_escape(tool, HUTCH_ESCAPE_TEXT);
    char *qq = hutch_text_escape(question, HUTCH_ESCAPE_TEXT);
    char line[64];
    uint64_t end;
    size_t n = 0;
    int fd, a = HUTCH_ANSWER_TIMEOUT;

    (void)arg;
    if (!shown || !qtool || !qq) {
        free(shown);
        free(qtool);
        free(qq);
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        free(shown);
        free(qtool);
        free(qq);
        snprintf(why, why_len, "hutch run has no terminal to ask on");
        return -ENOTTY;
    }
    pthread_mutex_lock(&one);
    dprintf(fd,
            "\nhutch: the policy asks before %s:\n  %s\nwith the arguments:\n%sallow? "
            "[y/N] ",
            qtool, qq, shown);
    end = hutch_now_ms() + ms;
    for (;;) {
        uint64_t now = hutch_now_ms();
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t got;
        if (now >= end)
            break;
        if (poll(&p, 1, (int)(end - now)) <= 0)
            continue;
        got = read(fd, line + n, sizeof(line) - 1 - n);
        if (got <= 0) {
            a = HUTCH_ANSWER_CANCEL;
            break;
        }
        n += (size_t)got;
        line[n] = '\0';
        if (strchr(line, '\n') || n == sizeof(line) - 1) {
            a = line[0] == 'y' || line[0] == 'Y' ? HUTCH_ANSWER_APPROVE
                                                 : HUTCH_ANSWER_DECLINE;
            break;
        }
    }
    if (a == HUTCH_ANSWER_TIMEOUT)
        dprintf(fd, "\nhutch: no answer within %u s: denied\n", ms / 1000);
    pthread_mutex_unlock(&one);
    close(fd);
    free(shown);
    free(qtool);
    free(qq);
    return a;
}

/* What hutch run's command line asks for.  The request and the jobs'
 * options are the caller's, filled in place; inputs has room for every
 * argument. */
struct run_args {
    struct hutch_jobs_opts *jo;
    struct hutch_job_req *job;
    struct hutch_job_input *inputs;
    size_t ninputs;
    const char *lang, *eval, *path, *servers, *policy_file, *audit_file, *flavour;
    int json, trace, audit_values;
    struct hutch_err err;
};

/* Only parses: -1 to go on, else the exit status (0 after --help, 2 on a
 * usage error, said on stderr). */
static int run_parse(int argc, char **argv, struct run_args *a)
{
    enum {
        OPT_PLUGINS = 256,
        OPT_JSON,
        OPT_PIDS,
        OPT_AUDIT,
        OPT_WORKSPACES,
        OPT_TRACE,
        OPT_OUTPUT_BYTES,
        OPT_FLAVOUR,
        OPT_AUDIT_VALUES
    };
    static const struct option opts[] = {
        {"lang", required_argument, NULL, 'l'},
        {"eval", required_argument, NULL, 'e'},
        {"file", required_argument, NULL, 'f'},
        {"out", required_argument, NULL, 'o'},
        {"workspace", required_argument, NULL, 'w'},
        {"workspaces", required_argument, NULL, OPT_WORKSPACES},
        {"executor", required_argument, NULL, 'x'},
        {"flavour", required_argument, NULL, OPT_FLAVOUR},
        {"plugins", required_argument, NULL, OPT_PLUGINS},
        {"servers", required_argument, NULL, 's'},
        {"policy", required_argument, NULL, 'p'},
        {"audit", required_argument, NULL, OPT_AUDIT},
        {"audit-values", no_argument, NULL, OPT_AUDIT_VALUES},
        {"timeout", required_argument, NULL, 't'},
        {"memory", required_argument, NULL, 'm'},
        {"pids", required_argument, NULL, OPT_PIDS},
        {"output-bytes", required_argument, NULL, OPT_OUTPUT_BYTES},
        {"json", no_argument, NULL, OPT_JSON},
        {"trace", no_argument, NULL, OPT_TRACE},
        {"verbose", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int c;

    optind = 1;
    while ((c = getopt_long(argc, argv, "l:e:f:o:w:x:s:p:t:m:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            a->lang = optarg;
            break;
        case 'e':
            a->eval = optarg;
            break;
        case 'f':
            if (file_arg(optarg, &a->inputs[a->ninputs++]) < 0) {
                fprintf(stderr, "hutch run: --file wants SRC[:DEST]\n");
                return 2;
            }
            break;
        case 'o':
            a->job->output_dir = optarg;
            break;
        case 'w':
            if (hutch_ws_check_name(optarg, &a->err) < 0) {
                fprintf(stderr, "hutch run: --workspace: %s\n", a->err.msg);
                return 2;
            }
            a->job->workspace = optarg;
            break;
        case OPT_WORKSPACES:
            a->jo->workspaces_dir = optarg;
            break;
        case 'x':
            a->jo->executor = optarg;
            a->jo->executor_from = "--executor";
            break;
        case OPT_FLAVOUR:
            a->flavour = optarg;
            break;
        case OPT_PLUGINS:
            a->jo->plugin_dir = optarg;
            break;
        case 's':
            a->servers = optarg;
            break;
        case 'p':
            a->policy_file = optarg;
            break;
        case OPT_AUDIT:
            a->audit_file = optarg;
            break;
        case OPT_AUDIT_VALUES:
            a->audit_values = 1;
            break;
        case 't':
            if (hutch_cli_limit("hutch run", "timeout", optarg, &a->jo->timeout_ms) <
                0) {
                return 2;
            }
            break;
        case 'm':
            if (hutch_cli_limit("hutch run", "memory", optarg, &a->jo->memory_mb) < 0) {
                return 2;
            }
            break;
        case OPT_PIDS:
            if (hutch_cli_limit("hutch run", "pids", optarg, &v) < 0) {
                return 2;
            }
            a->jo->pids = (uint32_t)v;
            break;
        case OPT_OUTPUT_BYTES:
            if (hutch_cli_limit("hutch run", "output-bytes", optarg,
                                &a->jo->output_bytes) < 0) {
                return 2;
            }
            break;
        case OPT_JSON:
            a->json = 1;
            break;
        case OPT_TRACE:
            a->trace = 1;
            break;
        case 'v':
            hutch_log_more();
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (a->trace && !a->json) {
        fprintf(stderr, "hutch run: --trace goes with --json\n");
        return 2;
    }
    if (optind < argc)
        a->path = argv[optind++];
    if (optind < argc || (a->eval && a->path) || (!a->eval && !a->path)) {
        fprintf(stderr,
                "hutch run: give the program as exactly one of -e CODE, FILE or - "
                "(see hutch run --help)\n");
        return 2;
    }
    if (a->flavour && strcmp(a->flavour, "base") != 0 &&
        strcmp(a->flavour, "data") != 0) {
        fprintf(stderr, "hutch run: --flavour must be base or data\n");
        return 2;
    }
    if (a->lang && !hutch_lang_canon(a->lang)) {
        fprintf(stderr,
                "hutch run: --lang must be python, javascript or typescript (or py, "
                "python3; js, node, nodejs; ts)\n");
        return 2;
    }
    a->lang = a->lang ? hutch_lang_canon(a->lang) : lang_from_path(a->path);
    if (!a->lang) {
        fprintf(stderr, "hutch run: --lang must be python, javascript or typescript\n");
        return 2;
    }
    return -1;
}

/* The program, from -e, a file or stdin, as a string: 0, or -1 once said
 * on stderr.  Caller frees *code. */
static int read_program(const struct run_args *a, char **code)
{
    struct hutch_err err = {0};
    size_t len = 0;
    int r = 0;

    *code = NULL;
    if (a->eval) {
        if (strlen(a->eval) > HUTCH_MAX_CODE_BYTES) {
            fprintf(stderr, "hutch run: code is larger than %u bytes\n",
                    HUTCH_MAX_CODE_BYTES);
            return -1;
        }
        *code = strdup(a->eval);
        len = *code ? strlen(*code) : 0;
    } else if (!strcmp(a->path, "-")) {
        r = hutch_read_fd(STDIN_FILENO, HUTCH_MAX_CODE_BYTES, code, &len, &err);
        if (r < 0)
            fprintf(stderr, "hutch run: reading the program from stdin: %s\n", err.msg);
    } else {
        r = hutch_read_file(a->path, HUTCH_MAX_CODE_BYTES, code, &len, &err);
        if (r < 0)
            fprintf(stderr, "hutch run: %s\n", err.msg);
    }
    if (r < 0)
        return -1;
    if (!*code) {
        fprintf(stderr, "hutch run: out of memory\n");
        return -1;
    }
    if (strlen(*code) != len) {
        fprintf(stderr, "hutch run: the program contains a NUL byte\n");
        return -1;
    }
    return 0;
}

int hutch_cmd_run(int argc, char **argv)
{
    struct hutch_err err = {0};
    struct hutch_jobs_opts jo = {0};
    struct hutch_job_req job = {0};
    struct hutch_exec_result res;
    struct hutch_jobs *jobs = NULL;
    struct run_args a = {.jo = &jo, .job = &job};
    struct hutch_gov *gov = NULL;
    struct hutch_upstreams *ups = NULL;
    struct hutch_bridge *bridge = NULL;
    cJSON *config = NULL;
    int rc = HUTCH_EXIT_ERROR, r;
    char *code = NULL;
    struct sigaction sa;

    hutch_exec_result_init(&res);
    a.inputs = calloc((size_t)argc, sizeof(*a.inputs));
    if (!a.inputs) {
        fprintf(stderr, "hutch run: out of memory\n");
        goto out;
    }
    if ((r = run_parse(argc, argv, &a)) >= 0) {
        rc = r;
        goto out;
    }
    /* The environment's settings (knobs.def), before anything starts. */
    if (hutch_knobs_check(HUTCH_CMD_RUN | HUTCH_CMD_ALL, &err) < 0) {
        fprintf(stderr, "hutch run: %s\n", err.msg);
        goto out;
    }
    if (read_program(&a, &code) < 0)
        goto out;
    /* Without --audit the decisions go nowhere: a one-shot run on the
     * shell is not a deployment. */
    if (hutch_gov_new(a.policy_file, a.audit_file ? a.audit_file : "/dev/null", &gov,
                      &err) < 0 ||
        hutch_gov_set_flavour(gov, a.flavour, &err) < 0) {
        fprintf(stderr, "hutch run: policy: %s\n", err.msg);
        goto out;
    }
    hutch_audit_set_values(hutch_gov_audit(gov), a.audit_values);
    if (hutch_cli_start_tools(a.servers, "hutch run", true, &config, &ups, &bridge,
                              &err) < 0) {
        fprintf(stderr, "hutch run: --servers: %s\n", err.msg);
        goto out;
    }
    jo.gov = gov;
    jo.bridge = bridge;
    jo.pools = 0; /* one-shot: a warm sandbox would only cost */
    if (hutch_jobs_new(&jo, &jobs, &err) < 0) {
        fprintf(stderr, "hutch run: %s\n", err.msg);
        goto out;
    }

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    job.principal = "local";
    job.language = a.lang;
    job.code = code;
    job.inputs = a.inputs;
    job.ninputs = a.ninputs;
    job.nfiles = a.ninputs;
    /* Without a policy file, hutch run reads and writes as the invoking
     * user, like any command. */
    job.host_paths_trusted = a.policy_file == NULL;
    /* Plain output without --out shows no files: save the round trip. */
    job.skip_files = !job.output_dir && !a.json;
    job.stream_fd_out = a.json ? -1 : STDOUT_FILENO;
    job.stream_fd_err = a.json ? -1 : STDERR_FILENO;
    job.cancel = &cancelled;
    job.ask = tty_ask;

    r = hutch_job_run(jobs, &job, &res, &err);
    if (r < 0) {
        fprintf(stderr, "hutch run: %s\n", err.msg);
        goto out;
    }
    if (atomic_load(&cancelled)) {
        fprintf(stderr, "hutch run: interrupted; the sandbox was killed\n");
        rc = 128 + atomic_load(&cancelled);
        goto out;
    }
    if (a.json) {
        cJSON *o = hutch_result_json(&res, a.trace, NULL, NULL);
        char *s = cJSON_PrintUnformatted(o);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        fflush(stdout);
        print_result(res.result);
        /* It may quote what the program chose (a file name, a workspace's
         * content): on a terminal, as text that cannot drive it. */
        if (res.message[0]) {
            char *m = hutch_text_escape(res.message, HUTCH_ESCAPE_TEXT);
            fprintf(stderr, "hutch: %s\n", m ? m : "(out of memory)");
            free(m);
        }
    }
    rc = res.exit_code;
out:
    fflush(stdout);
    if (jobs)
        hutch_job_release(jobs, &job);
    hutch_exec_result_free(&res);
    hutch_jobs_free(jobs);
    hutch_gov_free(gov);
    hutch_bridge_free(bridge);
    hutch_upstreams_free(ups);
    cJSON_Delete(config);
    free(code);
    free(a.inputs);
    return rc;
}
