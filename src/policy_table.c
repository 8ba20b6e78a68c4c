/* policy_table.c — the judge of the table a policy file returns
 * (hutch-policy(5)): every field checked (unknown fields are errors naming
 * the field, with a suggestion), and copied into struct hutch_policy.
 * Also the pieces on_execute's adjustments are checked with (limits, an
 * executor's name).
 *
 * Not here: running the file (policy_lua.c), the file's reading and the
 * error's line (policy.c).
 *
 * Runs on the thread that loads the policy, inside the first Lua state
 * built from it, before anyone else can see the policy: no locks.  An
 * error raises a Lua error with vc->failed set; whatever was copied so far
 * is owned by the policy and freed with it. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <lauxlib.h>
#include <lua.h>

#include "caps.h"
#include "egress.h"
#include "path.h"
#include "policy.h"
#include "policy_int.h"
#include "util.h"

#define TOKEN_SENTINEL "CHANGE-ME"

/* --- validation of the returned table --- */

__attribute__((format(printf, 4, 5))) static int
verr(lua_State *L, struct vctx *vc, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(vc->msg, sizeof(vc->msg), fmt, ap);
    va_end(ap);
    snprintf(vc->field, sizeof(vc->field), "%s", key ? key : "");
    vc->failed = 1;
    lua_pushstring(L, vc->msg);
    return lua_error(L);
}

static const char *const top_fields[] = {
    "executor",   "executor_options", "limits", "tools",
    "paths",      "principals",       "rate",   "audit",
    "on_execute", "on_tool_call",     "pool",   "direct_tools",
    "workspaces", "concurrency",      "taint",  "egress",
    NULL};
const char *const pol_limit_fields[] = {"timeout_ms",   "memory_mb",   "cpus", "pids",
                                        "output_bytes", "files_bytes", NULL};
static const char *const tools_fields[] = {"allow", "deny", NULL};
static const char *const path_fields[] = {"host", "sandbox", "mode", NULL};
static const char *const principal_fields[] = {"name", "token", "concurrency", "egress",
                                               NULL};
static const char *const concurrency_fields[] = {"executions", "queued", NULL};
static const char *const rate_fields[] = {"executions_per_minute",
                                          "tool_calls_per_minute", NULL};
static const char *const audit_fields[] = {"secret", NULL};
static const char *const taint_fields[] = {"sources", "sinks", "on_sink", NULL};
static const char *const workspace_fields[] = {"allow", "max_bytes", "max_count",
                                               "idle_s", NULL};
static const char *const egress_fields[] = {"allow", "max_bytes", "max_connections",
                                            "secrets", NULL};
static const char *const secret_fields[] = {"header", "value", "file", NULL};

static const char *join(char *buf, size_t len, const char *where, const char *key)
{
    snprintf(buf, len, "%s%s%s", where, *where ? "." : "", key);
    return buf;
}

/* Every key of the table at t is a string naming a known field. */
static void v_fields(lua_State *L, struct vctx *vc, int t, const char *where,
                     const char *const *known)
{
    char full[256], hint[300];
    lua_pushnil(L);
    while (lua_next(L, t)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            if (lua_isinteger(L, -1))
                verr(L, vc, NULL, "%s%sunknown field [%lld] (fields have names)", where,
                     *where ? ": " : "", (long long)lua_tointeger(L, -1));
            verr(L, vc, NULL, "%s%sunknown field (a %s key; fields have names)", where,
                 *where ? ": " : "", luaL_typename(L, -1));
        }
        const char *k = lua_tostring(L, -1);
        const char *const *f;
        for (f = known; *f && strcmp(*f, k); f++)
            ;
        if (!*f) {
            const char *s = hutch_suggest(k, known);
            hint[0] = '\0';
            if (s)
                snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)",
                         join(full, sizeof(full), where, s));
            verr(L, vc, k, "unknown field \"%s\"%s", join(full, sizeof(full), where, k),
                 hint);
        }
    }
}

int pol_rawget_field(lua_State *L, int t, const char *key)
{
    lua_pushstring(L, key);
    return lua_rawget(L, t);
}

const char *pol_type_of(lua_State *L, int idx)
{
    if (lua_type(L, idx) == LUA_TNUMBER && !lua_isinteger(L, idx))
        return "a fractional number";
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return "nil";
    case LUA_TBOOLEAN:
        return "a boolean";
    case LUA_TNUMBER:
        return "a number";
    case LUA_TSTRING:
        return "a string";
    case LUA_TTABLE:
        return "a table";
    case LUA_TFUNCTION:
        return "a function";
    default:
        return luaL_typename(L, idx);
    }
}

/* A plain table: no metatable, whose lookups would be invisible here. */
static void v_table(lua_State *L, struct vctx *vc, int idx, const char *name,
                    const char *key)
{
    if (lua_type(L, idx) != LUA_TTABLE)
        verr(L, vc, key, "%s: expected a table, got %s", name, pol_type_of(L, idx));
    if (lua_getmetatable(L, idx))
        verr(L, vc, key, "%s: has a metatable; give a plain table", name);
}

