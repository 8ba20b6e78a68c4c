/* test_policy.c — the Lua policy engine: tool globs, validation of the file,
 * on_execute and on_tool_call, path bypass attempts (from C and from a
 * hook), hostile policies (the files in tests/policy/), principals, secrets, the
 * built-in default, the example policies in contrib/policies/, concurrency,
 * and the `hutch policy` command when the binary is around. */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "egress.h"
#include "log.h"
#include "policy.h"
#include "tap.h"

static char root[PATH_MAX]; /* temporary tree */
static char real_root[PATH_MAX];
static int nfile;

static void skip(const char *what, const char *why)
{
    printf("ok %d - %s # SKIP %s\n", ++tap_n, what, why);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        printf("# cannot write %s\n", path);
        exit(2);
    }
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* s with every `from` replaced by `to`; caller frees. */
static char *subst(const char *s, const char *from, const char *to)
{
    size_t fl = strlen(from), tl = strlen(to), n = 0;
    const char *p;
    char *out, *o;
    for (p = s; (p = strstr(p, from)); p += fl)
        n++;
    out = o = malloc(strlen(s) + n * tl + 1);
    while ((p = strstr(s, from))) {
        memcpy(o, s, (size_t)(p - s));
        o += p - s;
        memcpy(o, to, tl);
        o += tl;
        s = p + fl;
    }
    memcpy(o, s, strlen(s) + 1);
    return out;
}

/* Write text (with @ROOT@ replaced) to a new file in root; its path in
 * `path`. */
static void policy_file(const char *text, char *path, size_t len)
{
    char *t = subst(text, "@ROOT@", root);
    snprintf(path, len, "%s/policy%d.lua", root, ++nfile);
    write_file(path, t);
    free(t);
}

static struct hutch_policy *load_text(const char *text, struct hutch_err *err)
{
    char path[PATH_MAX];
    struct hutch_policy *p = NULL;
    policy_file(text, path, sizeof(path));
    memset(err, 0, sizeof(*err));
    if (hutch_policy_load(path, &p, err) < 0)
        return NULL;
    return p;
}

static struct hutch_policy *must_load(const char *text)
{
    struct hutch_err err;
    struct hutch_policy *p = load_text(text, &err);
    if (!p) {
        printf("# policy failed to load: %s\n", err.msg);
        exit(2);
    }
    return p;
}

static const char *srcdir(void)
{
    const char *s = getenv("HUTCH_SRCDIR");
    return s && *s ? s : "../..";
}

static struct hutch_policy *fixture(const char *name, struct hutch_err *err)
{
    char path[PATH_MAX];
    struct hutch_policy *p = NULL;
    snprintf(path, sizeof(path), "%s/tests/policy/%s", srcdir(), name);
    memset(err, 0, sizeof(*err));
    if (hutch_policy_load(path, &p, err) < 0)
        return NULL;
    return p;
}

static char reason[1024];

static int tool(struct hutch_policy *p, const char *name, const char *args_json,
                const char *principal)
{
    cJSON *args = args_json ? cJSON_Parse(args_json) : NULL;
    int r;
    if (args_json && !args) {
        printf("# bad test JSON: %s\n", args_json);
        exit(2);
    }
    reason[0] = '\0';
    r = hutch_policy_check_tool(p, principal ? principal : "local", "exec-1", NULL,
                                name, args, reason, sizeof(reason));
    cJSON_Delete(args);
    return r;
}

/* A load that must fail with `want` in the message. */
static void load_fails(const char *text, const char *want, const char *what)
{
    struct hutch_err err;
    struct hutch_policy *p = load_text(text, &err);
    ok(!p && strstr(err.msg, want), "%s: \"%s\" (got \"%s\")", what, want,
       p ? "loaded" : err.msg);
    hutch_policy_unref(p);
}

/* --- globs --------------------------------------------------------------------------
 */

static void test_globs(void)
{
    struct hutch_policy *p =
        must_load("return { tools = {\n"
                  "  allow = { 'fs.read_*', 'fs.list_*', 'echo.?cho',\n"
                  "            'git*', ' Web.Fetch ' },\n"
                  "  deny = { '*.delete_*', 'fs.read_secret*' } } }\n");
    char name[700];

    ok(tool(p, "fs.read_file", NULL, NULL) == 0,
       "allow glob fs.read_* allows fs.read_file");
    ok(tool(p, " FS.Read_File ", NULL, NULL) == 0,
       "case and surrounding whitespace are ignored (\" FS.Read_File \")");
    ok(tool(p, "\tfs.LIST_DIRECTORY\n", NULL, NULL) == 0, "tabs, newlines, upper case");
    ok(tool(p, "fs.write_file", NULL, NULL) == -EPERM &&
           !strcmp(reason, "no tools.allow rule names fs.write_file"),
       "a tool no allow rule names is denied: %s", reason);
    ok(tool(p, "fs.read_secret_key", NULL, NULL) == -EPERM &&
           !strcmp(reason, "denied by tools.deny rule \"fs.read_secret*\""),
       "deny wins over allow: %s", reason);
    ok(tool(p, "FS.DELETE_FILE", NULL, NULL) == -EPERM && strstr(reason, "*.delete_*"),
       "deny is case-insensitive too: %s", reason);
    ok(tool(p, "echo.echo", NULL, NULL) == 0 && tool(p, "echo.ekko", NULL, NULL) != 0 &&
           tool(p, "echo.eecho", NULL, NULL) != 0,
       "? matches exactly one character");
    ok(tool(p, "github.create_issue", NULL, NULL) == 0 &&
           tool(p, "git.log", NULL, NULL) == 0,
       "* matches across dots");
    ok(tool(p, "web.fetch", NULL, NULL) == 0,
       "patterns are trimmed and case-folded too");
    ok(tool(p, "fs.read_file.extra", NULL, NULL) == 0 &&
           tool(p, "xfs.read_file", NULL, NULL),
       "globs anchor at both ends");
    ok(tool(p, "   ", NULL, NULL) < 0 && tool(p, "", NULL, NULL) < 0,
       "empty names denied");
    memset(name, 'a', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    memcpy(name, "fs.read_", 8);
    ok(tool(p, name, NULL, NULL) < 0, "an absurdly long name is denied: %s", reason);
    reason[0] = '\0';
    ok(hutch_policy_check_tool(p, "local", NULL, " FS ", "Read_File ", NULL, reason,
                               sizeof(reason)) == 0,
       "server and tool given apart, each trimmed");
    ok(hutch_policy_check_tool(p, "local", NULL, "fs", "delete_all", NULL, reason,
                               sizeof(reason)) == -EPERM,
       "server and tool apart: deny applies");
    hutch_policy_unref(p);

    p = must_load("return { executor = 'local' }");
    ok(tool(p, "fs.read_file", NULL, NULL) == -EPERM &&
           strstr(reason, "no tools.allow"),
       "a policy file without tools denies every tool");
    hutch_policy_unref(p);
    p = must_load("return { tools = { deny = { 'x.*' } } }");
    ok(tool(p, "fs.read_file", NULL, NULL) == -EPERM, "deny only: still default deny");
    hutch_policy_unref(p);
    p = must_load("return { tools = { allow = {} } }");
    ok(tool(p, "fs.read_file", NULL, NULL) == -EPERM, "an empty allow list denies all");
    hutch_policy_unref(p);
    p = must_load("return { tools = { allow = { '*' }, deny = { '*' } } }");
    ok(tool(p, "a.b", NULL, NULL) == -EPERM && strstr(reason, "tools.deny"),
       "deny '*' beats allow '*'");
    hutch_policy_unref(p);
}

/* --- the built-in default ------------------------------------------------------------
 */

static void test_default(void)
{
    struct hutch_policy *p = NULL;
    struct hutch_err err = {0};
    const struct hutch_policy_limits *l;
    ok(hutch_policy_default(&p, &err) == 0 && p, "the built-in default exists");
    l = hutch_policy_limits(p);
    ok(!strcmp(hutch_policy_source(p), "built-in") &&
           !strcmp(hutch_policy_executor(p), "local"),
       "default: built-in, executor local");
    ok(l->timeout_ms == 30000 && l->memory_mb == 512 && l->pids == 128 &&
           l->output_bytes == 1048576 && l->files_bytes == 64u << 20 &&
           l->cpus_milli == 0,
       "default limits: 30 s, 512 MB, 128 pids, 1 MiB output, 64 MiB files, no cpu "
       "cap");
    ok(tool(p, "any.tool", "{\"x\": 1}", NULL) == 0, "default: every tool allowed");
    ok(hutch_policy_npaths(p) == 0 && !hutch_policy_has_principals(p) &&
           hutch_policy_rate(p)->executions_per_minute == 0 &&
           hutch_policy_rate(p)->tool_calls_per_minute == 0,
       "default: no paths, principals or rates");
    ok(hutch_policy_workspaces(p)->allow &&
           hutch_policy_workspaces(p)->max_bytes == HUTCH_WORKSPACE_DEFAULT_MAX_BYTES &&
           hutch_policy_workspaces(p)->idle_s == HUTCH_WORKSPACE_DEFAULT_IDLE_S,
       "default: workspaces allowed, 16 MiB, 30 days idle");
    ok(!hutch_policy_egress(p), "default: no egress");
    ok(!hutch_policy_path_allowed(p, "/tmp", "ro", NULL, 0), "default: no host path");
    ok(hutch_policy_is_secret(p, "password") &&
           hutch_policy_is_secret(p, "api_token") &&
           hutch_policy_is_secret(p, "Authorization") &&
           !hutch_policy_is_secret(p, "path"),
       "default secret names (password, *token*, authorization; not path)");
    {
        struct hutch_policy_exec req = {"local", "e", "python", 10, 0, NULL};
        struct hutch_policy_decision d;
        ok(hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason)) == 0 &&
               !strcmp(d.executor, "local") && d.limits.timeout_ms == 30000,
           "default: executions allowed with the default limits");
    }
    ok(hutch_policy_ref(p) == p, "ref returns the policy");
    hutch_policy_unref(p);
    hutch_policy_unref(p);
}

/* A policy whose globs deny every tool (what `hutch policy check` warns
 * about), and the policies that do not. */
static void denies_all_is(const char *text, int want, const char *part,
                          const char *what)
{
    struct hutch_policy *p = must_load(text);
    char why[512] = "";
    int r = hutch_policy_denies_every_tool(p, why, sizeof(why));
    ok(r == want && (!part || strstr(why, part)), "denies every tool: %s (%d: %s)",
       what, r, why);
    hutch_policy_unref(p);
}

