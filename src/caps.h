/* caps.h — every fixed cap on input from outside, every default limit and
 * every timing, in one place.  Anything read from an agent, a file, a
 * plugin, an upstream server or a sandbox is bounded by one of these.
 *
 * Not here: the sizes of read chunks and caches (they bound nothing), the
 * sizes of text quoted in a message (beside the message), and the ABI's
 * HUTCH_ERR_MSG (hutch-executor.h).  Plugins are built apart and include
 * this file only where they already did. */
#ifndef HUTCH_CAPS_H
#define HUTCH_CAPS_H

#include <limits.h> /* PATH_MAX */

/* Names.  A tool is called as "server.tool" (the qualified name) from a
 * sandbox and matched so by the policy; MCP asks for tool names of at most
 * 128 characters, hutch takes twice that. */
#define HUTCH_MAX_SERVER_NAME 64  /* a key of mcpServers */
#define HUTCH_MAX_TOOL_NAME   256 /* a tool's own name, as its server lists it */
/* "server.tool" */
#define HUTCH_MAX_QUALIFIED_NAME (HUTCH_MAX_SERVER_NAME + 1 + HUTCH_MAX_TOOL_NAME)
#define HUTCH_MAX_PRINCIPAL_NAME 64 /* a policy principal's name */
#define HUTCH_MAX_EXECUTOR_NAME  64 /* a plugin's executor name */

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

/* hutch's own memory, per execution (budget.h): what the program makes
 * hutch hold (its messages as parsed, its tool calls' arguments and
 * results, the answers it has not read) passes this, and what asked fails. */
#define HUTCH_EXEC_MEMORY_BUDGET (128u << 20)
/* ... and all executions of one hutch process together pass this
 * ($HUTCH_MEMORY_BUDGET_MB overrides it, from 1 MiB up to the MAX). */
#define HUTCH_PROCESS_MEMORY_BUDGET_MB     1024u
#define HUTCH_PROCESS_MEMORY_BUDGET        ((size_t)HUTCH_PROCESS_MEMORY_BUDGET_MB << 20)
#define HUTCH_PROCESS_MEMORY_BUDGET_MAX_MB (1u << 20)
/* After a burst (all executions together held more than TRIM_AFTER), the
 * heap is trimmed once they hold nothing any more (malloc_trim), and once
 * more DELAY_MS later, when what their requests held is freed too, so that
 * hutch's resident memory comes back down; allocations from
 * MMAP_THRESHOLD up are mapped on their own and unmapped when freed. */
#define HUTCH_MALLOC_TRIM_AFTER     (16u << 20)
#define HUTCH_MALLOC_TRIM_DELAY_MS  1000 /* and again this long after */
#define HUTCH_MALLOC_MMAP_THRESHOLD (128u << 10)
/* At most this many malloc arenas per CPU (glibc's default is 8): each
 * arena a thread made keeps its own free pages and part-used pages
 * resident, so the more arenas, the higher hutch's resident memory settles
 * after load (the docker soak: +1.8 MiB of anonymous memory over the start
 * in 5 minutes, with the in-use bytes unchanged). */
#define HUTCH_MALLOC_ARENAS_PER_CPU 2
/* One JSON message from outside (a client, an upstream server) may not
 * take more than this to parse: its text is 16 MiB at most, but a tree of
 * "[0,0,...]" costs 40 times its text. */
#define HUTCH_JSON_MAX_TREE (64u << 20)

/* Wire protocol (runner <-> core).  MAX_PENDING: what the runner has not
 * read yet, in exec.c's queue of messages and in calls.c's of tool results. */
#define HUTCH_WIRE_MAX_LINE       (8u << 20) /* one NDJSON message */
#define HUTCH_WIRE_MAX_DEPTH      64         /* JSON nesting */
#define HUTCH_WIRE_MAX_TOOL_CALLS 10000      /* per execution */
#define HUTCH_WIRE_READY_MS       30000 /* runner start-up (a loaded machine: generous) */
#define HUTCH_WIRE_GONE_MS        5000 /* a runner that failed to start: its exit report */
#define HUTCH_WIRE_MAX_PENDING    (64u << 20) /* unread by the runner, then give up */
/* A start for a pool: nobody waits on it, and the data flavour's runner
 * imports its packages before it says ready (seconds on gVisor). */
#define HUTCH_WIRE_READY_POOL_MS 120000
/* Tool calls of one execution running at once, each on a worker thread of
 * the execution's own pool (calls.c); past them, calls wait in a queue. */
#define HUTCH_CALL_WORKERS 32

/* Program output kept per stream, its first and last bytes (output.h); the
 * rest is drained and counted.  MAX: the most any setting may ask.  MODEL:
 * execute_code's default, since its output goes into a model's context:
 * 8 KiB a stream is about 2,000 tokens, enough for a page of results or a
 * traceback with the lines before it, and two streams plus the result stay
 * well under what clients show a model of one tool result.  hutch run's
 * default is MAX (a shell reads it, not a model). */
#define HUTCH_OUTPUT_MAX_BYTES   (1u << 20)
#define HUTCH_OUTPUT_MODEL_BYTES (8u << 10)
/* What runsc may write to its log file per gVisor sandbox (a tmpfs of
 * this size: past it, log lines are dropped, runsc goes on). */
#define HUTCH_GVISOR_LOG_MAX_BYTES (1u << 20)

