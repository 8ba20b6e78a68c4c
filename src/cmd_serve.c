/* cmd_serve.c — `hutch serve`: the MCP server, over stdio (one client, the
 * default; stdio_server.c) or streamable HTTP (http.c).  This file parses
 * the options (the --config file is read by serve_config.c into them),
 * starts what they name, and stops it. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit.h"
#include "bridge.h"
#include "buf.h"
#include "caps.h"
#include "cli.h"
#include "govern.h"
#include "http.h"
#include "job.h"
#include "knobs.h"
#include "log.h"
#include "mcp_server.h"
#include "policy.h"
#include "resources.h"
#include "serve_config.h"
#include "shape.h"
#include "stdio_server.h"
#include "upstream.h"
#include "util.h"

static volatile sig_atomic_t stopping;
static struct hutch_gov *gov;
static struct hutch_jobs *jobs; /* set before the reload thread can act */

/* SIGHUP reloads the policy: a thread waits for it with sigwait, so that
 * reloading (Lua, files, allocation) never runs in a signal handler. */
static void *reload_thread(void *arg)
{
    sigset_t set;
    int sig;
    sigemptyset(&set);
    sigaddset(&set, SIGHUP);
    for (;;) {
        struct hutch_err err = {0};
        if (sigwait(&set, &sig) != 0)
            continue;
        if (hutch_gov_reload(gov, &err) < 0) {
            hutch_error("policy reload failed, keeping the current policy: %s",
                        err.msg);
        } else if (jobs && hutch_jobs_policy_changed(jobs, &err) < 0) {
            hutch_error("the reloaded policy cannot be served, every execution is "
                        "refused until it is fixed: %s",
                        err.msg);
        } else {
            hutch_info("policy reloaded");
        }
    }
    return NULL;
}

static int http_principal(void *arg, const char *token, char *name, size_t len)
{
    struct hutch_policy *p = hutch_gov_policy(arg);
    const char *who = hutch_policy_principal(p, token);
    if (who)
        snprintf(name, len, "%s", who);
    hutch_policy_unref(p);
    return who != NULL;
}

static void on_signal(int sig)
{
    stopping = sig;
}

/* HTTP takes the policy's principals' tokens when it names some. */
static void set_principals(struct hutch_http_opts *ho)
{
    struct hutch_policy *pol = hutch_gov_policy(gov);

    if (hutch_policy_has_principals(pol)) {
        ho->principal = http_principal;
        ho->principal_arg = gov;
    }
    hutch_policy_unref(pol);
}

/* $HUTCH_RESOURCE_TTL_MS and --resources-dir, as the MCP server will take
 * them.  make: create the directory if missing, as serve would; else
 * (--check-config, which makes nothing) only an existing one is checked. */
