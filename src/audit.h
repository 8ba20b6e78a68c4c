/* audit.h — the audit log: one JSON line per policy decision and per
 * execution, appended to a file (--audit FILE) or written to stderr.
 *
 * Secrets: no function here takes a bearer token, and none should ever be
 * passed in `reason` or `extra`; tool arguments go through hutch_audit_args
 * first, which by default keeps only their names and the type and size of
 * each value (an argument is the agent's data: a message, a query, a
 * customer's record), and with values on replaces every value the policy
 * marks secret.  Thread-safe; a line is built outside the lock and written with
 * one write(2), so concurrent lines never interleave. */
#ifndef HUTCH_AUDIT_H
#define HUTCH_AUDIT_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "caps.h"
#include "hutch-executor.h"

struct hutch_audit;

/* Its caps (HUTCH_AUDIT_*) are in caps.h. */

/* Opens FILE for appending (O_APPEND|O_CLOEXEC, 0600, created if missing),
 * or stderr when NULL.  Caller frees with hutch_audit_close. */
int hutch_audit_open(const char *file, struct hutch_audit **out, struct hutch_err *err);
void hutch_audit_close(struct hutch_audit *a);
/* Would hutch_audit_open(file) succeed?  Checked without making anything
 * (hutch serve --check-config): an existing FILE is opened for appending
 * and closed; a missing one needs a writable directory to be made in.
 * 0 (also for NULL: stderr), or why not in err. */
int hutch_audit_check(const char *file, struct hutch_err *err);
/* Log rotation (SIGHUP): reopen the file by name, so lines go to the new
 * file once the old one was moved away.  On failure the old file stays in
 * use and -errno is returned.  No-op (0) for stderr. */
int hutch_audit_reopen(struct hutch_audit *a);

/* Append one line:
 *   {"time": "2025-01-02T03:04:05.678Z", "event": ..., "principal": ...,
 *    "execution": ..., "tool": ..., "decision": ..., "reason": ...,
 *    "duration_ms": ..., <members of extra>}
 * event: "tool_call" | "execution" | "execute_decision" | "policy_reload" |
 * "auth" (not checked, so new events need no change here).  NULL strings
 * and a negative duration_ms are written as null, so every line has the
 * same keys.  Members of `extra` whose names are one of the keys above are
 * skipped (an argument cannot forge a decision).  Strings that are not
 * valid UTF-8 are repaired with U+FFFD.  Returns 0, -EINVAL (no event),
 * -ENOMEM, or the write error when the line was dropped (full disk, a pipe
 * full for HUTCH_AUDIT_WRITE_MS); dropped lines are counted. */
int hutch_audit_log(struct hutch_audit *a, const char *event, const char *principal,
                    const char *execution, const char *tool, const char *decision,
                    const char *reason, double duration_ms, const cJSON *extra);
/* Lines dropped since open. */
uint64_t hutch_audit_dropped(struct hutch_audit *a);

/* Whether hutch_audit_args writes argument values (off by default; the
 * operator's --audit-values). */
void hutch_audit_set_values(struct hutch_audit *a, int on);

/* A tool call's arguments as the audit log shows them.  Values off: an
 * object keeps its member names, each value replaced by what it is
 * ("<string, 12 bytes>", "<number>", "<boolean>", "<array, 3 items>",
 * "<object, 2 members>"; null stays null; a member is_secret marks reads
 * "[redacted]"), anything else is described whole.  Values on:
 * hutch_audit_redact.  NULL on NULL args or out of memory.  Caller frees. */
cJSON *hutch_audit_args(const struct hutch_audit *a, const cJSON *args,
                        int (*is_secret)(const void *arg, const char *key),
                        const void *arg);

/* Deep copy of args with the value of every object member for which
 * is_secret(arg, name) returns 1 replaced by "[redacted]" (at any depth up
 * to HUTCH_AUDIT_MAX_DEPTH), and strings longer than
 * HUTCH_AUDIT_MAX_STRING bytes cut, at a character boundary, with "…".
 * The copy is at most about a line (HUTCH_AUDIT_MAX_LINE) of JSON: past
 * that, the rest of an array or object is one "[N more items left out]"
 * (an object's under the key "…").  is_secret may be NULL (nothing is secret).  NULL on
 * NULL args or out of memory.  Caller frees with cJSON_Delete. */
cJSON *hutch_audit_redact(const cJSON *args,
                          int (*is_secret)(const void *arg, const char *key),
                          const void *arg);

#endif
