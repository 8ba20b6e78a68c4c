/* wire.c — the runner wire protocol, core side.  Everything parsed here came
 * out of a sandbox and is treated as hostile: bounded, validated, and never
 * trusted to be what it claims beyond what is checked.  Also the UTF-8
 * check and the sanitiser that turns a sandbox's bytes into text safe for a
 * C string and JSON (NUL and invalid bytes as U+FFFD), which every renderer
 * of its output uses (exec.c, mcp_server.c); and where an escaped NUL cut
 * a JSON string short (hutch_json_find_nul, for the edges that take JSON
 * from outside: MCP requests, the servers file). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "wire.h"

void hutch_wire_reader_init(struct hutch_wire_reader *r, size_t max_line)
{
    memset(r, 0, sizeof(*r));
    r->max_line = max_line;
    /* Room for one full line plus the start of the next read. */
    hutch_buf_init(&r->buf, max_line + 65536);
}

void hutch_wire_reader_free(struct hutch_wire_reader *r)
{
    hutch_buf_free(&r->buf);
}

int hutch_wire_feed(struct hutch_wire_reader *r, const void *data, size_t n)
{
    const char *p, *end, *nl;
    size_t old;

    hutch_buf_consume(&r->buf, r->consumed);
    r->consumed = 0;
    old = r->buf.len;
    if (hutch_buf_append(&r->buf, data, n) < 0)
        return -E2BIG;
    /* No line may pass the cap, complete or not (a partial one past it can
     * never become valid).  What came before was checked up to the start
     * of its last, partial line. */
    p = r->buf.data;
    end = p + r->buf.len;
    nl = old ? memrchr(p, '\n', old) : NULL;
    if (nl)
        p = nl + 1;
    for (;; p = nl + 1) {
        nl = memchr(p, '\n', (size_t)(end - p));
        if ((size_t)((nl ? nl : end) - p) > r->max_line)
            return -E2BIG;
        if (!nl)
            return 0;
    }
}

int hutch_wire_next(struct hutch_wire_reader *r, const char **line, size_t *len)
{
    char *start = r->buf.data + r->consumed;
    size_t avail = r->buf.len - r->consumed;
    char *nl = avail ? memchr(start, '\n', avail) : NULL;
    if (!nl)
        return 0;
    *nl = '\0';
    *line = start;
    *len = (size_t)(nl - start);
    r->consumed += *len + 1;
    return 1;
}

int hutch_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        size_t n;
        unsigned cp;
        if (c < 0x80) {
            p++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if ((size_t)(end - p) <= n)
            return 0;
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        p += n + 1;
    }
    return 1;
}

/* Length of the well-formed sequence at p (1 to 4), or 0. */
static size_t utf8_seq(const unsigned char *p, size_t avail)
{
    unsigned c = p[0];
    size_t n = c < 0x80                 ? 1
               : c >= 0xc2 && c <= 0xdf ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    return n && n <= avail && hutch_utf8_valid((const char *)p, n) ? n : 0;
}

char *hutch_utf8_sanitize(const char *s, size_t len, size_t *outlen)
{
    static const char repl[] = "\xef\xbf\xbd"; /* U+FFFD */
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0;
    char *out;

    if (len > (SIZE_MAX - 1) / 3)
        return NULL;
    out = malloc(len * 3 + 1);
    if (!out)
        return NULL;
    while (i < len) {
        size_t n = p[i] ? utf8_seq(p + i, len - i) : 0;
        if (n) {
            memcpy(out + o, p + i, n);
            o += n;
            i += n;
        } else {
            memcpy(out + o, repl, 3);
            o += 3;
            i++;
        }
    }
    out[o] = '\0';
    if (outlen)
        *outlen = o;
    return out;
}

/* cJSON decodes the escape \u0000 into a NUL that ends its C string, and
 * with it the rest of the value ("a\u0000b" would read as "a"): rewrite
 * each such escape as \ufffd, the same length, before parsing.  In valid
 * JSON a backslash only occurs in a string, where it starts an escape of
 * two characters (\uXXXX: six), so walking escapes pair by pair cannot
 * mistake "\\u0000" (a backslash, then text) for one.  NULL when the line
 * has none (parse it as it is) or out of memory (*oom set). */
static char *nul_escapes_replaced(const char *line, size_t len, int *oom)
{
    char *copy = NULL;

    *oom = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (line[i] != '\\')
            continue;
        if (line[i + 1] == 'u' && i + 6 <= len && !memcmp(line + i + 2, "0000", 4)) {
            if (!copy) {
                copy = malloc(len + 1);
                if (!copy) {
                    *oom = 1;
                    return NULL;
                }
                memcpy(copy, line, len);
                copy[len] = '\0';
            }
            memcpy(copy + i + 2, "fffd", 4);
        }
        i++; /* the escaped character is not a backslash that starts one */
    }
    return copy;
}

