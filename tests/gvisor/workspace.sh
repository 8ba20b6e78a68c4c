#!/bin/bash
# workspace.sh — tests/run/workspace.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/run/workspace.sh"