/* Default limits of one execution. */
#define HUTCH_DEFAULT_TIMEOUT_MS 30000
#define HUTCH_MAX_TIMEOUT_MS     (3600u * 1000u)
/* execute_code's timeout_ms and output_bytes are read up to this (past
 * it the number a double holds is no longer exact); job.c clamps them to
 * the server's ceiling. */
#define HUTCH_EXEC_ARG_COUNT_MAX 1000000000000000ull /* 1e15 */
#define HUTCH_DEFAULT_MEMORY_MB  512
#define HUTCH_MAX_MEMORY_MB      (64u * 1024u)
#define HUTCH_DEFAULT_PIDS       128
#define HUTCH_DEFAULT_WORK_MB    256
#define HUTCH_DEFAULT_TMP_MB     64
#define HUTCH_DEFAULT_OPEN_FILES 256
/* Signals queued at once in one sandbox (RLIMIT_SIGPENDING of the runner
 * on every executor: timers and sigqueue() take kernel memory each). */
#define HUTCH_SANDBOX_SIGPENDING 1024
/* The local executor's Python zygote (plugins/local/zygote.c): the
 * sandboxes one zygote forks before it retires (siblings share its hash
 * secret and address layout; the next zygote draws new ones), how long
 * its start may take, when one that could not start is tried again, and
 * the room an address-space limit (no memory
 * cgroup) must leave above the zygote's own size for its forks. */
#define HUTCH_ZYGOTE_FORKS    100
#define HUTCH_ZYGOTE_START_MS 30000
#define HUTCH_ZYGOTE_RETRY_MS 10000 /* after a zygote could not start */
#define HUTCH_ZYGOTE_AS_SLACK (128ull << 20)
/* hutch-init's view for the program in a container (plugins/init/init.c):
 * the tmpfs holding the runners' copy and /etc's three engine-written
 * files, and the most it copies of each of those files. */
#define HUTCH_SANDBOX_VIEW_BYTES (16u << 20)
#define HUTCH_SANDBOX_ETC_BYTES  (64u << 10)
/* One line hutch-init says on its ctl stream (plugins/common/sbio.c holds
 * it until its newline; a longer one ends the conversation). */
#define HUTCH_SANDBOX_CTL_LINE 128
/* hutch-init's egress forwarder (plugins/init/forward.c): connections it
 * relays at once (one more is answered 503 and closed; twice what one
 * execution's proxy takes at once, HUTCH_EGRESS_MAX_CONCURRENT, so that
 * the proxy's own refusal, which says why, is what a program past that
 * sees), and the buffer of each direction of one.  Also the backlog of the
 * executors' unix listener init connects to. */
#define HUTCH_SANDBOX_EGRESS_CONNS (2 * HUTCH_EGRESS_MAX_CONCURRENT)
#define HUTCH_SANDBOX_EGRESS_BUF   HUTCH_EGRESS_RELAY_BUF
/* The backlog of init's port: connections the kernel completes while init
 * is not scheduled (a busy machine, the sandbox's CPU quota spent); past
 * it a client's SYN is dropped and its connect() waits a second. */
#define HUTCH_SANDBOX_EGRESS_BACKLOG 256

/* MCP, both directions. */
#define HUTCH_MCP_MAX_MESSAGE         (16u << 20)  /* one JSON-RPC message */
#define HUTCH_MCP_MAX_INFLIGHT        64           /* concurrent requests per session */
#define HUTCH_MCP_LIST_TTL_MS         300000u      /* 2026 ttlMs of fixed lists */
#define HUTCH_MCP_MAX_FILES_OUT_BYTES (1u << 20)   /* inline in a result */
#define HUTCH_MCP_MAX_OUTPUT_TEXT     (256u << 10) /* search_tools' text */
#define HUTCH_HTTP_MAX_BODY           HUTCH_MCP_MAX_MESSAGE
#define HUTCH_UPSTREAM_MAX_MESSAGE    (16u << 20)
#define HUTCH_UPSTREAM_MAX_TOOLS      2000  /* per server */
#define HUTCH_UPSTREAM_MAX_PAGES      100   /* tools/list pages */
#define HUTCH_UPSTREAM_CALL_MS        60000 /* per tools/call; "timeout_ms" per server */
/* A tool call from a program gets at most this share (%) of the execution's
 * remaining time, so a call that hangs fails with a `timeout` error the
 * program still has time to catch, instead of taking the run down. */
#define HUTCH_CALL_SHARE_OF_REMAINING 80
#define HUTCH_UPSTREAM_START_MS       30000
#define HUTCH_UPSTREAM_MAX_SERVERS    64
#define HUTCH_SEARCH_MAX_RESULTS      100
#define HUTCH_MCP_MAX_DEPTH           128 /* JSON nesting of one message */
/* The whole text block of an execute_code result: both streams at their
 * most (each already cut, head and tail), and room for the result's JSON;
 * a longer result is cut. */
#define HUTCH_MCP_MAX_RESULT_TEXT (2 * HUTCH_OUTPUT_MAX_BYTES + (256u << 10))
/* The summary of an execution's tool calls (result.h): tools listed, and
 * failed calls listed one by one; the rest are counted. */
#define HUTCH_RESULT_MAX_TOOLS  32
#define HUTCH_RESULT_MAX_FAILED 5

/* Files of /work/out in an execute_code result (result_files.c): images
 * and small text files inline, up to HUTCH_MCP_MAX_FILES_OUT_BYTES per
 * result; the rest as resource_links to a store (resources.c) bounded per
 * process, fetched with resources/read until they expire.  A linked
 * file's base64 must fit in one JSON-RPC message (HUTCH_MCP_MAX_MESSAGE,
 * HTTP's SSE queue). */