static void test_denies_every_tool(void)
{
    struct hutch_policy *p = NULL;
    struct hutch_err err = {0};
    char why[512] = "";

    ok(hutch_policy_default(&p, &err) == 0 &&
           hutch_policy_denies_every_tool(p, why, sizeof(why)) == 0,
       "denies every tool: not the built-in default (it allows every tool)");
    hutch_policy_unref(p);
    denies_all_is("return { limits = { timeout_ms = 1000 } }", 1,
                  "the policy has no tools.allow glob", "a policy file without tools");
    denies_all_is("return { tools = { deny = { \"fs.*\" } } }", 1,
                  "no tools.allow glob", "tools with a deny list only");
    denies_all_is("return { tools = { allow = {} } }", 1, "no tools.allow glob",
                  "an empty allow list");
    denies_all_is("return { tools = { allow = { \"*\" }, deny = { \"*\" } } }", 1,
                  "tools.deny rule \"*\" matches every tool", "deny \"*\"");
    denies_all_is("return { tools = { allow = { \"fs.*\" }, deny = { \" *.** \" } } }",
                  1, "tools.deny rule \" *.** \"", "deny \"*.**\", spaces around");
    denies_all_is("return { tools = { allow = { \"*\" } } }", 0, NULL, "allow \"*\"");
    denies_all_is("return { tools = { allow = { \"fs.*\" }, deny = { \"*.delete_*\", "
                  "\"*.\", \".*\", \"*x\" } } }",
                  0, NULL, "deny globs that leave tools");
}

/* --- validation ----------------------------------------------------------------------
 */

static void test_validation(void)
{
    struct hutch_err err;
    struct hutch_policy *p;
    char path[PATH_MAX], text[2048];

    load_fails("return {\n  executor = 'local',\n  limts = { timeout_ms = 5 },\n}\n",
               ":3: unknown field \"limts\" (did you mean \"limits\"?)",
               "unknown top-level field, with its line and a suggestion");
    load_fails(
        "return { limits = { timout_ms = 5 } }",
        "unknown field \"limits.timout_ms\" (did you mean \"limits.timeout_ms\"?)",
        "unknown nested field");
    load_fails("return { tools = { allow = {'a'}, alow = {} } }",
               "unknown field \"tools.alow\"", "unknown field in tools");
    load_fails("return { frobnicate = true }", "unknown field \"frobnicate\"",
               "an unknown field without a near miss");
    load_fails("return { 'x' }", "unknown field [1]", "a list instead of fields");
    load_fails("return {\n limits = {\n  timeout_ms = '30s' } }",
               ":3: limits.timeout_ms: expected an integer, got a string",
               "wrong type");
    load_fails("return { limits = { memory_mb = 1.5 } }",
               "limits.memory_mb: expected an integer, got a fractional number",
               "fractional integer");
    load_fails("return { limits = { timeout_ms = 3600001 } }",
               "limits.timeout_ms: 3600001 is out of range (1 to 3600000)",
               "timeout above HUTCH_MAX_TIMEOUT_MS");
    load_fails("return { limits = { memory_mb = 0 } }",
               "limits.memory_mb: 0 is out of range", "zero memory");
    load_fails("return { limits = { memory_mb = 65537 } }", "out of range (1 to 65536)",
               "memory above HUTCH_MAX_MEMORY_MB");
    load_fails("return { limits = { output_bytes = 1048577 } }", "limits.output_bytes",
               "output above HUTCH_OUTPUT_MAX_BYTES");
    load_fails("return { limits = { cpus = -1 } }", "limits.cpus: -1 is out of range",
               "negative cpus");
    load_fails("return { limits = { cpus = '2' } }", "limits.cpus: expected a number",
               "cpus as a string");
    load_fails("return { limits = 5 }", "limits: expected a table, got a number",
               "limits not a table");
    load_fails("return { executor = 5 }", "executor: expected a string, got a number",
               "executor not a string");
    load_fails("return { executor = '../x' }", "is not an executor name",
               "executor name");
    load_fails("return { executor_options = 'kvm' }",
               "executor_options: expected a table, got a string",
               "executor_options not a table");
    load_fails("return { executor_options = { ['Bad/Name'] = {} } }",
               "keys are executor names", "executor_options with a bad executor name");
    load_fails("return { executor_options = { gvisor = 'kvm' } }",
               "executor_options.gvisor: expected a table, got a string",
               "executor_options entry not a table");
    load_fails("return { executor_options = { gvisor = { platform = 5 } } }",
               "executor_options.gvisor.platform: expected a string, got a number",
               "executor option not a string");
    load_fails("return { executor_options = { gvisor = { a = 'x', b = 'y', c = 'z', "
               "d = 'w', platform = 5 } } }",
               "executor_options.gvisor.platform: expected a string",
               "a bad option after good ones (their copies are freed: ASan)");
    {
        /* The options as typed pairs: the plugin's JSON and the flavour are
         * both rendered from them, --flavour adds one. */
        struct hutch_policy *xp =
            must_load("return { executor_options = { gvisor = { platform = 'kvm' }, "
                      "docker = { flavour = 'base' } } }");
        struct hutch_err xerr = HUTCH_ERR_INIT;
        char fl[32];
        ok(xp && !strcmp(hutch_policy_executor_options(xp, "gvisor"),
                         "{\"platform\":\"kvm\"}"),
           "gvisor's options as JSON");
        ok(xp && !strcmp(hutch_policy_flavour(xp, "docker", fl, sizeof(fl)), "base") &&
               !strcmp(hutch_policy_flavour(xp, "gvisor", fl, sizeof(fl)), "base"),
           "the flavour, named or not");
        ok(xp && hutch_policy_apply_flavour(xp, "data", &xerr) == -EINVAL &&
               strstr(xerr.msg, "executor_options.docker.flavour \"base\" differ"),
           "--flavour data against the policy's base: %s", xerr.msg);
        hutch_policy_unref(xp);
        xp = must_load(
            "return { executor_options = { gvisor = { platform = 'kvm' } } }");
        ok(xp && hutch_policy_apply_flavour(xp, "data", &xerr) == 0 &&
               !strcmp(hutch_policy_executor_options(xp, "gvisor"),
                       "{\"platform\":\"kvm\",\"flavour\":\"data\"}") &&
               !strcmp(hutch_policy_executor_options(xp, "local"),
                       "{\"flavour\":\"data\"}") &&
               !strcmp(hutch_policy_flavour(xp, "gvisor", fl, sizeof(fl)), "data"),
           "--flavour data joins each flavoured executor's options");
        hutch_policy_unref(xp);
    }
    load_fails("return { executor_options = { gvisor = { 'kvm' } } }",
               "option names are strings", "executor option without a name");
    load_fails(
        "return { executor_options = { gvisor = { platform = string.rep('x', 257) "
        "} } }",
        "longer than 256 bytes", "executor option value too long");
    load_fails("return { executor_options = { a = {}, b = {}, c = {}, d = {}, e = {}, "
               "f = {}, g = {}, h = {}, i = {} } }",
               "more than 8 executors", "options for too many executors");
    load_fails("return { executor_option = {} }", "did you mean \"executor_options\"",
               "executor_options misspelt");
    {
        struct hutch_policy *xp =
            must_load("return { executor_options = { gvisor = { platform = 'kvm' }, "
                      "docker = { runtime = 'runsc' } } }");
        const char *g = hutch_policy_executor_options(xp, "gvisor");
        const char *d = hutch_policy_executor_options(xp, "docker");
        ok(g && strcmp(g, "{\"platform\":\"kvm\"}") == 0,
           "executor_options for gvisor as JSON (got %s)", g ? g : "NULL");
        ok(d && strcmp(d, "{\"runtime\":\"runsc\"}") == 0,
           "executor_options for docker as JSON (got %s)", d ? d : "NULL");
        ok(hutch_policy_executor_options(xp, "local") == NULL,
           "no executor_options for local");
        hutch_policy_unref(xp);
    }
    load_fails("return { tools = { allow = 'fs.*' } }",
               "tools.allow: expected a table, got a string", "allow as a string");
    load_fails("return { tools = { allow = { 'a', x = 'b' } } }",
               "tools.allow: expected a list, found the key \"x\"",
               "allow with a named key");
    load_fails("return { tools = { allow = { 'a', nil, 'c' } } }", "tools.allow",
               "allow with a hole");
    load_fails("return { tools = { allow = { 5 } } }",
               "tools.allow[1]: expected a string, got a number",
               "allow entry not a string");
    load_fails("return { tools = { allow = { '' } } }",
               "tools.allow[1]: must not be empty", "empty glob");
    load_fails("return { on_tool_call = 'yes' }",
               "on_tool_call: expected a function, got a string",
               "hook not a function");
    load_fails("return { on_execute = {} }",
               "on_execute: expected a function, got a table",
               "on_execute not a function");
    load_fails("return { rate = { executions_per_minute = -1 } }",
               "rate.executions_per_minute: -1 is out of range", "negative rate");
    load_fails("return { rate = { per_hour = 1 } }", "unknown field \"rate.per_hour\"",
               "unknown rate");
    load_fails("return { audit = { secret = { 1 } } }",
               "audit.secret[1]: expected a string", "secret not a string");
    load_fails("return { audit = { secrets = {} } }",
               "unknown field \"audit.secrets\" (did you mean \"audit.secret\"?)",
               "audit.secrets");
    load_fails("return setmetatable({}, { __index = { executor = 'local' } })",
               "has a metatable", "a table with a metatable");
    load_fails("return 42", "must return a table of settings (it returned a number)",
               "returning a number");
    load_fails("return", "(it returned nil)", "returning nothing");
    load_fails("local x = = 1", ":1: unexpected symbol near '='",
               "syntax error with line");
    load_fails("\n\nerror('no')", ":3: no", "runtime error at load, with line");

    /* paths */
    load_fails("return { paths = { { host = '@ROOT@/nope', sandbox = '/data', mode = "
               "'ro' } } }",
               "paths[1].host: \"", "host missing");
    load_fails("return { paths = { { host = '@ROOT@/allowed/file', sandbox = '/data', "
               "mode = 'ro' } } }",
               "is not a directory", "host is a file");
    load_fails(
        "return { paths = { { host = 'relative', sandbox = '/data', mode = 'ro' } } }",
        "is not an absolute path", "relative host");
    load_fails(
        "return { paths = { { host = '@ROOT@/allowed', sandbox = 'data', mode = 'ro' } "
        "} }",
        "paths[1].sandbox: \"data\" is not an absolute path", "relative sandbox");
    load_fails("return { paths = { { host = '@ROOT@/allowed', sandbox = '/', mode = "
               "'ro' } } }",
               "is reserved", "sandbox /");
    load_fails(
        "return { paths = { { host = '@ROOT@/allowed', sandbox = '/work/', mode = 'rw' "
        "} } }",
        "is reserved", "sandbox /work/ (shadowing the program)");
    load_fails(
        "return { paths = { { host = '@ROOT@/allowed', sandbox = '/work/out/x', mode = "
        "'rw' } } }",
        "is reserved", "sandbox under /work/out");
    load_fails(
        "return { paths = { { host = '@ROOT@/allowed', sandbox = '/data/../proc', mode "
        "= 'ro' } } }",
        "is reserved", "sandbox /proc spelled with ..");
    load_fails(
        "return { paths = { { host = '@ROOT@/allowed', sandbox = '/usr/lib/x', mode = "
        "'ro' } } }",
        "is reserved", "sandbox below /usr");
    load_fails("return { paths = { { host = '@ROOT@/allowed', sandbox = '/data', mode "
               "= 'wo' } "
               "} }",
               "paths[1].mode: \"wo\" is not \"ro\" or \"rw\"", "bad mode");
    load_fails("return { paths = { { host = '@ROOT@/allowed', sandbox = '/data' } } }",
               "\"mode\" is missing", "mode missing");
    load_fails(
        "return { paths = { { host = '@ROOT@/allowed', sandbox = '/data', mode = 'ro', "
        "rw = true } } }",
        "unknown field \"paths[1].rw\"", "unknown field in a path entry");
    load_fails("return { paths = {\n"
               "  { host = '@ROOT@/allowed', sandbox = '/data', mode = 'ro' },\n"
               "  { host = '@ROOT@/rw', sandbox = '/data/sub', mode = 'rw' } } }",
               "overlaps paths[1].sandbox", "nested sandbox paths");
    p = must_load(
        "return { paths = {\n"
        "  { host = '@ROOT@/link_in/./sub//', sandbox = '/data/', mode = 'ro' },\n"
        "  { host = '@ROOT@/rw', sandbox = '/work/results', mode = 'rw' } } }");
    snprintf(path, sizeof(path), "%s/allowed/sub", real_root);
    ok(hutch_policy_npaths(p) == 2 && !strcmp(hutch_policy_path_at(p, 0)->host, path) &&
           !strcmp(hutch_policy_path_at(p, 0)->sandbox, "/data") &&
           !hutch_policy_path_at(p, 0)->rw && hutch_policy_path_at(p, 1)->rw &&
           hutch_policy_path_at(p, 2) == NULL,
       "paths: host resolved through symlinks and normalised (%s), sandbox normalised",
       hutch_policy_path_at(p, 0)->host);
    hutch_policy_unref(p);

    /* principals */
    load_fails("return { principals = { { name = 'a', token = 'short' } } }",
               "principals[1].token: must be 16 to 1024 characters (it has 5)",
               "short token");
    load_fails("return { principals = { { name = 'a', token = 'aaaaaaaaaaaaaaaa' },\n"
               "  { name = 'a', token = 'bbbbbbbbbbbbbbbb' } } }",
               "principals[2].name: \"a\" is also the name of principals[1]",
               "duplicate principal name");
    load_fails("return { principals = { { name = 'a', token = 'aaaaaaaaaaaaaaaa' },\n"
               "  { name = 'b', token = 'aaaaaaaaaaaaaaaa' } } }",
               "principals[2].token: the same token as principals[1]",
               "duplicate token (not echoed)");
    load_fails(
        "return { principals = { { name = 'a', token = 'has a space in it!' } } }",
        "printable ASCII", "token with spaces");
    load_fails(
        "return { principals = { { name = 'a b', token = 'aaaaaaaaaaaaaaaa' } } }",
        "may only hold", "principal name with a space");
    load_fails("return { principals = { { name = 'a' } } }",
               "needs both name and token", "principal without token");
    load_fails(
        "return { principals = { { name = 'a', token = 'CHANGE-ME-0123456789' } } }",
        "placeholder", "the example's placeholder token is refused");
    p = load_text(
        "return { principals = { { name = 'a', token = 'secret-token-0123456789' } "
        "} }",
        &err);
    ok(p != NULL, "a valid principal loads");
    hutch_policy_unref(p);
    load_fails(
        "return { principals = { { name = 'a', token = 'zzzzzzzzzzzzzzzzzzzz' }, "
        "{ name = 'a', token = 'yyyyyyyyyyyyyyyyyyy' } } }",
        "principals[2].name", "messages never include a token");
    p = load_text("return { principals = { { name = 'a', token = 'abc' } } }", &err);
    ok(!p && !strstr(err.msg, "abc"), "a rejected token is not echoed: %s", err.msg);

    /* files */
    ok(hutch_policy_load("/nonexistent/policy.lua", &p, &err) < 0 &&
           strstr(err.msg, "/nonexistent/policy.lua"),
       "a missing file is named: %s", err.msg);
    snprintf(path, sizeof(path), "%s/binary.lua", root);
    write_file(path, "\033LuaT\001\002\003");
    ok(hutch_policy_load(path, &p, &err) < 0 && strstr(err.msg, "binary") &&
           strstr(err.msg, path),
       "a binary chunk file is refused: %s", err.msg);
    snprintf(path, sizeof(path), "%s/big.lua", root);
    {
        FILE *f = fopen(path, "w");
        for (int i = 0; i < 100000; i++)
            fputs("-- padding\n", f);
        fputs("return {}\n", f);
        fclose(f);
    }
    ok(hutch_policy_load(path, &p, &err) < 0 && strstr(err.msg, "limit"),
       "a source over 1 MiB is refused: %s", err.msg);
    snprintf(text, sizeof(text),
             "return { limits = { timeout_ms = %u, memory_mb = %u, cpus "
             "= 0.25, pids = 1, output_bytes = %u, files_bytes = %u } }",
             HUTCH_MAX_TIMEOUT_MS, HUTCH_MAX_MEMORY_MB, HUTCH_OUTPUT_MAX_BYTES,
             HUTCH_MAX_INPUT_BYTES);
    p = must_load(text);
    ok(hutch_policy_limits(p)->timeout_ms == HUTCH_MAX_TIMEOUT_MS &&
           hutch_policy_limits(p)->cpus_milli == 250 &&
           hutch_policy_limits(p)->pids == 1,
       "limits at the caps load; cpus 0.25 is 250 milli");
    hutch_policy_unref(p);
    p = must_load(
        "return { limits = { timeout_ms = 2e3 }, rate = { executions_per_minute = "
        "10, tool_calls_per_minute = 600 } }");
    ok(hutch_policy_limits(p)->timeout_ms == 2000 &&
           hutch_policy_limits(p)->memory_mb == 512 &&
           hutch_policy_rate(p)->executions_per_minute == 10 &&
           hutch_policy_rate(p)->tool_calls_per_minute == 600,
       "2e3 is an integer; unset limits keep the defaults; rates");
    hutch_policy_unref(p);
    p = must_load("return { workspaces = { max_bytes = 4096, idle_s = 60 } }");
    ok(hutch_policy_workspaces(p)->allow &&
           hutch_policy_workspaces(p)->max_bytes == 4096 &&
           hutch_policy_workspaces(p)->idle_s == 60 &&
           hutch_policy_workspaces(p)->max_count == HUTCH_WORKSPACE_DEFAULT_MAX_COUNT,
       "workspaces: the fields given, defaults for the rest");
    hutch_policy_unref(p);
    p = must_load("return { workspaces = { allow = false } }");
    ok(!hutch_policy_workspaces(p)->allow, "workspaces.allow = false");
    hutch_policy_unref(p);
    load_fails("return { workspace = {} }",
               "unknown field \"workspace\" (did you mean \"workspaces\"?)",
               "workspace for workspaces");
    load_fails("return { workspaces = { max_byte = 1 } }",
               "unknown field \"workspaces.max_byte\" (did you mean "
               "\"workspaces.max_bytes\"?)",
               "workspaces.max_byte");
    load_fails("return { workspaces = { allow = 'yes' } }",
               "workspaces.allow: expected a boolean, got a string",
               "allow not a boolean");
    load_fails("return { workspaces = { max_bytes = 0 } }",
               "workspaces.max_bytes: 0 is out of range", "max_bytes 0");
    load_fails("return { workspaces = { max_bytes = 1e12 } }",
               "workspaces.max_bytes: 1000000000000 is out of range",
               "max_bytes over the result files' cap");
    load_fails("return { workspaces = { idle_s = 1.5 } }",
               "workspaces.idle_s: expected an integer, got a fractional number",
               "idle_s fractional");
}