static int check_resources(const char *dir, int make, struct hutch_err *err)
{
    struct hutch_resources *rs = NULL;
    unsigned ttl_ms;
    int r = hutch_resources_ttl_from_env(&ttl_ms, err);

    if (r == 0 && dir && !make && access(dir, F_OK) < 0)
        dir = dir[0] == '/' ? NULL : dir; /* a relative one is refused as is */
    if (r == 0)
        r = hutch_resources_new(ttl_ms, dir, &rs, err);
    hutch_resources_free(rs);
    return r;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "Usage: hutch serve [OPTIONS]\n"
        "\n"
        "Serves MCP with two tools, search_tools and execute_code, over stdio "
        "(default)\n"
        "or streamable HTTP at http://ADDR:PORT/mcp.\n"
        "\n"
        "  -s, --servers FILE     upstream MCP servers, in the mcpServers JSON format "
        "of\n"
        "                         Claude Desktop / Claude Code\n"
        "      --http ADDR:PORT   serve streamable HTTP instead of stdio\n"
        "      --token-file FILE  bearer token for HTTP (else $HUTCH_TOKEN); required\n"
        "                         on a non-loopback address\n"
        "  -p, --policy FILE      the deployment's policy (Lua; see hutch-policy(5))\n"
        "      --audit FILE       audit log, JSON lines (default: stderr)\n"
        "      --audit-values     write tool-call argument values into the audit\n"
        "                         log (default: their names and sizes only; the\n"
        "                         policy's audit.secret is redacted either way)\n"
        "  -x, --executor NAME    executor plugin (default: $HUTCH_EXECUTOR, else the\n"
        "                         policy's, else local; the two must agree)\n"
        "      --flavour NAME     base (default) or data: Python with numpy, pandas\n"
        "                         and matplotlib, on every executor (the policy's\n"
        "                         executor_options may name it too; the two must "
        "agree)\n"
        "      --plugins DIR      plugin directory\n"
        "      --workspaces DIR   where workspaces are kept (default:\n"
        "                         $HUTCH_WORKSPACES, else /var/lib/hutch/workspaces\n"
        "                         for root, else $XDG_STATE_HOME/hutch/workspaces)\n"
        "      --resources-dir DIR\n"
        "                         keep result files behind resource_links in DIR\n"
        "                         (absolute, 0700) instead of in memory: replicas\n"
        "                         given the same DIR serve each other's links\n"
        "      --pool N|LANG=N,…  warm sandboxes kept per language (python=N,\n"
        "                         javascript=N; default %d each, 0: none)\n"
        "  -t, --timeout MS       default and maximum time per execution (default %d)\n"
        "  -m, --memory MB        memory limit per execution (default %d)\n"
        "      --pids N           process limit per execution (default %d)\n"
        "      --output-bytes N   stdout and stderr kept per execution, each: its\n"
        "                         first and last bytes (default %u, max %u)\n"
        "      --no-envelope      do not wrap sandbox output in <untrusted-data-…> "
        "tags\n"
        "      --shapes FILE      keep the result shapes observed for tools without "
        "an\n"
        "                         outputSchema in FILE, across restarts\n"
        "      --direct-tools     also offer each upstream tool the policy allows as\n"
        "                         an MCP tool of its own (server__tool), governed\n"
        "                         like a call from execute_code (the policy's\n"
        "                         direct_tools overrides)\n"
        "  -v, --verbose          log more on stderr (repeat for debug)\n"
        "      --log-format F     text (default) or json: one JSON object per line\n"
        "      --config FILE      settings from FILE: `key = value` lines, each key\n"
        "                         one of these options (timeout = 20000,\n"
        "                         no-envelope = true); a flag overrides the file\n"
        "      --check-config     check the settings (FILE's and the flags'; the\n"
        "                         policy, servers file, executor and audit log) and\n"
        "                         start nothing: exit 0 when they are valid, 1 when\n"
        "                         not\n"
        "  -h, --help             this text\n",
        HUTCH_POOL_DEFAULT_SIZE, HUTCH_DEFAULT_TIMEOUT_MS, HUTCH_DEFAULT_MEMORY_MB,
        HUTCH_DEFAULT_PIDS, HUTCH_OUTPUT_MODEL_BYTES, HUTCH_OUTPUT_MAX_BYTES);
    hutch_knobs_help(f, HUTCH_CMD_SERVE | HUTCH_CMD_HTTP);
}

/* --pool N, or python=N,javascript=N (either may be left out). */
static int parse_pool(const char *arg, int size[2])
{
    static const char *const names[] = {"python", "javascript"};
    char buf[128], *save = NULL, *tok;
    uint64_t v;
    if (hutch_parse_u64(arg, 0, HUTCH_POOL_MAX_SIZE, &v) == 0 || !strcmp(arg, "0")) {
        size[0] = size[1] = (int)v;
        if (!strcmp(arg, "0"))
            size[0] = size[1] = 0;
        return 0;
    }
    if (strlen(arg) >= sizeof(buf))
        return -EINVAL;
    snprintf(buf, sizeof(buf), "%s", arg);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        int found = 0;
        if (!eq)
            return -EINVAL;
        *eq = '\0';
        for (int i = 0; i < 2; i++)
            if (hutch_lang_canon(tok) && !strcmp(hutch_lang_canon(tok), names[i])) {
                if (!strcmp(eq + 1, "0"))
                    v = 0;
                else if (hutch_parse_u64(eq + 1, 0, HUTCH_POOL_MAX_SIZE, &v) < 0)
                    return -EINVAL;
                size[i] = (int)v;
                found = 1;
            }
        if (!found)
            return -EINVAL;
    }
    return 0;
}

