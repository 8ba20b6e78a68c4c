return {
  principals = { { name = "alice", token = "0123456789abcdef0123" }, { name = "bob", token = "short" } },
  rate = { executions_per_minute = 5, tool_calls_per_minute = 0 },
  audit = { secret = { "password", "*token*" } },
}
