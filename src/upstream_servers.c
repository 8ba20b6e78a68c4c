/* upstream_servers.c — the servers file (Claude Desktop's "mcpServers",
 * VS Code's "servers", JSON with comments as VS Code writes it): loading
 * it, what an entry is (runs, disabled, skipped: a broken entry is skipped
 * with its reason while the others run), ${VAR} expansion, and each
 * entry's fields checked and read into a struct up_entry.  Nothing here
 * starts or talks to a server (upstream.c).  No threads, no locks: pure
 * functions of the file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "buf.h"
#include "caps.h"
#include "curl_lib.h"
#include "jsonc.h"
#include "log.h"
#include "upstream.h"
#include "upstream_int.h"
#include "upstream_parse.h"
#include "util.h"
#include "wire.h"

/* --- the servers file --------------------------------------------------- */

static bool name_ok(const char *n)
{
    size_t len = strlen(n);

    if (len < 1 || len > HUTCH_MAX_SERVER_NAME)
        return false;
    for (size_t i = 0; i < len; i++) {
        char ch = n[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
            return false;
    }
    return true;
}

static bool header_name_ok(const char *n)
{
    size_t len = strlen(n);

    if (len < 1 || len > 256)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)n[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || strchr("!#$%&'*+-.^_`|~", ch)))
            return false;
    }
    return true;
}

/* Headers hutch sets itself. */
static bool header_reserved(const char *n)
{
    static const char *const reserved[] = {"content-type",   "accept",
                                           "mcp-session-id", "mcp-protocol-version",
                                           "content-length", "transfer-encoding"};
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (!strcasecmp(n, reserved[i]))
            return true;
    return false;
}

