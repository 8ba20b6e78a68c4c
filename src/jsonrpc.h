/* jsonrpc.h — the JSON-RPC error codes hutch sends and recognises, defined
 * once: JSON-RPC 2.0's own, the server-error range's codes the MCP
 * transports and revisions give a meaning, and the 2026-07-28 revision's.
 * Every file that puts a code on the wire or reads one from an upstream
 * names it from here.
 *
 * Not here: the messages and data that go with them (beside each use), the
 * HTTP status an error also gets (mcp_era.c, http.c).  No functions. */
#ifndef HUTCH_JSONRPC_H
#define HUTCH_JSONRPC_H

enum hutch_rpc_code {
    /* JSON-RPC 2.0. */
    HUTCH_RPC_PARSE_ERROR = -32700,
    HUTCH_RPC_INVALID_REQUEST = -32600,
    HUTCH_RPC_METHOD_NOT_FOUND = -32601,
    HUTCH_RPC_INVALID_PARAMS = -32602,
    HUTCH_RPC_INTERNAL_ERROR = -32603,
    /* The implementation-defined range (-32000 to -32099). */
    /* A request the streamable HTTP transport refuses before any JSON-RPC
     * (bad headers, method, size, authorization, overload; http.c). */
    HUTCH_RPC_SERVER_ERROR = -32000,
    /* An Mcp-Session-Id this server does not know (streamable HTTP). */
    HUTCH_RPC_SESSION_NOT_FOUND = -32001,
    /* resources/read of an unknown, expired or foreign uri (MCP). */
    HUTCH_RPC_RESOURCE_NOT_FOUND = -32002,
    /* The 2026-07-28 revision. */
    HUTCH_RPC_HEADER_MISMATCH = -32020,
    HUTCH_RPC_MISSING_CLIENT_CAP = -32021,
    HUTCH_RPC_UNSUPPORTED_VERSION = -32022,
    /* A request its client cancelled (LSP's RequestCancelled): the answer
     * that only closes the request's stream. */
    HUTCH_RPC_REQUEST_CANCELLED = -32800,
};

#endif
