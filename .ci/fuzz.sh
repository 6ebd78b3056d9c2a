#!/usr/bin/env bash
# Fuzz smoke: runs each cargo-fuzz target of fuzz/ for a bounded time, starting
# from the checked-in seeds (fuzz/corpus/<target>). Exits non-zero on a crash,
# a failed check, a leak or a hang (libFuzzer's -timeout).
#
#   FUZZ_SECONDS=60   seconds per target (default 60)
#   FUZZ_TARGETS="model concurrent"
#
# Needs the nightly toolchain (skipped with a message if it is missing: it cannot
# be installed from here) and cargo-fuzz (installed if missing).
set -euo pipefail
cd "$(dirname "$0")/.."

secs="${FUZZ_SECONDS:-60}"
targets="${FUZZ_TARGETS:-model concurrent}"

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "fuzz: SKIPPED: no nightly toolchain (cargo-fuzz needs one)"
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi
cargo +nightly fuzz --version


work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd fuzz
cargo +nightly fuzz build
status=0
for t in $targets; do
  echo "=== fuzz $t: ${secs}s from $(ls "corpus/$t" | wc -l) seeds ==="
  mkdir -p "$work/$t"
  # New inputs go to the scratch corpus (first), the seeds are only read.
  if ! cargo +nightly fuzz run "$t" "$work/$t" "corpus/$t" -- \
      -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
      >"$work/$t.log" 2>&1; then
    status=1
    echo "fuzz $t: FAILED"
    grep -E -A12 'panicked at|ERROR: libFuzzer|ERROR: AddressSanitizer|ALARM' "$work/$t.log" | head -60 || true
    grep -E 'Test unit written|Base64' "$work/$t.log" || true
    for a in artifacts/"$t"/*; do
      [ -f "$a" ] || continue
      echo "--- $a ---"
      cargo +nightly fuzz fmt "$t" "$a" 2>/dev/null | tail -n 60 || true
    done
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$work/$t.log" || true
  # The model target counts how often it reached the regions the reliability
  # issue named (egress full, take_pending while open, never-due deadlines,
  # century steps, the clock at the horizon): the last count of the run.
  grep -E '^reached after' "$work/$t.log" | tail -n 1 || true
  grep -E '^#[0-9]+ +DONE' "$work/$t.log" || true
done
[ "$status" -eq 0 ] && echo "fuzz: all targets passed"
exit "$status"
