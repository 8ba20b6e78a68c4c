-- Hostile: unbounded recursion, in Lua and through a C function (gsub).
local function down(n) return 1 + down(n + 1) end
local function cdown(s) return (s:gsub(".", cdown)) end
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    if call.name == "c" then return cdown("ab") end
    return down(1) == 0
  end,
}