bool up_text_has_ctl(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

/* http:// or https://, a host, no spaces or control characters. */
static bool url_ok(const cJSON *url)
{
    const char *v = cJSON_IsString(url) ? url->valuestring : NULL;
    size_t skip;

    if (!v || strlen(v) > HUTCH_UPSTREAM_MAX_URL || up_text_has_ctl(v) ||
        strpbrk(v, " \"<>\\^`{|}"))
        return false;
    if (!strncasecmp(v, "http://", 7))
        skip = 7;
    else if (!strncasecmp(v, "https://", 8))
        skip = 8;
    else
        return false;
    return v[skip] && v[skip] != '/';
}

__attribute__((format(printf, 4, 5))) static int cfg_err(struct hutch_err *err,
                                                         const char *where,
                                                         const char *name,
                                                         const char *fmt, ...)
{
    char what[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return hutch_err_set(err, -EINVAL, "%s: server \"%s\": %s", where, name, what);
}

/* --- ${VAR} in the servers file ------------------------------------------
 *
 * Claude Code's syntax in .mcp.json: ${VAR} is the variable's value (an
 * error when it is unset), ${VAR:-default} is default when VAR is unset or
 * empty (as in the shell).  VS Code's ${env:VAR} is read as ${VAR}.  $${
 * is a literal "${"; any other $ is itself.  Expanded in "command",
 * "args", "env" values, "cwd", "url" and "headers" values, never in names.
 * Values come from hutch's own environment when the file is loaded.
 *
 * VS Code's other variables mean something only in VS Code: ${input:id}
 * (a value VS Code asks its user for), ${config:…}, ${command:…}, and its
 * predefined ones (${workspaceFolder}, ${userHome}, ${file}, …) unless
 * the environment sets a variable of that name.  They are named as such,
 * and the entry is skipped (an error of the entry, as any other). */

static bool var_char(char ch, bool first)
{
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' ||
           (!first && ch >= '0' && ch <= '9');
}

/* VS Code's predefined variables (code.visualstudio.com/docs/reference/
 * variables-reference); "/" is ${/}, its path separator. */
static const char *const vscode_vars[] = {"workspaceFolder",
                                          "workspaceFolderBasename",
                                          "userHome",
                                          "file",
                                          "fileWorkspaceFolder",
                                          "relativeFile",
                                          "relativeFileDirname",
                                          "fileBasename",
                                          "fileBasenameNoExtension",
                                          "fileExtname",
                                          "fileDirname",
                                          "fileDirnameBasename",
                                          "cwd",
                                          "lineNumber",
                                          "columnNumber",
                                          "selectedText",
                                          "execPath",
                                          "defaultBuildTask",
                                          "pathSeparator",
                                          "/",
                                          NULL};
static const char *const vscode_prefixes[] = {"input:", "config:", "command:", NULL};

/* A VS Code-only variable at name (just after "${"): its length up to the
 * "}", else 0.  A predefined name counts when the environment does not set
 * it, or when it is followed by ":" (${workspaceFolder:app}, a folder of a
 * multi-root workspace). */
static size_t vscode_var(const char *name)
{
    const char *close = strchr(name, '}');
    size_t n;

    if (!close)
        return 0;
    n = (size_t)(close - name);
    for (const char *const *p = vscode_prefixes; *p; p++)
        if (!strncmp(name, *p, strlen(*p)))
            return n;
    for (const char *const *v = vscode_vars; *v; v++) {
        size_t l = strlen(*v);
        char env[64];
        if (strncmp(name, *v, l) || (name[l] != '}' && name[l] != ':'))
            continue;
        if (name[l] == ':' && name[l + 1] != '-')
            return n;
        snprintf(env, sizeof(env), "%s", *v);
        if (name[l] == '}' && !getenv(env))
            return n;
    }
    return 0;
}

/* 0 and *out (caller frees); -ENOENT unset (var names it), -EINVAL
 * malformed (var holds what was written), -ENOTSUP VS Code's (var holds
 * it, "${…}" included), -E2BIG, -ENOMEM. */
static int expand_text(const char *in, char **out, char *var, size_t var_cap)
{
    struct hutch_buf b;
    const char *p = in;
    int r = 0;

    hutch_buf_init(&b, HUTCH_UPSTREAM_MAX_EXPANDED);
    var[0] = '\0';
    while (*p && r == 0) {
        const char *dollar = strchr(p, '$'), *name, *close, *val;
        size_t nlen;
        if (!dollar) {
            r = hutch_buf_appends(&b, p);
            break;
        }
        r = hutch_buf_append(&b, p, (size_t)(dollar - p));
        if (r < 0)
            break;
        if (!strncmp(dollar, "$${", 3)) {
            r = hutch_buf_appends(&b, "${");
            p = dollar + 3;
            continue;
        }
        if (dollar[1] != '{') {
            r = hutch_buf_append(&b, "$", 1);
            p = dollar + 1;
            continue;
        }
        name = dollar + 2;
        if (!strncmp(name, "env:", 4)) {
            name += 4;
        } else if ((nlen = vscode_var(name))) {
            up_clean_text(var, var_cap, dollar, nlen + 3);
            r = -ENOTSUP;
            break;
        }
        for (nlen = 0; var_char(name[nlen], nlen == 0); nlen++)
            ;
        close = strchr(name + nlen, '}');
        if (!nlen || !close || (name[nlen] != '}' && strncmp(name + nlen, ":-", 2))) {
            up_clean_text(var, var_cap, dollar,
                          close ? (size_t)(close - dollar + 1) : strnlen(dollar, 16));
            r = -EINVAL;
            break;
        }
        up_clean_text(var, var_cap, name, nlen);
        /* The file's author's variables, any name: not knobs (knobs.c). */
        val = nlen < var_cap - 1 ? getenv(var) : NULL;
        if (name[nlen] == ':' && (!val || !*val))
            r = hutch_buf_append(&b, name + nlen + 2,
                                 (size_t)(close - name - nlen - 2));
        else if (!val)
            r = -ENOENT;
        else
            r = hutch_buf_appends(&b, val);
        p = close + 1;
    }
    if (r == 0) {
        *out = hutch_buf_steal(&b, NULL);
        r = *out ? 0 : -ENOMEM;
    }
    hutch_buf_free(&b);
    return r;
}

/* Expand one string item in place; `field` names it in errors. */
static int expand_item(const char *where, const char *name, const char *field,
                       cJSON *item, struct hutch_err *err)
{
    char var[80], *v = NULL;
    int r;

    if (!cJSON_IsString(item) || !strstr(item->valuestring, "${"))
        return 0; /* the checks that follow name a wrong type */
    r = expand_text(item->valuestring, &v, var, sizeof(var));
    if (r == -ENOTSUP && !strncmp(var, "${input:", 8))
        return cfg_err(err, where, name,
                       "%s: %s is a VS Code input (VS Code asks its user for the "
                       "value; hutch cannot): put the value in an environment variable "
                       "and write ${env:NAME}",
                       field, var);
    if (r == -ENOTSUP)
        return cfg_err(err, where, name,
                       "%s: %s is a VS Code variable, which only VS Code can fill in: "
                       "write the value itself, or ${env:NAME} with an environment "
                       "variable",
                       field, var);
    if (r == -ENOENT)
        return cfg_err(err, where, name,
                       "%s: ${%s} is not set (set it, or give a default: "
                       "${%s:-value})",
                       field, var, var);
    if (r == -EINVAL)
        return cfg_err(err, where, name,
                       "%s: \"%s\" is not a variable: write ${NAME} or "
                       "${NAME:-default}, or $${ for a literal \"${\"",
                       field, var);
    if (r == -E2BIG)
        return cfg_err(err, where, name, "%s is longer than %u bytes once expanded",
                       field, HUTCH_UPSTREAM_MAX_EXPANDED);
    if (r < 0)
        return hutch_err_set(err, r, "out of memory");
    r = cJSON_SetValuestring(item, v) ? 0
                                      : hutch_err_set(err, -ENOMEM, "out of memory");
    free(v);
    return r;
}

/* A copy of entry e with its variables expanded (caller frees). */
static int expand_entry(const char *where, const char *name, const cJSON *e,
                        cJSON **out, struct hutch_err *err)
{
    static const char *const scalars[] = {"command", "cwd", "url"};
    static const char *const maps[] = {"env", "headers"};
    cJSON *x = cJSON_Duplicate(e, true), *it;
    char field[HUTCH_MAX_SERVER_NAME + 300];
    int r = 0, i;

    *out = NULL;
    if (!x)
        return hutch_err_set(err, -ENOMEM, "out of memory");
    /* Windsurf's name for "url". */
    if (get(x, "serverUrl")) {
        cJSON *su = cJSON_DetachItemFromObjectCaseSensitive(x, "serverUrl");
        if (get(x, "url")) {
            cJSON_Delete(su);
            cJSON_Delete(x);
            return cfg_err(err, where, name,
                           "both \"url\" and \"serverUrl\" (Windsurf's name for it): "
                           "keep one");
        }
        cJSON_AddItemToObject(x, "url", su);
    }
    for (size_t k = 0; k < 3 && r == 0; k++) {
        snprintf(field, sizeof(field), "\"%s\"", scalars[k]);
        r = expand_item(where, name, field,
                        cJSON_GetObjectItemCaseSensitive(x, scalars[k]), err);
    }
    i = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(x, "args"))
    {
        if (r < 0 || !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(x, "args")))
            break;
        snprintf(field, sizeof(field), "\"args\"[%d]", i++);
        r = expand_item(where, name, field, it, err);
    }
    for (size_t k = 0; k < 2 && r == 0; k++) {
        cJSON *m = cJSON_GetObjectItemCaseSensitive(x, maps[k]);
        if (!cJSON_IsObject(m))
            continue;
        cJSON_ArrayForEach(it, m)
        {
            char key[256];
            up_clean_text(key, sizeof(key), it->string, strlen(it->string));
            snprintf(field, sizeof(field), "\"%s\".\"%s\"", maps[k], key);
            r = expand_item(where, name, field, it, err);
            if (r < 0)
                break;
        }
    }
    if (r < 0) {
        cJSON_Delete(x);
        return r;
    }
    *out = x;
    return 0;
}