static int parse_addr(const char *arg, char *addr, size_t alen, uint16_t *port)
{
    const char *colon = strrchr(arg, ':');
    uint64_t p;
    size_t n;
    if (!colon || colon == arg)
        return -EINVAL;
    n = (size_t)(colon - arg);
    if (arg[0] == '[' && n >= 2 && arg[n - 1] == ']') { /* [::1]:8080 */
        arg++;
        n -= 2;
    }
    if (n >= alen || hutch_parse_u64(colon + 1, 0, 65535, &p) < 0)
        return -EINVAL;
    memcpy(addr, arg, n);
    addr[n] = '\0';
    *port = (uint16_t)p;
    return 0;
}

static char *read_token(const char *file, struct hutch_err *err)
{
    char *tok = NULL;
    size_t len;
    if (file) {
        if (hutch_read_file(file, 4096, &tok, &len, err) < 0)
            return NULL;
    } else {
        const char *env = hutch_knob_str(HUTCH_KNOB_TOKEN);
        if (!env)
            return NULL;
        tok = strdup(env);
        if (!tok)
            return NULL;
    }
    tok[strcspn(tok, "\r\n")] = '\0';
    if (strlen(tok) < hutch_knob(HUTCH_KNOB_TOKEN)->min) {
        hutch_err_set(err, -EINVAL, "the bearer token must be at least %llu characters",
                      (unsigned long long)hutch_knob(HUTCH_KNOB_TOKEN)->min);
        free(tok);
        return NULL;
    }
    return tok;
}

/* --check-config: everything serve reads before it starts anything, read
 * as serve reads it (the servers file parsed and its variables expanded,
 * none started; the executor found and probed, not opened; the audit log
 * checked, not created).  0, or 1 after saying what is wrong. */
