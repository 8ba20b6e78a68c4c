#!/bin/bash
# pool.sh — tests/mcp/pool.mjs on the gvisor executor.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
# It kills a hutch with -9 and checks what the next start removes: it holds
# the gvisor test lock alone, like faults.sh, so no other test sees (or
# cleans) what the killed one left in between.
export GVISOR_LOCK_MODE=-x
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/pool.mjs"
