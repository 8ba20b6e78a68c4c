return {
  tools = { allow = { "*" } },
  taint = { sources = { "fetch.*", "mail.read_*" }, sinks = { "mail.send*", " GitHub.Create_* " },
            on_sink = "ask" },
  on_tool_call = function(c) if c.name == "x" then return "ask", "Q?" end return true end,
}
