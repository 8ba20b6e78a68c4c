-- Benchmark policy: 50 glob rules (45 allow, 5 deny) and an on_tool_call
-- hook that looks at the principal and the arguments, for
-- `hutch policy bench tests/policy/bench.lua --tool fs.read_file`.
local writers = { alice = true, ["local"] = true }
return {
  tools = {
    allow = {
      "fs.read_*", "fs.list_*", "fs.get_*", "fs.search_*", "fs.describe_*",
      "git.read_*", "git.list_*", "git.get_*", "git.search_*", "git.describe_*",
      "github.read_*", "github.list_*", "github.get_*", "github.search_*", "github.describe_*",
      "slack.read_*", "slack.list_*", "slack.get_*", "slack.search_*", "slack.describe_*",
      "jira.read_*", "jira.list_*", "jira.get_*", "jira.search_*", "jira.describe_*",
      "docs.read_*", "docs.list_*", "docs.get_*", "docs.search_*", "docs.describe_*",
      "search.read_*", "search.list_*", "search.get_*", "search.search_*", "search.describe_*",
      "db.read_*", "db.list_*", "db.get_*", "db.search_*", "db.describe_*",
      "s3.read_*", "s3.list_*", "s3.get_*", "s3.search_*", "s3.describe_*",
    },
    deny = { "*.delete_*", "*.drop_*", "*admin*", "db.exec?", "*.write_secret*" },
  },
  on_tool_call = function(call)
    if call.name:find("^write") and not writers[call.principal] then
      return false, call.principal .. " may not write"
    end
    local path = call.args.path
    if type(path) == "string" and (path:find("..", 1, true) or path:find("%", 1, true)) then
      return false, "no .. or % in paths"
    end
    return true
  end,
}
