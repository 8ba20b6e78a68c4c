return {
  on_execute = function(req) error({}) end,
  on_tool_call = function(call) return "yes" end,
}
