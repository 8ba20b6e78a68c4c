#!/bin/bash
# egress_init.sh — tests/hostile/egress_init.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/hostile/egress_init.sh"
