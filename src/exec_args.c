/* exec_args.c — execute_code's arguments: the table (one row each), the
 * inputSchema generated from it, and a call's arguments checked and parsed
 * against it into struct hutch_exec_args (exec_args.h says what is not
 * here).
 *
 * A row says what JSON the argument takes (its kind: each kind has one JSON
 * type, one check, one message and one way into the typed request), its
 * description, and where its value lands (an offset into struct
 * hutch_exec_args).  The messages are tool errors the model reads, so that
 * it can correct its call: they name the argument and what it must be.
 *
 * What the schema says and what is checked differ on purpose in two places:
 * a number above the maximum shown is not refused but clamped (job.c gives
 * it the server's ceiling and the result says so), and `inputs` and
 * `output_dir` are accepted when not shown (the policy's paths refuse them
 * then, with a message that says why, job.c). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "exec_args.h"
#include "hutch_archive.h"
#include "util.h"
#include "workspace.h"

enum kind {
    ENUM,   /* a string among .values */
    STRING, /* a string, .what in the message; at most .max bytes (0: any) */
    NAME,   /* a string .check accepts: schema maxLength .max and .pattern */
    COUNT,  /* a positive integer (uint64_t); a fraction is refused below
             * .max only (above it the value is clamped anyway) */
    BOOL,   /* true or false (int) */
    FILES,  /* [{path, content, encoding?}] packed into a tar (struct
             * hutch_tar *), their number at .count_at (size_t) */
    PATHS,  /* [host path] (struct hutch_job_input *), their number at
             * .count_at (size_t) */
};

#define REQUIRED   1u /* absent or null is an error */
#define HOST_PATHS 2u /* shown only when the policy names host folders */

struct arg {
    const char *name;
    enum kind kind;
    unsigned flags;
    const char *doc; /* the schema's description, or NULL */
    size_t at;       /* AT(field): where the value lands */
    size_t count_at; /* FILES, PATHS: AT(field) of the count */
    const char *const *values;
    const char *what;
    uint64_t max;
    const char *pattern;
    int (*check)(const char *s, struct hutch_err *err);
    size_t shown_max; /* COUNT: SHOWN(field) of the offer, or 0: no maximum */
};

#define AT(f)    offsetof(struct hutch_exec_args, f)
#define SHOWN(f) (offsetof(struct hutch_exec_args_offer, f) + 1)

static const char *const languages[] = {"python", "javascript", "typescript", NULL};

/* The arguments, in the schema's order. */
static const struct arg args_table[] = {
    {.name = "language",
     .kind = ENUM,
     .flags = REQUIRED,
     .at = AT(job.language),
     .values = languages},
    {.name = "code",
     .kind = STRING,
     .flags = REQUIRED,
     .at = AT(job.code),
     .what = "a string",
     .max = HUTCH_MAX_CODE_BYTES},
    {.name = "files",
     .kind = FILES,
     .doc = "put under /work first",
     .at = AT(job.files),
     .count_at = AT(job.nfiles)},
    {.name = "inputs",
     .kind = PATHS,
     .flags = HOST_PATHS,
     .doc = "host files or folders to copy in",
     .at = AT(job.inputs),
     .count_at = AT(job.ninputs)},
    {.name = "output_dir",
     .kind = STRING,
     .flags = HOST_PATHS,
     .doc = "host folder that receives /work/out",
     .at = AT(job.output_dir),
     .what = "a host path"},
    {.name = "workspace",
     .kind = NAME,
     .doc = "keeps /work/out/workspace between runs that name it",
     .at = AT(job.workspace),
     .what = "a name (a string)",
     .check = hutch_ws_check_name,
     .max = HUTCH_WORKSPACE_NAME_MAX,
     .pattern = HUTCH_WS_NAME_PATTERN},
    {.name = "timeout_ms",
     .kind = COUNT,
     .at = AT(job.timeout_ms),
     .max = HUTCH_MAX_TIMEOUT_MS,
     .shown_max = SHOWN(timeout_ms_max)},
    {.name = "output_bytes",
     .kind = COUNT,
     .doc = "stdout/stderr kept, head and tail",
     .at = AT(job.output_bytes),
     .max = HUTCH_OUTPUT_MAX_BYTES,
     .shown_max = SHOWN(output_bytes_max)},
    {.name = "trace", .kind = BOOL, .doc = "list every tool call", .at = AT(trace)},
};
#define NARGS (sizeof(args_table) / sizeof(args_table[0]))

/* --- the schema ------------------------------------------------------------------ */

