#!/bin/bash
# workspace.sh — tests/run/workspace.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/run/workspace.sh"
