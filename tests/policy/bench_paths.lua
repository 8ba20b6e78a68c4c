-- Benchmark policy with a host path check in the hook (realpath on every
-- call): `hutch policy bench tests/policy/bench_paths.lua --args
-- '{"path": "/tmp/x"}'`.  /tmp exists on every machine.
return {
  tools = { allow = { "fs.*" } },
  paths = { { host = "/tmp", sandbox = "/data", mode = "ro" } },
  on_tool_call = function(call)
    local ok, why = hutch.path_allowed(call.args.path, "ro")
    if not ok then return false, why end
    return true
  end,
}
