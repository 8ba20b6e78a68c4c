#!/bin/bash
# taint.sh — tests/run/taint.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/run/taint.sh"
