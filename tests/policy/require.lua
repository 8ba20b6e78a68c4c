-- Hostile: reaches the missing libraries through require and package.
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    if call.name == "package" then return package.loaded.os.execute("true") end
    local os = require("os")
    return os.execute("true")
  end,
}
