-- Hostile: to-be-closed variables whose __close never returns, on a normal
-- return and while an error unwinds.
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    local guard <close> = setmetatable({}, { __close = function() while true do end end })
    if call.name == "error" then error("unwinding") end
    return true
  end,
}
