/* result_files.h — how the files an execution left in /work/out reach an
 * MCP client: images as image content, small text files inline, the rest
 * as resource_links (resources.h), and a line naming each file. */
#ifndef HUTCH_RESULT_FILES_H
#define HUTCH_RESULT_FILES_H

#include <stddef.h>

#include <cjson/cJSON.h>

#include "buf.h"
#include "resources.h"
#include "result.h"

/* For the files of `tar` (an execution's validated /work/out tar), in tar
 * order: appends a content item each to `items` (none for a dropped
 * file), a line each to `text` ("path (N bytes, mime): how it comes"), and
 * to the entry of `files` (structuredContent.files: [{path, size}], as
 * result_json.c renders `list`: entry i is list->v[i]) for its path:
 * "delivery" ("image", "inline", "link" or "dropped"),
 * "mimeType", and "uri" + "expires" for a link or "reason" for a dropped
 * file.  `rs` NULL: nothing is linked (a file that would be is dropped,
 * saying why).  Never fails: what cannot be delivered is named with the
 * reason. */
void hutch_result_files(const void *tar, size_t len, struct hutch_resources *rs,
                        const char *principal, cJSON *items,
                        const struct hutch_file_list *list, cJSON *files,
                        struct hutch_buf *text);

/* The MIME type of a file: from its first bytes for images (PNG, JPEG,
 * GIF, WebP), else from its name's extension; "application/octet-stream"
 * when neither says. */
const char *hutch_result_mime(const char *path, const void *data, size_t size);

#endif
