#!/usr/bin/env python3
"""Writes and reads seed inputs of the `model` fuzz target by name.

libFuzzer inputs are bytes that `arbitrary` 1.x decodes into `Input { heap,
capacity, ops }` (fuzz_targets/model.rs). This script encodes operation lists
into those bytes, so that a reproduction written as operations becomes a seed:

    python3 fuzz/seeds.py write            # (re)writes the named seeds below
    python3 fuzz/seeds.py show FILE        # decodes an input as operations
    python3 fuzz/seeds.py recode OLD.rs    # re-encodes corpus/model after the
                                           # `Op` enum changed (OLD.rs: the old
                                           # model.rs, e.g. from `git show`)

The encoding, as arbitrary 1.5 decodes it: `bool` is a byte (`& 1`), `u8`/`u16`/
`u32` are little-endian bytes, `Option` is a `bool` then the value, an enum is a
`u32` `x` selecting variant `(x * count) >> 32`, then its fields; the last field
(`ops`) takes the rest: each element after a `true` byte, a `false` byte ends it.
The enums' variants and field types are read from model.rs, so the names below
stay right when variants are added.
"""

import pathlib
import re
import struct
import sys

HERE = pathlib.Path(__file__).resolve().parent
MODEL = HERE / "fuzz_targets" / "model.rs"
CORPUS = HERE / "corpus" / "model"


def schema(source):
    """{enum name: [(variant, [(field, type)])]} for the enums of model.rs."""
    enums = {}
    for m in re.finditer(r"enum (\w+) \{(.*?)\n\}", source, re.S):
        body = re.sub(r"//[^\n]*", "", m.group(2))
        variants = []
        for v in re.finditer(r"(\w+)\s*(\{[^}]*\}|\([^)]*\))?\s*,", body):
            name, fields = v.group(1), v.group(2) or ""
            if fields.startswith("{"):
                fs = re.findall(r"(\w+)\s*:\s*(\w+)", fields)
            elif fields.startswith("("):
                fs = [(str(i), t.strip()) for i, t in enumerate(fields[1:-1].split(",")) if t.strip()]
            else:
                fs = []
            variants.append((name, fs))
        enums[m.group(1)] = variants
    return enums


INTS = {"u8": "<B", "u16": "<H", "u32": "<I"}


def enc_value(ty, value, enums):
    if ty in INTS:
        return struct.pack(INTS[ty], value)
    if ty == "bool":
        return bytes([1 if value else 0])
    variants = enums[ty]
    name, args = (value, {}) if isinstance(value, str) else value
    i = [v[0] for v in variants].index(name)
    x = (i * 2**32 + len(variants) - 1) // len(variants)
    out = struct.pack("<I", x)
    for field, fty in variants[i][1]:
        out += enc_value(fty, args[field], enums)
    return out


def encode(inp, enums):
    out = enc_value("bool", inp.get("heap", False), enums)
    cap = inp.get("capacity")
    out += enc_value("bool", cap is not None, enums)
    if cap is not None:
        out += enc_value("u8", cap, enums)
    for op in inp["ops"]:
        out += b"\x01" + enc_value("Op", op, enums)
    return out + b"\x00"


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        chunk = self.data[self.pos:self.pos + n]
        self.pos += len(chunk)
        return chunk + bytes(n - len(chunk))  # arbitrary fills a short read with zeros

    def empty(self):
        return self.pos >= len(self.data)


def dec_value(ty, r, enums):
    if ty in INTS:
        return struct.unpack(INTS[ty], r.take(struct.calcsize(INTS[ty])))[0]
    if ty == "bool":
        return r.take(1)[0] & 1 == 1
    variants = enums[ty]
    x = struct.unpack("<I", r.take(4))[0]
    name, fields = variants[(x * len(variants)) >> 32]
    if not fields:
        return name
    return (name, {f: dec_value(t, r, enums) for f, t in fields})


