-- Hostile: runs precompiled bytecode (crafted bytecode can break out of the
-- Lua VM).  string.dump is gone and load() takes text only.
local header = "\27LuaT\0\25\147\13\10\26\10\4\8\8\120\86\0\0\0\0\0\0\0\0\0\0\0\40\119\64"
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    if call.name == "dump" then
      local f = string.dump(function() return true end)
      return assert(load(f, "dumped", "b"))()
    end
    return assert(load(header .. "\1\0\0\0", "crafted", "b"))()
  end,
}
