/* serve_config.c — the optional configuration file of hutch serve: one
 * `key = value` a line, the keys being serve's long options, so a file
 * says what the flags say and serve parses both with the same code (the
 * file's settings come first, so every flag overrides them).  What the
 * values mean is cmd_serve.c's; this file only reads lines and keys. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "caps.h"
#include "serve_config.h"
#include "util.h"

static char *trim(char *s)
{
    char *e;
    while (*s == ' ' || *s == '\t')
        s++;
    e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        *--e = '\0';
    return s;
}

static int push(char ***args, int *n, const char *s)
{
    char **v = realloc(*args, (size_t)(*n + 1) * sizeof(*v));
    if (!v)
        return -1;
    *args = v;
    if (!(v[*n] = strdup(s)))
        return -1;
    (*n)++;
    return 0;
}

static int truth(const char *v)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (!strcasecmp(v, yes[i]))
            return 1;
        if (!strcasecmp(v, no[i]))
            return 0;
    }
    return -1;
}

int hutch_serve_config(const char *file, const struct option *opts,
                       const char *const *skip, char ***args, int *n,
                       struct hutch_err *err)
{
    const char *known[64];
    const struct option *seen[64] = {0};
    size_t nknown = 0, len;
    char *data = NULL, *line, *next;
    int lineno = 0, r = -EINVAL;

    for (const struct option *o = opts; o->name && nknown < 63; o++) {
        const char *const *s;
        for (s = skip; *s && strcmp(*s, o->name); s++)
            ;
        if (!*s)
            known[nknown++] = o->name;
    }
    known[nknown] = NULL;
    if (hutch_read_file(file, HUTCH_SERVE_CONFIG_MAX_BYTES, &data, &len, err) < 0)
        return -EINVAL; /* its message names the file */
    if (memchr(data, '\0', len)) {
        hutch_err_set(err, -EINVAL, "%s: a NUL byte: not a text file", file);
        goto out;
    }
    for (line = data; line; line = next) {
        char *eq, *key, *val;
        const struct option *o = NULL;
        size_t i;
        lineno++;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        line = trim(line);
        if (!*line || *line == '#')
            continue;
        if (!(eq = strchr(line, '='))) {
            hutch_err_set(err, -EINVAL, "%s:%d: not `key = value`", file, lineno);
            goto out;
        }
        *eq = '\0';
        key = trim(line);
        val = trim(eq + 1);
        for (i = 0; i < nknown && strcmp(known[i], key); i++)
            ;
        if (i == nknown) {
            const char *s = hutch_suggest(key, known);
            char hint[96] = "";
            if (s)
                snprintf(hint, sizeof(hint), " (did you mean \"%s\"?)", s);
            hutch_err_set(err, -EINVAL, "%s:%d: unknown key \"%.64s\"%s", file, lineno,
                          key, hint);
            goto out;
        }
        for (o = opts; strcmp(o->name, key); o++)
            ;
        if (seen[i] && strcmp(key, "verbose")) {
            hutch_err_set(err, -EINVAL, "%s:%d: \"%s\" is set twice", file, lineno,
                          key);
            goto out;
        }
        seen[i] = o;
        if (o->has_arg == no_argument) {
            int t = truth(val);
            if (t < 0) {
                hutch_err_set(err, -EINVAL, "%s:%d: %s wants true or false", file,
                              lineno, key);
                goto out;
            }
            if (t) {
                char flag[80];
                snprintf(flag, sizeof(flag), "--%s", key);
                if (push(args, n, flag) < 0)
                    goto oom;
            }
            continue;
        }
        if (!*val) {
            hutch_err_set(err, -EINVAL, "%s:%d: %s has no value", file, lineno, key);
            goto out;
        }
        {
            char flag[80];
            snprintf(flag, sizeof(flag), "--%s", key);
            if (push(args, n, flag) < 0 || push(args, n, val) < 0)
                goto oom;
        }
    }
    r = 0;
    goto out;
oom:
    r = hutch_err_set(err, -ENOMEM, "%s: out of memory", file);
out:
    free(data);
    return r;
}
