#!/bin/bash
# egress.sh — tests/run/egress.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/run/egress.sh"
