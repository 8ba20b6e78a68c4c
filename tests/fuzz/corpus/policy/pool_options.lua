return {
  pool = { python = 2, javascript = 0, docker = { python = 1 } },
  executor_options = { docker = { runtime = "runsc", image = "x" }, local_ = { a = 1 } },
}
