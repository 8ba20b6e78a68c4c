-- developer.lua — a developer workspace with a writable output folder
-- (hutch-policy(5)).
--
-- Code may read a project workspace, write only into an output folder (both
-- through the filesystem MCP server "fs"), use git and web fetching tools
-- read-only, and gets roomier limits than the analyst.  The workspace is
-- copied into the sandbox read-only at /work/src; files the program leaves
-- in /work/out may be extracted into the output folder.
--
-- Before use: point WORKSPACE and OUT at real directories.  The tests
-- replace /srv/hutch with a temporary tree.
local WORKSPACE = "/srv/hutch/workspace"
local OUT = "/srv/hutch/out"

-- The filesystem server's tools that change something, and their path
-- arguments.
local WRITES = {
  write_file = true, edit_file = true, create_directory = true, move_file = true,
}
local PATH_ARGS = { "path", "source", "destination" }

local function check_paths(args, mode)
  for _, key in ipairs(PATH_ARGS) do
    if args[key] ~= nil then
      local ok, why = hutch.path_allowed(args[key], mode)
      if not ok then return false, why end
    end
  end
  if type(args.paths) == "table" then
    for _, p in ipairs(args.paths) do
      local ok, why = hutch.path_allowed(p, mode)
      if not ok then return false, why end
    end
  end
  return true
end

return {
  executor = "local",
  limits = {
    timeout_ms = 120000,
    memory_mb = 2048,
    cpus = 2,
    pids = 256,
    output_bytes = 1048576,
    files_bytes = 67108864,
  },
  tools = {
    allow = { "fs.*", "git.*", "fetch.*" },
    deny = { "*.delete_*", "*.remove_*", "git.push*", "git.reset*" },
  },
  paths = {
    { host = WORKSPACE, sandbox = "/work/src", mode = "ro" },
    { host = OUT, sandbox = "/work/results", mode = "rw" },
  },
  rate = { executions_per_minute = 60, tool_calls_per_minute = 3000 },

  on_execute = function(req)
    -- Big programs are a sign something went wrong upstream.
    if req.code_bytes > 262144 then
      return false, "programs are limited to 256 KiB of source here"
    end
    return true
  end,

  on_tool_call = function(call)
    if call.server == "fs" then
      local mode = WRITES[call.name] and "rw" or "ro"
      local ok, why = check_paths(call.args, mode)
      if not ok then
        if mode == "rw" then return false, "writes go to " .. OUT .. " only: " .. why end
        return false, why
      end
    end
    return true
  end,
}
