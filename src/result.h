/* result.h — an execution's result as typed data, for the layers above to
 * render: the record of its tool calls, the files it left in /work/out,
 * the runner's error, and the summary of the calls a client sees.
 *
 * exec.c and calls.c fill these; result_json.c renders them as the JSON
 * of structuredContent and `hutch run --json`, mcp_tools.c as the text a
 * model reads.  Nothing above reads a result back out of JSON.
 *
 * Why a summary: code mode exists so that intermediate data stays out of
 * the model's context; one entry per call made a 300-call run answer with
 * 22 KB of trace (issue 12).  The trace stays available: in the audit log
 * always, in the result when the request asks (`trace: true`, `hutch run
 * --json --trace`).
 *
 * Not here: recording the calls (calls.c), rendering (result_json.c,
 * mcp_tools.c), output cuts (output.c).  No state; a call log is shared
 * by the workers of one execution under calls.c's lock. */
#ifndef HUTCH_RESULT_H
#define HUTCH_RESULT_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "caps.h"

struct hutch_audit;

/* One tool call as recorded: strings malloc'd (tool and outcome may be
 * NULL only when out of memory; error is NULL for a call that went ok). */
struct hutch_call_rec {
    int64_t id;
    char *tool;    /* the "server.tool" it resolved to, or as asked */
    char *outcome; /* "ok", or the error code ("denied", "unfinished", …) */
    char *error;   /* the message of a failed call */
    double duration_ms;
};

/* Every call of an execution, in the order they were answered (at most
 * HUTCH_WIRE_MAX_TOOL_CALLS: calls.c refuses more). */
struct hutch_call_log {
    struct hutch_call_rec *v;
    size_t n, cap;
};

/* Appends a call (copies the strings; error is kept only when outcome is
 * not "ok").  -ENOMEM and nothing appended when out of memory. */
int hutch_call_log_add(struct hutch_call_log *l, int64_t id, const char *tool,
                       const char *outcome, const char *error, double duration_ms);
void hutch_call_log_free(struct hutch_call_log *l);

/* One regular file of /work/out, in tar order. */
struct hutch_result_file {
    char *path; /* malloc'd, relative to /work/out */
    uint64_t size;
};
struct hutch_file_list {
    struct hutch_result_file *v;
    size_t n, cap;
};
int hutch_file_list_add(struct hutch_file_list *l, const char *path, uint64_t size);
/* Removes entry i, keeping the order. */
void hutch_file_list_remove(struct hutch_file_list *l, size_t i);
void hutch_file_list_clear(struct hutch_file_list *l);

/* The runner's error ({type, message, traceback} on the wire) as a result
 * shows it: type, message, and the line of the user's code the error was
 * raised at (its innermost frame in main.py or main.js), when the
 * traceback names one.  The traceback itself is in stderr, once. */
struct hutch_result_error {
    int set;       /* the runner reported an error */
    char *type;    /* malloc'd, NULL when the runner gave none */
    char *message; /* malloc'd, NULL when the runner gave none */
    long line;     /* 0: the traceback names no line of the user's code */
};
/* From the runner's error object (e may be NULL: nothing set).  -ENOMEM
 * when out of memory (e is then left unset). */
int hutch_result_error_set(struct hutch_result_error *e, const cJSON *error);
void hutch_result_error_free(struct hutch_result_error *e);

/* The summary of a call log:
 *   count, ok, errors;
 *   tools: one line per tool, first seen first, up to HUTCH_RESULT_MAX_TOOLS;
 *   other_calls: calls of tools past those (counted in count, ok, errors);
 *   failed: the first HUTCH_RESULT_MAX_FAILED failed calls (pointers into
 *           the log, valid while it is);
 *   failed_omitted: failed calls not listed. */
struct hutch_tool_sum {
    const char *tool; /* the log's string, "" for none */
    uint64_t count, ok;
    double total_ms; /* rounded to 0.01 ms */
};
struct hutch_calls_summary {
    uint64_t count, ok, errors, other_calls, failed_omitted;
    size_t ntools, nfailed;
    struct hutch_tool_sum tools[HUTCH_RESULT_MAX_TOOLS];
    const struct hutch_call_rec *failed[HUTCH_RESULT_MAX_FAILED];
};
void hutch_result_summarize(const struct hutch_call_log *calls,
                            struct hutch_calls_summary *s);

/* One call as its JSON record {id, tool, outcome, error?, duration_ms}
 * (the trace's entries, the audit's tool_trace calls).  Caller frees. */
cJSON *hutch_call_rec_json(const struct hutch_call_rec *c);

/* Writes the whole trace to the audit log as "tool_trace" records of at
 * most HUTCH_AUDIT_TRACE_CALLS calls each ({"first": index of the first,
 * "count": calls in all, "calls": [...]}, strings cut as in
 * hutch_audit_redact), so every record fits an audit line.  Nothing for
 * no calls. */
void hutch_result_trace_audit(struct hutch_audit *a, const char *principal,
                              const char *execution,
                              const struct hutch_call_log *calls);

#endif
