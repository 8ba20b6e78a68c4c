#!/bin/bash
# taint.sh — tests/run/taint.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/run/taint.sh"
