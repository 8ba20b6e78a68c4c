-- For the concurrency test: ordinary decisions, with now and then a hook
-- that loops, hogs memory or raises (each call decides which from args).
local function parity(n) return n % 2 == 0 end
return {
  tools = { allow = { "t.*" }, deny = { "t.never" } },
  on_execute = function(req)
    return { limits = { timeout_ms = 1000 + req.code_bytes } }
  end,
  on_tool_call = function(call)
    local a = call.args
    if a.spin then while true do end end
    if a.hog then local s = "x" while true do s = s .. s end end
    if a.fail then error("failing on purpose") end
    if parity(a.n) then return true end
    return false, "odd " .. a.n
  end,
}
