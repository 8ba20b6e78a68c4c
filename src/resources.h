/* resources.h — result files kept for a while, fetched by uri with MCP
 * resources/read (the other end of the resource_link items in an
 * execute_code result; see result_files.h). */
#ifndef HUTCH_RESOURCES_H
#define HUTCH_RESOURCES_H

#include <stddef.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "util.h"

struct hutch_resources;

/* An empty store.  ttl_ms: how long a file stays fetchable (0: the default,
 * HUTCH_MCP_LINK_TTL_MS).  dir: NULL keeps the files in memory; an
 * absolute path keeps them in that directory (created 0700; it must be
 * ours and not writable by others), where every hutch given the same
 * directory finds them (replicas). */
int hutch_resources_new(unsigned ttl_ms, const char *dir, struct hutch_resources **out,
                        struct hutch_err *err);
void hutch_resources_free(struct hutch_resources *rs);

/* The ttl from HUTCH_RESOURCE_TTL_MS (1000 up to the default), or the
 * default; -EINVAL with the reason for another value. */
int hutch_resources_ttl_from_env(unsigned *ttl_ms, struct hutch_err *err);

/* Keeps a copy of `size` bytes (a file of `path` in /work/out) for
 * `principal`; the uri it is fetched by goes into uri (an unguessable
 * hutch://files/… name) and its expiry (wall clock) into *expires.  When
 * the store is full, makes room by dropping the oldest file of the
 * principal that holds the most (resources.c, "Shares"): one principal's
 * flood drops its own files, not another's share.  -EFBIG when the file is over
 * HUTCH_MCP_LINK_MAX_FILE, -ENOMEM. */
int hutch_resources_put(struct hutch_resources *rs, const char *principal,
                        const char *path, const char *mime, const void *data,
                        size_t size, char *uri, size_t urilen, time_t *expires,
                        struct hutch_err *err);

/* resources/read: {"contents": [{uri, mimeType, text | blob}]} for a live
 * file of `principal`; NULL with -ENOENT (unknown, expired, dropped for
 * room, or another principal's: one answer for all) or -ENOMEM. */
cJSON *hutch_resources_read(struct hutch_resources *rs, const char *principal,
                            const char *uri, struct hutch_err *err);

/* resources/list: {"resources": [{uri, name, mimeType, size}]}, the live
 * files of `principal`, newest first. */
cJSON *hutch_resources_list(struct hutch_resources *rs, const char *principal);

/* The ttl in effect, for messages. */
unsigned hutch_resources_ttl_ms(const struct hutch_resources *rs);

#endif