/* --- what an entry is --------------------------------------------------- */

/* Keys hutch reads, then keys other clients write that hutch leaves alone
 * (doc/servers.md, "The servers file"). */
static const char *const entry_keys[] = {"type", "command", "args", "env", "cwd", "url",
                                         "headers", "timeout_ms", "disabled",
                                         "transportType", "serverUrl",
                                         /* ignored: */
                                         "alwaysAllow", "autoApprove", "disabledTools",
                                         "timeout", "watchPaths", "description", NULL};
#define ENTRY_KEYS_READ 11

/* The entry's "type" (or Cline's older "transportType"), or NULL. */
static const cJSON *entry_type(const cJSON *e)
{
    const cJSON *t = get(e, "type");
    return t ? t : get(e, "transportType");
}

static bool type_http(const char *t)
{
    return !strcmp(t, "http") || !strcmp(t, "streamable-http") ||
           !strcmp(t, "streamableHttp");
}

/* Whether entry e runs; why: for a skipped entry, the reason.  An entry
 * hutch cannot run (an old or unknown "type") or that is broken (not an
 * object, a field missing or of the wrong type, a variable unset or only
 * VS Code's, …) is skipped with the reason, as Claude Desktop skips it:
 * one typo does not stop the other servers.  Negative only when out of
 * memory. */
