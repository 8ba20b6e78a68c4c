#!/bin/bash
# clients.sh — tests/clients/claude_code.mjs on the docker executor: what
# Claude Code hands the model when the program's output, its chart and its
# 300 KiB file come back from a container (the shaping is hutch's core, the
# same for every executor; the files are fetched from the container), and
# that no container of that hutch is left once Claude Code has exited.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=docker
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require --exec
exec /usr/bin/node "$HUTCH_SRCDIR/tests/clients/claude_code.mjs"
