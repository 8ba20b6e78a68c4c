local t = setmetatable({}, { __index = function(t, k) return k end })
return t