#define HUTCH_MCP_INLINE_TEXT_MAX (32u << 10)     /* a text file inline */
#define HUTCH_MCP_MAX_FILE_ITEMS  100             /* files delivered per result */
#define HUTCH_MCP_FILES_TEXT_MAX  (64u << 10)     /* the lines naming them */
#define HUTCH_MCP_LINK_MAX_FILE   (10u << 20)     /* a linked file */
#define HUTCH_MCP_LINKS_MAX_BYTES (256u << 20)    /* the store, per process */
#define HUTCH_MCP_LINKS_MAX_COUNT 1000            /* files in the store */
#define HUTCH_MCP_LINK_TTL_MS     (3600u * 1000u) /* a link's life */
#define HUTCH_MCP_LINK_MIN_TTL_MS 1000 /* $HUTCH_RESOURCE_TTL_MS may shorten it */

/* Metrics (metrics.c): label values kept apart per family; past these,
 * new names are counted as "other".  Servers: every configured one, plus
 * "" (no known server) and "other". */
#define HUTCH_METRICS_MAX_EXECUTORS 16
#define HUTCH_METRICS_MAX_SERVERS   (HUTCH_UPSTREAM_MAX_SERVERS + 2)
#define HUTCH_METRICS_MAX_BYTES     (1u << 20) /* one /metrics answer */
/* /readyz probes the executor at most this often (a probe may ask a
 * daemon; /readyz needs no token). */
#define HUTCH_READY_PROBE_MS 1000u
/* One executor's runtime line per language ("Python 3.11.2"), as its
 * plugin's runtime() says it; longer is cut. */
#define HUTCH_RUNTIME_MAX 96
/* The packages an executor's flavour offers, one line (hutch-executor.h's
 * packages()), and the whole runtime clause of execute_code's description. */
#define HUTCH_PACKAGES_MAX     160
#define HUTCH_RUNTIME_DESC_MAX (2 * HUTCH_RUNTIME_MAX + HUTCH_PACKAGES_MAX + 96)
/* What hutch changed in a request (a value above a ceiling), said in the
 * result: a few lines. */
#define HUTCH_RESULT_NOTES_MAX 512

/* HTTP transport (http*.c).  The caps marked $ are the defaults of the
 * environment variables of the same name (man/hutch.1), each within
 * [MIN, MAX]. */
/* 2025-era sessions ($): all principals together, and each principal's
 * share.  A principal at its share that opens one more loses its own
 * oldest idle session; a full table takes the oldest idle session of
 * whoever holds the most (never from one holding no more than the one
 * asking).  A 2026-07-28 request holds no session. */
#define HUTCH_HTTP_MAX_SESSIONS               256u
#define HUTCH_HTTP_MAX_SESSIONS_PER_PRINCIPAL 32u
#define HUTCH_HTTP_SESSIONS_MAX               65536u /* either, at most */
/* An idle session ends after this ($HUTCH_HTTP_SESSION_IDLE_MS): clients
 * start a new one on the 404 (the spec says they must). */
#define HUTCH_HTTP_SESSION_IDLE_MS     (10u * 60u * 1000u)
#define HUTCH_HTTP_SESSION_IDLE_MIN_MS 1000u
#define HUTCH_HTTP_SESSION_IDLE_MAX_MS (24u * 3600u * 1000u)
#define HUTCH_HTTP_SWEEP_MS            10000u /* or half the idle time */
/* Connections ($HUTCH_HTTP_MAX_CONNECTIONS): a thread each. */
#define HUTCH_HTTP_MAX_CONNECTIONS     128u
#define HUTCH_HTTP_MAX_CONNECTIONS_MIN 8u
#define HUTCH_HTTP_MAX_CONNECTIONS_MAX 4096u
/* Of one client address ($HUTCH_HTTP_MAX_CONNECTIONS_PER_ADDRESS; 0: the
 * whole limit, for a reverse proxy in front): MHD refuses past it. */
#define HUTCH_HTTP_CONNECTIONS_PER_ADDRESS_SHARE 2u /* default: half the limit */
/* Until a connection has sent a complete request head it is
 * unauthenticated: it must finish that head within HEAD_TIMEOUT_MS of
 * connecting or of its previous response ($HUTCH_HTTP_HEAD_TIMEOUT_MS);
 * such connections take at most 1/UNAUTH_SHARE of the limit, at most
 * UNAUTH_PER_ADDRESS from one address (an IPv6 /64), the oldest closed to
 * make room for a newer one (never one whose whole head waits to be read,
 * HEAD_PEEK, nor one younger than ROOM_GRACE_MS: the tick closes it
 * later); the rest of the limit is room for authenticated clients.  One
 * that authenticated may wait for its next head up to CONN_TIMEOUT_S
 * (the timer does not restart on each byte). */
#define HUTCH_HTTP_HEAD_TIMEOUT_MS     5000u
#define HUTCH_HTTP_HEAD_TIMEOUT_MIN_MS 100u
#define HUTCH_HTTP_HEAD_TIMEOUT_MAX_MS 300000u
#define HUTCH_HTTP_UNAUTH_SHARE        2u
#define HUTCH_HTTP_UNAUTH_PER_ADDRESS  16u
#define HUTCH_HTTP_HEAD_PEEK           4096u /* a whole head there: not closed for room */
#define HUTCH_HTTP_ROOM_GRACE_MS       1000u /* nor one younger than this */
/* 1/ROOM_RESERVE_SHARE of the limit is kept free (MHD refuses a connection
 * past it, and counts one being closed until its thread ends).  While it
 * is not, one older than ROOM_PRESSED_GRACE_MS without its whole head is
 * closed for room, and a newcomer from an address that already has one
 * waiting without its head is closed at once (http_guard.h). */
