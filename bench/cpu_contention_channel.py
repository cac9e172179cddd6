"""What stays open by nature: two calls that run at the same time share the machine's cores, so
one can signal the other by how much CPU it takes. Measured here, bit rate and errors.

The sender (one call) holds each time slot busy (1: `--spinners` processes spinning, forks a
call may make) or idle (0: sleeping); the receiver (a concurrent call, on the other worker)
counts its own loop turns per slot and reads a 1 where it got fewer than the median. Both start
at the same whole second of CLOCK_MONOTONIC (one clock for the whole machine: no namespace
separates it). The pool bans nothing, so the programs use `time` and `os.fork`; under the
default policy a program has neither by name, and would build its clock and its spinning
otherwise (a file's timestamps in /tmp tick with the kernel's coarse clock): this is an upper
bound for that case.

    python -m bench.cpu_contention_channel [--bits 64] [--slots-ms 20 50 100] [--spinners 2]

Prints, per slot length, the bit error rate and the capacity of a binary symmetric channel with
that error rate (bits/s); writes logs/bench/cpu_contention_channel.json. The figure depends on
everything else the machine runs: note the load.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import sys
import time
from pathlib import Path

from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig

OUT = Path(__file__).resolve().parents[1] / "logs" / "bench" / "cpu_contention_channel.json"

SENDER = """
import os, time
def f(bits, slot, spinners):
    t0 = float(int(time.monotonic()) + 2)
    kids = []
    for k in range(spinners):
        pid = os.fork()
        if pid == 0:
            while time.monotonic() < t0:
                time.sleep(0.001)
            for i, b in enumerate(bits):
                end = t0 + (i + 1) * slot
                if b == '1':
                    while time.monotonic() < end:
                        pass
                else:
                    time.sleep(max(0.0, end - time.monotonic()))
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    return len(bits)
"""

RECEIVER = """
import time
def f(n, slot):
    t0 = float(int(time.monotonic()) + 2)
    while time.monotonic() < t0:
        time.sleep(0.001)
    counts = []
    for i in range(n):
        end, c = t0 + (i + 1) * slot, 0
        while time.monotonic() < end:
            c += 1
        counts.append(c)
    return counts
"""


def capacity(p: float) -> float:
    """Bits per channel use of a binary symmetric channel with error rate p."""
    if p <= 0.0 or p >= 1.0:
        return 1.0
    return 1.0 + p * math.log2(p) + (1 - p) * math.log2(1 - p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bits", type=int, default=64)
    parser.add_argument("--slots-ms", type=float, nargs="+", default=[20.0, 50.0, 100.0])
    parser.add_argument("--spinners", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    rows = []
    config = ExecutorConfig(workers=2, timeout_s=30.0, wall_s=60.0, banned_modules=(), banned_calls=())
    with Executor(config) as ex:
        for slot_ms in args.slots_ms:
            bits = format(secrets.randbits(args.bits), f"0{args.bits}b")
            slot = slot_ms / 1000
            load = os.getloadavg()[0]
            sent, got = ex.run_batch(
                [ExecCall(SENDER, "f", (bits, slot, args.spinners)), ExecCall(RECEIVER, "f", (args.bits, slot))]
            )
            assert sent.ok and got.ok, (sent, got)
            cut = sorted(got.value)[len(got.value) // 2]
            read = "".join("1" if c < cut else "0" for c in got.value)
            errors = sum(a != b for a, b in zip(read, bits))
            p = errors / args.bits
            rows.append(
                {
                    "slot_ms": slot_ms,
                    "bits": args.bits,
                    "errors": errors,
                    "error_rate": round(p, 3),
                    "raw_bits_per_s": round(1000 / slot_ms, 1),
                    "capacity_bits_per_s": round(capacity(p) * 1000 / slot_ms, 2),
                    "load_avg_1m": load,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {
                "rows": rows,
                "spinners": args.spinners,
                "cpus": os.cpu_count(),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
