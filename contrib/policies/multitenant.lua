-- multitenant.lua — one HTTP deployment shared by two principals
-- (hutch-policy(5)).
--
--   hutch serve --http 0.0.0.0:9000 --servers servers.json \
--     --policy multitenant.lua
--
-- Clients send "Authorization: Bearer <token>"; the token says who they
-- are.  alice (a data engineer) may read the shared folder and read and
-- write her own; bob (an intern) may read the shared folder and his own
-- folder, write his own, and gets tighter limits.  Nobody else may do
-- anything: a token that is not listed is refused by HTTP already, and the
-- hooks refuse any other principal (stdio's "local" included).  Rates are
-- per principal.
--
-- Before use: replace both tokens with long random secrets (the loader
-- refuses the CHANGE-ME placeholders), e.g. `openssl rand -hex 32`, keep
-- this file unreadable to others (chmod 600), and point ROOT at a real
-- tree with shared/, tenants/alice/ and tenants/bob/.  The tests replace
-- /srv/hutch with a temporary tree.
local ROOT = "/srv/hutch"
local SHARED = ROOT .. "/shared"

local TENANTS = {
  alice = { tools = { "fs.*", "db.query", "db.list_tables" } },
  bob = { tools = { "fs.read_*", "fs.list_*", "fs.write_file", "fs.get_file_info" },
          limits = { timeout_ms = 10000, memory_mb = 256, cpus = 0.5 } },
}

local WRITES = {
  write_file = true, edit_file = true, create_directory = true, move_file = true,
}
local PATH_ARGS = { "path", "source", "destination" }

-- dir itself or something below it (both resolved paths).
local function inside(path, dir)
  return path == dir or path:sub(1, #dir + 1) == dir .. "/"
end

-- May `who` touch `path` with `mode`?  Reads: the shared folder or one's
-- own; writes: one's own only.
local function path_ok(who, path, mode)
  local ok, real = hutch.path_allowed(path, mode)
  if not ok then return false, real end
  local own_ok, own = hutch.path_allowed(ROOT .. "/tenants/" .. who, "rw")
  if own_ok and inside(real, own) then return true end
  if mode == "ro" then
    local shared_ok, shared = hutch.path_allowed(SHARED, "ro")
    if shared_ok and inside(real, shared) then return true end
  end
  return false, real .. " belongs to someone else"
end

return {
  executor = "local",
  limits = { timeout_ms = 60000, memory_mb = 1024, cpus = 1, pids = 128 },
  tools = {
    allow = { "fs.*", "db.query", "db.list_tables" },
    deny = { "*.delete_*", "db.drop*" },
  },
  paths = {
    { host = SHARED, sandbox = "/work/shared", mode = "ro" },
    { host = ROOT .. "/tenants/alice", sandbox = "/work/alice", mode = "rw" },
    { host = ROOT .. "/tenants/bob", sandbox = "/work/bob", mode = "rw" },
  },
  principals = {
    { name = "alice", token = "CHANGE-ME-alice-0123456789abcdef" },
    { name = "bob", token = "CHANGE-ME-bob-0123456789abcdef" },
  },
  rate = { executions_per_minute = 20, tool_calls_per_minute = 300 },
  audit = { secret = { "password", "*token*", "*secret*", "*key*", "query" } },
  -- Files kept between executions (execute_code's `workspace`), each
  -- principal's apart: 8 MiB each, 4 each, gone after a week unused.
  workspaces = { max_bytes = 8 * 1048576, max_count = 4, idle_s = 7 * 86400 },

  on_execute = function(req)
    local t = TENANTS[req.principal]
    if not t then return false, "unknown principal " .. tostring(req.principal) end
    if t.limits then return { limits = t.limits } end -- tighter only: hutch clamps
    return true
  end,

  on_tool_call = function(call)
    local t = TENANTS[call.principal]
    if not t then return false, "unknown principal " .. tostring(call.principal) end
    local named = false
    for _, g in ipairs(t.tools) do
      if hutch.glob(g, call.tool) then named = true break end
    end
    if not named then return false, call.principal .. " may not call " .. call.tool end
    if call.server == "fs" then
      local mode = WRITES[call.name] and "rw" or "ro"
      for _, key in ipairs(PATH_ARGS) do
        if call.args[key] ~= nil then
          local ok, why = path_ok(call.principal, call.args[key], mode)
          if not ok then return false, why end
        end
      end
    end
    return true
  end,
}