#define HUTCH_HTTP_ROOM_RESERVE_SHARE    4u
#define HUTCH_HTTP_ROOM_PRESSED_GRACE_MS 100u
#define HUTCH_HTTP_GUARD_LOG_MS          10000u /* says what it closed, at most this often */
#define HUTCH_HTTP_CONN_TIMEOUT_S        60u /* idle keep-alive, stalled upload */
#define HUTCH_HTTP_CONN_MEMORY           (64u << 10) /* MHD's pool per connection */
#define HUTCH_HTTP_TICK_MS               100u   /* every wait looks at stop, client */
#define HUTCH_HTTP_KEEPALIVE_MS          15000u /* SSE comment after this silence */
/* Accepting (http.c): a connection is handed to libmicrohttpd only while
 * it has room for it (connections it counts, and those handed over in the
 * last ACCEPT_SETTLE_MS that it has not started yet), at most ACCEPT_BATCH
 * at a time; the rest wait in the listen backlog. */
#define HUTCH_HTTP_ACCEPT_BATCH     16u
#define HUTCH_HTTP_ACCEPT_SETTLE_MS 100u
#define HUTCH_HTTP_ACCEPT_WAIT_MS   10u /* no room: looked at again after */
/* Non-final messages (progress) waiting for a slow SSE reader. */
#define HUTCH_HTTP_SSE_MAX_QUEUED HUTCH_MCP_MAX_MESSAGE
/* Request bodies held at once, all connections together. */
#define HUTCH_HTTP_MAX_BUFFERED (4ull * HUTCH_HTTP_MAX_BODY)

/* Upstream servers (upstream.c).  Timings: restart backoff; a server up
 * STABLE_MS restarts the backoff at its next crash; a child gets
 * STDIN_GRACE_MS after its stdin closes and TERM_GRACE_MS after SIGTERM,
 * DEAD_GRACE_MS after it closed stdout; DRAIN_MS of stderr is read after
 * stdout closed; NOTE_MS for notifications/cancelled, replies and DELETE
 * over HTTP; an SSE stream may linger SSE_LINGER_MS after our response;
 * HTTP transfers notice hutch stopping within POLL_MS. */
#define HUTCH_UPSTREAM_MAX_CONFIG     (1u << 20) /* the servers file */
#define HUTCH_UPSTREAM_MAX_ARGS       1024       /* "args" of one server */
#define HUTCH_UPSTREAM_MAX_ENV        1024       /* "env" of one server */
#define HUTCH_UPSTREAM_MAX_HEADERS    64         /* "headers" of one server */
#define HUTCH_UPSTREAM_MAX_URL        4096
#define HUTCH_UPSTREAM_MAX_EXPANDED   8192 /* a string after ${VAR} expansion */
#define HUTCH_UPSTREAM_MAX_CURSOR     4096 /* a tools/list nextCursor */
#define HUTCH_UPSTREAM_MAX_SESSION_ID 256  /* an Mcp-Session-Id it sends */
#define HUTCH_UPSTREAM_STDERR_LINE    1000 /* bytes of a stderr line logged */
#define HUTCH_UPSTREAM_GARBAGE_LOGGED 5    /* bad lines logged per child */
#define HUTCH_UPSTREAM_MAX_OUTQ       (2 * (size_t)HUTCH_UPSTREAM_MAX_MESSAGE)
#define HUTCH_UPSTREAM_BACKOFF_MIN_MS 500
#define HUTCH_UPSTREAM_BACKOFF_MAX_MS 30000
#define HUTCH_UPSTREAM_STABLE_MS      10000
#define HUTCH_UPSTREAM_STDIN_GRACE_MS 500
#define HUTCH_UPSTREAM_TERM_GRACE_MS  1000
#define HUTCH_UPSTREAM_DEAD_GRACE_MS  1000
#define HUTCH_UPSTREAM_DRAIN_MS       200
#define HUTCH_UPSTREAM_NOTE_MS        1000
/* How long a stdio server may take to answer the server/discover probe
 * before hutch takes its silence for the 2025 era and sends initialize
 * (2026-07-28's dual-era rule; SDKs wait about as long). */
#define HUTCH_UPSTREAM_PROBE_MS 10000
/* Rounds of an upstream\'s input_required (questions relayed to the user)
 * before a tools/call gives up. */
#define HUTCH_UPSTREAM_INPUT_ROUNDS  4
#define HUTCH_UPSTREAM_SSE_LINGER_MS 100
#define HUTCH_UPSTREAM_POLL_MS       100
/* Resuming a 2025-era POST whose SSE stream the server closed before its
 * response (GET with Last-Event-ID): at most this many times per call, each
 * after the stream's "retry:" delay (at most RETRY_MAX_MS; RETRY_MS when it
 * gave none), and never past the call's own deadline.  EVENT_ID: the
 * longest SSE "id:" kept to send back. */
#define HUTCH_UPSTREAM_MAX_RESUMES  32
#define HUTCH_UPSTREAM_RETRY_MS     1000
#define HUTCH_UPSTREAM_RETRY_MAX_MS 10000
#define HUTCH_UPSTREAM_MAX_EVENT_ID 256
/* SEP-2243 (2026-07-28): the x-mcp-header parameters of one tool mirrored
 * into Mcp-Param-<Name> headers on tools/call, the longest <Name>, and the
 * longest value sent (after its =?base64?...?= encoding); a longer argument
 * fails the call rather than go without its header. */
