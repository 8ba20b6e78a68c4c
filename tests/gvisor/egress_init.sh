#!/bin/bash
# egress_init.sh — tests/hostile/egress_init.sh on the gvisor executor.
export HUTCH_EXECUTOR=gvisor
exec bash "$HUTCH_SRCDIR/tests/hostile/egress_init.sh"