/* Appends one step to the path in w[0..*n): .key for a plain identifier,
 * ["key"] (printable ASCII, cut) otherwise, [i] for an element. */
static void path_step(char *w, size_t wlen, const cJSON *item, int index)
{
    size_t n = strlen(w);
    const char *k = item->string;
    int plain = k && *k && !(*k >= '0' && *k <= '9');

    for (const char *c = k; plain && *c; c++)
        plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                (*c >= '0' && *c <= '9') || *c == '_';
    if (!k) {
        snprintf(w + n, wlen - n, "[%d]", index);
    } else if (plain) {
        snprintf(w + n, wlen - n, "%s%.64s", n ? "." : "", k);
    } else {
        char q[68];
        size_t o = 0;
        for (; *k && o < 64; k++)
            q[o++] = (*k >= 0x20 && *k < 0x7f && *k != '"' && *k != '\\') ? *k : '?';
        q[o] = '\0';
        snprintf(w + n, wlen - n, "[\"%s%s\"]", q, *k ? "..." : "");
    }
}

/* a as cJSON read it, b with every \u0000 read as U+FFFD (the members of
 * one container, from its first): the same trees but for the strings a NUL
 * cut.  1 at the first such key or string. */
static int nul_diff(const cJSON *a, const cJSON *b, char *w, size_t wlen)
{
    int i = 0;
    for (; a && b; a = a->next, b = b->next, i++) {
        size_t n = strlen(w);
        path_step(w, wlen, b, i);
        if ((a->string && strcmp(a->string, b->string)) ||
            (cJSON_IsString(a) && strcmp(a->valuestring, b->valuestring)) ||
            nul_diff(a->child, b->child, w, wlen))
            return 1;
        w[n] = '\0';
    }
    return 0;
}

int hutch_json_find_nul(const cJSON *parsed, const char *text, size_t len, char *where,
                        size_t where_len)
{
    int oom, r;
    char *fixed = nul_escapes_replaced(text, len, &oom);
    cJSON *b;

    if (where_len)
        where[0] = '\0';
    if (oom)
        return -ENOMEM;
    if (!fixed || !parsed)
        return 0;
    b = cJSON_ParseWithLength(fixed, len);
    free(fixed);
    if (!b)
        return -ENOMEM; /* it parsed once: the second can only lack memory */
    if (cJSON_IsString(parsed) && strcmp(parsed->valuestring, b->valuestring)) {
        snprintf(where, where_len, "the value");
        r = 1;
    } else {
        r = where_len ? nul_diff(parsed->child, b->child, where, where_len) : 0;
    }
    cJSON_Delete(b);
    return r;
}

int hutch_json_depth(const cJSON *j)
{
    int best = 0;
    if (!j || !(cJSON_IsArray(j) || cJSON_IsObject(j)))
        return 0;
    for (const cJSON *c = j->child; c; c = c->next) {
        int d = hutch_json_depth(c);
        if (d > best)
            best = d;
        if (best > HUTCH_WIRE_MAX_DEPTH)
            break;
    }
    return best + 1;
}

static int printable_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > HUTCH_MAX_QUALIFIED_NAME)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return 1;
}

int hutch_wire_parse(const char *line, size_t len, struct hutch_msg *m,
                     struct hutch_err *err)
{
    const cJSON *t;
    int r = 0;