#define HUTCH_UPSTREAM_MAX_PARAM_HEADERS 32
#define HUTCH_UPSTREAM_MAX_PARAM_NAME    128
#define HUTCH_UPSTREAM_MAX_PARAM_VALUE   4096
/* Idle connections kept per HTTP upstream server, for the next call. */
#define HUTCH_UPSTREAM_HTTP_POOL 8

/* The tool catalog (catalog.c): what upstream tool definitions may hold,
 * and what search shows of them.  SIG_*: Python/TypeScript signatures
 * (catalog_sig.c). */
#define HUTCH_CATALOG_MAX_TOOLS                                                        \
    ((size_t)HUTCH_UPSTREAM_MAX_TOOLS * HUTCH_UPSTREAM_MAX_SERVERS)
#define HUTCH_CATALOG_MAX_IDENT     128   /* bytes of a Python/TS identifier */
#define HUTCH_CATALOG_MAX_WARNINGS  200   /* kept; the rest are counted */
#define HUTCH_CATALOG_WARNING_BYTES 1024  /* of one warning */
#define HUTCH_SIG_MAX_DEPTH         16    /* subschemas followed, $ref included */
#define HUTCH_SIG_MAX_BYTES         8192  /* of one signature */
#define HUTCH_SIG_MAX_STEPS         20000 /* subschemas visited for one */
#define HUTCH_SIG_MAX_PROPS         256   /* properties of one object */
#define HUTCH_SIG_MAX_UNION         16    /* members of one union */
#define HUTCH_SIG_MAX_ENUM          20    /* longer: shown as its base type */
#define HUTCH_SEARCH_DESC_SHORT     200   /* one-line description in results */
#define HUTCH_SEARCH_DESC_FULL      8192  /* full description in results */
#define HUTCH_SEARCH_DESC_BYTES     4096  /* of a description, searched */
#define HUTCH_SEARCH_NAME_BYTES     256   /* of a parameter name or title */
#define HUTCH_SEARCH_MAX_WORD       48    /* bytes of a word; longer are cut */
#define HUTCH_SEARCH_FIELD_WORDS    512   /* words kept per searched field */
#define HUTCH_SEARCH_MAX_QUERY      1024  /* bytes of a query */
#define HUTCH_SEARCH_QUERY_WORDS    32
/* A search (search_tools, tools.search, a program's dir(tools)) waits for
 * upstreams still starting (hutch serve answers initialize before they are
 * up) until this long after the first search that found one; later
 * searches answer at once and name the servers still starting. */
#define HUTCH_SEARCH_START_WAIT_MS   5000
#define HUTCH_SEARCH_DEFAULT_RESULTS 10
/* search_tools without `detail` answers within this many bytes of text
 * (discover.c): the best matches whole, the rest by name. */
#define HUTCH_SEARCH_BRIEF_TEXT 2048
#define HUTCH_SEARCH_BRIEF_DESC 160 /* a description's first sentence, there */
/* hutch serve --direct-tools: how often the upstreams' generation is looked
 * at for notifications/tools/list_changed (mcp_direct.c). */
#define HUTCH_DIRECT_WATCH_MS 250

/* A tool's return type in its signatures (catalog_sig.c): a declared
 * outputSchema or an observed shape, spelled out until it passes this
 * many bytes, then shown shallower, then as dict / Any. */
#define HUTCH_SIG_MAX_RETURN_BYTES 1024

/* Observed result shapes (shape.c): the JSON shape of what a tool without
 * an outputSchema returned, merged over its calls.  Types and field names
 * only, never values.  One result is walked at most MAX_VISITS values
 * (past them it is not observed at all), MAX_ITEMS elements of an array
 * and MAX_ITEMS values of a map, MAX_DEPTH levels deep (deeper: the bare
 * type); an object with more than MAX_KEYS keys, or a key that is not a
 * plain identifier (at most KEY_BYTES of [A-Za-z0-9_], not starting with a
 * digit), is a map (dict[str, V]) whose keys are not kept.  A tool's merged
 * shape keeps at most MAX_NODES nodes (past them the deepest levels
 * collapse); at most MAX_TOOLS (principal, tool) shapes are kept, all
 * principals together (past them the least recently observed of the
 * principal holding the most gives way).
 * The cache file (--shapes) is at most FILE_BYTES and is written at most
 * every SAVE_MS while calls come in, and at exit. */
#define HUTCH_SHAPE_MAX_VISITS    4096
#define HUTCH_SHAPE_MAX_ITEMS     32
#define HUTCH_SHAPE_MAX_DEPTH     6
#define HUTCH_SHAPE_MAX_KEYS      32
#define HUTCH_SHAPE_MAX_KEY_BYTES 64
#define HUTCH_SHAPE_MAX_NODES     128
#define HUTCH_SHAPE_MAX_TOOLS     1024
#define HUTCH_SHAPE_FILE_BYTES    (8u << 20)
#define HUTCH_SHAPE_SAVE_MS       5000
/* Call and object counts stop here (they stay exact below). */
#define HUTCH_SHAPE_MAX_COUNT 1000000000ULL

/* JSON Schema of tool arguments (schema.c, and catalog_sig.c through its
 * $ref resolver). */
