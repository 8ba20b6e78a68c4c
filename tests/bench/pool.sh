#!/bin/sh
# pool.sh — benchmark of the warm pools (doc/operating.md, "Warm pools"), one command, one run:
#
#   make bench-pool                     (from a configured build directory)
#   sh tests/bench/pool.sh [ROUNDS] [BURST] [N]
#                                       with HUTCH=path/to/hutch, and from a
#                                       build tree HUTCH_PLUGIN_DIR,
#                                       HUTCH_RUNNER_DIR, HUTCH_IMAGES_DIR
#
# Per executor — local; docker when dockerd answers and hutch-python:VERSION
# exists; gvisor when runsc and the rootfs directories are there (as root);
# a line says why one is skipped — and in one run, interleaved so that the
# machine's noise hits all alike, prints:
#  1. p50 and p99 of execute_code `print(1)` over stdio (JSON-RPC to `hutch
#     serve --executor E`), a pool hit (--pool python=2; every result must
#     say warm: true and executor E) next to a cold start (--pool 0; warm:
#     false), over ROUNDS (default 30) rounds, each sample taken once the
#     pool has refilled and then PAUSE_MS (default 200) more;
#  2. bare `/usr/bin/python3 -c pass` on the host (the baseline for local);
#  3. `docker exec` of `python3 -c pass` into a running container of the same
#     image (the baseline for docker and gvisor);
#  4. BURST (default 200) executions back to back with a pool of 2: how fast,
#     how many came warm, and the order of warm and cold (the pool running
#     dry), on a server per HUTCH_POOL_REFILL_MAX of BURST_REFILL (default
#     "2,default": the two refill threads of before as the baseline, then
#     the default, the machine's CPUs; e.g. BURST_REFILL=2,4,8), with the
#     rate as a ratio to the first;
#  5. the memory held per idle pooled sandbox (a pool of N, default 3, per
#     language): RSS, PSS and USS of its host processes, its cgroup's usage;
#  6. the data flavour's chart (import pandas and matplotlib, plot, save a
#     PNG) on a warm sandbox, whose runner preloaded the packages, against
#     a cold start, DATA_ROUNDS (default 5) interleaved rounds;
# and the goals: warm local p50 / python3 -c pass ≤ 0.25, warm docker p50 /
# docker exec ≤ 0.1, warm gvisor p50 / docker exec ≤ 0.1, the warm chart ≤ 0.1
# of the cold one (PASS or MISS; a
# MISS does not fail).  Everything it starts is gone when it ends.
# EXECUTORS=local,docker limits the executors measured.
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/pool.py" "$@"
