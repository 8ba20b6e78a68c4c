return {
  tools = { allow = { "fs.*", "web.fetch" }, deny = { "fs.delete_*" } },
  on_execute = function(req)
    if req.language == "python" then return { executor = "gvisor", limits = { memory_mb = 99999, timeout_ms = 10 } } end
    return false, "no"
  end,
  on_tool_call = function(call)
    local n = 0
    for k, v in pairs(call.args or {}) do n = n + 1 end
    if call.tool == "fs.read_file" then return hutch.path_allowed(call.args.path, "ro") end
    return n < 3, string.format("%d args", n)
  end,
}