#define HUTCH_SCHEMA_MAX_DEPTH         32  /* subschemas on one path, $ref included */
#define HUTCH_SCHEMA_MAX_POINTER       512 /* bytes of a $ref */
#define HUTCH_SCHEMA_MAX_POINTER_INDEX 100000 /* an array index in a $ref */
/* Subschema visits per validation: a base for small arguments plus a share
 * per value node, so big arrays of records still pass while a schema whose
 * anyOf/$ref web fans out exponentially stops within tens of milliseconds. */
#define HUTCH_SCHEMA_BASE_STEPS 100000UL
#define HUTCH_SCHEMA_NODE_STEPS 16UL
#define HUTCH_SCHEMA_MAX_STEPS  10000000UL

/* Path normalisation (path.c). */
/* Rounds of decode + normalise before giving up: each round peels one
 * layer of percent-encoding, the last one must change nothing. */
#define HUTCH_PATH_MAX_ROUNDS 8
/* Raw input accepted: PATH_MAX once fully encoded (%XX is three bytes for
 * one) with room for a second layer on a few characters. */
#define HUTCH_PATH_MAX_INPUT (4 * PATH_MAX)
/* Symlinks followed in one resolution, as the kernel (MAXSYMLINKS). */
#define HUTCH_PATH_MAX_LINKS 40

/* The policy engine (policy.c, policy_lua.c, policy_table.c). */
#define HUTCH_POLICY_MAX_SOURCE (1u << 20)  /* bytes of policy source */
#define HUTCH_POLICY_MEM_CAP    (16u << 20) /* per Lua state */
#define HUTCH_POLICY_HOOK_MS    50 /* CPU time of one on_execute / on_tool_call */
/* How long the user has to answer the policy's question about a tool call
 * (on_tool_call's "ask"): the call's own timeout when it has one, else the
 * default; never more than the maximum.  No answer: denied. */
#define HUTCH_APPROVAL_DEFAULT_MS 60000
#define HUTCH_APPROVAL_MAX_MS     600000
/* The arguments shown in that question (approval.c), one line per
 * argument: ARGS_TEXT bytes of them in all, shared evenly, each at least
 * ARG_MIN (past ARGS_TEXT / ARG_MIN arguments the rest are counted, not
 * shown); a line longer than its share shows its head and its tail and how
 * many bytes between were left out.  A key or value that a tool call could
 * hide after 400 harmless bytes is in a head or a tail. */
#define HUTCH_APPROVAL_ARGS_TEXT 2048
#define HUTCH_APPROVAL_ARG_MIN   96
/* Tasks (the 2026-07-28 tasks extension): how long a task's record stays
 * readable with tasks/get after it ended, the poll interval hutch
 * suggests, and how many task records a process keeps (the oldest ended
 * one goes first; a running one is never dropped: past the cap with all
 * running, a new execution runs without a task). */
#define HUTCH_TASK_TTL_MS  (3600u * 1000u)
#define HUTCH_TASK_POLL_MS 1000
#define HUTCH_TASKS_MAX    1000
/* Executions at once (admit.h).  The total is sized from the machine: PER_CPU
 * executions per CPU (most of an execution's time is spent waiting for its
 * tool calls or sleeping), no more than one per HUTCH_DEFAULT_MEMORY_MB of
 * memory, at most MAX_TOTAL ($HUTCH_MAX_EXECUTIONS overrides it).  A
 * principal runs at most 1/PRINCIPAL_SHARE of the total when the policy
 * lists principals and says nothing (concurrency.executions), and keeps
 * DEFAULT_QUEUED waiting (concurrency.queued, at most MAX_QUEUED, which
 * also bounds all queues together).  A waiting execution gives up after
 * WAIT_MS. */
#define HUTCH_ADMIT_PER_CPU         8
#define HUTCH_ADMIT_MAX_TOTAL       4096
#define HUTCH_ADMIT_PRINCIPAL_SHARE 4
#define HUTCH_ADMIT_DEFAULT_QUEUED  16
#define HUTCH_ADMIT_MAX_QUEUED      1000
#define HUTCH_ADMIT_WAIT_MS         (600u * 1000u)
#define HUTCH_POLICY_LOAD_MS        1000        /* CPU time running the file once */
#define HUTCH_POLICY_MAX_STATES     32          /* Lua states per policy */
#define HUTCH_POLICY_WAIT_MS        1000        /* for a free state */
#define HUTCH_POLICY_MAX_RULES      1000        /* globs in tools.allow, tools.deny */
#define HUTCH_POLICY_MAX_GLOB       256         /* bytes of one glob */
#define HUTCH_POLICY_MAX_LOAD       (64u << 10) /* source given to load() */
#define HUTCH_POLICY_MAX_PATHS      64
#define HUTCH_POLICY_MAX_PRINCIPALS 1000
#define HUTCH_POLICY_MAX_SECRETS    256
/* A name matched against globs that is not a tool name: the subject of
 * hutch.glob(), an argument name checked against `secret`. */
#define HUTCH_POLICY_MAX_NAME       512
#define HUTCH_POLICY_MIN_TOKEN      16 /* bytes of a principal's token */
#define HUTCH_POLICY_MAX_TOKEN      1024
#define HUTCH_POLICY_ARGS_MAX_BYTES (4u << 20) /* strings in args, for hooks */
#define HUTCH_POLICY_ARGS_MAX_NODES 10000
#define HUTCH_POLICY_ARGS_MAX_DEPTH 64
#define HUTCH_POLICY_MAX_PIDS       65536
#define HUTCH_POLICY_MAX_CPUS       1024
#define HUTCH_POLICY_MAX_RATE       1000000 /* per minute */
#define HUTCH_POLICY_MAX_EXECUTORS  8       /* tables in executor_options */
#define HUTCH_POLICY_MAX_OPTIONS    16      /* options of one executor */
#define HUTCH_POLICY_MAX_OPT_NAME   32
#define HUTCH_POLICY_MAX_OPT_VALUE  256

