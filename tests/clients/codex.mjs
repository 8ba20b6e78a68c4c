// codex.mjs — what Codex CLI (pinned in package-lock.json, with its
// linux-x64 binary package) hands the model of hutch's results.
//
// `codex exec` runs against a scripted OpenAI Responses API on 127.0.0.1
// (lib.mjs: POST /v1/responses answered as SSE; every request body recorded
// in requests.jsonl).  Codex is configured through CODEX_HOME/config.toml: a
// model provider with base_url on loopback and wire_api = "responses", and
// hutch as a stdio MCP server with default_tools_approval_mode = "approve"
// (without it Codex refuses execute_code in exec mode: the tool is marked
// destructive).  Codex lists MCP tools to the model in a namespace
// (mcp__hutch, tools execute_code and search_tools); `required = true`
// makes it wait for a server's tools before the first request (an optional
// server still starting is left out of that turn).  The script calls them
// for each case of suite.mjs, reads the resource_link back with Codex's
// read_mcp_resource, then answers with text; the test asserts on the
// function_call_output items of the last request.
//
// Isolation: HOME and CODEX_HOME in a temp dir, a dummy key in the
// provider's env_key, no retries; plugins, apps and the shell snapshot off
// (the plugins feature runs `git ls-remote` against a public host); and,
// as root, the whole file in a network namespace with only loopback
// (lib.mjs, inNetns).
import fs from "node:fs";
import path from "node:path";
import { inNetns, isolatedEnv } from "./lib.mjs";
import { clientSuite, readBackFromText } from "./suite.mjs";

inNetns();

const q = (s) => JSON.stringify(String(s)); // a TOML basic string

function configToml(api, mcpServers) {
  let toml = `model = "gpt-5-codex"
model_provider = "scripted"
approval_policy = "never"
check_for_update_on_startup = false

[features]
plugins = false
remote_plugin = false
apps = false
shell_snapshot = false

[analytics]
enabled = false

[model_providers.scripted]
name = "scripted"
base_url = ${q(api.url + "/v1")}
wire_api = "responses"
env_key = "SCRIPTED_API_KEY"
request_max_retries = 0
stream_max_retries = 0
`;
  for (const [name, s] of Object.entries(mcpServers)) {
    toml += `
[mcp_servers.${name}]
command = ${q(s.command)}
args = [${s.args.map(q).join(", ")}]
default_tools_approval_mode = "approve"
required = true
startup_timeout_sec = 120
tool_timeout_sec = 240
`;
    if (s.env && Object.keys(s.env).length) {
      toml += `\n[mcp_servers.${name}.env]\n`;
      for (const [k, v] of Object.entries(s.env)) toml += `${k} = ${q(v)}\n`;
    }
  }
  return toml;
}

await clientSuite({
  name: "codex",
  kind: "responses",
  label: "Codex",
  resourceTool: { call: "read_mcp_resource", args: (uri) => ({ server: "hutch", uri }) },
  readBack: readBackFromText,
  // Codex cuts every tool output it hands the model to about 12 KB (head
  // and tail): of the 300 KiB file the model reads the first bytes.
  readPrefixOnly: "Codex cuts a tool output to about 12 KB before the model reads it",
  setup: ({ dir, api, mcpServers }) => {
    const home = path.join(dir, "home");
    const codexHome = path.join(dir, "codex-home");
    fs.mkdirSync(codexHome, { recursive: true });
    fs.writeFileSync(path.join(codexHome, "config.toml"), configToml(api, mcpServers));
    return {
      cwd: dir,
      args: ["exec", "--skip-git-repo-check", "--json", "Run the checks."],
      env: isolatedEnv(home, { CODEX_HOME: codexHome, SCRIPTED_API_KEY: "sk-scripted-for-tests" }),
    };
  },
});
