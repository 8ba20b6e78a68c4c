#!/bin/bash
# options.sh — a policy's executor_options on the gvisor executor (the
# platform), and executors refusing options they do not know.
. "$HUTCH_SRCDIR/tests/lib/tap.sh"
export HUTCH_EXECUTOR=gvisor
. "$HUTCH_SRCDIR/tests/lib/executor.sh"
executor_require
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

policy() { # FILE EXECUTOR OPTIONS
    printf 'return {\n  executor = "%s",\n  executor_options = %s,\n}\n' "$2" "$3" >"$1"
}

policy "$T/ptrace.lua" gvisor '{ gvisor = { platform = "ptrace" } }'
run_hutch run -v -v --policy "$T/ptrace.lua" --lang python -e 'print("on ptrace")'
is "platform ptrace: the run works" "$OUT" "on ptrace"
like "platform ptrace: the sandbox runs on ptrace" "$ERR" "sandbox on platform ptrace"

# kvm when the policy asks and /dev/kvm works; where it does not (no
# /dev/kvm, or it hangs as on VMs without nested virtualisation), ptrace
# with a warning saying why.
policy "$T/kvm.lua" gvisor '{ gvisor = { platform = "kvm" } }'
run_hutch run -v -v --policy "$T/kvm.lua" --lang python -e 'print("asked for kvm")'
is "platform kvm: the run works" "$OUT" "asked for kvm"
case "$ERR" in
*"does not work here"*)
    like "platform kvm unusable here: ptrace instead" "$ERR" "sandbox on platform ptrace"
    like "platform kvm unusable here: the warning says why" "$ERR" "asks for the kvm platform"
    ;;
*)
    like "platform kvm: the sandbox runs on kvm" "$ERR" "sandbox on platform kvm"
    ;;
esac

policy "$T/bogus.lua" gvisor '{ gvisor = { platform = "bogus" } }'
run_hutch run --policy "$T/bogus.lua" --lang python -e 'print(1)'
is "platform bogus: exit 125" "$RC" 125
like "platform bogus: says what to choose" "$ERR" "choose ptrace or kvm"

policy "$T/unknown.lua" gvisor '{ gvisor = { colour = "blue" } }'
run_hutch run --policy "$T/unknown.lua" --lang python -e 'print(1)'
is "unknown option: exit 125" "$RC" 125
like "unknown option: named, with what gvisor knows" "$ERR" \
    "executor_options.gvisor.colour: the gvisor executor has no such option (it knows platform, flavour)"

# The data flavour: Python with numpy, pandas and matplotlib
# (rootfs-python-data, make images); the base rootfs has none of them.
policy "$T/data.lua" gvisor '{ gvisor = { flavour = "data" } }'
run_hutch run --policy "$T/data.lua" --lang python -e '
import numpy, pandas, matplotlib
print(int(numpy.arange(5).sum()), pandas.__name__, matplotlib.__name__)'
is "flavour data: numpy, pandas, matplotlib import" "$OUT" "10 pandas matplotlib"
run_hutch run --policy "$T/data.lua" --lang javascript -e 'console.log("js")'
is "flavour data: JavaScript runs in its one rootfs" "$OUT" "js"
policy "$T/base.lua" gvisor '{ gvisor = { flavour = "base", platform = "ptrace" } }'
run_hutch run --policy "$T/base.lua" --lang python -e '
try:
    import numpy
    print("numpy")
except ImportError:
    print("no numpy")'
is "flavour base: no numpy" "$OUT" "no numpy"
policy "$T/flavour.lua" gvisor '{ gvisor = { flavour = "science" } }'
run_hutch run --policy "$T/flavour.lua" --lang python -e 'print(1)'
is "unknown flavour: exit 125" "$RC" 125
like "unknown flavour: says which there are" "$ERR" \
    'executor_options.gvisor.flavour "science" is not a flavour: "base" or "data"'

# Options of other executors do not apply.
policy "$T/other.lua" gvisor '{ docker = { runtime = "runsc" }, gvisor = {} }'
run_hutch run --policy "$T/other.lua" --lang javascript -e 'console.log("fine")'
is "another executor's options: ignored" "$OUT" "fine"

# The policy names local: this run is not the gvisor suite's (with
# HUTCH_EXECUTOR=gvisor it would be a conflict, refused at start-up).
policy "$T/local.lua" local '{ ["local"] = { x = "y" } }'
HUTCH_EXECUTOR= run_hutch run --policy "$T/local.lua" --lang python -e 'print(1)'
is "local with options: exit 125" "$RC" 125
like "local with unknown options: names the ones it knows" "$ERR" \
    "executor_options.local.x: the local executor has no such option (it knows flavour)"

done_testing