/* Egress (egress.h, the policy's `egress`).  RULES: patterns in
 * egress.allow; PATTERN: bytes of one; HOST: a DNS name (RFC 1035's 253).
 * max_bytes (both directions, every connection of an execution together)
 * and max_connections (over the execution's life) default to DEFAULT_*,
 * and the policy may set them up to MAX_*. */
#define HUTCH_EGRESS_MAX_RULES               256
#define HUTCH_EGRESS_MAX_PATTERN             300
#define HUTCH_EGRESS_MAX_HOST                253
#define HUTCH_EGRESS_DEFAULT_MAX_BYTES       (50ull << 20)
#define HUTCH_EGRESS_MAX_BYTES               (16ull << 30)
#define HUTCH_EGRESS_DEFAULT_MAX_CONNECTIONS 64
#define HUTCH_EGRESS_MAX_CONNECTIONS         4096
/* Connections of one execution open at once, each on a thread of its own;
 * one more is refused like one past max_connections. */
#define HUTCH_EGRESS_MAX_CONCURRENT 32
/* A request head (request line and headers, blank line included), its
 * header lines, and the method token.  Past them: 400. */
#define HUTCH_EGRESS_MAX_HEAD    (16u << 10)
#define HUTCH_EGRESS_MAX_HEADERS 100
#define HUTCH_EGRESS_MAX_METHOD  32
/* The whole head must arrive within HEAD_MS of the connection (a peer that
 * says nothing holds a thread no longer); a connect to one address gives up
 * after CONNECT_MS; hutch's own answer (an error, "200 Connection
 * established") waits at most REPLY_MS for a peer that does not read. */
#define HUTCH_EGRESS_HEAD_MS    5000
#define HUTCH_EGRESS_CONNECT_MS 10000
#define HUTCH_EGRESS_REPLY_MS   1000
/* Addresses of one name tried (getaddrinfo's answer, or the test
 * resolver's), and the bytes read or written at once in each direction. */
#define HUTCH_EGRESS_MAX_ADDRS 16
/* Connections exec.c takes from a sandbox's egress listener in one turn of
 * its loop, so that a program opening many cannot starve its output. */
#define HUTCH_EGRESS_ACCEPT_BATCH 16
#define HUTCH_EGRESS_RELAY_BUF    (16u << 10)
/* Secrets (egress.secrets): entries, a header's name, a value's bytes
 * (after ${NAME} expansion, or the file's), and the bytes of a file read
 * for one (a value plus a newline or two). */
#define HUTCH_EGRESS_MAX_SECRETS     64
#define HUTCH_EGRESS_MAX_HEADER_NAME 64
#define HUTCH_EGRESS_MAX_SECRET      8192
/* The deployment's CA (egress_tls.c): leaf certificates kept in memory (the
 * least recently used one is dropped past it), how long a leaf is valid and
 * how long before that one is made anew, and the bytes of the system's CA
 * bundle and of HUTCH_EGRESS_TRUST_FILE read. */
#define HUTCH_EGRESS_MAX_LEAVES   128
#define HUTCH_EGRESS_LEAF_DAYS    7
#define HUTCH_EGRESS_LEAF_RENEW_S (24 * 3600)
#define HUTCH_EGRESS_MAX_BUNDLE   (4u << 20)
/* An intercepted request's head, rewritten (the secret's line added). */
#define HUTCH_EGRESS_MAX_INNER_OUT                                                     \
    (2 * HUTCH_EGRESS_MAX_HEAD + HUTCH_EGRESS_MAX_SECRET + HUTCH_EGRESS_MAX_HOST + 256)
/* Egress rules execute_code's description names; the rest are counted. */
#define HUTCH_DISCOVER_EGRESS_RULES 20

/* hutch serve --config: the file's size. */
#define HUTCH_SERVE_CONFIG_MAX_BYTES (64u << 10)

/* Rate limits (rate.c).  Principals tracked at once; the least recently
 * used one is forgotten beyond that.  Forgetting loses nothing when that
 * principal made no request for 61 s, which is always so unless more than
 * this many principals are active in the same minute. */
#define HUTCH_RATE_MAX_PRINCIPALS 1024
/* Hash buckets of the principals' table: a few principals per chain at the
 * maximum above. */
#define HUTCH_RATE_BUCKETS 2048

/* The audit log (audit.c). */
/* Longest line written (bytes, newline included).  A line with an `extra`
 * that would make it longer is written without it and with
 * "extra_dropped": true. */
#define HUTCH_AUDIT_MAX_LINE (64u << 10)
/* Strings from args are cut to this many bytes, then "…" is appended. */
#define HUTCH_AUDIT_MAX_STRING 256
/* Deeper values (args, extra) are replaced by "[too deep]". */
#define HUTCH_AUDIT_MAX_DEPTH 32
/* principal, execution, tool, decision and reason are cut to this. */
#define HUTCH_AUDIT_MAX_FIELD 1024
/* Tool calls per "tool_trace" record (an execution's whole trace): with
 * strings cut to HUTCH_AUDIT_MAX_STRING, 50 calls fit a line. */