/* A sequence 1..n and nothing else; returns n. */
static size_t v_list(lua_State *L, struct vctx *vc, int idx, const char *name,
                     const char *key, size_t max)
{
    size_t n, count = 0;
    v_table(L, vc, idx, name, key);
    n = lua_rawlen(L, idx);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) == LUA_TSTRING)
            verr(L, vc, key, "%s: expected a list, found the key \"%s\"", name,
                 lua_tostring(L, -1));
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 ||
            (size_t)lua_tointeger(L, -1) > n)
            verr(L, vc, key, "%s: expected a list, found a %s key", name,
                 luaL_typename(L, -1));
        count++;
    }
    if (count != n)
        verr(L, vc, key, "%s: expected a list without holes", name);
    if (n > max)
        verr(L, vc, key, "%s: %zu entries, at most %zu", name, n, max);
    return n;
}

static const char *v_string(lua_State *L, struct vctx *vc, int idx, const char *name,
                            const char *key, size_t maxlen)
{
    size_t n;
    const char *s;
    if (lua_type(L, idx) != LUA_TSTRING)
        verr(L, vc, key, "%s: expected a string, got %s", name, pol_type_of(L, idx));
    s = lua_tolstring(L, idx, &n);
    if (n == 0)
        verr(L, vc, key, "%s: must not be empty", name);
    if (n > maxlen)
        verr(L, vc, key, "%s: longer than %zu bytes", name, maxlen);
    if (strlen(s) != n)
        verr(L, vc, key, "%s: contains a NUL byte", name);
    return s;
}

/* An integer limit, or cpus.  Used by validation (msg -> verr) and by
 * on_execute adjustments (msg -> deny reason). */
int pol_parse_limit(lua_State *L, int idx, const char *key, uint64_t *out, char *msg,
                    size_t len)
{
    static const struct {
        const char *name;
        uint64_t min, max;
    } spec[] = {
        {"timeout_ms", 1, HUTCH_MAX_TIMEOUT_MS},
        {"memory_mb", 1, HUTCH_MAX_MEMORY_MB},
        {"pids", 1, HUTCH_POLICY_MAX_PIDS},
        {"output_bytes", 1, HUTCH_OUTPUT_MAX_BYTES},
        {"files_bytes", 1, HUTCH_MAX_INPUT_BYTES},
    };
    if (!strcmp(key, "cpus")) {
        double v;
        if (lua_type(L, idx) != LUA_TNUMBER) {
            snprintf(msg, len, "expected a number of CPUs (like 0.5), got %s",
                     pol_type_of(L, idx));
            return -1;
        }
        v = lua_tonumber(L, idx);
        if (!(v == 0 || (v >= 0.001 && v <= HUTCH_POLICY_MAX_CPUS))) {
            snprintf(msg, len, "%g is out of range (0 for no limit, or 0.001 to %d)", v,
                     HUTCH_POLICY_MAX_CPUS);
            return -1;
        }
        *out = (uint64_t)(v * 1000.0 + 0.5);
        return 0;
    }
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
        lua_Integer v = 0;
        int isint = 0;
        if (strcmp(spec[i].name, key))
            continue;
        if (lua_type(L, idx) == LUA_TNUMBER)
            v = lua_tointegerx(L, idx, &isint);
        if (!isint) {
            snprintf(msg, len, "expected an integer, got %s", pol_type_of(L, idx));
            return -1;
        }
        if (v < 0 || (uint64_t)v < spec[i].min || (uint64_t)v > spec[i].max) {
            snprintf(msg, len, "%lld is out of range (%llu to %llu)", (long long)v,
                     (unsigned long long)spec[i].min, (unsigned long long)spec[i].max);
            return -1;
        }
        *out = (uint64_t)v;
        return 0;
    }
    snprintf(msg, len, "unknown limit");
    return -1;
}

void pol_set_limit(struct hutch_policy_limits *l, const char *key, uint64_t v)
{
    if (!strcmp(key, "timeout_ms"))
        l->timeout_ms = v;
    else if (!strcmp(key, "memory_mb"))
        l->memory_mb = v;
    else if (!strcmp(key, "cpus"))
        l->cpus_milli = (uint32_t)v;
    else if (!strcmp(key, "pids"))
        l->pids = (uint32_t)v;
    else if (!strcmp(key, "output_bytes"))
        l->output_bytes = v;
    else if (!strcmp(key, "files_bytes"))
        l->files_bytes = v;
}

static void v_limits(lua_State *L, struct vctx *vc, int t)
{
    char msg[256];
    v_table(L, vc, t, "limits", "limits");
    v_fields(L, vc, t, "limits", pol_limit_fields);
    for (const char *const *f = pol_limit_fields; *f; f++) {
        uint64_t v;
        if (pol_rawget_field(L, t, *f) != LUA_TNIL) {
            if (pol_parse_limit(L, -1, *f, &v, msg, sizeof(msg)) < 0)
                verr(L, vc, *f, "limits.%s: %s", *f, msg);
            pol_set_limit(&vc->p->limits, *f, v);
        }
        lua_pop(L, 1);
    }
}

static void v_globs(lua_State *L, struct vctx *vc, int t, const char *name,
                    struct glob **out, size_t *nout)
{
    char item[64];
    size_t n = v_list(L, vc, t, name, strchr(name, '.') + 1, HUTCH_POLICY_MAX_RULES);
    *out = calloc(n ? n : 1, sizeof(**out));
    if (!*out)
        verr(L, vc, NULL, "out of memory");
    for (size_t i = 1; i <= n; i++) {
        const char *s, *ts;
        size_t tn;
        struct glob *gl = &(*out)[*nout];
        snprintf(item, sizeof(item), "%s[%zu]", name, i);
        lua_rawgeti(L, t, (lua_Integer)i);
        s = v_string(L, vc, -1, item, NULL, HUTCH_POLICY_MAX_GLOB);
        tn = trim(s, &ts);
        if (!tn)
            verr(L, vc, NULL, "%s: must not be blank", item);
        gl->orig = strdup(s);
        gl->pat = strndup(ts, tn);
        if (!gl->orig || !gl->pat) {
            free(gl->orig);
            free(gl->pat);
            verr(L, vc, NULL, "out of memory");
        }
        for (char *c = gl->pat; *c; c++)
            *c = (char)lower((unsigned char)*c);
        (*nout)++;
        lua_pop(L, 1);
    }
}