/* --- principals and secrets ----------------------------------------------------------
 */

/* --- egress ------------------------------------------------------------------------
 */

static void test_egress(void)
{
    struct hutch_policy *p;
    const struct hutch_egress_rules *e;
    char buf[320];

    p = must_load("return { }");
    ok(!hutch_policy_egress(p), "egress: no field, egress off");
    hutch_policy_unref(p);

    p = must_load("return { egress = { allow = { 'API.GitHub.com.', '*.pypi.org:443', "
                  "'127.0.0.1:8080', '[::1]:9', '[0:0::1]' }, max_bytes = 1024, "
                  "max_connections = 3 } }");
    e = hutch_policy_egress(p);
    ok(e && e->n == 5 && e->max_bytes == 1024 && e->max_connections == 3,
       "egress: five rules and both caps");
    ok(e && !strcmp(e->rule[0].host, "api.github.com") && !e->rule[0].wildcard &&
           e->rule[0].port == 0 && !e->rule[0].is_ip_literal,
       "egress: a name lower-cased, its trailing dot dropped, no port");
    ok(e && e->rule[1].wildcard && !strcmp(e->rule[1].host, "pypi.org") &&
           e->rule[1].port == 443,
       "egress: a wildcard with a port");
    ok(e && e->rule[2].is_ip_literal && e->rule[2].port == 8080 &&
           !strcmp(hutch_egress_rule_str(&e->rule[2], buf, sizeof(buf)),
                   "127.0.0.1:8080"),
       "egress: an IPv4 literal");
    ok(e && e->rule[3].is_ip_literal && !strcmp(e->rule[3].host, "::1") &&
           !strcmp(hutch_egress_rule_str(&e->rule[4], buf, sizeof(buf)), "[::1]"),
       "egress: IPv6 literals, canonical");
    ok(e && hutch_egress_match(e, "a.pypi.org", 443, NULL) == HUTCH_EGRESS_OK &&
           hutch_egress_match(e, "api.github.com", 443, NULL) == HUTCH_EGRESS_OK,
       "egress: the policy's rules match");
    hutch_policy_unref(p);

    p = must_load("return { egress = {} }");
    e = hutch_policy_egress(p);
    ok(e && e->n == 0 && e->max_bytes == HUTCH_EGRESS_DEFAULT_MAX_BYTES &&
           e->max_connections == HUTCH_EGRESS_DEFAULT_MAX_CONNECTIONS &&
           hutch_egress_match(e, "example.com", 443, NULL) == HUTCH_EGRESS_REFUSED_NAME,
       "egress = {}: on, nothing allowed, default caps");
    hutch_policy_unref(p);

    load_fails("return { egres = {} }",
               "unknown field \"egres\" (did you mean \"egress\"?)", "egres");
    load_fails("return { egress = { alow = {} } }",
               "unknown field \"egress.alow\" (did you mean \"egress.allow\"?)",
               "egress.alow");
    load_fails("return { egress = 'api.github.com' }",
               "egress: expected a table, got a string", "egress a string");
    load_fails("return { egress = { allow = 'x.org' } }",
               "egress.allow: expected a table, got a string", "allow a string");
    load_fails("return { egress = { allow = { 'x.org', 7 } } }",
               "egress.allow[2]: expected a string, got a number", "allow[2] a number");
    load_fails("return { egress = { allow = { 'x.org', '' } } }",
               "egress.allow[2]: must not be empty", "allow[2] empty");
    load_fails("return { egress = { allow = { a = 'x.org' } } }",
               "egress.allow: expected a list", "allow not a list");
    load_fails("return { egress = { allow = { 'x.org:0' } } }",
               "egress.allow[1]: \"x.org:0\": the port is a number from 1 to 65535",
               "port 0");
    load_fails("return { egress = { allow = { 'x.org:65536' } } }",
               "the port is a number from 1 to 65535", "port 65536");
    load_fails("return { egress = { allow = { 'x.org:' } } }",
               "the port is a number from 1 to 65535", "empty port");
    load_fails("return { egress = { allow = { 'x.org:http' } } }",
               "the port is a number from 1 to 65535", "a port by name");
    load_fails("return { egress = { allow = { 'a.*.org' } } }",
               "* may only be the whole leftmost label", "* in the middle");
    load_fails("return { egress = { allow = { '*x.org' } } }",
               "* may only be the whole leftmost label", "* in a label");
    load_fails("return { egress = { allow = { '*' } } }",
               "* may only be the whole leftmost label", "* alone");
    load_fails("return { egress = { allow = { '::1' } } }",
               "an IPv6 address goes in brackets", "bare IPv6");
    load_fails("return { egress = { allow = { '[::1' } } }", "lacks its \"]\"",
               "unclosed bracket");
    load_fails("return { egress = { allow = { '[fe80::1%eth0]' } } }",
               "not an IPv6 address", "IPv6 zone");
    load_fails("return { egress = { allow = { 'https://x.org/' } } }",
               "host[:port], not a URL", "a URL");
    load_fails("return { egress = { allow = { 'user@x.org' } } }",
               "host[:port], not a URL", "userinfo");
    load_fails("return { egress = { allow = { 'x .org' } } }",
               "without spaces or control characters", "a space");
    load_fails("return { egress = { allow = { 'x..org' } } }", "an empty label",
               "empty label");
    load_fails("return { egress = { allow = { 'x!.org' } } }",
               "a host name holds letters, digits", "a bad character");
    load_fails("return { egress = { allow = { '10.1' } } }",
               "neither a host name (its last label is a number)", "10.1");
    load_fails("return { egress = { allow = { '2130706433' } } }",
               "neither a host name", "a decimal address");
    load_fails("return { egress = { allow = { '256.1.1.1' } } }", "neither a host name",
               "256.1.1.1");
    load_fails("return { egress = { max_bytes = 0 } }",
               "egress.max_bytes: 0 is out of range", "max_bytes 0");
    load_fails("return { egress = { max_bytes = 1.5 } }",
               "egress.max_bytes: expected an integer, got a fractional number",
               "max_bytes 1.5");
    load_fails("return { egress = { max_connections = 5000 } }",
               "egress.max_connections: 5000 is out of range (1 to 4096)",
               "max_connections 5000");
    load_fails("return { egress = { max_connections = '3' } }",
               "egress.max_connections: expected an integer, got a string",
               "max_connections a string");
    {
        char big[4096];
        int n = snprintf(big, sizeof(big), "return { egress = { allow = { ");
        for (int i = 0; i <= HUTCH_EGRESS_MAX_RULES; i++)
            n += snprintf(big + n, sizeof(big) - (size_t)n, "'h%d.x',", i);
        snprintf(big + n, sizeof(big) - (size_t)n, " } } }");
        load_fails(big, "egress.allow: 257 entries, at most 256", "too many rules");
    }
}

