#!/bin/bash
# files.sh — tests/run/files.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/run/files.sh"
