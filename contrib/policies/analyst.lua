-- analyst.lua — a read-only analyst (hutch-policy(5)).
--
-- Code may read and list files of one data folder through the filesystem
-- MCP server ("fs", @modelcontextprotocol/server-filesystem started on the
-- same folder) and nothing else: no writes, no other servers, tight limits.
--
-- Before use: put your data folder in DATA (it must exist).  The tests
-- replace /srv/hutch with a temporary tree.
--   hutch policy check analyst.lua
--   hutch serve --servers servers.json --policy analyst.lua
local DATA = "/srv/hutch/data"

-- Every argument of the filesystem server's tools that names a path.
local PATH_ARGS = { "path", "source", "destination" }

return {
  executor = "local",
  limits = {
    timeout_ms = 20000,
    memory_mb = 512,
    cpus = 1,
    pids = 64,
    output_bytes = 262144,
    files_bytes = 16777216,
  },
  tools = {
    allow = { "fs.read_*", "fs.list_*", "fs.directory_tree", "fs.search_files",
              "fs.get_file_info" },
    deny = { "*.write_*", "*.edit_*", "*.create_*", "*.move_*", "*.delete_*" },
  },
  -- Inputs copied into the sandbox, read-only, at /work/data.
  paths = { { host = DATA, sandbox = "/work/data", mode = "ro" } },
  rate = { executions_per_minute = 30, tool_calls_per_minute = 600 },
  audit = { secret = { "password", "*token*", "*secret*" } },

  on_tool_call = function(call)
    local args = call.args
    for _, key in ipairs(PATH_ARGS) do
      if args[key] ~= nil then
        local ok, why = hutch.path_allowed(args[key], "ro")
        if not ok then return false, "analysts read only " .. DATA .. ": " .. why end
      end
    end
    if args.paths ~= nil then -- read_multiple_files
      if type(args.paths) ~= "table" then return false, "paths must be a list" end
      for _, p in ipairs(args.paths) do
        local ok, why = hutch.path_allowed(p, "ro")
        if not ok then return false, "analysts read only " .. DATA .. ": " .. why end
      end
    end
    return true
  end,
}
