/* util.h — small helpers shared by the core: time, fds, files, hints. */
#ifndef HUTCH_UTIL_H
#define HUTCH_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "hutch-executor.h"

#define _cleanup_(f)    __attribute__((cleanup(f)))
#define _cleanup_free_  _cleanup_(hutch_freep)
#define _cleanup_close_ _cleanup_(hutch_closep)

void hutch_freep(void *p);
void hutch_closep(int *fd);

/* Hand ownership over: returns *pp and clears it. */
static inline void *hutch_steal(void *pp)
{
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}

uint64_t hutch_now_ms(void); /* monotonic */
/* The CPUs this process may run on (its affinity mask), at least 1. */
unsigned hutch_cpus(void);
/* Sleeps ms milliseconds, through signals. */
void hutch_sleep_ms(unsigned ms);
/* A condition variable on hutch_now_ms()'s clock, and a wait on it until
 * deadline_ms (that clock's time): ETIMEDOUT once it has passed. */
void hutch_cond_init_mono(pthread_cond_t *c);
int hutch_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t deadline_ms);
uint64_t hutch_now_us(void); /* monotonic */
int hutch_set_nonblock(int fd);
int hutch_set_cloexec(int fd);
/* Waits for `events` on fd, or for wake_fd to be readable (a close-down
 * signal), until deadline_ms (hutch_now_ms()'s clock), through EINTR: 1 fd
 * is ready, 0 the deadline passed, -1 woken or poll failed. */
int hutch_wait_fd(int fd, short events, int wake_fd, uint64_t deadline_ms);
/* Write all of buf, retrying on EINTR/short writes (blocking fds). */
int hutch_write_all(int fd, const void *buf, size_t len);
/* Replace `path` with `len` bytes, whole or not at all: a temporary file
 * beside it (mode 0600), fsync, rename, fsync of the directory.  A crash
 * at any moment leaves the old content or the new.  0, or negative with
 * err naming the path. */
int hutch_write_file_atomic(const char *path, const void *data, size_t len,
                            struct hutch_err *err);
/* Read a whole regular file, at most max bytes; caller frees *data
 * (NUL-terminated). */
int hutch_read_file(const char *path, size_t max, char **data, size_t *len,
                    struct hutch_err *err);
/* Read all of fd until EOF, at most max bytes; caller frees. */
int hutch_read_fd(int fd, size_t max, char **data, size_t *len, struct hutch_err *err);
/* The name of NULL-terminated `known` closest to k (at most 2 edits,
 * ASCII case ignored), for "did you mean" hints; NULL when none is. */
const char *hutch_suggest(const char *k, const char *const *known);
/* 16 hex characters from getrandom(). */
void hutch_random_id(char out[17]);
/* Parse a positive decimal integer within [min, max]. */
int hutch_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* The language a user named: "python" for python, python3 or py;
 * "javascript" for javascript, js, node or nodejs; "typescript" for
 * typescript or ts (any case); NULL for anything else. */
const char *hutch_lang_canon(const char *name);
/* The runtime a language runs on, which picks the runner, the sandbox
 * class, the pool and what the policy is told: "javascript" for
 * "typescript" (the JavaScript runner strips the types), else `lang`. */
const char *hutch_lang_runtime(const char *lang);

/* Untrusted text (a name a program chose, a file path from a tar) as it
 * may be shown to a person on a terminal, on one line: a newline, a tab and
 * a carriage return as "\n", "\t", "\r", every other control character
 * (C0, DEL, C1 U+0080..U+009F) and every byte that is not part of
 * well-formed UTF-8 as "\xNN", and the bidirectional controls that reorder
 * what a reader sees (U+061C, U+200E, U+200F, U+202A..U+202E,
 * U+2066..U+2069) as "\u{NNNN}".  HUTCH_ESCAPE_NAME also shows a
 * backslash as "\\", so that two names that differ show differently;
 * HUTCH_ESCAPE_TEXT keeps it (a message whose quotes are escaped already).
 * Everything else is kept.  Caller frees; NULL only when out of memory. */
enum hutch_escape { HUTCH_ESCAPE_TEXT = 0, HUTCH_ESCAPE_NAME = 1 };
char *hutch_text_escape(const char *s, enum hutch_escape how);

/* Base64 (RFC 4648, with padding).  encode: caller frees, NUL-terminated.
 * decode: ignores nothing — whitespace or a bad character is an error
 * (-EINVAL); caller frees *out. */
char *hutch_base64_encode(const void *data, size_t len);
int hutch_base64_decode(const char *s, size_t len, unsigned char **out, size_t *outlen);

#endif
