-- Hostile: hooks that never return.  The instruction-count hook stops them.
return {
  tools = { allow = { "*" } },
  on_execute = function(req)
    while true do end
  end,
  on_tool_call = function(call)
    local n = 0
    while true do n = n + 1 end
  end,
}