int up_entry_kind(const char *where, const char *name, const cJSON *e, char *why,
                  size_t why_cap, struct hutch_err *err)
{
    struct hutch_err perr = HUTCH_ERR_INIT;
    const cJSON *d, *t;
    char prefix[HUTCH_MAX_SERVER_NAME + 512];
    size_t pl;
    int r;

    why[0] = '\0';
    if (!cJSON_IsObject(e)) {
        snprintf(why, why_cap, "the entry must be an object, not %s",
                 cJSON_IsString(e)   ? "a string"
                 : cJSON_IsArray(e)  ? "an array"
                 : cJSON_IsNumber(e) ? "a number"
                 : cJSON_IsNull(e)   ? "null"
                                     : "a boolean");
        return ENTRY_BROKEN;
    }
    d = get(e, "disabled");
    if (d && !cJSON_IsBool(d)) {
        snprintf(why, why_cap, "\"disabled\" must be true or false");
        return ENTRY_BROKEN;
    }
    if (cJSON_IsTrue(d))
        return ENTRY_DISABLED;
    t = entry_type(e);
    if (t && cJSON_IsString(t) && !strcmp(t->valuestring, "sse")) {
        snprintf(why, why_cap,
                 "\"type\": \"sse\" (the old HTTP+SSE transport) is not supported; "
                 "if the server also speaks streamable HTTP, use \"type\": \"http\"");
        return ENTRY_SKIPPED;
    }
    if (t && cJSON_IsString(t) && strcmp(t->valuestring, "stdio") &&
        !type_http(t->valuestring)) {
        char shown[64];
        up_clean_text(shown, sizeof(shown), t->valuestring, strlen(t->valuestring));
        snprintf(why, why_cap,
                 "unknown \"type\" \"%s\" (hutch runs \"stdio\" and \"http\")", shown);
        return ENTRY_SKIPPED;
    }
    r = up_parse_entry(where, name, e, NULL, &perr);
    if (r == -ENOMEM)
        return hutch_err_set(err, r, "out of memory");
    if (r < 0) {
        /* The reason without the "where: server "name": " cfg_err put
         * in front: whoever shows it names the entry. */
        snprintf(prefix, sizeof(prefix), "%s: server \"%s\": ", where, name);
        pl = strlen(prefix);
        snprintf(why, why_cap, "%s",
                 perr.msg + (strncmp(perr.msg, prefix, pl) ? 0 : pl));
        return ENTRY_BROKEN;
    }
    return ENTRY_RUN;
}

