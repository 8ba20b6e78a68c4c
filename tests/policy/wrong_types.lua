-- Hooks returning what the engine does not accept: each denies.
return {
  tools = { allow = { "*" } },
  on_execute = function(req)
    if req.language == "python" then return "yes" end
    if req.language == "nil" then return nil end
    if req.language == "field" then return { executor = "local", memory = 10 } end
    if req.language == "limit" then return { limits = { timeout_ms = "fast" } } end
    if req.language == "executor" then return { executor = "../../bin/sh" } end
    return 1
  end,
  on_tool_call = function(call)
    if call.name == "number" then return 42 end
    if call.name == "string" then return "true" end
    if call.name == "table" then return {} end
    if call.name == "nothing" then return end
    return nil, "nil is not false"
  end,
}
