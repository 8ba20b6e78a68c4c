-- Hostile: reads a host file through io.
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    local f = io.open("/etc/passwd")
    return f ~= nil
  end,
}
