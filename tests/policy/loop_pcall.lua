-- Hostile: an endless loop that tries to survive the deadline by catching
-- the error it raises, with pcall and with xpcall.
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    while true do
      pcall(function() while true do end end)
      xpcall(function() while true do end end, function(e) return e end)
    end
  end,
}
