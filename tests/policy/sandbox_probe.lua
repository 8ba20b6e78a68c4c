-- Looks for every way out of the sandbox it can think of and allows only
-- when it found none; the reason lists what it found.
local found = {}
local function check(name, value)
  if value ~= nil then found[#found + 1] = name end
end
local function probe()
  found = {}
  check("io", io) check("os", os) check("package", package)
  check("require", require) check("debug", debug) check("coroutine", coroutine)
  check("dofile", dofile) check("loadfile", loadfile) check("rawset", rawset)
  check("string.dump", string.dump) check("collectgarbage-less", nil)
  check("getmetatable('').__index", (function()
    local mt = getmetatable("")
    return type(mt) == "table" and mt.__index or nil
  end)())
  check("getmetatable(_G)", getmetatable(_G) or nil)
  check("getmetatable(string)", getmetatable(string) or nil)
  check("load binary", (load("\27Lua", "x", "b")))
  -- load() without env must see the read-only globals, not the raw table
  local ok = pcall(load("leak = 1"))
  check("load env writable", ok and true or nil)
  return found
end
probe() -- at load time too
return {
  tools = { allow = { "*" } },
  on_tool_call = function(call)
    local f = probe()
    if #f == 0 then return true end
    return false, "reachable: " .. table.concat(f, ", ")
  end,
}