static const char *json_type(enum kind k)
{
    switch (k) {
    case ENUM:
    case STRING:
    case NAME:
        return "string";
    case COUNT:
        return "integer";
    case BOOL:
        return "boolean";
    case FILES:
    case PATHS:
        return "array";
    }
    return "null";
}

static cJSON *typed(cJSON *parent, const char *name, const char *type)
{
    cJSON *p = cJSON_AddObjectToObject(parent, name);
    if (p && !cJSON_AddStringToObject(p, "type", type))
        return NULL;
    return p;
}

static int add_strings(cJSON *o, const char *key, const char *const *v)
{
    cJSON *a = cJSON_AddArrayToObject(o, key);
    for (; a && *v; v++)
        if (!cJSON_AddItemToArray(a, cJSON_CreateString(*v)))
            return -ENOMEM;
    return a ? 0 : -ENOMEM;
}

/* {path, content, encoding?}: what FILES takes in each element. */
static int file_schema(cJSON *items)
{
    static const char *const encodings[] = {"utf-8", "base64", NULL};
    static const char *const required[] = {"path", "content", NULL};
    cJSON *props = cJSON_AddObjectToObject(items, "properties"), *e;
    if (!props || !typed(props, "path", "string") ||
        !typed(props, "content", "string") ||
        !(e = typed(props, "encoding", "string")) || add_strings(e, "enum", encodings))
        return -ENOMEM;
    return add_strings(items, "required", required);
}

static int arg_schema(const struct arg *a, const struct hutch_exec_args_offer *o,
                      cJSON *props)
{
    cJSON *p = typed(props, a->name, json_type(a->kind)), *items;
    if (!p || (a->doc && !cJSON_AddStringToObject(p, "description", a->doc)))
        return -ENOMEM;
    switch (a->kind) {
    case ENUM:
        return add_strings(p, "enum", a->values);
    case NAME:
        return cJSON_AddNumberToObject(p, "maxLength", (double)a->max) &&
                       cJSON_AddStringToObject(p, "pattern", a->pattern)
                   ? 0
                   : -ENOMEM;
    case COUNT:
        if (!cJSON_AddNumberToObject(p, "minimum", 1))
            return -ENOMEM;
        if (a->shown_max) {
            uint64_t max;
            memcpy(&max, (const char *)o + a->shown_max - 1, sizeof(max));
            if (!cJSON_AddNumberToObject(p, "maximum", (double)max))
                return -ENOMEM;
        }
        return 0;
    case FILES:
        items = typed(p, "items", "object");
        return items ? file_schema(items) : -ENOMEM;
    case PATHS:
        return typed(p, "items", "string") ? 0 : -ENOMEM;
    case STRING:
    case BOOL:
        return 0;
    }
    return 0;
}

cJSON *hutch_exec_args_schema(const struct hutch_exec_args_offer *o)
{
    cJSON *in = cJSON_CreateObject(), *props, *req;
    int r = -ENOMEM;

    if (!in || !cJSON_AddStringToObject(in, "type", "object") ||
        !(props = cJSON_AddObjectToObject(in, "properties")))
        goto out;
    for (size_t i = 0; i < NARGS; i++) {
        if ((args_table[i].flags & HOST_PATHS) && !o->host_paths)
            continue;
        if (arg_schema(&args_table[i], o, props) < 0)
            goto out;
    }
    if (!(req = cJSON_AddArrayToObject(in, "required")))
        goto out;
    for (size_t i = 0; i < NARGS; i++)
        if ((args_table[i].flags & REQUIRED) &&
            !cJSON_AddItemToArray(req, cJSON_CreateString(args_table[i].name)))
            goto out;
    if (cJSON_AddFalseToObject(in, "additionalProperties"))
        r = 0;
out:
    if (r < 0) {
        cJSON_Delete(in);
        return NULL;
    }
    return in;
}

/* --- checking and parsing ------------------------------------------------ */

/* Every message the model reads starts with the tool's name. */
__attribute__((format(printf, 3, 4))) static int bad(struct hutch_err *err, int code,
                                                     const char *fmt, ...)
{
    char msg[HUTCH_ERR_MSG];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return hutch_err_set(err, code, "execute_code: %s", msg);
}

/* "1 MiB", "64 KiB", "100 bytes". */
static void size_text(uint64_t n, char *out, size_t len)
{
    if (n && n % (1u << 20) == 0)
        snprintf(out, len, "%llu MiB", (unsigned long long)(n >> 20));
    else if (n && n % 1024 == 0)
        snprintf(out, len, "%llu KiB", (unsigned long long)(n >> 10));
    else
        snprintf(out, len, "%llu bytes", (unsigned long long)n);
}