static void v_tools(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    v_table(L, vc, t, "tools", "tools");
    v_fields(L, vc, t, "tools", tools_fields);
    if (pol_rawget_field(L, t, "allow") != LUA_TNIL)
        v_globs(L, vc, lua_gettop(L), "tools.allow", &p->allow, &p->nallow);
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "deny") != LUA_TNIL)
        v_globs(L, vc, lua_gettop(L), "tools.deny", &p->deny, &p->ndeny);
    lua_pop(L, 1);
}

/* taint = { sources = {globs}, sinks = {globs}, on_sink = "deny"|"ask" }:
 * both lists, neither empty (one without the other could never matter,
 * and is more likely a mistake than a plan). */
static void v_taint(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    v_table(L, vc, t, "taint", "taint");
    v_fields(L, vc, t, "taint", taint_fields);
    if (pol_rawget_field(L, t, "sources") != LUA_TNIL)
        v_globs(L, vc, lua_gettop(L), "taint.sources", &p->sources, &p->nsources);
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "sinks") != LUA_TNIL)
        v_globs(L, vc, lua_gettop(L), "taint.sinks", &p->sinks, &p->nsinks);
    lua_pop(L, 1);
    if (!p->nsources || !p->nsinks)
        verr(L, vc, "taint",
             "taint: needs both sources (the tools whose results may carry "
             "instructions from others) and sinks (the tools that send, write or "
             "publish); %s is %s",
             p->nsources ? "sinks" : "sources",
             (p->nsources ? p->sinks : p->sources) ? "empty" : "missing");
    if (pol_rawget_field(L, t, "on_sink") != LUA_TNIL) {
        const char *s = v_string(L, vc, -1, "taint.on_sink", "on_sink", 16);
        if (strcmp(s, "deny") && strcmp(s, "ask"))
            verr(L, vc, "on_sink",
                 "taint.on_sink: expected \"deny\" or \"ask\", got \"%s\"", s);
        p->taint_ask = !strcmp(s, "ask");
    }
    lua_pop(L, 1);
}

/* Sandbox paths a host directory may not appear at: the root and /work
 * themselves (they would hide the program), /work/out and below (what the
 * program writes for the caller), and the system's directories.  Below
 * /work is fine: inputs are copied there. */
static const char *reserved_sandbox(const char *s)
{
    static const char *const reserved[] = {
        "/work/out", "/bin",   "/boot",   "/dev",  "/etc", "/lib",
        "/lib32",    "/lib64", "/libx32", "/proc", "/run", "/sbin",
        "/sys",      "/tmp",   "/usr",    "/var",  NULL,
    };
    if (!strcmp(s, "/") || !strcmp(s, "/work"))
        return s;
    for (const char *const *r = reserved; *r; r++)
        if (hutch_path_within(s, *r))
            return *r;
    return NULL;
}

static void v_paths(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    size_t n = v_list(L, vc, t, "paths", "paths", HUTCH_POLICY_MAX_PATHS);
    char name[64], full[96], buf[PATH_MAX];
    struct hutch_err e = {0};
    struct stat sb;

    p->paths = calloc(n ? n : 1, sizeof(*p->paths));
    if (!p->paths)
        verr(L, vc, NULL, "out of memory");
    for (size_t i = 1; i <= n; i++) {
        struct hutch_policy_path *pp = &p->paths[p->npaths];
        const char *host, *sandbox, *mode, *r;
        int e_top = lua_gettop(L) + 1;
        snprintf(name, sizeof(name), "paths[%zu]", i);
        lua_rawgeti(L, t, (lua_Integer)i);
        v_table(L, vc, e_top, name, NULL);
        v_fields(L, vc, e_top, name, path_fields);
        for (const char *const *f = path_fields; *f; f++) {
            if (pol_rawget_field(L, e_top, *f) == LUA_TNIL)
                verr(L, vc, NULL,
                     "%s: \"%s\" is missing (every entry has host, sandbox "
                     "and mode)",
                     name, *f);
        }
        /* stack: entry, host, sandbox, mode */
        host = v_string(L, vc, e_top + 1, join(full, sizeof(full), name, "host"), NULL,
                        PATH_MAX - 1);
        sandbox = v_string(L, vc, e_top + 2, join(full, sizeof(full), name, "sandbox"),
                           NULL, PATH_MAX - 1);
        mode =
            v_string(L, vc, e_top + 3, join(full, sizeof(full), name, "mode"), NULL, 2);
        if (strcmp(mode, "ro") && strcmp(mode, "rw"))
            verr(L, vc, NULL, "%s.mode: \"%s\" is not \"ro\" or \"rw\"", name, mode);
        if (host[0] != '/')
            verr(L, vc, NULL, "%s.host: \"%s\" is not an absolute path", name, host);
        if (hutch_path_resolve(host, buf, sizeof(buf), &e) < 0)
            verr(L, vc, NULL, "%s.host: \"%s\": %s", name, host, e.msg);
        if (stat(buf, &sb) < 0 && errno == ENOENT)
            verr(L, vc, NULL, "%s.host: \"%s\" does not exist", name, host);
        if (stat(buf, &sb) < 0)
            verr(L, vc, NULL, "%s.host: \"%s\": %s", name, host, strerror(errno));
        if (!S_ISDIR(sb.st_mode))
            verr(L, vc, NULL, "%s.host: \"%s\" is not a directory", name, host);
        pp->rw = !strcmp(mode, "rw");
        pp->host = strdup(buf);
        p->npaths++; /* owned by p from here on, even if a check below fails */
        if (!pp->host)
            verr(L, vc, NULL, "out of memory");
        if (sandbox[0] != '/')
            verr(L, vc, NULL, "%s.sandbox: \"%s\" is not an absolute path", name,
                 sandbox);
        if (hutch_path_normalize(sandbox, buf, sizeof(buf), &e) < 0)
            verr(L, vc, NULL, "%s.sandbox: \"%s\": %s", name, sandbox, e.msg);
        if ((r = reserved_sandbox(buf)))
            verr(L, vc, NULL,
                 "%s.sandbox: \"%s\" is reserved (%s belongs to the sandbox itself; "
                 "use a directory like /data or /work/NAME)",
                 name, sandbox, r);
        pp->sandbox = strdup(buf);
        if (!pp->sandbox)
            verr(L, vc, NULL, "out of memory");
        for (size_t j = 0; j + 1 < p->npaths; j++) {
            const char *o = p->paths[j].sandbox;
            if (hutch_path_within(pp->sandbox, o) || hutch_path_within(o, pp->sandbox))
                verr(L, vc, NULL,
                     "%s.sandbox: \"%s\" overlaps paths[%zu].sandbox \"%s\"", name,
                     pp->sandbox, j + 1, o);
        }
        lua_settop(L, e_top - 1);
    }
}

