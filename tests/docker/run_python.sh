#!/bin/bash
# run_python.sh — tests/run/run_python.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/run/run_python.sh"
