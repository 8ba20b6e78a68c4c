local s = ("x"):rep(100):gsub("x", function(c) return c:upper() end)
return { audit = { secret = { s } } }