static void test_principals(void)
{
    struct hutch_policy *p =
        must_load("return { principals = {\n"
                  "  { name = 'alice', token = 'alice-token-0123456789abcdef' },\n"
                  "  { name = 'bob', token = 'bob-token-0123456789abcdef' } },\n"
                  "  audit = { secret = { 'pin', '*_key' } } }");
    ok(hutch_policy_has_principals(p), "has principals");
    ok(!strcmp(hutch_policy_principal(p, "alice-token-0123456789abcdef") ?: "",
               "alice") &&
           !strcmp(hutch_policy_principal(p, "bob-token-0123456789abcdef") ?: "",
                   "bob"),
       "tokens map to principals");
    ok(!hutch_policy_principal(p, "alice-token-0123456789abcde") &&
           !hutch_policy_principal(p, "alice-token-0123456789abcdeff") &&
           !hutch_policy_principal(p, "") && !hutch_policy_principal(p, NULL) &&
           !hutch_policy_principal(p, "ALICE-TOKEN-0123456789ABCDEF"),
       "prefixes, extensions, case variants and empty tokens match nobody");
    ok(hutch_policy_is_secret(p, "pin") && hutch_policy_is_secret(p, "PIN") &&
           hutch_policy_is_secret(p, "api_key") &&
           !hutch_policy_is_secret(p, "password") &&
           !hutch_policy_is_secret(p, "keyboard"),
       "audit.secret replaces the default list, globs, case-insensitive");
    hutch_policy_unref(p);
}

/* taint (policy.h): sources and sinks are globs like tools.allow; the rule
 * changes a decision only for a sink of a tainted execution; under "ask" a
 * hook's own question keeps its words, and the source is added. */
static void test_taint(void)
{
    struct hutch_policy *p = must_load(
        "return { tools = { allow = { \"*\" } },\n"
        "  taint = { sources = { \"web.*\", \"mail.read_*\" },\n"
        "            sinks = { \"mail.send*\", \" GitHub.Create_* \" } },\n"
        "  on_tool_call = function(c)\n"
        "    if c.name == 'send_all' then return 'ask', 'Send to everyone?' end\n"
        "    if c.name == 'send_never' then return false, 'never' end\n"
        "    return true end }");
    const char *sink = NULL;
    int r;

    ok(hutch_policy_taint_source(p, "web", "fetch") &&
           !strcmp(hutch_policy_taint_source(p, "web", "fetch"), "web.*"),
       "a source glob names web.fetch");
    ok(hutch_policy_taint_source(p, NULL, "MAIL.read_inbox") != NULL,
       "sources match without case");
    ok(!hutch_policy_taint_source(p, "mail", "send"), "mail.send is no source");
    ok(hutch_policy_taint_sink(p, "github", "create_issue", NULL) != NULL,
       "a sink glob is trimmed and matches without case");
    ok(!hutch_policy_taint_sink(p, "web", "fetch", NULL), "web.fetch is no sink");

    r = tool(p, "mail.send", NULL, NULL);
    r = hutch_policy_check_taint(p, NULL, "mail.send", NULL, r, reason, sizeof(reason),
                                 &sink);
    ok(r == 0 && !sink, "an untainted execution's sink call is allowed");
    r = tool(p, "mail.send", NULL, NULL);
    r = hutch_policy_check_taint(p, NULL, "mail.send", "web.fetch", r, reason,
                                 sizeof(reason), &sink);
    ok(r == -EPERM && sink && !strcmp(sink, "mail.send*") &&
           strstr(reason, "untrusted data from web.fetch") &&
           strstr(reason, "taint.sinks rule \"mail.send*\""),
       "a tainted execution's sink call is denied, naming source and rule (%s)",
       reason);
    r = tool(p, "web.fetch", NULL, NULL);
    r = hutch_policy_check_taint(p, NULL, "web.fetch", "web.fetch", r, reason,
                                 sizeof(reason), &sink);
    ok(r == 0 && !sink, "a tainted execution's other calls are allowed");
    r = tool(p, "mail.send_never", NULL, NULL);
    r = hutch_policy_check_taint(p, NULL, "mail.send_never", "web.fetch", r, reason,
                                 sizeof(reason), &sink);
    ok(r == -EPERM && !strcmp(reason, "never"), "the hook's denial stays its own (%s)",
       reason);
    hutch_policy_unref(p);

    p = must_load(
        "return { tools = { allow = { \"*\" } },\n"
        "  taint = { sources = { \"web.*\" }, sinks = { \"mail.*\" },\n"
        "            on_sink = \"ask\" },\n"
        "  on_tool_call = function(c)\n"
        "    if c.name == 'send_all' then return 'ask', 'Send to everyone?' end\n"
        "    return true end }");
    r = tool(p, "mail.send", NULL, NULL);
    r = hutch_policy_check_taint(p, NULL, "mail.send", "web.fetch", r, reason,
                                 sizeof(reason), &sink);
    ok(r == HUTCH_POLICY_ASK && strstr(reason, "untrusted data from web.fetch") &&
           strstr(reason, "mail.send"),
       "on_sink = \"ask\": a question naming the source and the tool (%s)", reason);
    r = tool(p, "mail.send_all", NULL, NULL);
    r = hutch_policy_check_taint(p, NULL, "mail.send_all", "web.fetch", r, reason,
                                 sizeof(reason), &sink);
    ok(r == HUTCH_POLICY_ASK && !strcmp(reason, "Send to everyone? (this program has "
                                                "read untrusted data from web.fetch)"),
       "the hook's own question keeps its words, the source added (%s)", reason);
    hutch_policy_unref(p);

    {
        int src, esink, ask;
        p = must_load("return { taint = { sources = { \"web.*\", \" EGRESS \" },\n"
                      "  sinks = { \"*\" }, on_sink = \"ask\" } }");
        hutch_policy_taint_egress(p, &src, &esink, &ask);
        ok(src && !esink && ask,
           "\"egress\" (any case, trimmed) names egress; \"*\" names tools only");
        hutch_policy_unref(p);
        hutch_policy_taint_egress(NULL, &src, &esink, &ask);
        ok(!src && !esink && !ask, "no policy: egress is neither");
    }
    /* A connection as a sink: the words a tool's decision has. */
    p = must_load(
        "return { taint = { sources = { \"web.*\" }, sinks = { \"egress\" } } }");
    r = hutch_policy_check_taint_egress(p, "api.example", 443, NULL, reason,
                                        sizeof(reason));
    ok(r == 0, "an untainted execution's connection goes");
    r = hutch_policy_check_taint_egress(p, "api.example", 443, "web.fetch", reason,
                                        sizeof(reason));
    ok(r == -EPERM &&
           !strcmp(reason, "denied by the policy's taint rule: this program has read "
                           "untrusted data from web.fetch (taint.sources), and a "
                           "connection to api.example:443 may send data out "
                           "(taint.sinks rule \"egress\")"),
       "a tainted execution's connection is denied, as a sink tool's call (%s)",
       reason);
    hutch_policy_unref(p);
    p = must_load(
        "return { taint = { sources = { \"web.*\" }, sinks = { \"egress\" },\n"
        "  on_sink = \"ask\" } }");
    r = hutch_policy_check_taint_egress(p, "api.example", 443, "web.fetch", reason,
                                        sizeof(reason));
    ok(r == HUTCH_POLICY_ASK && strstr(reason, "untrusted data from web.fetch") &&
           strstr(reason, "Allow it to connect to api.example:443, which may send"),
       "under ask: a question naming the source and the address (%s)", reason);
    hutch_policy_unref(p);
    p = must_load(
        "return { taint = { sources = { \"web.*\" }, sinks = { \"mail.*\" } } }");
    r = hutch_policy_check_taint_egress(p, "api.example", 443, "web.fetch", reason,
                                        sizeof(reason));
    ok(r == 0, "egress no sink: a tainted execution's connection goes");
    hutch_policy_unref(p);
    load_fails("return { taint = { sinks = { \"a.*\" } } }",
               "taint: needs both sources", "taint without sources");
    load_fails("return { taint = { sources = {}, sinks = { \"a.*\" } } }",
               "sources is empty", "taint with empty sources");
    load_fails("return { taint = { sources = { \"a.*\" }, sinks = { 3 } } }",
               "taint.sinks[1]", "a sink that is not a string");
    load_fails("return { taint = { sources = { \"a.*\" }, sinks = { \"b\" }, "
               "on_sink = true } }",
               "taint.on_sink", "on_sink not a string");
    load_fails("return { taint = \"web.*\" }", "taint", "taint not a table");
}

