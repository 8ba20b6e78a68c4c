#!/bin/bash
# run_typescript.sh — tests/run/run_typescript.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/run/run_typescript.sh"
