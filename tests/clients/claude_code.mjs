// claude_code.mjs — what Claude Code (pinned in package-lock.json) hands the
// model of hutch's results.
//
// `claude -p` runs with hutch as a stdio MCP server (--mcp-config, strict),
// against a scripted Anthropic Messages API on 127.0.0.1 (lib.mjs: POST
// /v1/messages answered as Claude Code asks, SSE when it streams; every
// request body recorded in requests.jsonl).  The script calls
// mcp__hutch__execute_code for each case of suite.mjs, reads the
// resource_link back with Claude Code's ReadMcpResourceTool, calls
// mcp__hutch__search_tools, then answers with text; the test asserts on the
// tool_result blocks of the last request, which carries them all.
//
// Isolation: HOME, the XDG directories and CLAUDE_CONFIG_DIR in a temp dir;
// ANTHROPIC_BASE_URL on loopback with a dummy key; nonessential traffic,
// the auto-updater, telemetry and error reporting off; and, when the test
// runs as root, the whole file in a network namespace of its own with only
// loopback up (lib.mjs, inNetns).  MCP_CONNECTION_NONBLOCKING=0: in -p
// mode Claude Code otherwise sends the first request before hutch's tools
// are listed (it offers a WaitForMcpServers tool instead).
import fs from "node:fs";
import path from "node:path";
import { inNetns, isolatedEnv } from "./lib.mjs";
import { clientSuite, readBackFromText } from "./suite.mjs";

inNetns();

await clientSuite({
  name: "claude",
  kind: "anthropic",
  label: "Claude Code",
  resourceTool: { tool: "ReadMcpResourceTool", args: (uri) => ({ server: "hutch", uri }) },
  // Claude Code saves a binary resource to a file and gives the model its
  // path (blobSavedTo): the bytes are that file's.
  readBack: readBackFromText,
  setup: ({ dir, api, mcpServers }) => {
    const home = path.join(dir, "home");
    const mcp = path.join(dir, "mcp.json");
    fs.writeFileSync(mcp, JSON.stringify({ mcpServers }, null, 2));
    const tools = ["mcp__hutch__execute_code", "mcp__hutch__search_tools", "ReadMcpResourceTool", "mcp__everything__get-tiny-image"];
    return {
      cwd: dir,
      args: ["-p", "Run the checks.", "--mcp-config", mcp, "--strict-mcp-config", "--allowedTools", tools.join(","),
        "--output-format", "json", "--model", "claude-sonnet-4-5"],
      env: isolatedEnv(home, {
        CLAUDE_CONFIG_DIR: path.join(home, ".claude"),
        ANTHROPIC_BASE_URL: api.url,
        ANTHROPIC_API_KEY: "sk-ant-scripted-for-tests",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        DISABLE_AUTOUPDATER: "1",
        DISABLE_TELEMETRY: "1",
        DISABLE_ERROR_REPORTING: "1",
        MCP_CONNECTION_NONBLOCKING: "0",
        // Even "blocking", Claude Code waits for the MCP servers only
        // MCP_CONNECT_TIMEOUT_MS (5 s by default) before its first request,
        // then goes on without the tools of one still starting: on a loaded
        // machine server-everything (node) took longer, and the control's
        // model never saw get-tiny-image.  The same generous budget as
        // MCP_TIMEOUT.
        MCP_CONNECT_TIMEOUT_MS: "120000",
        MCP_TIMEOUT: "120000",
        MCP_TOOL_TIMEOUT: "240000",
      }),
    };
  },
});
