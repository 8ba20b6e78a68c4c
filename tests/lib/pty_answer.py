#!/usr/bin/python3
"""pty_answer.py ANSWER CMD... -- run CMD on a pseudo-terminal (so that
/dev/tty is that terminal), wait until it prints PROMPT ("allow? [y/N] "),
type ANSWER and a newline (ANSWER "-": type nothing), and copy everything
CMD printed to stdout.  Exits with CMD's status.  No timing: it waits for
the prompt itself; a budget (HUTCH_PTY_BUDGET_S, 300 s) only ends a hang."""
import os
import pty
import select
import sys
import time

PROMPT = b"allow? [y/N] "


def main():
    answer, cmd = sys.argv[1], sys.argv[2:]
    budget = time.monotonic() + float(os.environ.get("HUTCH_PTY_BUDGET_S", "300"))
    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(cmd[0], cmd)
    out, typed = b"", False
    while time.monotonic() < budget:
        r, _, _ = select.select([fd], [], [], 1.0)
        if not r:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
        if not typed and PROMPT in out:
            typed = True
            if answer != "-":
                os.write(fd, answer.encode() + b"\n")
    else:
        os.kill(pid, 9)
        out += b"\npty_answer: gave up waiting\n"
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(out.decode("utf-8", "replace").replace("\r\n", "\n"))
    sys.exit(os.waitstatus_to_exitcode(status) & 0xFF)


main()
