/* exec.h — one execution, end to end: start a sandbox with a plugin, send
 * files and code, serve the runner's tool calls, collect output, the result
 * and /work/out, and destroy the sandbox. */
#ifndef HUTCH_EXEC_H
#define HUTCH_EXEC_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "buf.h"
#include "hutch-executor.h"
#include "hutch_archive.h"
#include "plugin.h"

/* Answers one tool call, on a worker thread (several run at once), within
 * timeout_ms.  Return 0 with reply->result set, or a negative code with
 * reply->code ("unknown_tool", "denied", "invalid_args", "upstream",
 * "timeout", "internal") and reply->message (malloc'd) set.  The executor
 * frees both. */
struct hutch_tool_reply {
    cJSON *result;
    const char *code; /* static string */
    char *message;
    char *tool; /* malloc'd: "server.tool" the call resolved to, or NULL */
};
typedef int (*hutch_tool_fn)(void *arg, const char *tool, const cJSON *args,
                             int timeout_ms, struct hutch_tool_reply *reply);

struct hutch_exec_req {
    const char *language;
    const char *code;
    const void *tar; /* files for /work, may be NULL */
    size_t tar_len;
    uint64_t timeout_ms;
    uint64_t memory_mb;
    uint32_t pids;
    uint32_t cpu_millis;          /* 0: no CPU limit */
    const char *executor_options; /* the policy's, JSON; NULL: none */
    uint64_t output_bytes;        /* kept per stream; 0: HUTCH_OUTPUT_MAX_BYTES */
    uint64_t files_bytes;         /* /work/out cap; 0: HUTCH_TAR_OUT_MAX_BYTES */
    const char *label;
    const char *out_dir; /* unpack /work/out here; NULL: list only */
    int skip_files;      /* nobody looks at /work/out: do not fetch it */
    int stream_fd_out;   /* live copy of stdout, -1 for none */
    int stream_fd_err;
    hutch_tool_fn tool; /* NULL: every tool is unknown */
    void *tool_arg;
    volatile int *cancel; /* set to non-zero to kill the run */
    /* Called about once a second while the job runs (progress). */
    void (*tick)(void *arg, uint64_t elapsed_ms);
    void *tick_arg;
};

struct hutch_exec_result {
    int exit_code;
    int timed_out;
    int oom;
    int ok; /* runner said done ok */
    uint64_t duration_ms;
    struct hutch_buf out, err;     /* capped copies */
    uint64_t out_total, err_total; /* bytes produced, kept or not */
    cJSON *result;                 /* owned; JSON null when none */
    cJSON *error;                  /* owned; runner's error object or NULL */
    cJSON *files;                  /* owned array of {path, size} */
    cJSON *tool_calls;             /* owned array */
    struct hutch_buf out_tar;      /* raw tar of /work/out (validated) */
    char message[HUTCH_ERR_MSG];   /* hutch's note (timeout, protocol error…) */
};

void hutch_exec_result_init(struct hutch_exec_result *res);
void hutch_exec_result_free(struct hutch_exec_result *res);

/* Runs one execution.  Returns 0 when the program ran (whatever its exit
 * status; see res), or a negative code when hutch could not run it (err
 * says why and what to do). */
int hutch_exec_run(struct hutch_plugin *plugin, const struct hutch_exec_req *req,
                   struct hutch_exec_result *res, struct hutch_err *err);

/* The result as the JSON object of `hutch run --json`; caller frees. */
cJSON *hutch_exec_result_json(const struct hutch_exec_result *res);

#endif
