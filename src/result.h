/* result.h — what of an execution's result reaches a client, beyond the
 * raw record: the summary of its tool calls (instead of one entry per
 * call), the whole per-call trace as bounded audit records, and the
 * runner's error without the traceback its stderr already shows.
 *
 * Why a summary: code mode exists so that intermediate data stays out of
 * the model's context; one entry per call made a 300-call run answer with
 * 22 KB of trace (issue 12).  The trace stays available: in the audit log
 * always, in the result when the request asks (`trace: true`, `hutch run
 * --json --trace`).
 *
 * Not here: recording the calls (calls.c), the text block (mcp_server.c),
 * output cuts (output.c).  No state: callable from any thread. */
#ifndef HUTCH_RESULT_H
#define HUTCH_RESULT_H

#include <cjson/cJSON.h>

struct hutch_audit;

/* The summary of `calls` (the tool_calls record: [{id, tool, outcome,
 * error?, duration_ms}]):
 *   {"count", "ok", "errors",
 *    "tools": [{"tool", "count", "ok", "errors", "total_ms"}],  first seen first
 *    "other_calls": calls of tools past the first HUTCH_RESULT_MAX_TOOLS
 *                   (counted in count, ok, errors; not listed in tools),
 *    "failed": [the first HUTCH_RESULT_MAX_FAILED failed calls, as recorded],
 *    "failed_omitted": failed calls not listed}
 * Caller frees; NULL when out of memory. */
cJSON *hutch_result_calls_summary(const cJSON *calls);

/* Writes the whole trace to the audit log as "tool_trace" records of at
 * most HUTCH_AUDIT_TRACE_CALLS calls each ({"first": index of the first,
 * "count": calls in all, "calls": [...]}, strings cut as in
 * hutch_audit_redact), so every record fits an audit line.  Nothing for
 * no calls. */
void hutch_result_trace_audit(struct hutch_audit *a, const char *principal,
                              const char *execution, const cJSON *calls);

/* The runner's error object ({type, message, traceback}) as a result shows
 * it: {type, message, line}, where line is the line of the user's code the
 * error was raised at (its innermost frame in main.py or main.js), when
 * the traceback names one.  The traceback itself is in stderr, once.
 * Caller frees. */
cJSON *hutch_result_error(const cJSON *error);

#endif
