#!/bin/bash
# tools.sh — tests/run/tools.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/run/tools.sh"