static int check_config(const char *servers, const char *policy_file,
                        const char *audit_file, const char *http, const char *addr,
                        uint16_t port, const char *token_file, const char *executor,
                        const char *flavour, const char *plugin_dir,
                        const char *shapes_file, const char *resources_dir)
{
    static int shapes_said;
    struct hutch_jobs_opts jo = {
        .plugin_dir = plugin_dir, .executor = executor, .executor_from = "--executor"};
    struct hutch_err err = {0};
    struct hutch_policy *p = NULL;
    cJSON *config = NULL;
    char *token = NULL;
    int rc = 1;

    if ((policy_file ? hutch_policy_load(policy_file, &p, &err) < 0
                     : hutch_policy_default(&p, &err) < 0) ||
        hutch_policy_apply_flavour(p, flavour, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        goto out;
    }
    if (http && !(token = read_token(token_file, &err)) && err.msg[0]) {
        fprintf(stderr, "hutch serve: token: %s\n", err.msg);
        goto out;
    }
    if (http) {
        struct hutch_http_opts ho = {.addr = addr, .port = port, .token = token};
        if (hutch_policy_has_principals(p))
            ho.principal = http_principal; /* only its presence is checked */
        if (hutch_http_check(&ho, &err) < 0) {
            fprintf(stderr, "hutch serve: --http: %s\n", err.msg);
            goto out;
        }
    }
    if (check_resources(resources_dir, 0, &err) < 0) {
        fprintf(stderr, "hutch serve: %s\n", err.msg);
        goto out;
    }
    if (servers && hutch_upstreams_load(servers, &config, &err) < 0) {
        fprintf(stderr, "hutch serve: servers: %s\n", err.msg);
        goto out;
    }
    /* serve would start the others; a check says what it would skip. */
    if (config && hutch_upstreams_broken(config)) {
        fprintf(stderr,
                "hutch serve: servers: %s: %zu broken entr%s would be skipped (see "
                "the warnings above)\n",
                servers, hutch_upstreams_broken(config),
                hutch_upstreams_broken(config) == 1 ? "y" : "ies");
        goto out;
    }
    if (hutch_jobs_check(&jo, p, &err) < 0) {
        fprintf(stderr, "hutch serve: executor: %s\n", err.msg);
        goto out;
    }
    if (hutch_audit_check(audit_file, &err) < 0) {
        fprintf(stderr, "hutch serve: audit: %s\n", err.msg);
        goto out;
    }
    /* A cache: what is wrong with it is only said, once (the file's
     * settings are checked alone first, then with the flags). */
    if (shapes_file && !shapes_said++) {
        struct hutch_shapes *sh = NULL;
        if (hutch_shapes_new(&sh, &err) == 0 &&
            hutch_shapes_attach(sh, shapes_file, &err) < 0)
            fprintf(stderr,
                    "hutch serve: warning: result shapes: %s (it would be replaced)\n",
                    err.msg);
        hutch_shapes_free(sh);
    }
    rc = 0;
out:
    cJSON_Delete(config);
    free(token);
    hutch_policy_unref(p);
    return rc;
}

enum {
    OPT_PLUGINS = 256,
    OPT_HTTP,
    OPT_TOKEN_FILE,
    OPT_PIDS,
    OPT_NO_ENVELOPE,
    OPT_AUDIT,
    OPT_POOL,
    OPT_CONFIG,
    OPT_CHECK_CONFIG,
    OPT_LOG_FORMAT,
    OPT_SHAPES,
    OPT_DIRECT_TOOLS,
    OPT_WORKSPACES,
    OPT_RESOURCES_DIR,
    OPT_OUTPUT_BYTES,
    OPT_FLAVOUR,
    OPT_AUDIT_VALUES
};
static const struct option opts[] = {
    {"servers", required_argument, NULL, 's'},
    {"policy", required_argument, NULL, 'p'},
    {"audit", required_argument, NULL, OPT_AUDIT},
    {"audit-values", no_argument, NULL, OPT_AUDIT_VALUES},
    {"http", required_argument, NULL, OPT_HTTP},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"executor", required_argument, NULL, 'x'},
    {"flavour", required_argument, NULL, OPT_FLAVOUR},
    {"plugins", required_argument, NULL, OPT_PLUGINS},
    {"timeout", required_argument, NULL, 't'},
    {"memory", required_argument, NULL, 'm'},
    {"pids", required_argument, NULL, OPT_PIDS},
    {"output-bytes", required_argument, NULL, OPT_OUTPUT_BYTES},
    {"no-envelope", no_argument, NULL, OPT_NO_ENVELOPE},
    {"direct-tools", no_argument, NULL, OPT_DIRECT_TOOLS},
    {"pool", required_argument, NULL, OPT_POOL},
    {"verbose", no_argument, NULL, 'v'},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"check-config", no_argument, NULL, OPT_CHECK_CONFIG},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"shapes", required_argument, NULL, OPT_SHAPES},
    {"workspaces", required_argument, NULL, OPT_WORKSPACES},
    {"resources-dir", required_argument, NULL, OPT_RESOURCES_DIR},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* argv: the configuration file's settings, then the command line's (see
 * hutch_cmd_serve); check: --check-config, stop once they are parsed. */