/* egress per principal: its own table replaces the policy's, false takes it
 * away; on_execute may only take it away for one execution. */
static void test_egress_principals(void)
{
    struct hutch_policy_exec req = {
        .principal = "bob", .execution = "x", .language = "python"};
    struct hutch_policy_decision d;
    struct hutch_policy *p = must_load(
        "return { egress = { allow = { 'api.github.com' } },\n"
        "  principals = {\n"
        "  { name = 'alice', token = 'alice-token-0123456789abcdef',\n"
        "    egress = { allow = { 'pypi.org:443', '127.0.0.1:8080' }, max_connections "
        "= 3 } },\n"
        "  { name = 'bob', token = 'bob-token-0123456789abcdef', egress = false },\n"
        "  { name = 'carol', token = 'carol-token-0123456789abcdef' } },\n"
        "  on_execute = function(r) if r.principal == 'carol' then return { egress = "
        "false } end\n"
        "    return true end }");
    const struct hutch_egress_rules *a = hutch_policy_egress_of(p, "alice");
    ok(a && a->n == 2 && a->max_connections == 3, "alice: her own egress");
    ok(!hutch_policy_egress_of(p, "bob"), "bob: egress = false, none");
    a = hutch_policy_egress_of(p, "carol");
    ok(a && a->n == 1, "carol: the policy's");
    ok(hutch_policy_egress_of(p, "nobody") == hutch_policy_egress(p),
       "an unknown principal: the policy's");
    ok(hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason)) == 0 &&
           !d.egress_off,
       "on_execute true: egress left as it is");
    req.principal = "carol";
    ok(hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason)) == 0 &&
           d.egress_off,
       "on_execute { egress = false }: none for this execution");
    hutch_policy_unref(p);

    p = must_load("return { on_execute = function() return { egress = { allow = { "
                  "'x.org' } } } end }");
    ok(hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason)) < 0 &&
           strstr(reason, "may only take egress away"),
       "on_execute cannot give egress: %s", reason);
    hutch_policy_unref(p);
    load_fails(
        "return { principals = { { name = 'a', token = 'a-token-0123456789abcdef',"
        " egress = true } } }",
        "principals[1].egress: true is not a table", "a principal's egress = true");
    load_fails(
        "return { principals = { { name = 'a', token = 'a-token-0123456789abcdef',"
        " egress = { allow = { 'a..b' } } } } }",
        "principals[1].egress.allow[1]", "a principal's bad rule names its path");
}

/* concurrency (admit.h): the policy's for everyone, a principal's own per
 * field. */
static void test_concurrency_limits(void)
{
    struct hutch_policy_concurrency c;
    struct hutch_policy *p =
        must_load("return { concurrency = { executions = 3, queued = 5 },\n"
                  "  principals = {\n"
                  "  { name = 'alice', token = 'alice-token-0123456789abcdef',\n"
                  "    concurrency = { executions = 8 } },\n"
                  "  { name = 'bob', token = 'bob-token-0123456789abcdef',\n"
                  "    concurrency = { queued = 0 } } } }");
    hutch_policy_concurrency(p, "alice", &c);
    ok(c.executions == 8 && c.queued == 5 && c.queued_set,
       "alice: her own executions, the policy's queue");
    hutch_policy_concurrency(p, "bob", &c);
    ok(c.executions == 3 && c.queued == 0 && c.queued_set,
       "bob: the policy's executions, no queue of his own");
    hutch_policy_concurrency(p, "nobody", &c);
    ok(c.executions == 3 && c.queued == 5, "another: the policy's");
    hutch_policy_unref(p);
    p = must_load("return {}");
    hutch_policy_concurrency(p, "local", &c);
    ok(c.executions == 0 && !c.queued_set, "a policy that says nothing: 0 (defaults)");
    hutch_policy_unref(p);
    load_fails("return { concurrency = { executions = 0 } }",
               "concurrency.executions: 0 is out of range (1 to 4096)",
               "concurrency.executions 0");
    load_fails("return { concurrency = { queued = 1001 } }",
               "concurrency.queued: 1001 is out of range (0 to 1000)",
               "concurrency.queued past the cap");
    load_fails("return { concurrency = { parallel = 2 } }", "parallel",
               "an unknown concurrency field");
    load_fails("return { principals = { { name = 'a', token = "
               "'a-token-0123456789abcdef', concurrency = { executions = 'x' } } } }",
               "principals[1].concurrency.executions: expected an integer",
               "a principal's concurrency, checked the same");
}

/* --- paths
 * ------------------------------------------------------------------------------ */

static void mk(const char *rel, int dir)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    if (dir ? mkdir(p, 0755) : (write_file(p, "x"), 0)) {
        printf("# cannot create %s\n", p);
        exit(2);
    }
}

static void ln(const char *target, const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    unlink(p);
    if (symlink(target, p)) {
        printf("# cannot link %s\n", p);
        exit(2);
    }
}

static void make_tree(void)
{
    snprintf(root, sizeof(root), "/tmp/hutch-policy-test.XXXXXX");
    if (!mkdtemp(root)) {
        printf("Bail out! mkdtemp\n");
        exit(2);
    }
    if (!realpath(root, real_root))
        exit(2);
    mk("allowed", 1);
    mk("allowed/file", 0);
    mk("allowed/sub", 1);
    mk("allowed/real", 1);
    mk("allowedX", 1);
    mk("allowedX/file", 0);
    mk("outside", 1);
    mk("outside/secret", 0);
    mk("outside/d", 1);
    mk("rw", 1);
    ln("../outside", "allowed/link_out");
    ln("sub", "allowed/link_in");
    ln("real", "allowed/link_race");
    ln("../outside/d", "allowed/linkdir");
    ln("allowed", "link_in"); /* root/link_in -> allowed */
}

static int rm_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    return remove(path);
}

static void rmtree(const char *dir)
{
    if (strncmp(dir, "/tmp/hutch-policy-test.", 23))
        return;
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        printf("# could not remove %s\n", dir);
}

static const char *const path_policy =
    "return {\n"
    "  tools = { allow = { 't.*' } },\n"
    "  paths = { { host = '@ROOT@/allowed', sandbox = '/data', mode = 'ro' },\n"
    "            { host = '@ROOT@/rw', sandbox = '/work/out_dir', mode = 'rw' } },\n"
    "  on_tool_call = function(call)\n"
    "    local ok, r = hutch.path_allowed(call.args.path, call.args.mode)\n"
    "    if call.name == 'resolve' then return false, tostring(r) end\n"
    "    if call.name == 'nul' then\n"
    "      return (hutch.path_allowed('@ROOT@/allowed/file\\0/../../outside/secret'))\n"
    "    end\n"
    "    if not ok then return false, r end\n"
    "    return true\n"
    "  end,\n"
    "}\n";

/* Both ways: hutch_policy_path_allowed and a hook calling
 * hutch.path_allowed must agree. */
static void path_case(struct hutch_policy *p, const char *rel, const char *mode,
                      int want, const char *what)
{
    char path[PATH_MAX * 2], args[PATH_MAX * 3], resolved[PATH_MAX];
    int c, h;
    cJSON *a = cJSON_CreateObject();
    if (rel[0] == '/' || rel[0] == '%' || !*rel)
        snprintf(path, sizeof(path), "%s", rel);
    else
        snprintf(path, sizeof(path), "%s/%s", root, rel);
    c = hutch_policy_path_allowed(p, path, mode, resolved, sizeof(resolved));
    cJSON_AddStringToObject(a, "path", path);
    cJSON_AddStringToObject(a, "mode", mode);
    reason[0] = '\0';
    h = hutch_policy_check_tool(p, "local", "e", "t", "read", a, reason,
                                sizeof(reason)) == 0;
    cJSON_Delete(a);
    (void)args;
    ok(c == want && h == want, "%s %s: %s (C %d, hook %d%s%s)",
       want ? "allowed" : "denied", what, rel, c, h, h ? "" : ": ", h ? "" : reason);
}

