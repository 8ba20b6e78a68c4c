-- Globals are read-only once the file has run: a hook assigning one fails
-- (and so denies).  Helpers defined at load time remain callable.
function is_read(tool)
  return tool:match("%.read_") ~= nil
end
counter = 0
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    if call.name == "helper" then return is_read("fs.read_file") end
    if call.name == "rawset" then rawset(_G, "counter", 1) return true end
    if call.name == "lib" then string.upper = nil return true end
    if call.name == "meta" then setmetatable(_G, nil) return true end
    counter = counter + 1
    return true
  end,
}