static int serve(int argc, char **argv, const char *config_file, int check)
{
    struct hutch_mcp_opts mo = {0};
    struct hutch_http_opts ho = {0};
    struct hutch_jobs_opts jo = {.pools = 1, .pool_size = {-1, -1}};
    struct hutch_err err = {0};
    struct hutch_bridge *bridge = NULL;
    struct hutch_upstreams *ups = NULL;
    struct hutch_mcp *m = NULL;
    cJSON *config = NULL;
    const char *servers = NULL, *http = NULL, *token_file = NULL, *executor = NULL,
               *plugin_dir = NULL, *policy_file = NULL, *audit_file = NULL,
               *shapes_file = NULL, *flavour = NULL;
    pthread_t reloader;
    sigset_t hup;
    char addr[256] = "", *token = NULL;
    uint64_t timeout = HUTCH_DEFAULT_TIMEOUT_MS, memory = HUTCH_DEFAULT_MEMORY_MB,
             pids = HUTCH_DEFAULT_PIDS, output_bytes = 0;
    int c, rc = HUTCH_EXIT_ERROR, envelope = 1, timeout_set = 0, memory_set = 0,
           pids_set = 0, audit_values = 0;
    struct sigaction sa;

    hutch_log_set_level(HUTCH_LOG_WARN);
    optind = 1;
    while ((c = getopt_long(argc, argv, "s:p:x:t:m:vh", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            servers = optarg;
            break;
        case OPT_HTTP:
            http = optarg;
            break;
        case 'p':
            policy_file = optarg;
            break;
        case OPT_AUDIT:
            audit_file = optarg;
            break;
        case OPT_AUDIT_VALUES:
            audit_values = 1;
            break;
        case OPT_SHAPES:
            shapes_file = optarg;
            break;
        case OPT_TOKEN_FILE:
            token_file = optarg;
            break;
        case 'x':
            executor = optarg;
            break;
        case OPT_FLAVOUR:
            if (strcmp(optarg, "base") != 0 && strcmp(optarg, "data") != 0) {
                fprintf(stderr, "hutch serve: --flavour must be base or data\n");
                return 2;
            }
            flavour = optarg;
            break;
        case OPT_PLUGINS:
            plugin_dir = optarg;
            break;
        case OPT_WORKSPACES:
            jo.workspaces_dir = optarg;
            break;
        case OPT_RESOURCES_DIR:
            mo.resources_dir = optarg;
            break;
        case 't':
            if (hutch_cli_limit("hutch serve", "timeout", optarg, &timeout) < 0)
                return 2;
            timeout_set = 1;
            break;
        case 'm':
            if (hutch_cli_limit("hutch serve", "memory", optarg, &memory) < 0)
                return 2;
            memory_set = 1;
            break;
        case OPT_PIDS:
            if (hutch_cli_limit("hutch serve", "pids", optarg, &pids) < 0)
                return 2;
            pids_set = 1;
            break;
        case OPT_OUTPUT_BYTES:
            if (hutch_cli_limit("hutch serve", "output-bytes", optarg, &output_bytes) <
                0)
                return 2;
            break;
        case OPT_NO_ENVELOPE:
            envelope = 0;
            break;
        case OPT_DIRECT_TOOLS:
            mo.direct_tools = 1;
            break;
        case OPT_POOL:
            if (parse_pool(optarg, jo.pool_size) < 0) {
                fprintf(stderr,
                        "hutch serve: --pool wants N or python=N,javascript=N (0 to "
                        "%d)\n",
                        HUTCH_POOL_MAX_SIZE);
                return 2;
            }
            break;
        case 'v':
            hutch_log_more();
            break;
        case OPT_LOG_FORMAT:
            if (hutch_log_set_format_name(optarg) < 0) {
                fprintf(stderr, "hutch serve: --log-format wants text or json\n");
                return 2;
            }
            break;
        case OPT_CONFIG:
            if (!config_file || strcmp(optarg, config_file)) {
                fprintf(stderr, "hutch serve: one --config FILE, spelled out\n");
                return 2;
            }
            break;
        case OPT_CHECK_CONFIG:
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hutch serve: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    if (http && parse_addr(http, addr, sizeof(addr), &ho.port) < 0) {
        fprintf(stderr,
                "hutch serve: --http wants ADDR:PORT (127.0.0.1:8080, [::1]:8080)\n");
        return 2;
    }
    if (check)
        return check_config(servers, policy_file, audit_file, http, addr, ho.port,
                            token_file, executor, flavour, plugin_dir, shapes_file,
                            mo.resources_dir);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: a blocked read must see it */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    if (http) {
        token = read_token(token_file, &err);
        if (!token && err.msg[0]) {
            hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "token: %s", err.msg);
            goto out;
        }
    }
    if (hutch_gov_new(policy_file, audit_file, &gov, &err) < 0 ||
        hutch_gov_set_flavour(gov, flavour, &err) < 0) {
        hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "policy: %s", err.msg);
        goto out;
    }
    hutch_audit_set_values(hutch_gov_audit(gov), audit_values);
    /* Everything else the settings name is checked before anything starts
     * (upstream servers, pools): a bad one stops serve with nothing to
     * undo. */
    if (http) {
        ho.addr = addr;
        ho.token = token;
        set_principals(&ho);
        if (hutch_http_check(&ho, &err) < 0) {
            hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "%s", err.msg);
            goto out;
        }
    }
    if (check_resources(mo.resources_dir, 1, &err) < 0) {
        hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "%s", err.msg);
        goto out;
    }
    /* Every thread created from here on inherits SIGHUP blocked. */
    sigemptyset(&hup);
    sigaddset(&hup, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &hup, NULL);
    if (pthread_create(&reloader, NULL, reload_thread, NULL) == 0)
        pthread_detach(reloader);
    if (hutch_cli_start_tools(servers, "hutch serve", false, &config, &ups, &bridge,
                              &err) < 0) {
        hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "%s", err.msg);
        goto out;
    }
    /* A cache: one that cannot be read is said, then replaced. */
    if (shapes_file &&
        hutch_shapes_attach(hutch_bridge_shapes(bridge), shapes_file, &err) < 0) {
        hutch_log_say(HUTCH_LOG_WARN, "hutch serve", NULL,
                      "result shapes: %s (starting without them; the file is "
                      "replaced at the next save)",
                      err.msg);
        err = (struct hutch_err){0};
    }
    jo.plugin_dir = plugin_dir;
    jo.executor = executor;
    jo.executor_from = "--executor";
    jo.gov = gov;
    jo.bridge = bridge;
    jo.timeout_ms = timeout_set ? timeout : 0;
    jo.memory_mb = memory_set ? memory : 0;
    jo.pids = pids_set ? (uint32_t)pids : 0;
    jo.output_bytes = output_bytes;
    jo.output_default = HUTCH_OUTPUT_MODEL_BYTES; /* a model reads it */
    if (hutch_jobs_new(&jo, &jobs, &err) < 0) {
        hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "%s", err.msg);
        goto out;
    }
    mo.jobs = jobs;
    mo.bridge = bridge;
    mo.upstreams = ups;
    mo.gov = gov;
    mo.timeout_ms = timeout;
    mo.output_max = output_bytes;
    mo.untrusted_envelope = envelope;
    if (hutch_mcp_new(&mo, &m, &err) < 0) {
        hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "%s", err.msg);
        goto out;
    }
    if (http) {
        ho.jobs = jobs;
        ho.upstreams = ups;
        if (!token && !ho.principal &&
            (!strcmp(addr, "127.0.0.1") || !strcmp(addr, "::1") ||
             !strcmp(addr, "localhost") || !strncmp(addr, "127.", 4)))
            hutch_log_say(HUTCH_LOG_WARN, "hutch serve", NULL,
                          "serving HTTP without a bearer token (set HUTCH_TOKEN or "
                          "--token-file): any local process can use it");
        if (hutch_http_serve(m, &ho, &stopping, &err) < 0) {
            hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "%s", err.msg);
            goto out;
        }
        rc = 0;
    } else {
        struct hutch_err serr = HUTCH_ERR_INIT;
        if (hutch_stdio_serve(m, ups, STDIN_FILENO, STDOUT_FILENO, &stopping, &serr) <
            0) {
            fprintf(stderr, "hutch serve: %s\n", serr.msg);
            rc = HUTCH_EXIT_ERROR;
        } else {
            rc = 0;
        }
    }
