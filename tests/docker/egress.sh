#!/bin/bash
# egress.sh — tests/run/egress.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/run/egress.sh"
