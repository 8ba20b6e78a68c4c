#!/bin/bash
# run_javascript.sh — tests/run/run_javascript.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/run/run_javascript.sh"