static int valid_name(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || strchr("_.@+-", *s)))
            return 0;
    return 1;
}

/* concurrency = {executions, queued} at `where` ("concurrency", or a
 * principal's). */
static void v_concurrency(lua_State *L, struct vctx *vc, int t, const char *where,
                          struct hutch_policy_concurrency *c)
{
    static const struct {
        const char *name;
        uint64_t min, max;
    } spec[] = {
        {"executions", 1, HUTCH_ADMIT_MAX_TOTAL},
        {"queued", 0, HUTCH_ADMIT_MAX_QUEUED},
    };
    char full[128];
    v_table(L, vc, t, where, "concurrency");
    v_fields(L, vc, t, where, concurrency_fields);
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
        lua_Integer v = 0;
        int isint = 0;
        join(full, sizeof(full), where, spec[i].name);
        if (pol_rawget_field(L, t, spec[i].name) != LUA_TNIL) {
            if (lua_type(L, -1) == LUA_TNUMBER)
                v = lua_tointegerx(L, -1, &isint);
            if (!isint)
                verr(L, vc, spec[i].name, "%s: expected an integer, got %s", full,
                     pol_type_of(L, -1));
            if (v < 0 || (uint64_t)v < spec[i].min || (uint64_t)v > spec[i].max)
                verr(L, vc, spec[i].name, "%s: %lld is out of range (%llu to %llu)",
                     full, (long long)v, (unsigned long long)spec[i].min,
                     (unsigned long long)spec[i].max);
            if (i == 0) {
                c->executions = (uint32_t)v;
            } else {
                c->queued = (uint32_t)v;
                c->queued_set = 1;
            }
        }
        lua_pop(L, 1);
    }
}

static void v_egress(lua_State *L, struct vctx *vc, int t, const char *at,
                     struct hutch_egress_rules **out);

