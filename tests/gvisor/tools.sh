#!/bin/bash
# tools.sh — tests/run/tools.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/run/tools.sh"
