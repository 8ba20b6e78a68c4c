/* workspace.h — workspaces: files that stay between executions.
 *
 * An execution that names a workspace finds in /work/out/workspace what the
 * previous successful execution of that workspace left there; when it ends
 * with exit status 0, what that folder holds then is saved.  The folder is
 * inside /work/out because that is what every executor hands back (the
 * plugin ABI's get_archive), through the same judge and caps as every
 * result: no executor needs to know about workspaces.  Its files are not
 * result files: the core takes them out of the result before anyone sees
 * it.
 *
 * Store: DIR/<hex of the principal>/<name>.tar (the folder as an
 * uncompressed tar) beside <name>.lock, and <name>.taint when an execution
 * the policy's taint rule had marked saved it (see hutch_ws_split).  DIR is
 * --workspaces, else $HUTCH_WORKSPACES, else /var/lib/hutch/workspaces for root, else
 * $XDG_STATE_HOME/hutch/workspaces ($HOME/.local/state/hutch/workspaces).
 * A save writes a temporary file, fsyncs it and renames it over the old
 * one: a crash at any point leaves the previous content.  One execution
 * at a time holds a workspace (a record lock on its lock file, and a claim
 * within the process: workspace.c says why not flock); a second one is
 * refused, not queued.  A workspace unused for the policy's idle_s is
 * removed (when any workspace of the store is opened, and by `hutch
 * workspace list`).
 *
 * What does not live here: where in an execution these are called (job.c)
 * and the command line (cmd_workspace.c).
 *
 * Threads: a struct hutch_ws belongs to one execution; different ones may
 * be used from different threads at once (the claims are under a mutex). */
#ifndef HUTCH_WORKSPACE_H
#define HUTCH_WORKSPACE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "hutch_archive.h"
#include "policy.h"
#include "result.h"

struct hutch_ws;

/* The store directory (see above) into out; created with its parents
 * (0700) when `create`. */
int hutch_ws_store(const char *flag, int create, char *out, size_t len,
                   struct hutch_err *err);
/* 0 when `name` is a valid workspace name, else -EINVAL and why.  The
 * same rule as a JSON Schema pattern (with HUTCH_WORKSPACE_NAME_MAX as its
 * maxLength), for execute_code's inputSchema. */
int hutch_ws_check_name(const char *name, struct hutch_err *err);
#define HUTCH_WS_NAME_PATTERN "^[A-Za-z0-9_][A-Za-z0-9_.-]*$"

/* Opens and locks workspace `name` of `principal` (refused with -EBUSY while
 * another execution holds it; with -EDQUOT when it does not exist yet and
 * the principal has pol->max_count).  Expired workspaces of the store are
 * removed first. */
int hutch_ws_open(const char *store, const char *principal, const char *name,
                  const struct hutch_policy_workspaces *pol, struct hutch_ws **out,
                  struct hutch_err *err);
/* Adds what the workspace holds to `*tar` (created when NULL, capped at
 * tar_max) under HUTCH_WORKSPACE_DIR_IN_SANDBOX. */
int hutch_ws_load(struct hutch_ws *w, struct hutch_tar **tar, size_t tar_max,
                  struct hutch_err *err);
/* Splits the judged tar of /work/out: `workspace/…` leaves `out_tar` and
 * `files` (the listing of out_tar); then, when `save`, becomes the
 * workspace's new content: refused with -E2BIG over pol->max_bytes (the
 * previous content stays).  `taint` (NULL: none) is what tainted the
 * execution that saves (govern.h): kept in <name>.taint, written before
 * the content, and never removed but with the workspace, so that every
 * later execution that opens it starts tainted.  out_dir, when not NULL,
 * receives the rest. */
int hutch_ws_split(struct hutch_ws *w, struct hutch_buf *out_tar,
                   struct hutch_file_list *files, int save, const char *taint,
                   const char *out_dir, struct hutch_err *err);
/* What tainted the execution that last saved the workspace (its mark), or
 * NULL: an execution that opens a tainted workspace starts tainted. */
const char *hutch_ws_taint(const struct hutch_ws *w);
/* Unlocks. */
void hutch_ws_close(struct hutch_ws *w);

/* The workspaces of `principal` (NULL: every principal), expired ones
 * removed first when idle_s > 0: fn(arg, principal, name, bytes, mtime,
 * tainted), tainted 1 when the workspace has a taint mark. */
typedef void (*hutch_ws_fn)(void *arg, const char *principal, const char *name,
                            uint64_t bytes, int64_t mtime, int tainted);
int hutch_ws_list(const char *store, const char *principal, uint64_t idle_s,
                  hutch_ws_fn fn, void *arg, struct hutch_err *err);
/* Deletes one (-ENOENT when there is none, -EBUSY while an execution holds
 * it). */
int hutch_ws_delete(const char *store, const char *principal, const char *name,
                    struct hutch_err *err);
/* The stored tar of one, caller frees *tar. */
int hutch_ws_read(const char *store, const char *principal, const char *name,
                  char **tar, size_t *len, struct hutch_err *err);

#endif