/* Warn about the keys of e that nobody reads. */
static void warn_keys(const char *where, const char *name, const cJSON *e)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, e)
    {
        const char *const *k;
        const char *near;
        char shown[80];
        size_t i = 0;
        for (k = entry_keys; *k && strcmp(*k, it->string); k++)
            i++;
        if (*k) {
            if (i >= ENTRY_KEYS_READ)
                hutch_info("%s: server \"%s\": \"%s\" (another client's setting) is "
                           "ignored",
                           where, name, *k);
            continue;
        }
        up_clean_text(shown, sizeof(shown), it->string, strlen(it->string));
        near = hutch_suggest(it->string, entry_keys);
        hutch_warn("%s: server \"%s\": unknown key \"%s\" is ignored%s%s%s", where,
                   name, shown, near ? " (did you mean \"" : "", near ? near : "",
                   near ? "\"?)" : "");
    }
}

/* Check one entry (its variables expanded) that runs; with c, also fill
 * c (freed by up_entry_free, whatever the outcome). */
static int parse_fields(const char *where, const char *name, const cJSON *e,
                        struct up_entry *c, struct hutch_err *err)
{
    const cJSON *type, *cmd, *url, *args, *env, *cwd, *hdrs, *it, *tmo;
    enum transport tr;
    size_t n, i;

    if (!cJSON_IsObject(e))
        return cfg_err(err, where, name, "must be an object");
    /* The time one tools/call may take (doc/servers.md, "Tool calls that hang").
     * Not "timeout": Cline reads it in seconds, Gemini CLI in ms. */
    tmo = get(e, "timeout_ms");
    if (tmo && (!cJSON_IsNumber(tmo) || tmo->valuedouble < 1 ||
                tmo->valuedouble > (double)HUTCH_MAX_TIMEOUT_MS ||
                tmo->valuedouble != (double)(int)tmo->valuedouble))
        return cfg_err(
            err, where, name,
            "\"timeout_ms\" must be a whole number of milliseconds from 1 to %u",
            HUTCH_MAX_TIMEOUT_MS);
    if (c && tmo)
        c->call_ms = (int)tmo->valuedouble;
    type = entry_type(e);
    cmd = get(e, "command");
    url = get(e, "url");
    if (type) {
        /* entry_kind skipped the other types */
        if (!cJSON_IsString(type))
            return cfg_err(err, where, name, "\"type\" must be a string");
        tr = type_http(type->valuestring) ? TR_HTTP : TR_STDIO;
    } else {
        tr = !cmd && url ? TR_HTTP : TR_STDIO;
    }

