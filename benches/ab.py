#!/usr/bin/env python3
"""Interleaved A/B runs of the comparison harness's child mode, for one change.

Build the harness once per variant and keep the binaries apart, e.g.

    git stash; cargo build --release -p delayq-bench --example compare
    cp target/release/examples/compare /tmp/compare-base
    git stash pop; cargo build --release -p delayq-bench --example compare
    cp target/release/examples/compare /tmp/compare-new

then

    python3 benches/ab.py 5 base=/tmp/compare-base new=/tmp/compare-new -- \\
        "delayq 16 300000 1000000 100000" "delayq 16 2000000 1000000 0"

Each configuration is `IMPL THREADS N D_NS RATE` as `compare --child` takes it
(RATE 0: producers unthrottled). Repeats are the outer loop and every variant
runs each configuration back to back, so outside load hits all variants alike.
A variant may be a script that sets an environment variable and execs a binary.
Before each run it samples the host for a second and waits while the
hypervisor steals more than 5 % of the CPU (`AB_MAX_STEAL`, percent; this
VM has had stretches of 30-40 % steal, in which no figure is comparable),
and a run during which more was stolen is run again (up to 5 times).
Prints every run (with the 1-minute load average before it and the steal
during it), then min / median
/ max per configuration and variant: throughput (M items/s), lateness p50 / p99
/ p999 (µs) and CPU per item (µs, the whole child process). Exits non-zero if
any run lost or duplicated an item or delivered one early.
"""
import os
import statistics
import subprocess
import sys
import time


def cpu_times():
    """(all, stolen) CPU time so far, from /proc/stat."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f), f[7] if len(f) > 7 else 0


def stolen_since(before):
    """Percent of the CPU time since `before` that the hypervisor stole."""
    (t0, s0), (t1, s1) = before, cpu_times()
    return 100.0 * (s1 - s0) / max(1, t1 - t0)


def steal():
    """Percent of CPU time stolen by the hypervisor over the next second."""
    before = cpu_times()
    time.sleep(1)
    return stolen_since(before)


def wait_quiet(limit):
    """Waits (up to 10 minutes) until a second passes with steal <= limit."""
    st = steal()
    deadline = time.time() + 600
    while st > limit and time.time() < deadline:
        print(f"  steal {st:.0f} %: waiting", file=sys.stderr, flush=True)
        time.sleep(5)
        st = steal()
    return st


def main():
    args = sys.argv[1:]
    if len(args) < 4 or "--" not in args:
        sys.exit(__doc__)
    reps, sep = int(args[0]), args.index("--")
    variants = [a.split("=", 1) for a in args[1:sep]]
    configs = [c.split() for c in args[sep + 1:]]
    limit = float(os.environ.get("AB_MAX_STEAL", "5"))
    runs, bad = {}, 0
    for _ in range(reps):
        for cfg in configs:
            for label, exe in variants:
                for _attempt in range(5):
                    wait_quiet(limit)
                    load = open("/proc/loadavg").read().split()[0]
                    before = cpu_times()
                    out = subprocess.run([exe, "--child", *cfg], capture_output=True, text=True, timeout=600).stdout
                    st = stolen_since(before)
                    if st <= limit:
                        break
                    print(f"  steal {st:.0f} % during the run: again", file=sys.stderr, flush=True)
                line = next(l for l in out.splitlines() if l.startswith("RESULT"))
                f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
                n = int(f["n"])
                r = (float(f["thr"]) / 1e6, int(f["p50"]) / 1e3, int(f["p99"]) / 1e3, int(f["p999"]) / 1e3,
                     float(f["cpu"]) / n * 1e6)
                wrong = int(f["early"]) + int(f["lost"]) + int(f["dup"])
                bad += wrong
                runs.setdefault((" ".join(cfg), label), []).append(r)
                print(f"{' '.join(cfg):34} {label:8} {r[0]:.3f} M/s  p50 {r[1]:8.1f}  p99 {r[2]:8.1f}  "
                      f"p999 {r[3]:8.1f} µs  cpu/item {r[4]:6.2f} µs  wrong {wrong}  load {load}  steal {st:.0f} %", flush=True)
    print("\nmin / median / max")
    for (cfg, label), rs in runs.items():
        def col(k, fmt):
            xs = [r[k] for r in rs]
            return "/".join(fmt.format(x) for x in (min(xs), statistics.median(xs), max(xs)))
        print(f"{cfg:34} {label:8} M/s {col(0, '{:.2f}')} | p50 {col(1, '{:.1f}')} | p99 {col(2, '{:.1f}')} | "
              f"p999 {col(3, '{:.1f}')} | cpu/item {col(4, '{:.1f}')}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
