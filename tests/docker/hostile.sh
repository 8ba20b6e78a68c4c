#!/bin/bash
# hostile.sh — tests/hostile/hostile.sh on the docker executor.
export HUTCH_EXECUTOR=docker
exec bash "$HUTCH_SRCDIR/tests/hostile/hostile.sh"