out:
    /* The upstreams stop first: a call still in flight (its execution is
     * being cancelled) or waiting for a server that is still starting
     * fails now rather than at its timeout, and they wind down while the
     * pools' sandboxes are destroyed, not after (a client that closed our
     * stdin gives us a few seconds before it kills us).  Before them, the
     * pools stop starting sandboxes: a container created as hutch is
     * killed is the one thing the engine does not remove by itself. */
    hutch_jobs_stop(jobs);
    hutch_upstreams_stop(ups);
    hutch_mcp_free(m);
    {
        struct hutch_jobs *jb = jobs;
        jobs = NULL; /* the reload thread must not see it go */
        hutch_jobs_free(jb);
    }
    if (bridge && hutch_shapes_save(hutch_bridge_shapes(bridge), &err) < 0)
        hutch_log_say(HUTCH_LOG_WARN, "hutch serve", NULL, "saving result shapes: %s",
                      err.msg);
    hutch_bridge_free(bridge);
    hutch_upstreams_free(ups);
    cJSON_Delete(config);
    /* gov stays: the reload thread may still be waiting on SIGHUP. */
    free(token);
    return rc;
}

static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 1;
    return 0;
}

/* --config FILE puts the file's settings before the command line's, so
 * every flag overrides them (the last of an option wins); --check-config
 * parses both and stops: exit 0 when they are valid, 1 when the file or a
 * value in it is not, 2 for a bad command line. */
