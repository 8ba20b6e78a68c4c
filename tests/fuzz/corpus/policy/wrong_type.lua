return { limits = { timeout_ms = "soon" }, tools = { allow = "x" } }
