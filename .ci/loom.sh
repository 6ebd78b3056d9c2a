#!/usr/bin/env bash
# Loom model checks of delayq (loom-tests/): the whole suite, then the check that
# loom still finds each bug planted behind a `--cfg delayq_bug_*`.
#
# Bounded so that it finishes well under 15 minutes on 2 cores:
#   LOOM_MAX_PREEMPTIONS (default 2) bounds every model (the suite takes about
#   80 s at 2); LOOM_TIMEOUT (seconds, default 600) bounds each cargo invocation,
#   compilation included. A deeper local run: loom-tests/README.md (bound 3 is
#   cheap for the component models, hours for the whole suite).
# Separate target dirs keep the loom RUSTFLAGS from invalidating the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
limit="${LOOM_TIMEOUT:-600}"
export RUST_BACKTRACE=0

echo "loom suite: LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS, timeout ${limit}s"
start=$(date +%s)
# The models of the internals (loom-tests/models/, compiled into the crate's tests)...
RUSTFLAGS="--cfg delayq_loom" CARGO_TARGET_DIR=target/loom \
  timeout "$limit" cargo test -p delayq --lib --release -- loom_models --nocapture
# ...and the whole-queue models on the public API (loom-tests/tests/).
RUSTFLAGS="--cfg delayq_loom" CARGO_TARGET_DIR=target/loom \
  timeout "$limit" cargo test -p loom-tests --release --no-fail-fast -- --nocapture
echo "loom suite: $(( $(date +%s) - start )) s"

# Planted bugs in the component models of the internals: each in its own build
# (one target dir for all: they differ only in RUSTFLAGS, so each rebuilds the
# crate), and the models named must fail, with the message given.
#   found BUG FILTER MESSAGE
found() {
  local bug=$1 filter=$2 message=$3 out start
  echo "planted bug: loom must find --cfg $bug"
  start=$(date +%s)
  out=$(RUSTFLAGS="--cfg delayq_loom --cfg $bug" CARGO_TARGET_DIR="target/loom-bug" \
    timeout "$limit" cargo test -p delayq --lib --release -- "$filter" 2>&1) && {
    echo "$out"; echo "loom missed the planted bug $bug"; exit 1; }
  grep -q "$message" <<<"$out" || {
    echo "$out"; echo "the models failed under $bug, but not with: $message"; exit 1; }
  echo "planted bug $bug: found in $(( $(date +%s) - start )) s"
}
# A take that frees its egress slot before it reads the item out (egress.rs):
# the next lap's push writes the item while the consumer still reads it.
found delayq_bug_egress_free_before_read loom_models::egress "Causality violation"
# A take that claims a slot whose take of one lap ago is not done (egress.rs):
# it takes that lap's item a second time.
found delayq_bug_egress_take_unfinished loom_models::egress::a_take_behind "left twice or never"
# The inserter's read of the lead without its fence (lead.rs): a consumer
# left leading for the old head while the new one is due.
found delayq_bug_new_head_no_fence loom_models::lead::a_new_earliest "deadlock"
# The leader's give-up without its fence (lead.rs): a follower left asleep.
found delayq_bug_lead_no_fence loom_models::lead::a_leader_that_leaves "deadlock"
# A release of the dequeue role that forgets the consumer waiting for it (role.rs).
found delayq_bug_role_no_wake loom_models::role::a_consumer_that_wants "deadlock"
# A performer of the enqueue role that does not ring for the commands it left (role.rs).
found delayq_bug_help_no_ring loom_models::role::no_push_is_left "deadlock"
# A push that leaves its command to a streaming enqueue proxy without ringing it
# (role.rs): the proxy may have looked at the ingress and be parking.
found delayq_bug_stream_no_ring loom_models::role::no_push_is_left_behind_a_streaming "deadlock"
# A look for work after a role's release that ignores the spill behind a
# drained ring (ingress.rs): the spilled command is left with the proxy parked.
found delayq_bug_ready_no_spill loom_models::role::a_push_that_spilled "deadlock"
# A woken consumer that never leaves the waiter list's count of woken threads
# (waiters.rs): takes that leave items behind skip their wakes forever.
found delayq_bug_woken_never_runs loom_models::blocking::a_woken_consumer "deadlock"

# Each planted bug in its own build: loom must find it.
for bug in delayq_bug_async_drop_no_pass_on delayq_bug_catch_up_no_sync delayq_bug_catch_up_no_move delayq_bug_catch_up_no_look; do
  echo "planted bug: loom must find --cfg $bug"
  start=$(date +%s)
  RUSTFLAGS="--cfg delayq_loom --cfg $bug" CARGO_TARGET_DIR="target/loom-$bug" \
    timeout "$limit" cargo test -p loom-tests --release --test loom_planted_bug -- --nocapture
  echo "planted bug $bug: $(( $(date +%s) - start )) s"
done