static void test_paths(void)
{
    struct hutch_policy *p = must_load(path_policy);
    char path[PATH_MAX], resolved[PATH_MAX], want[PATH_MAX], longp[PATH_MAX + 100];
    cJSON *a;

    path_case(p, "allowed/file", "ro", 1, "a file inside");
    path_case(p, "allowed/newfile", "ro", 1, "a file not created yet");
    path_case(p, "allowed", "ro", 1, "the directory itself");
    path_case(p, "allowed//sub///./x", "ro", 1, "repeated slashes and .");
    path_case(p, "allowed/../outside/secret", "ro", 0, "..");
    path_case(p, "allowed/sub/../../outside/secret", "ro", 0, "../..");
    path_case(p, "allowed/%2e%2e/outside/secret", "ro", 0, "%2e%2e");
    path_case(p, "allowed/%2E%2E/outside/secret", "ro", 0, "%2E%2E");
    path_case(p, "allowed/%252e%252e/outside/secret", "ro", 0,
              "double-encoded %252e%252e");
    path_case(p, "allowed%2f..%2foutside%2fsecret", "ro", 0, "%2f");
    path_case(p, "allowed/sub/a%2fb/../../../outside/secret", "ro", 0,
              "%2f that hides a level from a literal reader");
    path_case(p, "allowed/x%00/../../outside/secret", "ro", 0, "%00");
    path_case(p, "allowed/%zz", "ro", 0, "invalid percent escape");
    path_case(p, "//etc/passwd", "ro", 0, "//etc");
    path_case(p, "allowed//..//..//outside/secret", "ro", 0, "// with ..");
    path_case(p, "allowed/link_out/secret", "ro", 0,
              "a symlink inside pointing outside");
    path_case(p, "allowed/link_out", "ro", 0, "the outward symlink itself");
    path_case(p, "allowed/linkdir/../secret", "ro", 0,
              "a symlink followed by .. (the kernel goes outside)");
    path_case(p, "allowed/link_in/x", "ro", 1, "a symlink inside pointing inside");
    path_case(p, "link_in/file", "ro", 1, "a symlink outside pointing inside");
    path_case(p, "allowedX/file", "ro", 0, "a sibling sharing the prefix");
    path_case(p, "allowed/file", "rw", 0, "writing to a ro path");
    path_case(p, "rw/new", "rw", 1, "writing to a rw path");
    path_case(p, "rw/new", "ro", 1, "reading a rw path");
    path_case(p, "outside/secret", "ro", 0, "outside");
    path_case(p, "/etc/passwd", "ro", 0, "/etc/passwd");
    path_case(p, "/", "ro", 0, "/");
    path_case(p, "%2Fetc/passwd", "ro", 0, "relative, starting with %2F");
    ok(!hutch_policy_path_allowed(p, "allowed/file", "ro", NULL, 0) &&
           !hutch_policy_path_allowed(p, "", "ro", NULL, 0) &&
           !hutch_policy_path_allowed(p, NULL, "ro", NULL, 0),
       "relative, empty and NULL paths are denied");
    snprintf(path, sizeof(path), "%s/allowed/file", root);
    ok(!hutch_policy_path_allowed(p, path, "rx", NULL, 0) &&
           hutch_policy_path_allowed(p, path, NULL, NULL, 0),
       "an unknown mode is denied; NULL mode is ro");
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    memcpy(longp, path, strlen(path));
    longp[strlen(path)] = '/';
    ok(!hutch_policy_path_allowed(p, longp, "ro", NULL, 0),
       "an over-long path is denied");
    ok(tool(p, "t.nul", "{}", NULL) != 0, "a Lua string with a NUL byte is denied");
    ok(tool(p, "t.read", "{\"path\": 5}", NULL) == -EPERM && strstr(reason, "no path"),
       "a non-string path is denied by the helper: %s", reason);
    ok(tool(p, "t.read", "{}", NULL) == -EPERM, "a missing path is denied");
    ok(tool(p, "t.read", "{\"path\": \"/tmp\", \"mode\": \"rx\"}", NULL) != 0 &&
           strstr(reason, "invalid option 'rx'"),
       "a bad mode in the hook is an error (denied): %s", reason);

    /* The race: what is decided is the resolved path, and that is what must
     * be used; re-pointing the symlink afterwards cannot move it. */
    snprintf(path, sizeof(path), "%s/allowed/link_race/f", root);
    snprintf(want, sizeof(want), "%s/allowed/real/f", real_root);
    ok(hutch_policy_path_allowed(p, path, "ro", resolved, sizeof(resolved)) == 1 &&
           !strcmp(resolved, want),
       "through a symlink: allowed, resolved to %s", resolved);
    a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "path", path);
    hutch_policy_check_tool(p, "local", "e", "t", "resolve", a, reason, sizeof(reason));
    ok(!strcmp(reason, want), "hutch.path_allowed returns the same resolved path: %s",
       reason);
    cJSON_Delete(a);
    ln("../outside", "allowed/link_race");
    {
        char now[PATH_MAX];
        ok(realpath(path, now) == NULL ||
               strncmp(now, real_root, strlen(real_root)) != 0 ||
               strstr(now, "/outside/"),
           "the original string now leads outside");
    }
    snprintf(want, sizeof(want), "%s/allowed", real_root);
    ok(!strncmp(resolved, want, strlen(want)) && resolved[strlen(want)] == '/' &&
           hutch_policy_path_allowed(p, resolved, "ro", NULL, 0),
       "the resolved path still lies inside the allowed dir");
    ok(!hutch_policy_path_allowed(p, path, "ro", NULL, 0),
       "and deciding the original string again denies it");
    ln("real", "allowed/link_race");
    hutch_policy_unref(p);
}

/* --- hooks
 * ------------------------------------------------------------------------------- */

static void test_tool_hook(void)
{
    struct hutch_policy *p = must_load(
        "return {\n"
        "  tools = { allow = { '*' } },\n"
        "  on_tool_call = function(c)\n"
        "    if c.name == 'fields' then\n"
        "      return false, table.concat({ c.tool, c.server, c.name, c.principal,\n"
        "        tostring(c.execution) }, '|')\n"
        "    end\n"
        "    if c.name == 'args' then\n"
        "      local a = c.args\n"
        "      return false, string.format('%s %s %s %s %s %s %s %s', math.type(a.i),\n"
        "        math.type(a.f), tostring(a.t), a.s, #a.list, a.list[2], a.obj.k,\n"
        "        tostring(a.null == hutch.null))\n"
        "    end\n"
        "    if c.name == 'alice_only' then\n"
        "      if c.principal ~= 'alice' then return false, 'only alice' end\n"
        "      return true\n"
        "    end\n"
        "    if c.name == 'false_only' then return false end\n"
        "    if c.name == 'number_reason' then return false, 42 end\n"
        "    if c.name == 'glob' then return hutch.glob('fs.*_FILE', ' fs.read_file ') "
        "end\n"
        "    if c.name == 'log' then hutch.log('logged from a hook') print('x', 1) "
        "end\n"
        "    return true\n"
        "  end }\n");
    ok(tool(p, " Srv.Fields ", NULL, "alice") == -EPERM &&
           !strcmp(reason, "srv.fields|srv|fields|alice|exec-1"),
       "call.tool, server, name (canonical), principal, execution: %s", reason);
    ok(tool(p, "a.args",
            "{\"i\": 3, \"f\": 1.5, \"t\": true, \"s\": \"str\", \"list\": [1, 2, 3], "
            "\"obj\": {\"k\": \"v\"}, \"null\": null}",
            NULL) == -EPERM &&
           !strcmp(reason, "integer float true str 3 2 v true"),
       "args arrive as Lua values (null is hutch.null): %s", reason);
    ok(tool(p, "a.alice_only", NULL, "alice") == 0 &&
           tool(p, "a.alice_only", NULL, "bob") == -EPERM &&
           !strcmp(reason, "only alice"),
       "decisions per principal");
    ok(tool(p, "a.false_only", NULL, NULL) == -EPERM &&
           !strcmp(reason, "denied by on_tool_call"),
       "false without a reason: %s", reason);
    ok(tool(p, "a.number_reason", NULL, NULL) == -EPERM && !strcmp(reason, "42"),
       "a number reason is used as text");
    ok(tool(p, "a.glob", NULL, NULL) == 0, "hutch.glob: case-insensitive, trimmed");
    ok(tool(p, "a.log", NULL, NULL) == 0, "hutch.log and print work");
    ok(tool(p, "a.x", "{\"path\": \"/a\", \"path\": \"/b\"}", NULL) == -EINVAL &&
           strstr(reason, "repeat the key \"path\""),
       "arguments repeating a key are denied: %s", reason);
    {
        cJSON *big = cJSON_CreateObject();
        char *s = malloc(5u << 20);
        memset(s, 'x', (5u << 20) - 1);
        s[(5u << 20) - 1] = '\0';
        cJSON_AddStringToObject(big, "content", s);
        free(s);
        ok(hutch_policy_check_tool(p, "local", "e", "a", "x", big, reason,
                                   sizeof(reason)) == -E2BIG &&
               strstr(reason, "too large"),
           "arguments over the hook's cap are denied: %s", reason);
        cJSON_Delete(big);
        big = cJSON_CreateObject();
        cJSON *cur = big;
        for (int i = 0; i < 100; i++)
            cur = cJSON_AddObjectToObject(cur, "d");
        ok(hutch_policy_check_tool(p, "local", "e", "a", "x", big, reason,
                                   sizeof(reason)) == -E2BIG,
           "arguments nested 100 deep are denied");
        cJSON_Delete(big);
    }
    hutch_policy_unref(p);
}

/* "ask", question: the user decides (issue 11); the question is text. */
static void test_ask(void)
{
    struct hutch_policy *p = must_load(
        "return {\n"
        "  tools = { allow = { '*' } },\n"
        "  on_tool_call = function(c)\n"
        "    if c.name == 'q' then return 'ask', 'Send ' .. c.args.n .. ' mails?' end\n"
        "    if c.name == 'ctl' then return 'ask', 'line1\\nline2' end\n"
        "    if c.name == 'bare' then return 'ask' end\n"
        "    if c.name == 'empty' then return 'ask', '' end\n"
        "    if c.name == 'other' then return 'maybe', 'x' end\n"
        "    return true\n"
        "  end,\n"
        "}\n");
    int r;

    if (!p)
        return;
    r = tool(p, "m.q", "{\"n\": 3}", NULL);
    ok(r == HUTCH_POLICY_ASK && !strcmp(reason, "Send 3 mails?"),
       "\"ask\", question: HUTCH_POLICY_ASK with the question (%d: %s)", r, reason);
    r = tool(p, "m.ctl", NULL, NULL);
    ok(r == HUTCH_POLICY_ASK && !strcmp(reason, "line1 line2"),
       "a question's control characters are blanked (%s)", reason);
    r = tool(p, "m.bare", NULL, NULL);
    ok(r == -EPROTO && strstr(reason, "returned \"ask\" without a question"),
       "\"ask\" without a question: a policy error, a denial (%d: %s)", r, reason);
    r = tool(p, "m.empty", NULL, NULL);
    ok(r == -EPROTO, "\"ask\" with an empty question: a policy error (%d)", r);
    r = tool(p, "m.other", NULL, NULL);
    ok(r == -EPROTO && strstr(reason, "returned a string"),
       "another string is a policy error (%d: %s)", r, reason);
    ok(tool(p, "m.fine", NULL, NULL) == 0, "true still allows");
    hutch_policy_unref(p);
}

static void test_execute_hook(void)
{
    struct hutch_policy *p = must_load(
        "return {\n"
        "  executor = 'local',\n"
        "  limits = { timeout_ms = 10000, memory_mb = 256, cpus = 1, pids = 64 },\n"
        "  on_execute = function(req)\n"
        "    if req.principal == 'mallory' then return false, 'not you' end\n"
        "    if req.principal == 'quiet' then return false end\n"
        "    if req.language == 'javascript' then\n"
        "      return { executor = 'docker', limits = { timeout_ms = 5000, memory_mb = "
        "1024,\n"
        "               cpus = 0.5, pids = 1000 } }\n"
        "    end\n"
        "    if req.language == 'loose' then return { limits = { cpus = 0 } } end\n"
        "    if req.language == 'echo' then\n"
        "      return false, string.format('%s %s %s %d %d %s %d %g', req.principal,\n"
        "        req.execution, req.language, req.code_bytes, req.files, "
        "req.executor,\n"
        "        req.limits.timeout_ms, req.limits.cpus)\n"
        "    end\n"
        "    return true\n"
        "  end }\n");
    struct hutch_policy_exec req = {"alice", "ex-9", "python", 123, 4, NULL};
    struct hutch_policy_decision d;
    int r;

    r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
    ok(r == 0 && !strcmp(d.executor, "local") && d.limits.timeout_ms == 10000 &&
           d.limits.memory_mb == 256 && d.limits.cpus_milli == 1000,
       "true: the policy's executor and limits");
    req.language = "javascript";
    r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
    ok(r == 0 && !strcmp(d.executor, "docker") && d.limits.timeout_ms == 5000 &&
           d.limits.memory_mb == 256 && d.limits.cpus_milli == 500 &&
           d.limits.pids == 64,
       "adjustments: tighter values used, looser ones clamped (%llu ms, %llu MB, %u "
       "mcpu, %u pids)",
       (unsigned long long)d.limits.timeout_ms, (unsigned long long)d.limits.memory_mb,
       d.limits.cpus_milli, d.limits.pids);
    req.language = "loose";
    r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
    ok(r == 0 && d.limits.cpus_milli == 1000,
       "cpus 0 (no limit) cannot loosen a cpu cap");
    req.language = "echo";
    r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
    ok(r == -EPERM && !strcmp(reason, "alice ex-9 echo 123 4 local 10000 1"),
       "req fields: %s", reason);
    req.principal = "mallory";
    r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
    ok(r == -EPERM && !strcmp(reason, "not you"), "false, reason refuses");
    req.principal = "quiet";
    r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
    ok(r == -EPERM && !strcmp(reason, "denied by on_execute"), "false alone refuses");
    hutch_policy_unref(p);
}

