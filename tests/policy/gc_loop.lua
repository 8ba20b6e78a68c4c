-- Hostile: a finalizer that never returns, and one that hogs memory; they
-- run during garbage collection and when the state is closed.
local function bad()
  setmetatable({}, { __gc = function() while true do end end })
  setmetatable({}, { __gc = function() local t = {} while true do t[#t + 1] = {} end end })
end
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    for i = 1, 10 do bad() end
    collectgarbage()
    return true
  end,
}
