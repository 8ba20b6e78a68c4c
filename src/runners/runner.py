"""Entry point of the Python runner: `python3 -I -S /run/hutch/runner.py`.

The runner itself is hutch_runner.py.  A script run directly is always
compiled from source, which costs about 4 ms of every cold start; an
imported module uses the bytecode that `make` compiled next to it
(__pycache__, checked against the source's hash, ignored by another Python
version, which then compiles from source as before).
"""
import sys

sys.path.insert(0, __file__.rpartition('/')[0] or '.')
import hutch_runner  # noqa: E402

del sys.path[0]
hutch_runner.main()
