/* result_json.h — an execution's result (struct hutch_exec_result, filled
 * by exec.c and job.c) rendered as the JSON object of execute_code's
 * structuredContent and of `hutch run --json`: one renderer for both, so
 * the two outputs cannot drift.
 *
 * Not here: the text a model reads (mcp_tools.c), the files' content
 * items (result_files.c).  No state: callable from any thread. */
#ifndef HUTCH_RESULT_JSON_H
#define HUTCH_RESULT_JSON_H

#include <cjson/cJSON.h>

#include "exec.h"

/* {exit_code, stdout, stderr, stdout_omitted_bytes, stderr_omitted_bytes,
 *  result, files, duration_ms, timed_out, oom, executor, warm, tool_calls,
 *  trace?, stdout_truncated, stderr_truncated, error?, message?, notes?}
 *
 * tool_calls is the summary (result.h); the whole per-call `trace` only
 * when `trace` is non-zero.  stdout and stderr are what was kept, with
 * the marker of what was left out (output.h) between head and tail.
 *
 * `value`, when not NULL, is the result's value, taken (not copied: a
 * value may be most of an execution's memory budget); NULL: a copy of
 * res->result (JSON null when none).  `files`, when not NULL, is the
 * files array, taken (mcp_tools.c annotates it with how each file is
 * delivered); NULL: hutch_result_files_json(res).  Caller frees; NULL
 * when out of memory (value and files are freed then). */
cJSON *hutch_result_json(const struct hutch_exec_result *res, int trace, cJSON *value,
                         cJSON *files);

/* The files of res as [{path, size}], in tar order.  Caller frees. */
cJSON *hutch_result_files_json(const struct hutch_exec_result *res);

/* The calls summary (result.h) as {count, ok, errors, tools: [{tool,
 * count, ok, errors, total_ms}], other_calls, failed: [call records],
 * failed_omitted}.  Caller frees. */
cJSON *hutch_result_summary_json(const struct hutch_calls_summary *s);

#endif
