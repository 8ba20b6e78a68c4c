# init.sh — sourced by hostile.sh on the docker and gvisor executors: what
# the program can do to hutch-init, pid 1 of its sandbox, and through it to
# the host (plugins/init/init.c), and what the image tells it.  Uses
# hostile.sh's T, PYH, run_hutch and assert_clean.

# The image says nothing of the machine that built it.
run_hutch run $PYH -e '
import socket
print(repr(open("/etc/hostname").read().strip()), socket.gethostname())
print(repr(open("/etc/resolv.conf").read()))'
S=$(echo "$OUT" | json stdout)
like "image: /etc/hostname is the sandbox's" "$S" "'hutch' hutch"
unlike "image: /etc/resolv.conf names no name server" "$S" "nameserver"
