// gemini.mjs — what Gemini CLI (pinned in package-lock.json) hands the model
// of hutch's results.
//
// `gemini -p` runs with a dummy GEMINI_API_KEY against a scripted Gemini API
// on 127.0.0.1 (GOOGLE_GEMINI_BASE_URL; lib.mjs: POST
// /v1beta/models/M:streamGenerateContent?alt=sse and :generateContent;
// every request body recorded in requests.jsonl), with hutch as a stdio MCP
// server in $HOME/.gemini/settings.json (trust: true, so its tools run
// without asking).  Gemini CLI names MCP tools mcp_hutch_execute_code and
// mcp_hutch_search_tools; the script calls them for each case of suite.mjs
// and answers with text; the test asserts on the functionResponse parts of
// the last request (and the parts that follow each in its turn, where an
// image goes).  Gemini CLI offers the model no tool to read an MCP
// resource, so the link case checks the uri only.
//
// Isolation: HOME and the XDG directories in a temp dir, the folder trusted
// for this run only (--skip-trust), auto-update, usage statistics and
// telemetry off; as root, the whole file in a network namespace with only
// loopback (lib.mjs, inNetns).
import fs from "node:fs";
import path from "node:path";
import { inNetns, isolatedEnv } from "./lib.mjs";
import { clientSuite } from "./suite.mjs";

inNetns();

await clientSuite({
  name: "gemini",
  kind: "gemini",
  label: "Gemini CLI",
  resourceTool: null,
  setup: ({ dir, api, mcpServers }) => {
    const home = path.join(dir, "home");
    fs.mkdirSync(path.join(home, ".gemini"), { recursive: true });
    const servers = Object.fromEntries(
      Object.entries(mcpServers).map(([name, s]) => [name, { ...s, trust: true, timeout: 240000 }]),
    );
    fs.writeFileSync(
      path.join(home, ".gemini", "settings.json"),
      JSON.stringify(
        {
          general: { disableAutoUpdate: true, disableUpdateNag: true },
          privacy: { usageStatisticsEnabled: false },
          telemetry: { enabled: false },
          security: { auth: { selectedType: "gemini-api-key" } },
          mcpServers: servers,
        },
        null,
        2,
      ),
    );
    return {
      cwd: dir,
      args: ["-p", "Run the checks.", "--output-format", "json", "--approval-mode", "yolo", "--skip-trust", "-m", "gemini-2.5-flash"],
      env: isolatedEnv(home, { GEMINI_API_KEY: "scripted-key-for-tests", GOOGLE_GEMINI_BASE_URL: api.url }),
    };
  },
});
