return { paths = {
  { host = "/tmp", sandbox = "/work/tmp", mode = "rw" },
  { host = "relative", sandbox = "/work/x", mode = "ro" },
  { host = "/nonexistent/dir", sandbox = "/work/y", mode = "xx" } } }