    if (tr == TR_STDIO) {
        if (!cmd)
            return cfg_err(err, where, name,
                           "\"command\" is missing (or use \"type\": \"http\" with "
                           "\"url\")");
        if (!cJSON_IsString(cmd) || !cmd->valuestring[0] ||
            strlen(cmd->valuestring) >= PATH_MAX)
            return cfg_err(err, where, name, "\"command\" must be a non-empty string");
        args = get(e, "args");
        n = 0;
        if (args) {
            if (!cJSON_IsArray(args))
                return cfg_err(err, where, name,
                               "\"args\" must be an array of strings");
            cJSON_ArrayForEach(it, args)
            {
                if (!cJSON_IsString(it))
                    return cfg_err(err, where, name,
                                   "\"args\" must be an array of strings");
                n++;
            }
            if (n > HUTCH_UPSTREAM_MAX_ARGS)
                return cfg_err(err, where, name, "\"args\" has %zu entries, at most %d",
                               n, HUTCH_UPSTREAM_MAX_ARGS);
        }
        env = get(e, "env");
        if (env) {
            size_t ne = 0;
            if (!cJSON_IsObject(env))
                return cfg_err(err, where, name,
                               "\"env\" must be an object of strings");
            cJSON_ArrayForEach(it, env)
            {
                if (!cJSON_IsString(it))
                    return cfg_err(err, where, name,
                                   "\"env\" must be an object of strings");
                if (!it->string[0] || strchr(it->string, '=') ||
                    up_text_has_ctl(it->string))
                    return cfg_err(err, where, name,
                                   "\"env\" has an invalid variable name");
                ne++;
            }
            if (ne > HUTCH_UPSTREAM_MAX_ENV)
                return cfg_err(err, where, name, "\"env\" has %zu entries, at most %d",
                               ne, HUTCH_UPSTREAM_MAX_ENV);
        }
        cwd = get(e, "cwd");
        if (cwd && (!cJSON_IsString(cwd) || !cwd->valuestring[0]))
            return cfg_err(err, where, name, "\"cwd\" must be a non-empty string");
        if (!c)
            return 0;

        c->tr = TR_STDIO;
        c->command = strdup(cmd->valuestring);
        c->argv = strv_new(n + 1);
        if (!c->command || !c->argv)
            return -ENOMEM;
        c->argv[0] = strdup(cmd->valuestring);
        if (!c->argv[0])
            return -ENOMEM;
        i = 1;
        cJSON_ArrayForEach(it, args)
        {
            if (!(c->argv[i++] = strdup(it->valuestring)))
                return -ENOMEM;
        }
        c->env = strv_new((size_t)cJSON_GetArraySize(env));
        if (!c->env)
            return -ENOMEM;
        i = 0;
        cJSON_ArrayForEach(it, env)
        {
            if (asprintf(&c->env[i], "%s=%s", it->string, it->valuestring) < 0) {
                c->env[i] = NULL;
                return -ENOMEM;
            }
            i++;
        }
        if (cwd && !(c->cwd = strdup(cwd->valuestring)))
            return -ENOMEM;
        return 0;
    }

    if (!url)
        return cfg_err(err, where, name, "\"url\" is missing");
    if (!url_ok(url))
        return cfg_err(err, where, name, "\"url\" must be an http:// or https:// URL");
    hdrs = get(e, "headers");
    n = 0;
    if (hdrs) {
        if (!cJSON_IsObject(hdrs))
            return cfg_err(err, where, name,
                           "\"headers\" must be an object of strings");
        cJSON_ArrayForEach(it, hdrs)
        {
            if (!cJSON_IsString(it))
                return cfg_err(err, where, name,
                               "\"headers\" must be an object of strings");
            if (!header_name_ok(it->string))
                return cfg_err(err, where, name,
                               "\"headers\" has an invalid header name");
            if (header_reserved(it->string))
                return cfg_err(err, where, name,
                               "\"headers\": \"%s\" is set by hutch and cannot be "
                               "configured",
                               it->string);
            if (up_text_has_ctl(it->valuestring) || strlen(it->valuestring) > 8192)
                return cfg_err(
                    err, where, name,
                    "\"headers\": the value of \"%s\" has control characters "
                    "or is too long",
                    it->string);
            n++;
        }
        if (n > HUTCH_UPSTREAM_MAX_HEADERS)
            return cfg_err(err, where, name, "\"headers\" has %zu entries, at most %d",
                           n, HUTCH_UPSTREAM_MAX_HEADERS);
    }
    if (!c)
        return 0;

    c->tr = TR_HTTP;
    c->url = strdup(url->valuestring);
    c->headers = strv_new(n);
    if (!c->url || !c->headers)
        return -ENOMEM;
    i = 0;
    cJSON_ArrayForEach(it, hdrs)
    {
        if (asprintf(&c->headers[i], "%s: %s", it->string, it->valuestring) < 0) {
            c->headers[i] = NULL;
            return -ENOMEM;
        }
        i++;
    }
    return 0;
}

