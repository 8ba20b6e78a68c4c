/* log.h — diagnostics on stderr, one line each, with a level threshold. */
#ifndef HUTCH_LOG_H
#define HUTCH_LOG_H

#include "hutch-executor.h"

void hutch_log_set_level(enum hutch_log_level level);
enum hutch_log_level hutch_log_get_level(void);
/* One -v: one level more, up to debug. */
void hutch_log_more(void);
void hutch_log(enum hutch_log_level level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define hutch_error(...) hutch_log(HUTCH_LOG_ERROR, "hutch", __VA_ARGS__)
#define hutch_warn(...)  hutch_log(HUTCH_LOG_WARN, "hutch", __VA_ARGS__)
#define hutch_info(...)  hutch_log(HUTCH_LOG_INFO, "hutch", __VA_ARGS__)
#define hutch_debug(...) hutch_log(HUTCH_LOG_DEBUG, "hutch", __VA_ARGS__)

#endif
