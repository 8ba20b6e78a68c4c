return {
  executor = "local",
  limits = { timeout_ms = 30000, memory_mb = 256, cpus = 0.5, pids = 64,
             output_bytes = 1048576, files_bytes = 16777216 },
  tools = { allow = { "fs.read_*", "fs.list_*", "everything.echo" },
            deny  = { "*.delete_*" } },
  paths = { { host = "/tmp", sandbox = "/work/data", mode = "ro" },
            { host = "/var/tmp",  sandbox = "/work/results", mode = "rw" } },
  principals = { { name = "alice", token = "0123456789abcdef0123" } },
  rate = { executions_per_minute = 30, tool_calls_per_minute = 600 },
  audit = { secret = { "password", "*token*" } },
  on_execute = function(req)
    if req.language == "javascript" then
      return { limits = { memory_mb = 128 } }
    end
    return true
  end,
  on_tool_call = function(call)
    if call.tool == "fs.read_file" then
      local ok, why = hutch.path_allowed(call.args.path, "ro")
      if not ok then return false, why end
    end
    return true
  end,
}
