-- Hostile: tries io at load time.
local secret = io.open("/etc/shadow"):read("a")
return {}