def decode(data, enums):
    r = Reader(data)
    inp = {"heap": dec_value("bool", r, enums)}
    inp["capacity"] = dec_value("u8", r, enums) if dec_value("bool", r, enums) else None
    ops = []
    while not r.empty() and dec_value("bool", r, enums):
        ops.append(dec_value("Op", r, enums))
    inp["ops"] = ops
    return inp


def op(name, **args):
    return (name, args) if args else name


# The reliability issue's reproductions, as `model` inputs.
SEEDS = {
    # 1. A saturated deadline on the timing wheel, then clock steps of centuries:
    #    the proxy spun forever and `advance` never returned.
    "wheel-saturated-deadline": {
        "heap": False,
        "ops": [
            op("SendAfter", tx=0, delay="Far"),
            op("SendAtYears", tx=0, years=600),
            op("SendAtYears", tx=0, years=1),
            op("AdvanceYears", years=500),
            op("TryRecv", rx=0),
            op("TryRecv", rx=0),
            op("AdvanceMax"),
            op("TryRecv", rx=0),
            op("SendAfter", tx=0, delay="Zero"),
            op("Advance", ms=0),
            op("TryRecv", rx=0),
            op("PeekDeadline", rx=0),
            op("TakePending", rx=0),
        ],
    },
    # 2. Saturating ticks: +600 y and +500 y fell due 110 years early, in key order.
    "heap-far-deadlines-early": {
        "heap": True,
        "ops": [
            op("SendAtYears", tx=0, years=600),
            op("SendAtYears", tx=0, years=500),
            op("SendAtYears", tx=0, years=400),
            op("AdvanceYears", years=490),
            op("TryRecv", rx=0),
            op("TryRecv", rx=0),
            op("PeekDeadline", rx=0),
            op("RescheduleYears", tx=0, key=0, years=450),
            op("AdvanceYears", years=5),
            op("TryRecv", rx=0),
        ],
    },
    # 3. The wheel's peek after a rotation carry reported B, not the earlier C.
    "wheel-peek-after-carry": {
        "heap": False,
        "ops": [
            op("SendAtNs", tx=0, at_ms=0, ns=65_036),
            op("SendAtNs", tx=0, at_ms=0, ns=115_536),
            op("SetNs", at_ms=0, ns=65_036),
            op("TryRecv", rx=0),
            op("SendAtNs", tx=0, at_ms=0, ns=65_636),
            op("PeekDeadline", rx=0),
            op("SetNs", at_ms=0, ns=115_536),
            op("TryRecv", rx=0),
            op("TryRecv", rx=0),
        ],
    },
    # 4. `take_pending` while the dequeue proxy waits for egress room: a later due
    #    item was never moved (`recv_many` hung; libFuzzer reports a timeout).
    "take-pending-while-waiting-for-room": {
        "heap": False,
        "ops": [
            op("Burst", tx=0, at_ms=0, n=137),
            op("Advance", ms=1),
            op("TakePending", rx=0),
            op("SendAfter", tx=0, delay="Zero"),
            op("RecvMany", rx=0, limit=1),
        ],
    },
}


def main():
    enums = schema(MODEL.read_text())
    cmd = sys.argv[1] if len(sys.argv) > 1 else "write"
    if cmd == "write":
        CORPUS.mkdir(parents=True, exist_ok=True)
        for name, inp in SEEDS.items():
            data = encode(inp, enums)
            assert decode(data, enums) == {"capacity": None, **inp}, name
            (CORPUS / name).write_bytes(data)
            print(f"{name}: {len(data)} bytes")
    elif cmd == "show":
        print(decode(pathlib.Path(sys.argv[2]).read_bytes(), enums))
    elif cmd == "recode":
        old = schema(pathlib.Path(sys.argv[2]).read_text())
        for f in sorted(CORPUS.iterdir()):
            inp = decode(f.read_bytes(), old)
            f.write_bytes(encode(inp, enums))
            print(f"{f.name}: {len(inp['ops'])} ops")
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
