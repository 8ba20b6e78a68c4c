#!/bin/bash
# egress.sh — make bench-egress (issue 24): a 1 MB download and 100 small
# requests through hutch's egress proxy, from a program on the local
# executor, against the same done directly from the host, interleaved in
# one run and printed as ratios (these machines' speed drifts from day to
# day; a ratio from one run does not).  The origin is
# tests/lib/egress_servers.py on 127.0.0.1; both sides time the same
# Python code (urllib, one connection per request) inside their own
# process, so interpreter and sandbox start-up are left out: what is
# compared is the path, direct or through the proxy.
#   ROUNDS (default 15)  interleaved rounds; each does the download once and
#                        the 100 requests once on each side
# Goal (issue 24): the download through the proxy at most 1.5x direct.
set -eu
HUTCH=${HUTCH:?run through make bench-egress}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ROUNDS=${ROUNDS:-15}
T=$(mktemp -d)
SRV=
cleanup() {
    if [ -n "$SRV" ]; then kill "$SRV" 2>/dev/null; wait "$SRV" 2>/dev/null || true; fi
    rm -rf "$T"
}
trap cleanup EXIT

python3 "$SRC/tests/lib/egress_servers.py" "$T" 2>"$T/servers.err" &
SRV=$!
for _ in $(seq 600); do [ -f "$T/ports" ] && break; sleep 0.1; done
read -r HP _ <"$T/ports"
cat >"$T/p.lua" <<EOF
return { egress = { allow = { "127.0.0.1:$HP" }, max_bytes = 1024 * 1024 * 1024,
                    max_connections = 4096 },
         limits = { timeout_ms = 120000 } }
EOF
# One round of the measured work: prints "download_ms small_ms".
cat >"$T/work.py" <<EOF
import time, urllib.request
def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return r.read()
t0 = time.perf_counter()
n = len(get("http://127.0.0.1:$HP/bytes?n=1048576"))
t1 = time.perf_counter()
for i in range(100):
    get("http://127.0.0.1:$HP/echo")
t2 = time.perf_counter()
assert n == 1048576, n
print("%.3f %.3f" % ((t1 - t0) * 1000, (t2 - t1) * 1000))
EOF
: >"$T/direct"
: >"$T/proxy"
for i in $(seq "$ROUNDS"); do
    env -u HTTP_PROXY -u http_proxy -u HTTPS_PROXY -u https_proxy python3 "$T/work.py" >>"$T/direct"
    out=$("$HUTCH" run --json --policy "$T/p.lua" --lang python -e "$(cat "$T/work.py")")
    echo "$out" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["executor"] == "local" and r["exit_code"] == 0, r
print(r["stdout"].strip())' >>"$T/proxy"
done
python3 - "$T/direct" "$T/proxy" "$ROUNDS" <<'EOF'
import statistics, sys
def load(p):
    rows = [tuple(map(float, l.split())) for l in open(p) if l.strip()]
    return [r[0] for r in rows], [r[1] for r in rows]
dd, ds = load(sys.argv[1])
pd, ps = load(sys.argv[2])
md, mpd = statistics.median(dd), statistics.median(pd)
ms, mps = statistics.median(ds), statistics.median(ps)
print("egress through hutch's proxy against direct from the host, %s interleaved rounds "
      "(medians, ms; local executor)" % sys.argv[3])
print("%-28s %10s %10s %8s %s" % ("", "direct", "proxy", "ratio", "goal"))
r1 = mpd / md
print("%-28s %10.2f %10.2f %7.2fx %s" % ("1 MB download", md, mpd, r1,
      "<= 1.5x: " + ("PASS" if r1 <= 1.5 else "MISS")))
print("%-28s %10.2f %10.2f %7.2fx %s" % ("100 small requests", ms, mps, mps / ms, "(no goal)"))
print("%-28s %10.3f %10.3f %7.2fx" % ("  per request", ms / 100, mps / 100, mps / ms))
EOF
