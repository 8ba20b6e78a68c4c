/* exec_args.h — execute_code's arguments, declared once.  One row per
 * argument in exec_args.c's table (its name, JSON type and constraints,
 * description, and where it lands in struct hutch_exec_args); from that
 * table come both the tool's inputSchema (tools/list) and the checking and
 * parsing of a call's arguments into the typed request.  Adding an argument
 * is a row there and, when it needs one, a field of the request.
 *
 * Not here: what the arguments mean to an execution (job.c; the ceilings
 * timeout_ms and output_bytes are clamped to are job.c's), the rest of the
 * tool's definition (mcp_tools.c), running it (mcp_exec.c).  `hutch run`
 * takes flags, not these arguments (cmd_run.c).
 *
 * Pure functions; no state, no locks. */
#ifndef HUTCH_EXEC_ARGS_H
#define HUTCH_EXEC_ARGS_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "job.h"

/* A call's arguments, typed.  Strings point into the cJSON they were parsed
 * from, which must outlive this; hutch_exec_args_free releases the rest. */
struct hutch_exec_args {
    /* language, code, files + nfiles, inputs + ninputs, output_dir,
     * workspace, timeout_ms, output_bytes; the other fields are left 0. */
    struct hutch_job_req job;
    int trace; /* list every tool call in the result */
};

/* What this server offers, as the tool's definition shows it: the host
 * folders (the policy names some: `inputs` and `output_dir` are shown), and
 * the maxima shown for timeout_ms and output_bytes.  A call above a maximum
 * is not refused: job.c gives it the ceiling and the result says so. */
struct hutch_exec_args_offer {
    int host_paths;
    uint64_t timeout_ms_max;
    uint64_t output_bytes_max;
};

/* execute_code's inputSchema; NULL when out of memory. */
cJSON *hutch_exec_args_schema(const struct hutch_exec_args_offer *offer);

/* Checks `args` (a JSON object) against the table and fills `a` (zeroed
 * first).  0, or a negative errno-style code with err's message ready for
 * the model ("execute_code: \"timeout_ms\" must be a positive integer");
 * `a` then holds nothing to free.  When several arguments are wrong, the
 * first in the table's order is named, files and inputs last. */
int hutch_exec_args_parse(const cJSON *args, struct hutch_exec_args *a,
                          struct hutch_err *err);

/* Releases what hutch_exec_args_parse allocated (the files' tar, the
 * inputs); `a` may be zeroed or already freed. */
void hutch_exec_args_free(struct hutch_exec_args *a);

#endif