/* Check one entry that runs: its variables expanded, then its fields; with
 * c, also fill c. */
int up_parse_entry(const char *where, const char *name, const cJSON *e,
                   struct up_entry *c, struct hutch_err *err)
{
    cJSON *x = NULL;
    int r = expand_entry(where, name, e, &x, err);

    if (r < 0)
        return r;
    r = parse_fields(where, name, x, c, err);
    cJSON_Delete(x);
    return r;
}

/* Check every entry of `servers` (the file's `key` object).  warn: say
 * which entries are disabled or skipped and which keys nobody reads (once,
 * when the file is loaded). */
int up_check_servers(const char *where, const char *key, const cJSON *servers,
                     bool warn, struct hutch_err *err)
{
    const cJSON *e, *o;
    char why[HUTCH_ERR_MSG];
    int n = 0, r;

    if (!cJSON_IsObject(servers))
        return hutch_err_set(err, -EINVAL, "%s: \"%s\" must be an object", where, key);
    cJSON_ArrayForEach(e, servers)
    {
        if (++n > HUTCH_UPSTREAM_MAX_SERVERS)
            return hutch_err_set(err, -EINVAL, "%s: more than %d servers in \"%s\"",
                                 where, HUTCH_UPSTREAM_MAX_SERVERS, key);
        if (!name_ok(e->string)) {
            char shown[80];
            up_clean_text(shown, sizeof(shown), e->string, strlen(e->string));
            return hutch_err_set(
                err, -EINVAL,
                "%s: server name \"%s\" is invalid: use 1-%d characters "
                "of A-Z a-z 0-9 _ . -",
                where, shown, HUTCH_MAX_SERVER_NAME);
        }
        for (o = servers->child; o != e; o = o->next)
            if (!strcmp(o->string, e->string))
                return hutch_err_set(err, -EINVAL, "%s: server \"%s\" is defined twice",
                                     where, e->string);
        r = up_entry_kind(where, e->string, e, why, sizeof(why), err);
        if (r < 0)
            return r;
        if (!warn)
            continue;
        /* First the keys (a typo'd "comand" says what was meant), then
         * why the entry does not run. */
        if (r != ENTRY_DISABLED && cJSON_IsObject(e))
            warn_keys(where, e->string, e);
        if (r == ENTRY_DISABLED)
            hutch_info("%s: server \"%s\" is disabled: not started", where, e->string);
        if (r == ENTRY_SKIPPED || r == ENTRY_BROKEN)
            hutch_warn("%s: server \"%s\" is skipped: %s", where, e->string, why);
    }
    return 0;
}

size_t hutch_upstreams_broken(const cJSON *config)
{
    struct hutch_err err = HUTCH_ERR_INIT;
    char why[HUTCH_ERR_MSG];
    const cJSON *e;
    size_t n = 0;

    cJSON_ArrayForEach(e, config)
    {
        n += up_entry_kind("mcpServers", e->string, e, why, sizeof(why), &err) ==
             ENTRY_BROKEN;
    }
    return n;
}

/* Entries no client would run under that name: an invalid name (hutch's
 * names become tools.<server>), or a name given again further down, where
 * the last definition counts, as JSON.parse reads the file in every client
 * that writes one.  Dropped with a warning, before anything else is
 * checked. */
static void drop_names(const char *where, cJSON *servers)
{
    cJSON *e, *next, *o;

    for (e = cJSON_IsObject(servers) ? servers->child : NULL; e; e = next) {
        char shown[80];
        next = e->next;
        up_clean_text(shown, sizeof(shown), e->string, strlen(e->string));
        if (!name_ok(e->string)) {
            hutch_warn("%s: server name \"%s\" is invalid (use 1-%d characters of "
                       "A-Z a-z 0-9 _ . -): the entry is skipped",
                       where, shown, HUTCH_MAX_SERVER_NAME);
            cJSON_Delete(cJSON_DetachItemViaPointer(servers, e));
            continue;
        }
        for (o = next; o && strcmp(o->string, e->string); o = o->next)
            ;
        if (o) {
            hutch_warn("%s: server \"%s\" is defined twice: the last definition is "
                       "used, as JSON.parse reads the file",
                       where, shown);
            cJSON_Delete(cJSON_DetachItemViaPointer(servers, e));
        }
    }
}

