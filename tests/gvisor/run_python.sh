#!/bin/bash
# run_python.sh — tests/run/run_python.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/run/run_python.sh"
