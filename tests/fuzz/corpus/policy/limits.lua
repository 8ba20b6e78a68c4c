return { executor = "docker", limits = { timeout_ms = 1000, memory_mb = 64, cpus = 0.25, pids = 16, output_bytes = 4096, files_bytes = 65536 } }
