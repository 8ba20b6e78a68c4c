#!/bin/sh
# demo.sh — the quick start's first command: install the dependencies, build
# and install hutch, and run a real program on the local executor.
set -e
SRC=$(cd "$(dirname "$0")/.." && pwd)
. "$SRC/contrib/deps.sh"

install_deps $BUILD_DEPS $RUNTIME_DEPS
build "$SRC/build"
as_root make -C "$SRC/build" install >/dev/null
command -v hutch >/dev/null || PATH=/usr/local/bin:$PATH

work=$(mktemp -d)
printf 'city,temp\nOslo,3\nLisbon,19\nCairo,27\nHanoi,24\n' >"$work/weather.csv"
echo '$ hutch run --lang python --file weather.csv --out out -e …'
hutch run --lang python --file "$work/weather.csv" --out "$work/out" -e '
import csv, json
rows = list(csv.DictReader(open("weather.csv")))
warm = [r["city"] for r in rows if int(r["temp"]) > 20]
json.dump({"warm": warm}, open("/work/out/warm.json", "w"))
print(f"{len(rows)} cities, {len(warm)} warm")
max(rows, key=lambda r: int(r["temp"]))["city"]'
echo "\$ cat out/warm.json"
cat "$work/out/warm.json"
echo
rm -rf "$work"