#define HUTCH_AUDIT_TRACE_CALLS 50
/* How long one line may wait for a full pipe or terminal before it is
 * dropped (and counted); after a drop, later lines do not wait at all
 * until one gets through. */
#define HUTCH_AUDIT_WRITE_MS 1000

/* Warm pools (src/pool.c). */
#define HUTCH_POOL_MAX_SIZE        64     /* sandboxes of one class */
#define HUTCH_POOL_MAX_CLASSES     16     /* classes kept warm at once */
#define HUTCH_POOL_REFILL_THREADS  2      /* refill threads that always run */
#define HUTCH_POOL_EXIT_THREADS    8      /* sandboxes destroyed at once at exit */
#define HUTCH_POOL_MAX_IDLE_MS     300000 /* an idle sandbox is replaced */
#define HUTCH_POOL_MIN_IDLE_MS     1000   /* $HUTCH_POOL_MAX_IDLE_MS at least */
#define HUTCH_POOL_CLASS_IDLE_MS   600000 /* an unused on-demand class ends */
#define HUTCH_POOL_REFILL_DEFER_MS 250    /* a refill waits for running jobs */
#define HUTCH_POOL_BACKOFF_MIN_MS  500    /* after a failed refill */
#define HUTCH_POOL_BACKOFF_MAX_MS  30000
#define HUTCH_POOL_DEFAULT_SIZE    2 /* hutch serve, per language */
/* More refill threads start while more sandboxes are missing than threads
 * are free, up to $HUTCH_POOL_REFILL_MAX (default: the CPUs, at least
 * REFILL_THREADS, at most REFILL_MAX_THREADS); one with nothing to do for
 * REFILL_LINGER_MS ends. */
#define HUTCH_POOL_REFILL_MAX_THREADS 16
#define HUTCH_POOL_REFILL_LINGER_MS   10000
/* A class that ran dry grows: each take that finds it empty adds one
 * sandbox to keep warm, up to GROW_FACTOR times its size (and
 * HUTCH_POOL_MAX_SIZE); after SHRINK_MS without such a take it gives one
 * back ($HUTCH_POOL_SHRINK_MS, at least SHRINK_MIN_MS), down to its size. */
#define HUTCH_POOL_GROW_FACTOR   4
#define HUTCH_POOL_SHRINK_MS     60000
#define HUTCH_POOL_SHRINK_MIN_MS 1000
#define HUTCH_POOL_SHRINK_MAX_MS 3600000
/* Shares between principals: a principal that took a sandbox within
 * SHARE_MS ($HUTCH_POOL_SHARE_MS, SHARE_MIN_MS..SHARE_MAX_MS) and has fewer
 * jobs under way than another is left one idle box of a class by it.  The
 * pool tracks SHARE_SLOTS principals; one past them (all with jobs under
 * way) takes as if the policy listed none. */
#define HUTCH_POOL_SHARE_MS     30000
#define HUTCH_POOL_SHARE_MIN_MS 1000
#define HUTCH_POOL_SHARE_MAX_MS 3600000
#define HUTCH_POOL_SHARE_SLOTS  64

/* The janitor (janitor.h): how long it waits for a dead hutch to be reaped
 * before it gives up, and when it sweeps again after the first sweep. */
#define HUTCH_JANITOR_REAP_MS   600000
#define HUTCH_JANITOR_AGAIN1_MS 3000
#define HUTCH_JANITOR_AGAIN2_MS 15000

/* Plugins. */
#define HUTCH_MAX_PLUGINS 64

/* Workspaces (workspace.c): a name is 1..HUTCH_WORKSPACE_NAME_MAX of
 * [A-Za-z0-9_.-], not starting with "." or "-".  The policy's
 * workspaces.max_bytes (the tar of the folder, headers included) is at most
 * the result files' own cap: a workspace comes out with them. */
#define HUTCH_WORKSPACE_NAME_MAX          64
#define HUTCH_WORKSPACE_DIR_IN_SANDBOX    "out/workspace" /* relative to /work */
#define HUTCH_WORKSPACE_DEFAULT_MAX_BYTES (16u << 20)
#define HUTCH_WORKSPACE_MAX_BYTES         HUTCH_TAR_OUT_MAX_BYTES
#define HUTCH_WORKSPACE_DEFAULT_MAX_COUNT 16            /* per principal */
#define HUTCH_WORKSPACE_MAX_COUNT         1000          /* the policy's ceiling */
#define HUTCH_WORKSPACE_DEFAULT_IDLE_S    (30u * 86400) /* unused for 30 days */
#define HUTCH_WORKSPACE_MAX_IDLE_S        (3650u * 86400)
/* An execution that finds its workspace's lock taken tries again for this
 * long before it says "in use": the lock may be held for an instant by
 * something that is not an execution (another execution's idle sweep,
 * `hutch workspace delete` of another name reading it, a probe). */
#define HUTCH_WORKSPACE_BUSY_RETRY_MS 1000
/* What a workspace's taint mark (<name>.taint) holds at most: the source
 * that tainted the execution that saved it, for messages. */
#define HUTCH_WORKSPACE_TAINT_MAX 192

/* Exit statuses of `hutch run` for hutch's own outcomes. */
#define HUTCH_EXIT_TIMEOUT 124
#define HUTCH_EXIT_ERROR   125
#define HUTCH_EXIT_OOM     137

/* The Docker executor: endpoints in HUTCH_DOCKER_ENDPOINTS, or in one
 * policy class's executor_options.docker.endpoints. */
#define HUTCH_DOCKER_MAX_ENDPOINTS 16

#endif
