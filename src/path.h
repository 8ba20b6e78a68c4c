/* path.h — path normalisation for policy decisions.  A path is decided on
 * only after it reached a fixed point: percent-decoding (%2e%2e, %2f…),
 * backslashes are not separators, "." and ".." resolved lexically,
 * repeated slashes collapsed; repeated until nothing changes.  Then, for
 * the part that exists on the host, symlinks are resolved (realpath-style,
 * component by component, bounded), so the decision and the later use see
 * the same file. */
#ifndef HUTCH_PATH_H
#define HUTCH_PATH_H

#include <stddef.h>

#include "hutch-executor.h"

/* Lexical normalisation of an absolute path to its fixed point.  -EINVAL
 * for a relative path, a NUL byte, invalid percent-encoding, or a result
 * longer than len. */
int hutch_path_normalize(const char *in, char *out, size_t len, struct hutch_err *err);
/* hutch_path_normalize, then resolve symlinks in the longest existing
 * prefix and append the rest.  The result is what the decision is made on
 * and what must be used afterwards. */
int hutch_path_resolve(const char *in, char *out, size_t len, struct hutch_err *err);
/* 1 when `path` equals `dir` or lies below it (both normalised). */
int hutch_path_within(const char *path, const char *dir);

#endif
