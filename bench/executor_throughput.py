"""Executions per second of `def f(x): return x + 1`: the warm sandbox pool against a naive
`subprocess.run([sys.executable, "-c", ...])` per call, measured in one run on the same
machine. The two are interleaved (pool, naive, pool, naive, ...) so that load from other
processes hits both alike; each figure is the median over the repetitions.

The naive baseline runs its calls one after another, as a plain loop would; the pool
uses its default size (ExecutorConfig().workers) and every call is still a fresh process,
forked from a clean zygote, with the full isolation (runtime-only root, namespaces, a PID
namespace and a fresh /tmp per call, uid drop, seccomp, rlimits, the worker's cgroup:
`isolation` and `limits` in the JSON say which were on). `cpu_ms_per_call` is the CPU the
calls' processes used (the part of the cost that does not depend on how busy the machine
is; with cgroups, of the call's whole tree from its fork on). `faults_per_call` counts the page
faults of the zygotes and of their calls (`/proc/<zygote>/stat` minflt and cminflt): every page
either side writes between two forks costs one, and the count does not depend on the load, so
it compares two versions of the pool on a busy machine where the rates cannot.

    python -m bench.executor_throughput [--reps 5] [--calls 400] [--naive-calls 40]

Writes logs/bench/executor_throughput.json: pooled_per_s, naive_per_s, ratio (+ details).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from bench.common import REPO, write_json
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig  # noqa: E402

PROGRAM = "def f(x):\n    return x + 1\n"
OUT = REPO / "logs" / "bench" / "executor_throughput.json"


def pooled_rate(ex: Executor, n: int, cpu: list | None = None, faults: list | None = None) -> float:
    calls = [ExecCall(PROGRAM, "f", (i,)) for i in range(n)]
    before = _faults(ex)
    start = time.perf_counter()
    results = ex.run_batch(calls)
    elapsed = time.perf_counter() - start
    assert all(r.ok and r.value == i + 1 for i, r in enumerate(results)), "pool gave a wrong result"
    if cpu is not None:
        cpu.append(1000 * sum(r.cpu_s for r in results) / n)
    if faults is not None and before is not None:
        after = _faults(ex)
        faults.append(tuple((b - a) / n for a, b in zip(before, after)))
    return n / elapsed


def _faults(ex: Executor) -> tuple[int, int] | None:
    """(minor faults of the zygotes, of their reaped calls) so far; None where /proc hides them."""
    zygote = calls = 0
    try:
        for worker in ex._workers:  # the jail process; its one child is the zygote
            for child in _children(worker.proc.pid):
                fields = open(f"/proc/{child}/stat").read().rsplit(")", 1)[1].split()
                zygote, calls = zygote + int(fields[7]), calls + int(fields[8])
    except (OSError, IndexError, ValueError):
        return None
    return zygote, calls


def _children(pid: int) -> list[int]:
    return [int(c) for task in os.listdir(f"/proc/{pid}/task") for c in open(f"/proc/{pid}/task/{task}/children").read().split()]


def naive_rate(n: int) -> float:
    start = time.perf_counter()
    for i in range(n):
        out = subprocess.run([sys.executable, "-c", f"{PROGRAM}print(f({i}))"], capture_output=True, text=True)
        assert out.stdout.strip() == str(i + 1), "naive run gave a wrong result"
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--calls", type=int, default=400, help="pooled calls per repetition")
    parser.add_argument("--naive-calls", type=int, default=40, help="naive calls per repetition")
    args = parser.parse_args()

    config = ExecutorConfig()
    pooled, naive, cpu, faults = [], [], [], []
    with Executor(config) as ex:
        pooled_rate(ex, 50)  # warm-up: first forks touch cold pages
        for rep in range(args.reps):
            pooled.append(pooled_rate(ex, args.calls, cpu, faults))
            naive.append(naive_rate(args.naive_calls))
            print(f"rep {rep + 1}/{args.reps}: pooled {pooled[-1]:7.1f}/s   naive {naive[-1]:6.1f}/s", flush=True)
        isolation, limits = ex.isolation, ex.limits

    result = {
        "pooled_per_s": round(statistics.median(pooled), 1),
        "naive_per_s": round(statistics.median(naive), 1),
        "ratio": round(statistics.median(pooled) / statistics.median(naive), 2),
        "pooled_runs": [round(x, 1) for x in pooled],
        "naive_runs": [round(x, 1) for x in naive],
        "calls_per_rep": {"pooled": args.calls, "naive": args.naive_calls},
        "cpu_ms_per_call": round(statistics.median(cpu), 3),
        "faults_per_call": {
            "zygote": round(statistics.median(f[0] for f in faults), 1) if faults else None,
            "call": round(statistics.median(f[1] for f in faults), 1) if faults else None,
        },
        "workers": config.workers,
        "cpus": os.cpu_count(),
        "load_avg_1m": os.getloadavg()[0],
        "python": platform.python_version(),
        "isolation": isolation,
        "limits": limits,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUT, result, indent=2)
    print(f"pooled {result['pooled_per_s']}/s  naive {result['naive_per_s']}/s  ratio {result['ratio']}x")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