static void v_principals(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    size_t n =
        v_list(L, vc, t, "principals", "principals", HUTCH_POLICY_MAX_PRINCIPALS);
    char name[64], full[96];

    p->principals = calloc(n ? n : 1, sizeof(*p->principals));
    if (!p->principals)
        verr(L, vc, NULL, "out of memory");
    for (size_t i = 1; i <= n; i++) {
        struct principal *pr = &p->principals[p->nprincipals];
        const char *pname, *token;
        size_t tlen;
        int e_top = lua_gettop(L) + 1;
        snprintf(name, sizeof(name), "principals[%zu]", i);
        lua_rawgeti(L, t, (lua_Integer)i);
        v_table(L, vc, e_top, name, NULL);
        v_fields(L, vc, e_top, name, principal_fields);
        pol_rawget_field(L, e_top, "name");
        pol_rawget_field(L, e_top, "token");
        if (lua_isnil(L, e_top + 1) || lua_isnil(L, e_top + 2))
            verr(L, vc, NULL, "%s: needs both name and token", name);
        pname = v_string(L, vc, e_top + 1, join(full, sizeof(full), name, "name"), NULL,
                         HUTCH_MAX_PRINCIPAL_NAME);
        if (!valid_name(pname))
            verr(L, vc, NULL,
                 "%s.name: \"%s\" may only hold letters, digits and _ . @ + -", name,
                 pname);
        /* Never echo a token in a message. */
        if (lua_type(L, e_top + 2) != LUA_TSTRING)
            verr(L, vc, NULL, "%s.token: expected a string, got %s", name,
                 pol_type_of(L, e_top + 2));
        token = lua_tolstring(L, e_top + 2, &tlen);
        if (tlen < HUTCH_POLICY_MIN_TOKEN || tlen > HUTCH_POLICY_MAX_TOKEN)
            verr(L, vc, NULL, "%s.token: must be %d to %d characters (it has %zu)",
                 name, HUTCH_POLICY_MIN_TOKEN, HUTCH_POLICY_MAX_TOKEN, tlen);
        for (size_t k = 0; k < tlen; k++)
            if ((unsigned char)token[k] <= 0x20 || (unsigned char)token[k] >= 0x7f)
                verr(
                    L, vc, NULL,
                    "%s.token: only printable ASCII without spaces (it goes in an HTTP "
                    "header)",
                    name);
        if (strstr(token, TOKEN_SENTINEL))
            verr(L, vc, NULL,
                 "%s.token: still the example's placeholder (" TOKEN_SENTINEL
                 "…); put a long random secret there, e.g. from `openssl rand -hex 32`",
                 name);
        for (size_t j = 0; j < p->nprincipals; j++) {
            if (!strcmp(p->principals[j].name, pname))
                verr(L, vc, NULL, "%s.name: \"%s\" is also the name of principals[%zu]",
                     name, pname, j + 1);
            if (p->principals[j].token_len == tlen &&
                !memcmp(p->principals[j].token, token, tlen))
                verr(L, vc, NULL, "%s.token: the same token as principals[%zu]", name,
                     j + 1);
        }
        pr->name = strdup(pname);
        pr->token = strdup(token);
        pr->token_len = tlen;
        p->nprincipals++;
        if (!pr->name || !pr->token)
            verr(L, vc, NULL, "out of memory");
        if (pol_rawget_field(L, e_top, "concurrency") != LUA_TNIL)
            v_concurrency(L, vc, e_top + 3,
                          join(full, sizeof(full), name, "concurrency"), &pr->conc);
        /* Its own egress replaces the policy's; false: none for it. */
        if (pol_rawget_field(L, e_top, "egress") != LUA_TNIL) {
            join(full, sizeof(full), name, "egress");
            if (lua_type(L, -1) == LUA_TBOOLEAN && !lua_toboolean(L, -1))
                pr->egress_off = 1;
            else if (lua_type(L, -1) == LUA_TBOOLEAN)
                verr(L, vc, "egress",
                     "%s: true is not a table of rules (give a table, or false for "
                     "none)",
                     full);
            else
                v_egress(L, vc, lua_gettop(L), full, &pr->egress);
        }
        lua_settop(L, e_top - 1);
    }
}

static void v_rate(lua_State *L, struct vctx *vc, int t)
{
    v_table(L, vc, t, "rate", "rate");
    v_fields(L, vc, t, "rate", rate_fields);
    for (const char *const *f = rate_fields; *f; f++) {
        lua_Integer v = 0;
        int isint = 0;
        if (pol_rawget_field(L, t, *f) != LUA_TNIL) {
            if (lua_type(L, -1) == LUA_TNUMBER)
                v = lua_tointegerx(L, -1, &isint);
            if (!isint)
                verr(L, vc, *f, "rate.%s: expected an integer, got %s", *f,
                     pol_type_of(L, -1));
            if (v < 0 || v > HUTCH_POLICY_MAX_RATE)
                verr(L, vc, *f,
                     "rate.%s: %lld is out of range (0 for no limit, up to %d)", *f,
                     (long long)v, HUTCH_POLICY_MAX_RATE);
            if (f == rate_fields)
                vc->p->rate.executions_per_minute = (uint32_t)v;
            else
                vc->p->rate.tool_calls_per_minute = (uint32_t)v;
        }
        lua_pop(L, 1);
    }
}

static void v_workspaces(lua_State *L, struct vctx *vc, int t)
{
    static const struct {
        const char *name;
        uint64_t min, max;
    } spec[] = {
        {"max_bytes", 1, HUTCH_WORKSPACE_MAX_BYTES},
        {"max_count", 1, HUTCH_WORKSPACE_MAX_COUNT},
        {"idle_s", 1, HUTCH_WORKSPACE_MAX_IDLE_S},
    };
    struct hutch_policy_workspaces *w = &vc->p->ws;
    v_table(L, vc, t, "workspaces", "workspaces");
    v_fields(L, vc, t, "workspaces", workspace_fields);
    if (pol_rawget_field(L, t, "allow") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TBOOLEAN)
            verr(L, vc, "allow", "workspaces.allow: expected a boolean, got %s",
                 pol_type_of(L, -1));
        w->allow = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
        lua_Integer v = 0;
        int isint = 0;
        if (pol_rawget_field(L, t, spec[i].name) != LUA_TNIL) {
            if (lua_type(L, -1) == LUA_TNUMBER)
                v = lua_tointegerx(L, -1, &isint);
            if (!isint)
                verr(L, vc, spec[i].name, "workspaces.%s: expected an integer, got %s",
                     spec[i].name, pol_type_of(L, -1));
            if (v < 0 || (uint64_t)v < spec[i].min || (uint64_t)v > spec[i].max)
                verr(L, vc, spec[i].name,
                     "workspaces.%s: %lld is out of range (%llu to %llu)", spec[i].name,
                     (long long)v, (unsigned long long)spec[i].min,
                     (unsigned long long)spec[i].max);
            if (i == 0)
                w->max_bytes = (uint64_t)v;
            else if (i == 1)
                w->max_count = (uint32_t)v;
            else
                w->idle_s = (uint64_t)v;
        }
        lua_pop(L, 1);
    }
}

/* egress.secrets = { ["host[:port]"] = { header = NAME, value = "..${VAR}.."
 * | file = "/path" }, ... }: checked and expanded by egress_rules.c
 * (hutch_egress_secret_add), against the rules already read.  No message
 * holds a value. */
