/* log.c — diagnostics on stderr.  One write(2) per line so lines from
 * concurrent threads and from sandbox helpers do not interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static enum hutch_log_level threshold = HUTCH_LOG_WARN;

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

void hutch_log(enum hutch_log_level level, const char *who, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    char line[2048];
    va_list ap;
    int n;

    if (level > threshold)
        return;
    n = snprintf(line, sizeof(line), "%s: %s: ", who ? who : "hutch",
                 names[(unsigned)level < 4 ? level : 3]);
    if (n < 0 || (size_t)n >= sizeof(line))
        return;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    n = (int)strnlen(line, sizeof(line) - 2);
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        return;
}
