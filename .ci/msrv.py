#!/usr/bin/env python3
"""Checks the MSRV without a second toolchain: every package a published
workspace package (`delayq`, `delayq-durable`) depends on (all features, every
target, as locked in Cargo.lock) must declare a `rust-version` no newer than
that package's own. Prints the closure and exits 1 on a
violation. Clippy's `incompatible_msrv` lint (denied in Cargo.toml) covers the
standard-library APIs delayq itself uses.

    python3 .ci/msrv.py
"""
import json
import subprocess
import sys


def version(v):
    return tuple(int(x) for x in (v.split(".") + ["0", "0"])[:3])


def main():
    meta = json.loads(subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--all-features"]))
    pkgs = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    failed = False
    for name in ("delayq", "delayq-durable"):
        root = next(p for p in meta["packages"] if p["name"] == name and p["source"] is None)
        failed |= check(root, pkgs, nodes)
    if failed:
        sys.exit(1)


def check(root, pkgs, nodes):
    msrv = root["rust_version"]
    seen, todo = set(), [root["id"]]
    while todo:
        for dep in nodes[todo.pop()]["deps"]:
            if dep["pkg"] not in seen:
                seen.add(dep["pkg"])
                todo.append(dep["pkg"])
    bad = []
    for pid in sorted(seen, key=lambda i: pkgs[i]["name"]):
        p = pkgs[pid]
        rv = p.get("rust_version")
        ok = rv is None or version(rv) <= version(msrv)
        print(f"  {p['name']} {p['version']}: rust-version {rv or '(none)'}{'' if ok else '  <-- too new'}")
        if not ok:
            bad.append(p)
    print(f"{root['name']} rust-version {msrv}: {len(seen)} dependencies checked")
    if bad:
        names = ", ".join(f"{p['name']} {p['version']} ({p['rust_version']})" for p in bad)
        print(f"MSRV check FAILED for {root['name']}: newer than {msrv}: {names}; run `cargo update` (resolver 3 picks fitting versions) or raise rust-version")
        return True
    return False


if __name__ == "__main__":
    main()