static void v_secrets(lua_State *L, struct vctx *vc, int t, const char *at,
                      struct hutch_egress_rules *r)
{
    char where[HUTCH_EGRESS_MAX_PATTERN + 32], msg[400];
    size_t count = 0;

    snprintf(where, sizeof(where), "%s.secrets", at);
    v_table(L, vc, t, where, "secrets");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *key, *header, *value = NULL, *file = NULL;
        int e = lua_gettop(L);
        if (lua_type(L, -2) != LUA_TSTRING)
            verr(L, vc, "secrets",
                 "%s.secrets: keys are hosts, as in [\"api.example.com\"] (found "
                 "%s)",
                 at, pol_type_of(L, -2));
        key = lua_tostring(L, -2);
        if (++count > HUTCH_EGRESS_MAX_SECRETS)
            verr(L, vc, "secrets", "%s.secrets: at most %d entries", at,
                 HUTCH_EGRESS_MAX_SECRETS);
        snprintf(where, sizeof(where), "%s.secrets[\"%.*s\"]", at,
                 HUTCH_EGRESS_MAX_PATTERN, key);
        v_table(L, vc, e, where, "secrets");
        v_fields(L, vc, e, where, secret_fields);
        snprintf(msg, sizeof(msg), "%s.header", where);
        pol_rawget_field(L, e, "header");
        header = v_string(L, vc, -1, msg, "secrets", HUTCH_EGRESS_MAX_HEADER_NAME);
        if (pol_rawget_field(L, e, "value") != LUA_TNIL) {
            snprintf(msg, sizeof(msg), "%s.value", where);
            value = v_string(L, vc, -1, msg, "secrets", HUTCH_EGRESS_MAX_SECRET);
        }
        if (pol_rawget_field(L, e, "file") != LUA_TNIL) {
            snprintf(msg, sizeof(msg), "%s.file", where);
            file = v_string(L, vc, -1, msg, "secrets", 4096);
        }
        if (hutch_egress_secret_add(r, key, header, value, file, msg, sizeof(msg)) < 0)
            verr(L, vc, "secrets", "%s: %s", where, msg);
        lua_settop(L, e - 1); /* the key stays for lua_next */
    }
}

/* egress = { allow = { "host[:port]", ... }, max_bytes, max_connections,
 * secrets }: what a pattern is and how it matches is egress_rules.c's
 * (egress.h).  The field present turns egress on; without allow, every
 * connection is refused. */
static void v_egress(lua_State *L, struct vctx *vc, int t, const char *at,
                     struct hutch_egress_rules **out)
{
    static const struct {
        const char *name;
        uint64_t min, max;
    } spec[] = {
        {"max_bytes", 1, HUTCH_EGRESS_MAX_BYTES},
        {"max_connections", 1, HUTCH_EGRESS_MAX_CONNECTIONS},
    };
    char item[96], msg[192];
    size_t n = 0;
    int a;

