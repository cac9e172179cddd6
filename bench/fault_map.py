"""Where a trivial call's page faults land: which mapping of the zygote's image each fault of
the zygote and of its calls touches (`perf record -e page-faults -d`, every fault sampled).

A pooled call's CPU is mostly page faults (docs/sandbox.md, "Where a call's time goes"):
every page either side of a fork writes is copied, and a child maps again every page of a
library's code it runs (the fork copies no page-table entries of a file mapping that holds
no private page). The count is the same on an idle and a busy machine, so this bench tells
what a change to the pool would save without timing anything: `[anon]` and `[heap]` are the
interpreter's objects (reference counts, allocations), `libpython ... rw-p` its static
objects (None, small ints, static types: what Python 3.12's immortal objects would stop
writing), `r-xp`/`r--p` code and constants mapped again in each child.

    python -m bench.fault_map [--calls 200]

Needs `perf` (linux-tools) and the right to attach it to the zygote (root, or
perf_event_paranoid <= 1); without perf it says so in one line and exits 2. Writes logs/bench/fault_map.json: per side, faults per call and per
mapping.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import OUT, write_json
from bench.executor_throughput import PROGRAM, _children
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig


def mappings(pid: int) -> list[tuple[int, int, str]]:
    """(start, end, "file perms") of each mapping of `pid`; anonymous ones as [anon]."""
    out = []
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split()
        start, end = (int(x, 16) for x in parts[0].split("-"))
        name = parts[5].rsplit("/", 1)[-1] if len(parts) > 5 else "[anon]"
        out.append((start, end, f"{name} {parts[1]}"))
    return out


def place(addr: int, maps: list[tuple[int, int, str]]) -> str:
    return next((name for start, end, name in maps if start <= addr < end), "mapped after the fork")


def tally(lines: list[str], zygote: int, maps, calls: int) -> dict:
    """perf script lines "pid addr" -> {side: {per_call, by_mapping}}."""
    counts = {"zygote": collections.Counter(), "call": collections.Counter()}
    for line in lines:
        fields = line.split()
        if len(fields) < 2:
            continue
        side = "zygote" if int(fields[0]) == zygote else "call"
        counts[side][place(int(fields[1], 16), maps)] += 1
    return {
        side: {
            "per_call": round(sum(c.values()) / calls, 1),
            "by_mapping": {name: round(n / calls, 1) for name, n in c.most_common(12)},
        }
        for side, c in counts.items()
    }


def measure(calls: int) -> dict:
    with Executor(ExecutorConfig(workers=1)) as ex, tempfile.TemporaryDirectory() as tmp:
        ex.run_batch([ExecCall(PROGRAM, "f", (i,)) for i in range(300)])  # warm: first forks touch cold pages
        zygote = _children(ex._workers[0].proc.pid)[0]
        maps, data = mappings(zygote), f"{tmp}/faults.data"
        rec = subprocess.Popen(["perf", "record", "-q", "-e", "page-faults", "-c", "1", "-d", "-p", str(zygote), "-o", data])
        time.sleep(2)  # perf attached
        ex.run_batch([ExecCall(PROGRAM, "f", (i,)) for i in range(calls)])
        time.sleep(0.5)
        rec.send_signal(signal.SIGINT)
        rec.wait()
        script = subprocess.run(["perf", "script", "-i", data, "-F", "pid,addr"], capture_output=True, text=True, check=True)
        return {"calls": calls, **tally(script.stdout.splitlines(), zygote, maps, calls), "isolation": ex.isolation}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, default=OUT / "fault_map.json")
    args = parser.parse_args()
    if shutil.which("perf") is None:
        print("fault_map: needs perf (linux-tools) on PATH", file=sys.stderr)
        sys.exit(2)
    result = measure(args.calls)
    for side in ("zygote", "call"):
        print(f"{side}: {result[side]['per_call']} faults per call")
        for name, n in result[side]["by_mapping"].items():
            print(f"  {n:7.1f}  {name}")
    write_json(args.out, result, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
