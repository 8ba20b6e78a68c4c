/* log.h — diagnostics on stderr, one line each, with a level threshold;
 * text or JSON lines (see log.c for the JSON shape). */
#ifndef HUTCH_LOG_H
#define HUTCH_LOG_H

#include <cjson/cJSON.h>

#include "hutch-executor.h"

enum hutch_log_format { HUTCH_LOG_TEXT, HUTCH_LOG_JSON };

void hutch_log_set_level(enum hutch_log_level level);
enum hutch_log_level hutch_log_get_level(void);
/* One -v: one level more, up to debug. */
void hutch_log_more(void);
/* "text" or "json" (NULL: text); -1 for anything else. */
int hutch_log_set_format_name(const char *name);
enum hutch_log_format hutch_log_get_format(void);
void hutch_log(enum hutch_log_level level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* What a command says whatever the threshold (where it listens, why it
 * cannot start): as text "WHO: MESSAGE" ("WHO: warning: MESSAGE" for a
 * warning), as JSON a line of that level with `fields` (borrowed, may be
 * NULL) added. */
void hutch_log_say(enum hutch_log_level level, const char *who, cJSON *fields,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#define hutch_error(...) hutch_log(HUTCH_LOG_ERROR, "hutch", __VA_ARGS__)
#define hutch_warn(...)  hutch_log(HUTCH_LOG_WARN, "hutch", __VA_ARGS__)
#define hutch_info(...)  hutch_log(HUTCH_LOG_INFO, "hutch", __VA_ARGS__)
#define hutch_debug(...) hutch_log(HUTCH_LOG_DEBUG, "hutch", __VA_ARGS__)

#endif
