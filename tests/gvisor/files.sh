#!/bin/bash
# files.sh — tests/run/files.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/run/files.sh"