int hutch_upstreams_load(const char *path, cJSON **config, struct hutch_err *err)
{
    char *data = NULL;
    size_t len = 0;
    cJSON *root = NULL, *servers, *vscode;
    const char *end = NULL, *key = "mcpServers";
    int r;

    if (!path || !config)
        return hutch_err_set(err, -EINVAL, "hutch_upstreams_load: bad arguments");
    *config = NULL;
    r = hutch_read_file(path, HUTCH_UPSTREAM_MAX_CONFIG, &data, &len, err);
    if (r < 0)
        return r;
    /* VS Code's mcp.json is JSON with comments and trailing commas. */
    {
        unsigned line = 0, col = 0;
        if (hutch_jsonc_strip(data, len, &line, &col) < 0) {
            r = hutch_err_set(
                err, -EINVAL,
                "%s: a comment that starts at line %u, column %u is never "
                "closed (\"*/\")",
                path, line, col);
            goto out;
        }
    }
    root = cJSON_ParseWithLengthOpts(data, len, &end, false);
    if (root && end) {
        while (end < data + len && is_space(*end))
            end++;
    }
    if (!root || end != data + len) {
        unsigned line = 1, col = 1;
        for (const char *p = data; end && p < end && p < data + len; p++) {
            if (*p == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        r = hutch_err_set(
            err, -EINVAL, "%s: %s at line %u, column %u", path,
            root ? "unexpected data after the JSON value" : "invalid JSON", line, col);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        r = hutch_err_set(err, -EINVAL,
                          "%s: expected a JSON object with \"mcpServers\"", path);
        goto out;
    }
    {
        /* "a\u0000b" would be read as "a": a name, command, argument or
         * header cut short without a word. */
        char where[160];
        r = hutch_json_find_nul(root, data, len, where, sizeof(where));
        if (r != 0) {
            r = r < 0 ? hutch_err_set(err, r, "%s: out of memory", path)
                      : hutch_err_set(err, -EINVAL,
                                      "%s: %s holds a NUL character (\\u0000), which "
                                      "no name, command, argument or header may hold",
                                      path, where);
            goto out;
        }
    }
    /* Claude Desktop, Claude Code, Cline, Roo Code: "mcpServers"; VS Code's
     * .vscode/mcp.json: "servers", the same entries. */
    servers = cJSON_GetObjectItemCaseSensitive(root, "mcpServers");
    vscode = cJSON_GetObjectItemCaseSensitive(root, "servers");
    if (servers && vscode) {
        r = hutch_err_set(err, -EINVAL,
                          "%s: both \"mcpServers\" and \"servers\" (VS Code's name): "
                          "keep one",
                          path);
        goto out;
    }
    if (vscode) {
        servers = vscode;
        key = "servers";
    }
    if (!servers) {
        r = hutch_err_set(err, -EINVAL,
                          "%s: no \"mcpServers\" object (or VS Code's \"servers\")",
                          path);
        goto out;
    }
    drop_names(path, servers);
    r = up_check_servers(path, key, servers, true, err);
    if (r < 0)
        goto out;
    *config = cJSON_DetachItemViaPointer(root, servers);
out:
    cJSON_Delete(root);
    free(data);
    return r;
}

void up_entry_free(struct up_entry *c)
{
    free(c->command);
    up_strv_free(c->argv);
    up_strv_free(c->env);
    free(c->cwd);
    free(c->url);
    up_strv_free(c->headers);
    memset(c, 0, sizeof(*c));
}
