#!/bin/bash
# run_typescript.sh — tests/run/run_typescript.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/run/run_typescript.sh"
