#!/bin/bash
# run_javascript.sh — tests/run/run_javascript.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/run/run_javascript.sh"