    memset(m, 0, sizeof(*m));
    if (len > HUTCH_WIRE_MAX_LINE)
        return hutch_err_set(err, -E2BIG,
                             "message of %zu bytes exceeds the %u-byte limit", len,
                             HUTCH_WIRE_MAX_LINE);
    if (!hutch_utf8_valid(line, len))
        return hutch_err_set(err, -EILSEQ, "message is not valid UTF-8");
    if (memchr(line, '\0', len)) /* JSON has none outside an escape */
        return hutch_err_set(err, -EBADMSG, "message contains a NUL byte");
    {
        int oom;
        char *fixed = nul_escapes_replaced(line, len, &oom);
        if (oom)
            return hutch_err_set(err, -ENOMEM, "out of memory");
        m->root = cJSON_ParseWithLength(fixed ? fixed : line, len);
        free(fixed);
    }
    if (!m->root)
        return hutch_err_set(err, -EBADMSG, "message is not valid JSON");
    if (!cJSON_IsObject(m->root)) {
        r = hutch_err_set(err, -EBADMSG, "message is not a JSON object");
        goto fail;
    }
    if (hutch_json_depth(m->root) > HUTCH_WIRE_MAX_DEPTH) {
        r = hutch_err_set(err, -EBADMSG, "message nests deeper than %d levels",
                          HUTCH_WIRE_MAX_DEPTH);
        goto fail;
    }
    t = cJSON_GetObjectItemCaseSensitive(m->root, "t");
    if (!cJSON_IsString(t)) {
        r = hutch_err_set(err, -EBADMSG, "message has no string member \"t\"");
        goto fail;
    }
    if (strcmp(t->valuestring, "ready") == 0) {
        const cJSON *lang = cJSON_GetObjectItemCaseSensitive(m->root, "lang");
        const cJSON *ver = cJSON_GetObjectItemCaseSensitive(m->root, "version");
        m->type = HUTCH_MSG_READY;
        m->lang = cJSON_IsString(lang) ? lang->valuestring : "";
        m->version = cJSON_IsString(ver) ? ver->valuestring : "";
    } else if (strcmp(t->valuestring, "tool_call") == 0 ||
               strcmp(t->valuestring, "search") == 0 ||
               strcmp(t->valuestring, "describe") == 0) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(m->root, "id");
        const cJSON *tool = cJSON_GetObjectItemCaseSensitive(m->root, "tool");
        /* search and describe ask hutch itself and name no tool. */
        int search = t->valuestring[0] != 't';
        m->type = t->valuestring[0] == 's'   ? HUTCH_MSG_SEARCH
                  : t->valuestring[0] == 'd' ? HUTCH_MSG_DESCRIBE
                                             : HUTCH_MSG_TOOL_CALL;
        if (!cJSON_IsNumber(id) || !(id->valuedouble >= 1) ||
            id->valuedouble > 9007199254740991.0 ||
            floor(id->valuedouble) != id->valuedouble) {
            r = hutch_err_set(err, -EBADMSG, "%s id must be a positive integer",
                              t->valuestring);
            goto fail;
        }
        m->id = (int64_t)id->valuedouble;
        if (search) {
            m->tool = NULL;
        } else if (!cJSON_IsString(tool) || !printable_name(tool->valuestring)) {
            r = hutch_err_set(err, -EBADMSG,
                              "tool_call tool must be a printable string of 1-%u bytes",
                              (unsigned)HUTCH_MAX_QUALIFIED_NAME);
            goto fail;
        } else {
            m->tool = tool->valuestring;
        }
        m->args = cJSON_GetObjectItemCaseSensitive(m->root, "args");
        if (m->args && cJSON_IsNull(m->args))
            m->args = NULL;
        if (m->args && !cJSON_IsObject(m->args)) {
            r = hutch_err_set(err, -EBADMSG, "%s args must be an object",
                              t->valuestring);
            goto fail;
        }
    } else if (strcmp(t->valuestring, "done") == 0) {
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(m->root, "ok"), *status,
                    *files;
        m->type = HUTCH_MSG_DONE;
        if (!cJSON_IsBool(ok)) {
            r = hutch_err_set(err, -EBADMSG, "done needs a boolean \"ok\"");
            goto fail;
        }
        m->ok = cJSON_IsTrue(ok);
        m->status = -1;
        status = cJSON_GetObjectItemCaseSensitive(m->root, "status");
        if (status) {
            if (!cJSON_IsNumber(status) || status->valuedouble < 0 ||
                status->valuedouble > 255 ||
                status->valuedouble != (double)(int)status->valuedouble ||
                (status->valueint == 0) != m->ok) {
                r = hutch_err_set(err, -EBADMSG,
                                  "done \"status\" must be an exit status from 0 to "
                                  "255, 0 exactly when ok");
                goto fail;
            }
            m->status = status->valueint;
        }
        files = cJSON_GetObjectItemCaseSensitive(m->root, "files");
        if (files && !cJSON_IsBool(files)) {
            r = hutch_err_set(err, -EBADMSG, "done \"files\" must be a boolean");
            goto fail;
        }
        m->files = files ? cJSON_IsTrue(files) : -1;
        m->result = cJSON_GetObjectItemCaseSensitive(m->root, "result");
        m->error = cJSON_GetObjectItemCaseSensitive(m->root, "error");
        if (!m->ok && !cJSON_IsObject(m->error)) {
            r = hutch_err_set(err, -EBADMSG,
                              "done with ok=false needs an error object");
            goto fail;
        }
    } else {
        r = hutch_err_set(err, -EBADMSG, "unknown message type \"%.64s\"",
                          t->valuestring);
        goto fail;
    }
    return 0;
fail:
    cJSON_Delete(m->root);
    m->root = NULL;
    return r;
}

void hutch_msg_free(struct hutch_msg *m)
{
    cJSON_Delete(m->root);
    memset(m, 0, sizeof(*m));
}

char *hutch_wire_encode(const cJSON *msg, size_t *len)
{
    char *s = cJSON_PrintUnformatted(msg);
    size_t n;
    char *out;
    if (!s)
        return NULL;
    n = strlen(s);
    out = realloc(s, n + 2);
    if (!out) {
        free(s);
        return NULL;
    }
    out[n] = '\n';
    out[n + 1] = '\0';
    *len = n + 1;
    return out;
}
