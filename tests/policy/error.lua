-- Hostile (or buggy): hooks that raise.
return {
  tools = { allow = { "*" } },
  on_execute = function(req) error("boom in on_execute") end,
  on_tool_call = function(call)
    if call.name == "table" then error({ code = 1 }) end
    if call.name == "index" then return call.args.missing.field end
    error("boom")
  end,
}
