#!/bin/sh
# Builds the comparison harness with one probe patch applied to a scratch copy
# of this tree (the tree itself is left alone), and copies the binary to OUT.
#
#   benches/probes/build.sh lag /tmp/compare-lag
#   PROBE_LAG=1 /tmp/compare-lag --child delayq 16 2000000 1000000 1000000
#
#   benches/probes/build.sh knobs /tmp/compare-knobs
#   printf '#!/bin/sh\nPROBE_SLACK_NS=50000 exec /tmp/compare-knobs "$@"\n' > /tmp/s50
#   chmod +x /tmp/s50
#   python3 benches/ab.py 5 base=/tmp/compare-knobs s50=/tmp/s50 -- "delayq 1 300000 1000000 100000"
#
# Patches (each one `git diff` against the commit that added it; docs/bench/README.md,
# eighteenth to twentieth rounds, say what each measured):
#   lag    where an item's lateness forms: log2 histograms of send-to-apply,
#          insert-late, moved-lag and taken-lag, printed to stderr when the queue
#          drops if PROBE_LAG is set
#   knobs  constants read once from the environment: PROBE_SLACK_NS (the
#          leader's timer slack), PROBE_STREAM_AT, PROBE_CLIENT_BATCH,
#          PROBE_NO_LONE, PROBE_HELP_DEPTH (a burst's push combines past this
#          ingress depth), PROBE_INDEX (`heap` or `wheel`, the harness's delayq)
#   holder lag and knobs together, plus two histograms (role-hold: how long a
#          producer held the enqueue role for one batch; busy-depth: the ingress
#          depth, in commands x 1000, seen by a push that found the role held)
#          and what such a push does past a depth: PROBE_YIELD_DEPTH, yield its
#          CPU (or sleep PROBE_SLEEP_US); PROBE_WAIT_DEPTH, park until the holder's
#          release wakes it (at most PROBE_WAIT_US, 200), then perform the role
#   sample a thread that looks at the queue every 200 us while PROBE_SAMPLE is
#          set and, when the index's head has been due for over 20 us, counts
#          why nobody has moved it (the egress holds items; the dequeue role is
#          held, and whether the timers lock or the enqueue role is; a woken
#          consumer has not run; none of these) and how many consumers were
#          parked (docs/bench/README.md, twentieth round)
set -eu
[ $# -eq 2 ] || { echo "usage: $0 lag|knobs|holder|sample OUT" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
patch="$root/benches/probes/$1.patch"
[ -f "$patch" ] || { echo "no such probe: $patch" >&2; exit 2; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$root" && tar --exclude=./target --exclude=./.git --exclude=./fuzz/target -cf - .) | (cd "$scratch" && tar -xf -)
(cd "$scratch" && git init -q && git apply "$patch")
CARGO_TARGET_DIR="$root/target/probe-$1" cargo build --release -q -p delayq-bench --example compare \
    --manifest-path "$scratch/Cargo.toml"
cp "$root/target/probe-$1/release/examples/compare" "$2"
echo "built $2 with benches/probes/$1.patch"
