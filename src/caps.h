/* caps.h — every fixed cap on input from outside, and every default limit,
 * in one place.  Anything read from an agent, a file, a plugin or a sandbox
 * is bounded by one of these. */
#ifndef HUTCH_CAPS_H
#define HUTCH_CAPS_H

/* Code and files an agent sends in. */
#define HUTCH_MAX_CODE_BYTES  (1u << 20) /* 1 MiB of source */
#define HUTCH_MAX_INPUT_FILES 1000
#define HUTCH_MAX_INPUT_BYTES (64u << 20) /* files in, total */

/* Tar streams.  In: what the core sends into a sandbox.  Out: what comes
 * back from /work/out (untrusted). */
#define HUTCH_TAR_MAX_ENTRIES   10000
#define HUTCH_TAR_MAX_PATH      1024
#define HUTCH_TAR_MAX_DEPTH     32
#define HUTCH_TAR_MAX_NAME      255 /* one path component */
#define HUTCH_TAR_OUT_MAX_BYTES (64u << 20)
#define HUTCH_TAR_IN_MAX_BYTES  (HUTCH_MAX_INPUT_BYTES + HUTCH_MAX_CODE_BYTES)
#define HUTCH_TAR_MAX_STREAM    (HUTCH_TAR_OUT_MAX_BYTES + (16u << 20)) /* + headers */

/* Wire protocol (runner <-> core). */
#define HUTCH_WIRE_MAX_LINE       (8u << 20) /* one NDJSON message */
#define HUTCH_WIRE_MAX_DEPTH      64         /* JSON nesting */
#define HUTCH_WIRE_MAX_TOOL_CALLS 10000      /* per execution */
#define HUTCH_WIRE_READY_MS       10000      /* runner start-up */
/* Tool calls of one execution running at once, each on a worker thread of
 * the execution's own pool (calls.c); past them, calls wait in a queue. */
#define HUTCH_CALL_WORKERS 32

/* Program output kept per stream; the rest is drained and counted. */
#define HUTCH_OUTPUT_MAX_BYTES (1u << 20)

/* Default limits of one execution. */
#define HUTCH_DEFAULT_TIMEOUT_MS 30000
#define HUTCH_MAX_TIMEOUT_MS     (3600u * 1000u)
#define HUTCH_DEFAULT_MEMORY_MB  512
#define HUTCH_MAX_MEMORY_MB      (64u * 1024u)
#define HUTCH_DEFAULT_PIDS       128
#define HUTCH_DEFAULT_WORK_MB    256
#define HUTCH_DEFAULT_TMP_MB     64
#define HUTCH_DEFAULT_OPEN_FILES 256

/* MCP, both directions. */
#define HUTCH_MCP_MAX_MESSAGE         (16u << 20)  /* one JSON-RPC message */
#define HUTCH_MCP_MAX_INFLIGHT        64           /* concurrent requests per session */
#define HUTCH_MCP_MAX_FILES_OUT_BYTES (8u << 20)   /* embedded in a result */
#define HUTCH_MCP_MAX_OUTPUT_TEXT     (256u << 10) /* stdout/stderr in content */
#define HUTCH_HTTP_MAX_BODY           HUTCH_MCP_MAX_MESSAGE
#define HUTCH_HTTP_MAX_SESSIONS       256
#define HUTCH_UPSTREAM_MAX_MESSAGE    (16u << 20)
#define HUTCH_UPSTREAM_MAX_TOOLS      2000 /* per server */
#define HUTCH_UPSTREAM_MAX_PAGES      100  /* tools/list pages */
#define HUTCH_UPSTREAM_CALL_MS        60000
#define HUTCH_UPSTREAM_START_MS       30000
#define HUTCH_UPSTREAM_MAX_SERVERS    64
#define HUTCH_SEARCH_MAX_RESULTS      100

/* Plugins. */
#define HUTCH_MAX_PLUGINS 64

/* Exit statuses of `hutch run` for hutch's own outcomes. */
#define HUTCH_EXIT_TIMEOUT 124
#define HUTCH_EXIT_ERROR   125
#define HUTCH_EXIT_OOM     137

#endif