    v_table(L, vc, t, at, "egress");
    v_fields(L, vc, t, at, egress_fields);
    a = lua_gettop(L) + 1;
    if (pol_rawget_field(L, t, "allow") != LUA_TNIL)
        n = v_list(L, vc, a, join(item, sizeof(item), at, "allow"), "allow",
                   HUTCH_EGRESS_MAX_RULES);
    if (!(*out = hutch_egress_rules_new(n)))
        verr(L, vc, NULL, "out of memory");
    for (size_t i = 1; i <= n; i++) {
        const char *pat;
        snprintf(item, sizeof(item), "%s.allow[%zu]", at, i);
        lua_rawgeti(L, a, (lua_Integer)i);
        pat = v_string(L, vc, -1, item, "allow", HUTCH_EGRESS_MAX_PATTERN);
        if (hutch_egress_rule_parse(pat, &(*out)->rule[i - 1], msg, sizeof(msg)) < 0)
            verr(L, vc, "allow", "%s: \"%s\": %s", item, pat, msg);
        (*out)->n++;
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    for (size_t i = 0; i < sizeof(spec) / sizeof(spec[0]); i++) {
        lua_Integer v = 0;
        int isint = 0;
        if (pol_rawget_field(L, t, spec[i].name) != LUA_TNIL) {
            if (lua_type(L, -1) == LUA_TNUMBER)
                v = lua_tointegerx(L, -1, &isint);
            if (!isint)
                verr(L, vc, spec[i].name, "%s.%s: expected an integer, got %s", at,
                     spec[i].name, pol_type_of(L, -1));
            if (v < 0 || (uint64_t)v < spec[i].min || (uint64_t)v > spec[i].max)
                verr(L, vc, spec[i].name, "%s.%s: %lld is out of range (%llu to %llu)",
                     at, spec[i].name, (long long)v, (unsigned long long)spec[i].min,
                     (unsigned long long)spec[i].max);
            if (i == 0)
                (*out)->max_bytes = (uint64_t)v;
            else
                (*out)->max_connections = (uint32_t)v;
        }
        lua_pop(L, 1);
    }
    if (pol_rawget_field(L, t, "secrets") != LUA_TNIL)
        v_secrets(L, vc, lua_gettop(L), at, *out);
    lua_pop(L, 1);
}

static void v_audit(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    v_table(L, vc, t, "audit", "audit");
    v_fields(L, vc, t, "audit", audit_fields);
    if (pol_rawget_field(L, t, "secret") != LUA_TNIL) {
        int s = lua_gettop(L);
        size_t n = v_list(L, vc, s, "audit.secret", "secret", HUTCH_POLICY_MAX_SECRETS);
        char item[64];
        /* The file's list replaces the default one. */
        for (size_t i = 0; i < p->nsecret; i++) {
            free(p->secret[i].pat);
            free(p->secret[i].orig);
        }
        free(p->secret);
        p->nsecret = 0;
        p->secret = calloc(n ? n : 1, sizeof(*p->secret));
        if (!p->secret)
            verr(L, vc, NULL, "out of memory");
        for (size_t i = 1; i <= n; i++) {
            const char *str;
            snprintf(item, sizeof(item), "audit.secret[%zu]", i);
            lua_rawgeti(L, s, (lua_Integer)i);
            str = v_string(L, vc, -1, item, NULL, HUTCH_POLICY_MAX_GLOB);
            p->secret[p->nsecret].pat = strdup(str);
            p->secret[p->nsecret].orig = strdup(str);
            p->nsecret++;
            if (!p->secret[p->nsecret - 1].pat || !p->secret[p->nsecret - 1].orig)
                verr(L, vc, NULL, "out of memory");
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

int pol_valid_executor(const char *s)
{
    if (!*s || strlen(s) >= sizeof(((struct hutch_policy *)0)->executor))
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-'))
            return 0;
    return 1;
}

/* executor_options = { gvisor = { platform = "kvm" }, docker = {...} }:
 * names of executors, each a table of string options.  Which options an
 * executor knows is its own business: it refuses unknown ones when it
 * starts a sandbox. */
static void v_executor_options(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    v_table(L, vc, t, "executor_options", "executor_options");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        int o = lua_gettop(L);
        const char *name;
        size_t n = 0, x;
        if (lua_type(L, -2) != LUA_TSTRING || !pol_valid_executor(lua_tostring(L, -2)))
            verr(L, vc, "executor_options",
                 "executor_options: keys are executor names (lower-case letters, "
                 "digits, _ and -), found %s",
                 lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2)
                                                : luaL_typename(L, -2));
        name = lua_tostring(L, -2);
        if (p->nxopts == HUTCH_POLICY_MAX_EXECUTORS)
            verr(L, vc, "executor_options",
                 "executor_options: options for more than %d executors",
                 HUTCH_POLICY_MAX_EXECUTORS);
        if (lua_type(L, o) != LUA_TTABLE)
            verr(L, vc, name, "executor_options.%s: expected a table, got %s", name,
                 pol_type_of(L, o));
        v_table(L, vc, o, "executor_options", name);
        /* Counted now: the policy's free takes the pairs of an entry that a
         * bad option below leaves half made. */
        x = p->nxopts++;
        snprintf(p->xopts[x].name, sizeof(p->xopts[0].name), "%s", name);
        p->xopts[x].n = 0;
        p->xopts[x].json = NULL;
        lua_pushnil(L);
        while (lua_next(L, o)) {
            const char *k, *v;
            size_t klen, vlen;
            if (lua_type(L, -2) != LUA_TSTRING)
                verr(L, vc, name, "executor_options.%s: option names are strings",
                     name);
            k = lua_tolstring(L, -2, &klen);
            if (lua_type(L, -1) != LUA_TSTRING || klen == 0 ||
                klen > HUTCH_POLICY_MAX_OPT_NAME || strlen(k) != klen ||
                ++n > HUTCH_POLICY_MAX_OPTIONS) {
                if (n > HUTCH_POLICY_MAX_OPTIONS)
                    verr(L, vc, name, "executor_options.%s: more than %d options", name,
                         HUTCH_POLICY_MAX_OPTIONS);
                if (lua_type(L, -1) != LUA_TSTRING)
                    verr(L, vc, name,
                         "executor_options.%s.%s: expected a string, got %s", name, k,
                         pol_type_of(L, -1));
                verr(L, vc, name,
                     "executor_options.%s: an option name is empty, longer than %d "
                     "bytes "
                     "or holds a NUL byte",
                     name, HUTCH_POLICY_MAX_OPT_NAME);
            }
            v = lua_tolstring(L, -1, &vlen);
            if (vlen > HUTCH_POLICY_MAX_OPT_VALUE || strlen(v) != vlen)
                verr(L, vc, name,
                     "executor_options.%s.%s: longer than %d bytes or holds a NUL byte",
                     name, k, HUTCH_POLICY_MAX_OPT_VALUE);
            snprintf(p->xopts[x].kv[p->xopts[x].n].key, sizeof(p->xopts[x].kv[0].key),
                     "%s", k);
            if (!(p->xopts[x].kv[p->xopts[x].n].value = strdup(v)))
                verr(L, vc, NULL, "out of memory");
            p->xopts[x].n++;
            lua_pop(L, 1);
        }
        if (pol_xopts_render(p, x) < 0)
            verr(L, vc, NULL, "out of memory");
        lua_pop(L, 1);
    }
}

int pol_xopts_render(struct hutch_policy *p, size_t i)
{
    cJSON *o = cJSON_CreateObject();
    char *json;
    for (size_t k = 0; o && k < p->xopts[i].n; k++)
        if (!cJSON_AddStringToObject(o, p->xopts[i].kv[k].key,
                                     p->xopts[i].kv[k].value)) {
            cJSON_Delete(o);
            o = NULL;
        }
    json = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!json)
        return -ENOMEM;
    free(p->xopts[i].json);
    p->xopts[i].json = json;
    return 0;
}

const char *pol_xopts_get(const struct hutch_policy *p, size_t i, const char *key)
{
    for (size_t k = 0; k < p->xopts[i].n; k++)
        if (!strcmp(p->xopts[i].kv[k].key, key))
            return p->xopts[i].kv[k].value;
    return NULL;
}

/* pool = { python = N, javascript = N, docker = { python = N, ... } }. */
const char *const pol_pool_langs[] = {"python", "javascript", NULL};

static int v_pool_size(lua_State *L, struct vctx *vc, int idx, const char *where)
{
    if (!lua_isinteger(L, idx) || lua_tointeger(L, idx) < 0 ||
        lua_tointeger(L, idx) > HUTCH_POOL_MAX_SIZE)
        verr(L, vc, NULL, "%s: expected a whole number from 0 to %d, got %s", where,
             HUTCH_POOL_MAX_SIZE,
             lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx)
                                             : pol_type_of(L, idx));
    return (int)lua_tointeger(L, idx);
}

