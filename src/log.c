/* log.c — diagnostics on stderr, as text (the default) or as JSON lines
 * (--log-format json, or HUTCH_LOG_FORMAT=json for every command).  One
 * write(2) per line so lines from concurrent threads and from sandbox
 * helpers do not interleave.
 *
 * A JSON line is one object: {"time": RFC 3339 UTC with milliseconds,
 * "level": "error"|"warning"|"info"|"debug", "who": the component ("hutch",
 * "hutch serve", "policy", an upstream server's name …), "msg": the text},
 * plus "fields" where a caller has some.  Text that is not valid UTF-8
 * (an upstream's stderr, say) has the bad bytes replaced by U+FFFD, so
 * every line parses.
 *
 * Not here: the audit log (audit.c), its own JSON lines, to its own file. */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static enum hutch_log_level threshold = HUTCH_LOG_WARN;
static enum hutch_log_format format = HUTCH_LOG_TEXT;
static const char *const names[] = {"error", "warning", "info", "debug"};

void hutch_log_set_level(enum hutch_log_level level)
{
    threshold = level;
}

void hutch_log_more(void)
{
    if (threshold < HUTCH_LOG_DEBUG)
        threshold++;
}

enum hutch_log_level hutch_log_get_level(void)
{
    return threshold;
}

int hutch_log_set_format_name(const char *name)
{
    if (!name || !strcmp(name, "text"))
        format = HUTCH_LOG_TEXT;
    else if (!strcmp(name, "json"))
        format = HUTCH_LOG_JSON;
    else
        return -1;
    return 0;
}

enum hutch_log_format hutch_log_get_format(void)
{
    return format;
}

/* Valid UTF-8 of s (len bytes) into out (cap >= 3 * len + 1): invalid
 * sequences become U+FFFD. */
static void utf8_clean(const char *s, size_t len, char *out)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, o = 0;

    while (i < len) {
        unsigned c = p[i];
        size_t n = c < 0x80         ? 1
                   : (c >> 5) == 6  ? 2
                   : (c >> 4) == 14 ? 3
                   : (c >> 3) == 30 ? 4
                                    : 0;
        size_t k;
        unsigned cp;

        if (n == 1) {
            out[o++] = (char)c;
            i++;
            continue;
        }
        for (k = 1; n && k < n; k++)
            if (i + k >= len || (p[i + k] & 0xC0) != 0x80)
                n = 0;
        if (n) {
            cp = n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
            for (k = 1; k < n; k++)
                cp = (cp << 6) | (p[i + k] & 0x3F);
            /* overlong, surrogates, past U+10FFFF */
            if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
                (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
                (cp >= 0xD800 && cp <= 0xDFFF))
                n = 0;
        }
        if (!n) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, s + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
}

/* The message is whole in `msg`; writes one line, text or JSON. */
static void emit(enum hutch_log_level level, const char *who, int plain, cJSON *fields,
                 const char *msg)
{
    char line[2048];
    int n;

    if (format == HUTCH_LOG_JSON) {
        char clean[3 * 2048 + 1], clean_who[3 * 128 + 1], when[40];
        struct timespec ts;
        struct tm tm;
        cJSON *o = cJSON_CreateObject();
        char *text;

        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = (int)strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + n, sizeof(when) - (size_t)n, ".%03ldZ", ts.tv_nsec / 1000000L);
        utf8_clean(msg, strnlen(msg, 2047), clean);
        utf8_clean(who ? who : "hutch", strnlen(who ? who : "hutch", 128), clean_who);
        cJSON_AddStringToObject(o, "time", when);
        cJSON_AddStringToObject(o, "level", names[(unsigned)level < 4 ? level : 3]);
        cJSON_AddStringToObject(o, "who", clean_who);
        cJSON_AddStringToObject(o, "msg", clean);
        if (fields)
            cJSON_AddItemReferenceToObject(o, "fields", fields);
        text = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (text) {
            size_t len = strlen(text);
            char *nl = realloc(text, len + 2);
            if (nl) {
                nl[len] = '\n';
                if (write(STDERR_FILENO, nl, len + 1) < 0) {
                    /* nowhere left to say it */
                }
                free(nl);
            } else {
                free(text);
            }
        }
        return;
    }
    if (plain)
        n = snprintf(line, sizeof(line), "%s: %s%s\n", who ? who : "hutch",
                     level == HUTCH_LOG_WARN ? "warning: " : "", msg);
    else
        n = snprintf(line, sizeof(line), "%s: %s: %s\n", who ? who : "hutch",
                     names[(unsigned)level < 4 ? level : 3], msg);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line)) {
        n = sizeof(line) - 1;
        line[n - 1] = '\n';
    }
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}

void hutch_log(enum hutch_log_level level, const char *who, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    if (level > threshold)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    emit(level, who, 0, NULL, msg);
}

void hutch_log_say(enum hutch_log_level level, const char *who, cJSON *fields,
                   const char *fmt, ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    emit(level, who, 1, fields, msg);
}
