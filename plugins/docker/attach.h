/* attach.h — a container's attach stream as the four streams of sbio.h.
 *
 * hutch-init --attach (plugins/init/init.c) speaks frames (mux.h) on its
 * stdin and stdout; the engine carries them over one hijacked connection
 * (api.h's dk_api_hijack), multiplexed with init's stderr in the engine's
 * own 8-byte frames.  A pump thread per sandbox moves the bytes between
 * that connection and four socket pairs whose other ends the core reads
 * and writes as it does a local sandbox's fds.  The connection is the only
 * thing between hutch and the sandbox: nothing is a path on hutch's host,
 * and a local unix socket, a TCP or a TLS engine are one code path. */
#ifndef HUTCH_DOCKER_ATTACH_H
#define HUTCH_DOCKER_ATTACH_H

#include "api.h"
#include "sbio.h"

struct dk_attach;

/* Attach to container `id` (created, not yet started: nothing it says is
 * lost) and start the pump; io adopts the core-facing ends (sbio_adopt).
 * 0, or an error with nothing left. */
int dk_attach_open(struct dk_attach **out, const struct dk_api *api, const char *id,
                   struct sbio *io, struct hutch_err *err);

/* What the container wrote on its own stderr (hutch-init's errors before
 * the runner started), up to len-1 bytes, NUL-terminated. */
void dk_attach_diag(struct dk_attach *a, char *out, size_t len);

/* Stop the pump and close the connection (NULL is fine).  The core-facing
 * ends belong to io: sbio_close() closes them. */
void dk_attach_close(struct dk_attach *a);

#endif