int hutch_cmd_serve(int argc, char **argv)
{
    static const char *const skip[] = {"config", "check-config", "help", NULL};
    const char *file = NULL;
    struct hutch_err err = {0};
    char **cfg = NULL, **all = NULL;
    int check = 0, ncfg = 0, rc = 2;

    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            file = argv[++i];
        else if (!strncmp(argv[i], "--config=", 9))
            file = argv[i] + 9;
        else if (!strcmp(argv[i], "--check-config"))
            check = 1;
    }
    /* The environment's settings (knobs.def), the --http ones too when
     * serving stdio (one rule: a bad value stops serve, whatever it
     * serves), before the file's and the flags' (it is not their fault). */
    if (!wants_help(argc, argv) &&
        hutch_knobs_check(HUTCH_CMD_SERVE | HUTCH_CMD_HTTP | HUTCH_CMD_ALL, &err) < 0) {
        if (check) {
            fprintf(stderr, "hutch serve: %s\n", err.msg);
            return 1;
        }
        hutch_log_say(HUTCH_LOG_ERROR, "hutch serve", NULL, "%s", err.msg);
        return HUTCH_EXIT_ERROR;
    }
    if (file && hutch_serve_config(file, opts, skip, &cfg, &ncfg, &err) < 0) {
        fprintf(stderr, "%s\n", err.msg);
        rc = check ? 1 : 2;
        goto out;
    }
    all = calloc((size_t)(argc + ncfg + 1), sizeof(*all));
    if (!all) {
        fprintf(stderr, "hutch serve: out of memory\n");
        rc = HUTCH_EXIT_ERROR;
        goto out;
    }
    all[0] = argv[0];
    if (check && file) {
        /* The file's values alone first: a bad one is the file's fault. */
        for (int i = 0; i < ncfg; i++)
            all[1 + i] = cfg[i];
        all[ncfg + 1] = NULL;
        if (serve(ncfg + 1, all, NULL, 1) != 0) {
            fprintf(stderr, "%s: invalid (the value above is the file's)\n", file);
            rc = 1;
            goto out;
        }
    }
    for (int i = 0; i < ncfg; i++)
        all[1 + i] = cfg[i];
    for (int i = 1; i < argc; i++)
        all[ncfg + i] = argv[i];
    all[argc + ncfg] = NULL;
    rc = serve(argc + ncfg, all, file, check);
    if (check && rc == 0 && !wants_help(argc, argv))
        printf("ok: %s\n", file ? file : "(no --config: the flags)");
out:
    for (int i = 0; i < ncfg; i++)
        free(cfg[i]);
    free(cfg);
    free(all);
    return rc;
}
