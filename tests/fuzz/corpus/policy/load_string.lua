local f = load("return {}")
return f()