/* --- hostile policies ----------------------------------------------------------------
 */

/* want: "a|b" accepts either (a memory hog may hit the deadline first on
 * a slow or sanitized build). */
static int has(const char *s, const char *want)
{
    char buf[256], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", want);
    for (char *w = strtok_r(buf, "|", &save); w; w = strtok_r(NULL, "|", &save))
        if (strstr(s, w))
            return 1;
    return 0;
}

static void hostile_tool(const char *file, const char *name, const char *want)
{
    struct hutch_err err;
    struct hutch_policy *p = fixture(file, &err);
    double t0;
    int r;
    if (!p) {
        ok(0, "%s loads: %s", file, err.msg);
        return;
    }
    t0 = now_s();
    r = tool(p, name, "{\"n\": 1}", NULL);
    t0 = now_s() - t0;
    /* The budget is CPU time; the wall-clock bound is only "it ends". */
    ok(r < 0 && has(reason, want) && t0 < 30.0, "%s %s: denied in %.0f ms: %s", file,
       name, t0 * 1000, reason);
    /* The state it ran in is rebuilt or reused: the next call behaves the same. */
    r = tool(p, name, "{\"n\": 1}", NULL);
    ok(r < 0 && has(reason, want), "%s %s: again", file, name);
    hutch_policy_unref(p);
}

static void hostile_exec(const char *file, const char *lang, const char *want)
{
    struct hutch_err err;
    struct hutch_policy *p = fixture(file, &err);
    struct hutch_policy_exec req = {"local", "e", lang, 1, 0, NULL};
    struct hutch_policy_decision d;
    double t0;
    int r;
    if (!p) {
        ok(0, "%s loads: %s", file, err.msg);
        return;
    }
    t0 = now_s();
    reason[0] = '\0';
    r = hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason));
    t0 = now_s() - t0;
    /* The budget is CPU time; the wall-clock bound is only "it ends". */
    ok(r < 0 && has(reason, want) && t0 < 30.0,
       "%s on_execute(%s): refused in %.0f ms: %s", file, lang, t0 * 1000, reason);
    hutch_policy_unref(p);
}

static void hostile_load(const char *file, const char *want)
{
    struct hutch_err err;
    struct hutch_policy *p;
    double t0 = now_s();
    p = fixture(file, &err);
    t0 = now_s() - t0;
    ok(!p && has(err.msg, want) && t0 < 30.0, "%s: refused in %.0f ms: %s", file,
       t0 * 1000, err.msg);
    hutch_policy_unref(p);
}

static void test_hostile(void)
{
    hostile_tool("loop.lua", "x.y", "policy hook ran too long");
    hostile_exec("loop.lua", "python", "ran too long");
    hostile_tool("loop_pcall.lua", "x.y", "policy hook ran too long");
    hostile_tool("memhog.lua", "x.table", "not enough memory|ran too long");
    hostile_tool("memhog.lua", "x.string", "not enough memory|ran too long");
    hostile_tool("memhog.lua", "x.pcall", "not enough memory|ran too long");
    hostile_tool("error.lua", "x.y", "policy error: error.lua:8: boom");
    hostile_tool("error.lua", "x.table", "error object is a table");
    hostile_tool("error.lua", "x.index", "attempt to index a nil value");
    hostile_exec("error.lua", "python", "boom in on_execute");
    hostile_tool(
        "wrong_types.lua", "x.number",
        "on_tool_call returned a number; expected true, false and a reason, or \"ask\" "
        "and a question");
    hostile_tool("wrong_types.lua", "x.string", "on_tool_call returned a string");
    hostile_tool("wrong_types.lua", "x.table", "on_tool_call returned a table");
    hostile_tool("wrong_types.lua", "x.nothing", "on_tool_call returned nil");
    hostile_tool("wrong_types.lua", "x.other", "on_tool_call returned nil");
    hostile_exec("wrong_types.lua", "python", "on_execute returned a string");
    hostile_exec("wrong_types.lua", "nil", "on_execute returned nil");
    hostile_exec("wrong_types.lua", "field", "unknown field \"memory\"");
    hostile_exec("wrong_types.lua", "limit", "limits.timeout_ms: expected an integer");
    hostile_exec("wrong_types.lua", "executor", "invalid executor");
    hostile_exec("wrong_types.lua", "other", "on_execute returned a number");
    hostile_tool("io.lua", "x.y", "attempt to index a nil value (global 'io')");
    hostile_tool("os.lua", "x.y", "attempt to index a nil value (global 'os')");
    ok(access("/tmp/hutch-policy-pwned", F_OK) != 0, "os.execute ran nothing");
    hostile_tool("require.lua", "x.y",
                 "attempt to call a nil value (global 'require')");
    hostile_tool("require.lua", "x.package", "(global 'package')");
    hostile_tool("bytecode.lua", "x.y", "attempt to load a binary chunk");
    hostile_tool("bytecode.lua", "x.dump", "(field 'dump')");
    hostile_tool("globals.lua", "x.y", "cannot assign global \"counter\"");
    hostile_tool("globals.lua", "x.rawset", "(global 'rawset')");
    hostile_tool("globals.lua", "x.lib", "cannot modify a library table");
    hostile_tool("globals.lua", "x.meta", "protected metatable");
    {
        struct hutch_err err;
        struct hutch_policy *p = fixture("globals.lua", &err);
        ok(p && tool(p, "x.helper", NULL, NULL) == 0,
           "globals.lua: a helper defined at load still works");
        hutch_policy_unref(p);
        p = fixture("sandbox_probe.lua", &err);
        ok(p && tool(p, "x.y", NULL, NULL) == 0,
           "sandbox_probe.lua finds no way out: %s", p ? reason : err.msg);
        hutch_policy_unref(p);
    }
    hostile_tool("gc_loop.lua", "x.y", "__gc metamethods are not available");
    hostile_tool("close.lua", "x.y", "ran too long");
    hostile_tool("close.lua", "x.error", "ran too long");
    hostile_tool("recursion.lua", "x.y",
                 "not enough memory|stack overflow|ran too long");
    hostile_tool("recursion.lua", "x.c", "stack overflow");
    hostile_load("load_loop.lua", "took too long to load");
    hostile_load("load_memhog.lua", "ran out of memory|took too long");
    hostile_load("load_io.lua",
                 "load_io.lua:2: attempt to index a nil value (global 'io')");
}

/* A hook deep in C recursion on a thread with a small stack: the engine
 * moves it to a thread with enough stack instead of crashing. */
static void *small_stack_main(void *arg)
{
    struct hutch_policy *p = arg;
    static char r2[512];
    int r = hutch_policy_check_tool(p, "local", "e", "x", "c", NULL, r2, sizeof(r2));
    return (void *)(intptr_t)(r < 0 && strstr(r2, "stack overflow"));
}

static void test_small_stack(void)
{
    struct hutch_err err;
    struct hutch_policy *p = fixture("recursion.lua", &err);
    pthread_attr_t attr;
    pthread_t th;
    void *res = NULL;
    if (!p) {
        ok(0, "recursion.lua loads: %s", err.msg);
        return;
    }
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_create(&th, &attr, small_stack_main, p);
    pthread_join(th, &res);
    pthread_attr_destroy(&attr);
    ok(res != NULL, "deep C recursion in a hook on a 256 KiB thread fails closed");
    hutch_policy_unref(p);
}

/* --- concurrency
 * ----------------------------------------------------------------------- */

struct worker {
    pthread_t t;
    struct hutch_policy *p;
    int id, n, wrong;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    char why[256], args[128];
    for (int i = 0; i < w->n; i++) {
        int special = i % 2500 == 7 ? (i / 2500) % 3 + 1 : 0, r;
        cJSON *a;
        if (special == 1)
            snprintf(args, sizeof(args), "{\"n\": %d, \"spin\": true}", i);
        else if (special == 2)
            snprintf(args, sizeof(args), "{\"n\": %d, \"hog\": true}", i);
        else if (special == 3 || i % 1000 == 3)
            snprintf(args, sizeof(args), "{\"n\": %d, \"fail\": true}", i);
        else
            snprintf(args, sizeof(args), "{\"n\": %d}", i);
        a = cJSON_Parse(args);
        r = hutch_policy_check_tool(w->p, "p", "e", "t", i % 500 == 1 ? "never" : "x",
                                    a, why, sizeof(why));
        cJSON_Delete(a);
        if (i % 500 == 1)
            w->wrong += r != -EPERM || !strstr(why, "tools.deny");
        else if (special || i % 1000 == 3)
            w->wrong += r >= 0 || !strstr(why, "policy error");
        else if (i % 2 == 0)
            w->wrong += r != 0;
        else
            w->wrong += r != -EPERM || strncmp(why, "odd ", 4);
        if (i % 1000 == 0) {
            struct hutch_policy_exec req = {"p", "e", "python", (size_t)i, 0, NULL};
            struct hutch_policy_decision d;
            r = hutch_policy_check_execute(w->p, &req, &d, why, sizeof(why));
            w->wrong += r != 0 || d.limits.timeout_ms !=
                                      (uint64_t)(1000 + i < 30000 ? 1000 + i : 30000);
        }
    }
    return NULL;
}

static void test_concurrency(void)
{
    struct hutch_err err;
    struct hutch_policy *p = fixture("concurrency.lua", &err);
    struct worker w[8];
    int wrong = 0;
    double t0 = now_s();
    if (!p) {
        ok(0, "concurrency.lua loads: %s", err.msg);
        return;
    }
    for (int i = 0; i < 8; i++) {
        w[i] = (struct worker){.p = hutch_policy_ref(p), .id = i, .n = 10000};
        pthread_create(&w[i].t, NULL, worker_main, &w[i]);
    }
    hutch_policy_unref(p); /* the workers hold the last references */
    for (int i = 0; i < 8; i++) {
        pthread_join(w[i].t, NULL);
        wrong += w[i].wrong;
        hutch_policy_unref(w[i].p);
    }
    ok(wrong == 0,
       "8 threads x 10000 decisions with hooks (some looping, hogging, failing): "
       "%d wrong, %.1f s",
       wrong, now_s() - t0);
}

/* --- the example policies
 * -------------------------------------------------------------- */

