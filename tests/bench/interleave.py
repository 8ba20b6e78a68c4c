"""interleave.py — what the cold-start benchmarks (cold_start.sh, docker.sh,
gvisor.sh) share: run commands interleaved, so that machine noise hits all
alike, and print their medians, p90s and hutch's ratio to each.

A case is (name, argv), or (name, a function returning argv) when each run
needs fresh arguments.  Every run must exit 0 and print `expect`."""
import statistics
import subprocess
import sys
import time


def _once(argv, env, expect):
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t0
    if p.returncode != 0 or p.stdout.strip() != expect:
        sys.exit(f"benchmark command failed: {' '.join(argv[:3])}: rc={p.returncode} "
                 f"{p.stderr.decode()[:400]}")
    return dt * 1000


def measure(cases, runs, env, warmup=2, expect=b"1"):
    """{name: [ms, ...]} of `runs` interleaved rounds after `warmup` each."""
    def argv_of(a):
        return a() if callable(a) else a
    for _, a in cases:  # page cache, first-run costs
        for _ in range(warmup):
            _once(argv_of(a), env, expect)
    times = {name: [] for name, _ in cases}
    for _ in range(runs):
        for name, a in cases:
            times[name].append(_once(argv_of(a), env, expect))
    return times


def report(title, times, runs):
    """The table; the first case is hutch, the ratio column hutch / this."""
    med = {n: statistics.median(v) for n, v in times.items()}
    base = next(iter(med.values()))
    print(f"{title}, median of {runs} interleaved runs (ms)")
    print(f"{'command':34} {'median':>8} {'p90':>8}  {'hutch / this':>12}")
    for name, v in times.items():
        v = sorted(v)
        p90 = v[max(0, int(len(v) * 0.9) - 1)]
        print(f"{name:34} {med[name]:8.2f} {p90:8.2f}  {base / med[name]:11.2f}x")
    return med
