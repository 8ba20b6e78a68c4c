#!/bin/bash
# fairness.sh — tests/mcp/fairness.mjs on the gvisor executor: its steps
# that involve the executor (executions at once and their CPU weights, warm
# sandboxes shared between principals); the others are hutch's alone and
# run once, on local.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
export FAIRNESS_STEP=2,5
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/mcp/fairness.mjs"