static struct hutch_policy *contrib(const char *name, char *path, size_t len)
{
    char src[PATH_MAX], *text, *t1, *t2;
    struct hutch_err err = {0};
    struct hutch_policy *p = NULL;
    snprintf(src, sizeof(src), "%s/contrib/policies/%s", srcdir(), name);
    text = read_all(src);
    if (!text) {
        ok(0, "contrib/policies/%s is readable", name);
        return NULL;
    }
    t1 = subst(text, "/srv/hutch", root);
    t2 = subst(t1, "CHANGE-ME", "test-only-secret");
    snprintf(path, len, "%s/%s", root, name);
    write_file(path, t2);
    ok(hutch_policy_load(path, &p, &err) == 0,
       "contrib/policies/%s loads (with /srv/hutch "
       "-> a temporary tree): %s",
       name, err.msg);
    free(text);
    free(t1);
    free(t2);
    return p;
}

static void test_contrib(void)
{
    char path[PATH_MAX], args[PATH_MAX + 64];
    struct hutch_policy *p;
    struct hutch_policy_exec req = {"local", "e", "python", 10, 0, NULL};
    struct hutch_policy_decision d;

    mk("data", 1);
    mk("data/a.csv", 0);
    mk("out", 1);
    mk("workspace", 1);
    mk("shared", 1);
    mk("tenants", 1);
    mk("tenants/alice", 1);
    mk("tenants/bob", 1);

    if ((p = contrib("analyst.lua", path, sizeof(path)))) {
        snprintf(args, sizeof(args), "{\"path\": \"%s/data/a.csv\"}", root);
        ok(tool(p, "fs.read_file", args, NULL) == 0,
           "analyst: reads inside the data folder");
        snprintf(args, sizeof(args), "{\"path\": \"%s/data/../out/x\"}", root);
        ok(tool(p, "fs.read_file", args, NULL) == -EPERM, "analyst: not outside it: %s",
           reason);
        ok(tool(p, "fs.write_file", "{\"path\": \"/x\"}", NULL) == -EPERM,
           "analyst: no writes: %s", reason);
        ok(hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason)) == 0 &&
               d.limits.timeout_ms <= 30000 && d.limits.memory_mb <= 512,
           "analyst: tight limits");
        hutch_policy_unref(p);
    }
    if ((p = contrib("developer.lua", path, sizeof(path)))) {
        snprintf(args, sizeof(args),
                 "{\"path\": \"%s/out/result.txt\", \"content\": \"x\"}", root);
        ok(tool(p, "fs.write_file", args, NULL) == 0,
           "developer: writes in the output folder");
        snprintf(args, sizeof(args),
                 "{\"path\": \"%s/workspace/main.py\", \"content\": \"x\"}", root);
        ok(tool(p, "fs.write_file", args, NULL) == -EPERM,
           "developer: not in the read-only workspace: %s", reason);
        snprintf(args, sizeof(args), "{\"path\": \"%s/workspace/main.py\"}", root);
        ok(tool(p, "fs.read_file", args, NULL) == 0, "developer: reads the workspace");
        ok(tool(p, "fs.delete_file", args, NULL) == -EPERM, "developer: no deletes: %s",
           reason);
        hutch_policy_unref(p);
    }
    if ((p = contrib("multitenant.lua", path, sizeof(path)))) {
        const char *alice = NULL, *bob = NULL;
        char *text = read_all(path), *tok;
        /* The test tokens: the file's, with CHANGE-ME replaced. */
        for (tok = text; tok && (tok = strstr(tok, "token = \"")); tok++) {
            char *e, t[256];
            tok += 9;
            e = strchr(tok, '"');
            snprintf(t, sizeof(t), "%.*s", (int)(e - tok), tok);
            if (!alice)
                alice = hutch_policy_principal(p, t);
            else
                bob = hutch_policy_principal(p, t);
        }
        free(text);
        ok(hutch_policy_has_principals(p) && alice && bob && !strcmp(alice, "alice") &&
               !strcmp(bob, "bob"),
           "multitenant: two principals by token");
        ok(hutch_policy_rate(p)->executions_per_minute > 0 &&
               hutch_policy_rate(p)->tool_calls_per_minute > 0,
           "multitenant: rate limits");
        snprintf(args, sizeof(args), "{\"path\": \"%s/tenants/alice/x\"}", root);
        ok(tool(p, "fs.read_file", args, "alice") == 0,
           "multitenant: alice reads her folder");
        ok(tool(p, "fs.read_file", args, "bob") == -EPERM,
           "multitenant: bob cannot read alice's: %s", reason);
        ok(tool(p, "fs.write_file", args, "alice") == 0 &&
               tool(p, "fs.write_file", args, "bob") == -EPERM,
           "multitenant: writes only to one's own folder");
        ok(tool(p, "fs.read_file", args, "mallory") == -EPERM,
           "multitenant: an unknown principal gets nothing");
        req.principal = "bob";
        ok(hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason)) == 0,
           "multitenant: bob may execute");
        req.principal = "mallory";
        ok(hutch_policy_check_execute(p, &req, &d, reason, sizeof(reason)) == -EPERM,
           "multitenant: nobody else: %s", reason);
        hutch_policy_unref(p);
    }
    {
        /* As shipped: the placeholder tokens are refused. */
        char src[PATH_MAX], *text, *t1;
        struct hutch_err err = {0};
        snprintf(src, sizeof(src), "%s/contrib/policies/multitenant.lua", srcdir());
        text = read_all(src);
        t1 = text ? subst(text, "/srv/hutch", root) : NULL;
        if (t1) {
            snprintf(path, sizeof(path), "%s/as-shipped.lua", root);
            write_file(path, t1);
            ok(hutch_policy_load(path, &p, &err) < 0 && strstr(err.msg, "placeholder"),
               "multitenant as shipped: the placeholder tokens must be replaced: %s",
               err.msg);
        }
        free(text);
        free(t1);
    }
}

/* --- the command line
 * ------------------------------------------------------------------ */

static int run(char *const argv[], char *out, size_t len)
{
    int fds[2], status;
    pid_t pid;
    size_t n = 0;
    ssize_t k;
    if (pipe(fds))
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    while ((k = read(fds[0], out + n, len - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* run() with the output's last newline dropped, for messages. */
static int run_trim(char *const argv[], char *out, size_t len)
{
    int rc = run(argv, out, len);
    size_t n = strlen(out);
    if (n && out[n - 1] == '\n')
        out[n - 1] = '\0';
    return rc;
}

static void test_cli(void)
{
    char hutch[PATH_MAX], out[8192], good[PATH_MAX], bad[PATH_MAX], want[PATH_MAX + 64];
    const char *h = getenv("HUTCH"), *b = getenv("HUTCH_BUILDDIR");
    int rc;
    if (h && *h)
        snprintf(hutch, sizeof(hutch), "%s", h);
    else
        snprintf(hutch, sizeof(hutch), "%s/hutch", b && *b ? b : "../..");
    {
        char *argv[] = {hutch, "policy", "--help", NULL};
        if (access(hutch, X_OK) != 0 || run(argv, out, sizeof(out)) != 0) {
            skip("hutch policy command line", "no hutch binary with a policy command");
            return;
        }
        ok(strstr(out, "Usage: hutch policy"), "hutch policy --help");
    }
    policy_file(
        "return { tools = { allow = { 'fs.read_*' }, deny = { 'fs.read_secret' } },\n"
        "  on_tool_call = function(c)\n"
        "    if c.args.path == '/etc/shadow' then return false, 'no shadow' end\n"
        "    return true\n"
        "  end }\n",
        good, sizeof(good));
    policy_file("return {\n  tools = {},\n  limts = {},\n}\n", bad, sizeof(bad));
    {
        char *argv[] = {hutch, "policy", "check", good, NULL};
        rc = run(argv, out, sizeof(out));
        snprintf(want, sizeof(want), "ok: %s", good);
        ok(rc == 0 && strstr(out, want), "policy check FILE: exit 0 and \"ok: FILE\"");
    }
    {
        char *argv[] = {hutch, "policy", "check", bad, NULL};
        rc = run_trim(argv, out, sizeof(out));
        snprintf(want, sizeof(want), "%s:3: unknown field \"limts\"", bad);
        ok(rc == 1 && strstr(out, want),
           "policy check BAD: exit 1 and FILE:LINE: message: %s", out);
    }
    {
        char *argv[] = {hutch,    "policy",         "test", good,
                        "--tool", " FS.Read_File ", NULL};
        rc = run(argv, out, sizeof(out));
        ok(rc == 0 && !strcmp(out, "allow\n"), "policy test: allow, exit 0");
    }
    {
        char *argv[] = {
            hutch,    "policy",       "test",   good,
            "--tool", "fs.read_file", "--args", "{\"path\": \"/etc/shadow\"}",
            NULL};
        rc = run(argv, out, sizeof(out));
        ok(rc == 3 && !strcmp(out, "deny: no shadow\n"),
           "policy test: hook deny, exit 3");
    }
    {
        char *argv[] = {hutch, "policy", "test", good, "--tool", "fs.write_file", NULL};
        rc = run(argv, out, sizeof(out));
        ok(rc == 3 && strstr(out, "deny: no tools.allow rule names fs.write_file"),
           "policy test: glob deny, exit 3");
    }
    {
        char *argv[] = {hutch, "policy", "test", bad, "--tool", "x.y", NULL};
        rc = run(argv, out, sizeof(out));
        ok(rc == 2, "policy test with a broken file: exit 2");
    }
    {
        char *argv[] = {hutch, "policy", "test", good, "--execute", NULL};
        rc = run(argv, out, sizeof(out));
        ok(rc == 0 && !strncmp(out, "allow\n", 6) && strstr(out, "timeout_ms: 30000"),
           "policy test --execute prints the limits");
    }
    {
        char *argv[] = {hutch, "policy", "test", good, "--args",
                        "[",   "--tool", "x",    NULL};
        rc = run(argv, out, sizeof(out));
        ok(rc == 2 && strstr(out, "--args"), "bad --args JSON: exit 2");
    }
    {
        char *argv[] = {hutch, "policy", "bench", good, "--n", "2000", NULL};
        rc = run(argv, out, sizeof(out));
        ok(rc == 0 && strstr(out, "p50") && strstr(out, "p99"),
           "policy bench prints p50 and p99");
    }
    for (int i = 0; i < 3; i++) {
        char *cmd = (char *[]){"check", "test", "bench"}[i];
        char *argv[] = {hutch, "policy", cmd, "--help", NULL};
        rc = run(argv, out, sizeof(out));
        ok(rc == 0 && strstr(out, "Usage: hutch policy"), "hutch policy %s --help",
           cmd);
    }
}

int main(void)
{
    hutch_log_set_level(getenv("TEST_VERBOSE") ? HUTCH_LOG_DEBUG : HUTCH_LOG_ERROR);
    unlink("/tmp/hutch-policy-pwned");
    make_tree();
    test_globs();
    test_default();
    test_denies_every_tool();
    test_validation();
    test_egress();
    test_principals();
    test_concurrency_limits();
    test_taint();
    test_egress_principals();
    test_paths();
    test_tool_hook();
    test_ask();
    test_execute_hook();
    test_hostile();
    test_small_stack();
    test_concurrency();
    test_contrib();
    test_cli();
    rmtree(root);
    return tap_done();
}
