#!/bin/bash
# hostile.sh — tests/hostile/hostile.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/hostile/hostile.sh"
