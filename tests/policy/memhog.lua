-- Hostile: hooks that eat memory until the allocator's cap stops them,
-- one with a growing table, one with a growing string, one catching the
-- memory error and trying again.
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    if call.name == "string" then
      local s = "x"
      while true do s = s .. s end
    elseif call.name == "pcall" then
      local keep = {}
      while true do
        pcall(function() keep[#keep + 1] = string.rep("y", 1 << 20) end)
      end
    end
    local t = {}
    for i = 1, math.huge do t[i] = { i, i, i } end
  end,
}