static void v_pool(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    char where[160];
    v_table(L, vc, t, "pool", "pool");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        int lang = -1;
        for (int i = 0; k && pol_pool_langs[i]; i++)
            if (!strcmp(k, pol_pool_langs[i]))
                lang = i;
        if (!k)
            verr(L, vc, NULL, "pool: keys are languages or executor names");
        if (lang >= 0) {
            snprintf(where, sizeof(where), "pool.%s", k);
            p->pool_any[lang] = v_pool_size(L, vc, -1, where);
        } else if (lua_type(L, -1) == LUA_TTABLE && pol_valid_executor(k)) {
            int e = lua_gettop(L);
            if (p->npools == HUTCH_POLICY_MAX_EXECUTORS)
                verr(L, vc, NULL, "pool: sizes for more than %d executors",
                     HUTCH_POLICY_MAX_EXECUTORS);
            snprintf(p->pools[p->npools].name, sizeof(p->pools[0].name), "%s", k);
            p->pools[p->npools].size[0] = p->pools[p->npools].size[1] = -1;
            snprintf(where, sizeof(where), "pool.%s", k);
            v_fields(L, vc, e, where, pol_pool_langs);
            for (int i = 0; pol_pool_langs[i]; i++) {
                if (pol_rawget_field(L, e, pol_pool_langs[i]) != LUA_TNIL) {
                    snprintf(where, sizeof(where), "pool.%s.%s", k, pol_pool_langs[i]);
                    p->pools[p->npools].size[i] = v_pool_size(L, vc, -1, where);
                }
                lua_pop(L, 1);
            }
            p->npools++;
        } else {
            verr(L, vc, NULL,
                 "pool.%s: expected python = N, javascript = N, or an executor name "
                 "with a table of those",
                 k);
        }
        lua_pop(L, 1);
    }
}

void pol_validate(lua_State *L, struct vctx *vc, int t)
{
    struct hutch_policy *p = vc->p;
    if (lua_type(L, t) != LUA_TTABLE)
        verr(L, vc, NULL, "the file must return a table of settings (it returned %s)",
             pol_type_of(L, t));
    v_table(L, vc, t, "the returned table", NULL);
    v_fields(L, vc, t, "", top_fields);

    if (pol_rawget_field(L, t, "executor") != LUA_TNIL) {
        const char *s = v_string(L, vc, -1, "executor", "executor", 63);
        if (!pol_valid_executor(s))
            verr(
                L, vc, "executor",
                "executor: \"%s\" is not an executor name (lower-case letters, digits, "
                "_ and -; see hutch plugins)",
                s);
        snprintf(p->executor, sizeof(p->executor), "%s", s);
        p->executor_explicit = 1;
    }
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "pool") != LUA_TNIL)
        v_pool(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "executor_options") != LUA_TNIL)
        v_executor_options(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "limits") != LUA_TNIL)
        v_limits(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "tools") != LUA_TNIL)
        v_tools(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "paths") != LUA_TNIL)
        v_paths(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "principals") != LUA_TNIL)
        v_principals(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "rate") != LUA_TNIL)
        v_rate(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "audit") != LUA_TNIL)
        v_audit(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    p->direct_tools = -1;
    if (pol_rawget_field(L, t, "direct_tools") != LUA_TNIL) {
        if (!lua_isboolean(L, -1))
            verr(L, vc, "direct_tools", "direct_tools: expected true or false, got %s",
                 pol_type_of(L, -1));
        p->direct_tools = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "workspaces") != LUA_TNIL)
        v_workspaces(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "concurrency") != LUA_TNIL)
        v_concurrency(L, vc, lua_gettop(L), "concurrency", &p->conc);
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "taint") != LUA_TNIL)
        v_taint(L, vc, lua_gettop(L));
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "egress") != LUA_TNIL)
        v_egress(L, vc, lua_gettop(L), "egress", &p->egress);
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "on_execute") != LUA_TNIL && !lua_isfunction(L, -1))
        verr(L, vc, "on_execute", "on_execute: expected a function, got %s",
             pol_type_of(L, -1));
    p->has_execute = lua_isfunction(L, -1);
    lua_pop(L, 1);
    if (pol_rawget_field(L, t, "on_tool_call") != LUA_TNIL && !lua_isfunction(L, -1))
        verr(L, vc, "on_tool_call", "on_tool_call: expected a function, got %s",
             pol_type_of(L, -1));
    p->has_tool_call = lua_isfunction(L, -1);
    lua_pop(L, 1);
}
