#!/usr/bin/env bash
# The SeqCst fence audit: delete each `fence(Ordering::SeqCst)` in src/ (the
# core; the layers' are not protocol fences) in turn, in a scratch copy of the
# workspace, and run the loom suite against it. Every deletion must make some
# model fail; a fence whose deletion passes every model is either redundant or
# guarded by no model, and loom-tests/README.md says which.
#
# Not part of .ci/run (about a minute per fence with the component models,
# several with the whole-queue ones). Usage:
#   bash .ci/fence_audit.sh            # component models, then whole queues for the survivors
#   bash .ci/fence_audit.sh --quick    # component models only
# Prints one line per fence: FAILS (some model caught the deletion) or PASSES.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
quick=${1:-}
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}" RUST_BACKTRACE=0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
target="$root/target/loom-audit"

run_models() { # DIR PACKAGE-ARGS...: 0 if every model passed
  (cd "$1" && shift && RUSTFLAGS="--cfg delayq_loom" CARGO_TARGET_DIR="$target" \
    timeout 900 cargo test --release "$@" >"$scratch/out.log" 2>&1)
}

mapfile -t fences < <(grep -rn 'fence(Ordering::SeqCst);' src --include='*.rs' \
  | grep -v '^src/timer/\|^src/workqueue/' | cut -d: -f1,2)
echo "fence audit: ${#fences[@]} SeqCst fences in src/ (LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS)"
for f in "${fences[@]}"; do
  file=${f%%:*} line=${f##*:}
  copy="$scratch/ws"
  rm -rf "$copy"; mkdir -p "$copy"
  # The workspace without its build outputs.
  tar -C "$root" --exclude=./target --exclude=./fuzz/target --exclude=./.git -cf - . | tar -C "$copy" -xf -
  sed -i "${line}s/fence(Ordering::SeqCst);/\/\* fence deleted by the audit \*\//" "$copy/$file"
  where="$file:$line ($(sed -n "$((line - 1))p" "$root/$file" | sed 's/^ *//' | cut -c1-60))"
  if ! run_models "$copy" -p delayq --lib -- loom_models; then
    echo "FAILS  $where: $(grep -oE 'test loom_models::[a-z_:]+ \.\.\. FAILED' "$scratch/out.log" | sed 's/^test //; s/ \.\.\. FAILED//' | tr '\n' ' ' || true)"
    continue
  fi
  if [ "$quick" = --quick ]; then
    echo "PASSES $where (component models only)"
    continue
  fi
  if ! run_models "$copy" -p loom-tests --no-fail-fast; then
    # A model that deadlocks aborts its test binary (loom panics inside a
    # panic), so it never prints "... FAILED": name it by its panic line.
    echo "FAILS  $where: $( { grep -oE 'test [a-z_]+ \.\.\. FAILED' "$scratch/out.log" | sed 's/^test //; s/ \.\.\. FAILED//'; \
      grep -oE "^thread '[a-z_]+' \([0-9]+\) panicked" "$scratch/out.log" | cut -d"'" -f2; } | sort -u | tr '\n' ' ' || true)"
  else
    echo "PASSES $where: no model fails without it"
  fi
done