/* "\"python\", \"javascript\" or \"typescript\"" */
static void values_text(const char *const *v, char *out, size_t len)
{
    size_t w = 0;
    out[0] = '\0';
    for (size_t i = 0; v[i] && w < len; i++) {
        int n = snprintf(out + w, len - w, "%s\"%s\"",
                         i == 0     ? ""
                         : v[i + 1] ? ", "
                                    : " or ",
                         v[i]);
        if (n < 0)
            break;
        w += (size_t)n;
    }
}

static void *slot(struct hutch_exec_args *a, size_t at)
{
    return (char *)a + at;
}

static void set_str(struct hutch_exec_args *a, size_t at, const char *s)
{
    memcpy(slot(a, at), &s, sizeof(s));
}

/* files: each element packed into a tar for /work. */
static int parse_files(const cJSON *files, struct hutch_tar **tar,
                       struct hutch_err *err)
{
    struct hutch_err e = {0};
    const cJSON *f;
    int n = 0, r;

    if (!cJSON_IsArray(files))
        return bad(err, -EINVAL,
                   "\"files\" must be an array of {path, content, encoding?}");
    if (cJSON_GetArraySize(files) > HUTCH_MAX_INPUT_FILES)
        return bad(err, -E2BIG, "more than %d files", HUTCH_MAX_INPUT_FILES);
    r = hutch_tar_new(tar, HUTCH_TAR_IN_MAX_BYTES, &e);
    if (r < 0)
        return bad(err, r, "%s", e.msg);
    cJSON_ArrayForEach(f, files)
    {
        const cJSON *path = cJSON_GetObjectItemCaseSensitive(f, "path");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(f, "content");
        const cJSON *enc = cJSON_GetObjectItemCaseSensitive(f, "encoding");
        unsigned char *bytes = NULL;
        size_t nbytes = 0;
        n++;
        if (!cJSON_IsObject(f) || !cJSON_IsString(path) || !cJSON_IsString(content))
            return bad(err, -EINVAL,
                       "files[%d] needs a string \"path\" and a string \"content\"",
                       n - 1);
        if (enc && !cJSON_IsNull(enc) &&
            (!cJSON_IsString(enc) ||
             (strcmp(enc->valuestring, "utf-8") && strcmp(enc->valuestring, "base64"))))
            return bad(err, -EINVAL,
                       "files[%d].encoding must be \"utf-8\" or \"base64\"", n - 1);
        if (cJSON_IsString(enc) && !strcmp(enc->valuestring, "base64")) {
            r = hutch_base64_decode(content->valuestring, strlen(content->valuestring),
                                    &bytes, &nbytes);
            if (r < 0)
                return bad(err, r, "files[%d] (%s): content is not valid base64", n - 1,
                           path->valuestring);
        }
        r = hutch_tar_add_bytes(
            *tar, path->valuestring, bytes ? (const void *)bytes : content->valuestring,
            bytes ? nbytes : strlen(content->valuestring), 0644, &e);
        free(bytes);
        if (r < 0)
            return bad(err, r, "files[%d]: %s", n - 1, e.msg);
    }
    return n;
}

/* inputs: host paths, copied in where the policy's paths say (job.c). */
static int parse_paths(const cJSON *inputs, struct hutch_job_input **out,
                       struct hutch_err *err)
{
    const cJSON *it;
    int i = 0;
    if (!cJSON_IsArray(inputs) || cJSON_GetArraySize(inputs) > HUTCH_MAX_INPUT_FILES)
        return bad(err, -EINVAL, "\"inputs\" must be an array of at most %d host paths",
                   HUTCH_MAX_INPUT_FILES);
    *out = calloc((size_t)cJSON_GetArraySize(inputs) + 1, sizeof(**out));
    if (!*out)
        return bad(err, -ENOMEM, "out of memory");
    cJSON_ArrayForEach(it, inputs)
    {
        if (!cJSON_IsString(it))
            return bad(err, -EINVAL, "\"inputs\" must hold strings (host paths)");
        (*out)[i++].src = it->valuestring;
    }
    return i;
}

/* One argument, present (v) or not (NULL; null counts as absent unless it
 * is REQUIRED). */
static int parse_arg(const struct arg *a, const cJSON *v, struct hutch_exec_args *out,
                     struct hutch_err *err)
{
    char text[256];
    int r;

