/* mcp_era.h — which MCP protocol era a message belongs to, and what the
 * 2026-07-28 (stateless) era asks of a request and of a result.
 *
 * hutch serves two eras on one endpoint (stdio and HTTP alike):
 *   legacy  2025-06-18 and 2025-11-25: initialize, a session, the version
 *           agreed once (mcp_server.c keeps it in the session);
 *   modern  2026-07-28: no handshake, no session; every request names its
 *           version and the client's capabilities in params._meta, and is
 *           served from what it carries alone.
 * hutch_mcp_classify() is the one place that decides, per message, the body
 * first and the HTTP headers as a cross-check (the rules of the revision
 * and of the official SDK's dual-era entry: a request whose _meta carries
 * io.modelcontextprotocol/protocolVersion is modern, anything else legacy).
 * It also refuses what the modern era defines as protocol errors, with the
 * JSON-RPC code, data and HTTP status the revision gives them.  Before it,
 * hutch_mcp_msg_parse turns the bytes of one message into JSON-RPC (caps,
 * UTF-8, JSON cost and depth, shape), for both transports.
 *
 * Not here: dispatching a request (mcp_server.c) and reading headers off a
 * connection (http.c).  Pure functions; no state, no locks. */
#ifndef HUTCH_MCP_ERA_H
#define HUTCH_MCP_ERA_H

#include <cjson/cJSON.h>

#include "hutch-executor.h"
#include "jsonrpc.h"

#define HUTCH_MCP_META_PROTOCOL_VERSION "io.modelcontextprotocol/protocolVersion"
#define HUTCH_MCP_META_CLIENT_CAPS      "io.modelcontextprotocol/clientCapabilities"
#define HUTCH_MCP_META_CLIENT_INFO      "io.modelcontextprotocol/clientInfo"
#define HUTCH_MCP_META_SERVER_INFO      "io.modelcontextprotocol/serverInfo"
#define HUTCH_MCP_MODERN_PROTOCOL       "2026-07-28"
#define HUTCH_MCP_EXT_TASKS             "io.modelcontextprotocol/tasks"

enum hutch_mcp_era {
    HUTCH_MCP_LEGACY = 0,
    HUTCH_MCP_MODERN = 1,
};

/* The MCP request methods hutch knows, one row each of mcp_methods.def (see
 * there for the fields): which eras serve them, whether a 2025 session must
 * be initialized first, the body field Mcp-Name mirrors. */
#define MCP_ERA_2025 (1u << HUTCH_MCP_LEGACY)
#define MCP_ERA_2026 (1u << HUTCH_MCP_MODERN)
struct hutch_mcp_method {
    const char *name;
    unsigned eras;
    int init;
    const char *mirror;
};
/* The rows, in mcp_methods.def's order, and how many. */
extern const struct hutch_mcp_method hutch_mcp_methods[];
extern const size_t hutch_mcp_nmethods;
/* The row of `name`, or NULL for a method hutch does not know. */
const struct hutch_mcp_method *hutch_mcp_method_find(const char *name);

/* The HTTP request headers the era looks at; NULL when absent.  On stdio
 * there are none: classify with headers == NULL. */
struct hutch_mcp_headers {
    const char *protocol_version; /* MCP-Protocol-Version */
    const char *method;           /* Mcp-Method */
    const char *name;             /* Mcp-Name */
};

struct hutch_mcp_verdict {
    enum hutch_mcp_era era;
    /* Modern requests: the revision named in _meta and the client's
     * capabilities (both point into the message classified). */
    const char *version;
    const cJSON *client_caps;
    /* When refused: the JSON-RPC error code (the message is in err), its
     * data (owned, may be NULL) and the HTTP status to send it with. */
    int code;
    cJSON *data;
    unsigned http_status;
};

/* Decide the era of one JSON-RPC message (an object with a string method;
 * responses from the client are legacy traffic).  0: v->era says which,
 * and a modern request is well-formed and names a version hutch speaks,
 * for a method the modern era defines.  Negative (-EPROTO): refused, with
 * v->code, v->data, v->http_status and the reason in err.  Free v->data
 * with hutch_mcp_verdict_clear() in both cases. */
int hutch_mcp_classify(const cJSON *msg, const struct hutch_mcp_headers *headers,
                       struct hutch_mcp_verdict *v, struct hutch_err *err);
void hutch_mcp_verdict_clear(struct hutch_mcp_verdict *v);

/* One message from a client, parsed and judged (untrusted input: sizes,
 * UTF-8, JSON cost and depth, the JSON-RPC shape, then the era). */
struct hutch_mcp_msg {
    cJSON *json;         /* NULL when it could not be parsed */
    const cJSON *id;     /* a valid request id, or NULL */
    const char *method;  /* NULL for a response from the client */
    const cJSON *params; /* NULL or an object */
    int answer;          /* 1: a response is owed (a request, or junk) */
    int refused;         /* 1: answer with the error below, nothing else */
    int protocol_error;  /* refused by hutch_mcp_classify, whatever the era */
    struct hutch_mcp_verdict v;
    char why[HUTCH_ERR_MSG]; /* the refusal's message */
};

/* Never fails: whatever json is, *m describes it (m->refused for junk).
 * headers: as for hutch_mcp_classify.  Free with hutch_mcp_msg_clear(). */
void hutch_mcp_msg_parse(const char *json, size_t len,
                         const struct hutch_mcp_headers *headers,
                         struct hutch_mcp_msg *m);
void hutch_mcp_msg_clear(struct hutch_mcp_msg *m);

/* A JSON-RPC error response (id NULL: null); data is taken over. */
cJSON *hutch_mcp_error_response(const cJSON *id, int code, const char *message,
                                cJSON *data);
/* The refusal of a refused message as a JSON-RPC response, for a transport
 * that answers it without a session (HTTP); caller frees. */
char *hutch_mcp_msg_refusal(struct hutch_mcp_msg *m);

/* 1 when `version` is a modern revision hutch speaks (2026-07-28). */
int hutch_mcp_version_modern(const char *version);
/* The modern revisions hutch speaks, newest first (server/discover). */
cJSON *hutch_mcp_modern_versions(void);

/* How long a client may keep a result (SEP-2549), for results that may be
 * cached: tools/list, resources/list, resources/templates/list,
 * resources/read, server/discover. */
struct hutch_mcp_cache {
    unsigned ttl_ms;
    int public_scope; /* the same for every principal */
};

/* Make `result` a 2026-07-28 result of `method`: "resultType": "complete",
 * and the cache hints when `cache` is given. */
void hutch_mcp_stamp_result(cJSON *result, const struct hutch_mcp_cache *cache);

#endif