    if (!v || (cJSON_IsNull(v) && !(a->flags & REQUIRED))) {
        if (!(a->flags & REQUIRED))
            return 0;
        v = NULL;
    }
    switch (a->kind) {
    case ENUM:
        for (size_t i = 0; v && cJSON_IsString(v) && a->values[i]; i++)
            if (!strcmp(v->valuestring, a->values[i])) {
                set_str(out, a->at, v->valuestring);
                return 0;
            }
        values_text(a->values, text, sizeof(text));
        return bad(err, -EINVAL, "\"%s\" must be %s", a->name, text);
    case STRING:
        if (!cJSON_IsString(v))
            return bad(err, -EINVAL, "\"%s\" must be %s", a->name, a->what);
        if (a->max && strlen(v->valuestring) > a->max) {
            size_text(a->max, text, sizeof(text));
            return bad(err, -E2BIG, "\"%s\" is larger than %s", a->name, text);
        }
        set_str(out, a->at, v->valuestring);
        return 0;
    case NAME: {
        struct hutch_err e = {0};
        if (!cJSON_IsString(v))
            return bad(err, -EINVAL, "\"%s\": must be %s", a->name, a->what);
        if ((r = a->check(v->valuestring, &e)) < 0)
            return bad(err, r, "\"%s\": %s", a->name, e.msg);
        set_str(out, a->at, v->valuestring);
        return 0;
    }
    case COUNT: {
        double d = cJSON_IsNumber(v) ? v->valuedouble : 0;
        uint64_t n;
        if (d < 1 || (d < (double)a->max && d != (double)(uint64_t)d))
            return bad(err, -EINVAL, "\"%s\" must be a positive integer", a->name);
        /* Above the server's ceiling it gets the ceiling, and the result
         * says what was asked (job.c); this cap keeps the number exact. */
        n = d > (double)HUTCH_EXEC_ARG_COUNT_MAX ? HUTCH_EXEC_ARG_COUNT_MAX
                                                 : (uint64_t)d;
        memcpy(slot(out, a->at), &n, sizeof(n));
        return 0;
    }
    case BOOL: {
        int b = cJSON_IsTrue(v);
        if (!cJSON_IsBool(v))
            return bad(err, -EINVAL, "\"%s\" must be true or false", a->name);
        memcpy(slot(out, a->at), &b, sizeof(b));
        return 0;
    }
    case FILES: {
        struct hutch_tar *tar = NULL;
        size_t n;
        r = parse_files(v, &tar, err);
        /* On failure too: hutch_exec_args_free frees it. */
        memcpy(slot(out, a->at), &tar, sizeof(tar));
        if (r < 0)
            return r;
        n = (size_t)r;
        memcpy(slot(out, a->count_at), &n, sizeof(n));
        return 0;
    }
    case PATHS: {
        struct hutch_job_input *in = NULL;
        size_t n;
        r = parse_paths(v, &in, err);
        memcpy(slot(out, a->at), &in, sizeof(in));
        if (r < 0)
            return r;
        n = (size_t)r;
        memcpy(slot(out, a->count_at), &n, sizeof(n));
        return 0;
    }
    }
    return bad(err, -EINVAL, "\"%s\" cannot be read", a->name);
}

static const struct arg *find_arg(const char *name)
{
    for (size_t i = 0; i < NARGS; i++)
        if (!strcmp(args_table[i].name, name))
            return &args_table[i];
    return NULL;
}

int hutch_exec_args_parse(const cJSON *args, struct hutch_exec_args *a,
                          struct hutch_err *err)
{
    const cJSON *it;
    int r = 0;

    memset(a, 0, sizeof(*a));
    if (!cJSON_IsObject(args))
        return bad(err, -EINVAL, "the arguments must be an object");
    cJSON_ArrayForEach(it, args)
    {
        if (!find_arg(it->string))
            return bad(err, -EINVAL, "unknown argument \"%.64s\"", it->string);
    }
    /* Two passes: what is only checked first, then files and inputs, which
     * are built (a tar of up to HUTCH_TAR_IN_MAX_BYTES). */
    for (int pass = 0; pass < 2 && r == 0; pass++)
        for (size_t i = 0; i < NARGS && r == 0; i++) {
            const struct arg *x = &args_table[i];
            if ((x->kind == FILES || x->kind == PATHS) != pass)
                continue;
            r = parse_arg(x, cJSON_GetObjectItemCaseSensitive(args, x->name), a, err);
        }
    if (r < 0) {
        hutch_exec_args_free(a);
        memset(a, 0, sizeof(*a));
    }
    return r < 0 ? r : 0;
}

void hutch_exec_args_free(struct hutch_exec_args *a)
{
    hutch_tar_free(a->job.files);
    a->job.files = NULL;
    /* parse_paths allocated it; the request only reads it. */
    free((void *)a->job.inputs);
    a->job.inputs = NULL;
}
