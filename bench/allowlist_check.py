"""Every canonical solution of MBPP+ (399) and HumanEval (164), on every input of EvalPlus's
verdict (MBPP+: base and plus inputs; HumanEval: the calls its check code makes), under the
seccomp allowlist and in a pool without any filter: the results must be the same, call by call
(status, error, and the value as EvalPlus compares it: three MBPP+ solutions return
tuple(set(...)), whose order differs from run to run with or without a filter), and every
HumanEval solution must pass its recorded cases under both. A call that times out in one run
only is listed apart, with its CPU time in the other: a solution near the CPU limit on a
loaded machine.

    python -m bench.allowlist_check [--policy default|bare]

`default` is the executor's default policy (what training runs); `bare` bans nothing, so only
the kernel layer stands between a program and the kernel. Writes
docs/results/allowlist_check.json (the CI test, tests/sandbox/test_allowlist.py, runs the
base inputs only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

from unified.benchmarks.hidden import evalplus_cases, hidden_calls, passes_hidden
from unified.benchmarks.load import load_problems
from unified.benchmarks.oracle import output_matches
from unified.machine import cpu_info, git_commit
from unified.sandbox import config as sandbox_config
from unified.sandbox.executor import Executor, ExecutorConfig
from unified.values import values_equal

OUT = Path(__file__).resolve().parents[1] / "docs" / "results" / "allowlist_check.json"


def run(config: ExecutorConfig, calls, filtered: bool):
    real = sandbox_config.seccomp_filter.bpf
    if not filtered:
        sandbox_config.seccomp_filter.bpf = lambda **_: None
    try:
        ex = Executor(config)
    finally:
        sandbox_config.seccomp_filter.bpf = real
    with ex:
        assert bool(ex.isolation.get("seccomp")) == filtered, ex.isolation
        start = time.monotonic()
        results = ex.run_batch(calls)
        return results, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", choices=("default", "bare"), default="default")
    args = parser.parse_args()
    bans = {} if args.policy == "default" else {"banned_modules": (), "banned_calls": ()}
    config = ExecutorConfig(workers=2, **bans)
    jobs, problems = [], []
    for name in ("mbpp", "humaneval"):
        for p in load_problems(name):
            cases = tuple(c for c in evalplus_cases(p) if c.args is not None)
            if p.canonical_solution and cases:
                problems.append((p, cases, len(jobs)))
                jobs += hidden_calls(p, p.canonical_solution, cases)
    under, under_s = run(config, jobs, True)
    without, without_s = run(config, jobs, False)
    case_of = [(p, c) for p, cases, _ in problems for c in cases]
    differ, timeouts, reordered = [], [], 0
    for i, (a, b) in enumerate(zip(under, without)):
        p, case = case_of[i]
        if (a.status, a.error) != (b.status, b.error):
            (timeouts if "timeout" in (a.status, b.status) else differ).append(i)
        elif a.ok and not values_equal(a.value, b.value):
            if output_matches(p, case.args, a.value, b.value):
                reordered += 1  # the same output as EvalPlus compares it (a set's order, as tuple(set(...)) gives it)
            else:
                differ.append(i)
    he = [(p, cases, start) for p, cases, start in problems if p.benchmark == "humaneval"]
    he_pass = {
        label: sum(passes_hidden(p, res[start : start + len(cases)], cases) for p, cases, start in he)
        for label, res in (("allowlist", under), ("no_filter", without))
    }
    result = {
        "what": "canonical solutions on every EvalPlus input, under the seccomp allowlist and without a filter",
        "command": f"python -m bench.allowlist_check --policy {args.policy}",
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "commit": git_commit(OUT.parents[2]),
        "cpu": cpu_info(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "load_avg_1m": os.getloadavg()[0],
        "problems": {"mbpp": sum(p.benchmark == "mbpp" for p, _, _ in problems), "humaneval": len(he)},
        "calls": len(jobs),
        "statuses_allowlist": dict(Counter(r.status for r in under)),
        "statuses_no_filter": dict(Counter(r.status for r in without)),
        "calls_that_differ": len(differ),
        "differing": [
            {
                "call": i,
                "problem": case_of[i][0].problem_id,
                "allowlist": [under[i].status, under[i].error[:200]],
                "no_filter": [without[i].status, without[i].error[:200]],
            }
            for i in differ[:20]
        ],
        "same_output_in_another_order": reordered,
        "timeout_in_one_run_only": [
            {
                "problem": case_of[i][0].problem_id,
                "allowlist": [under[i].status, round(under[i].cpu_s, 2)],
                "no_filter": [without[i].status, round(without[i].cpu_s, 2)],
            }
            for i in timeouts
        ],
        "humaneval_solutions_passing": he_pass,
        "seconds": {"allowlist": round(under_s, 1), "no_filter": round(without_s, 1)},
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    keys = ("calls", "calls_that_differ", "same_output_in_another_order", "humaneval_solutions_passing", "seconds")
    print(json.dumps({k: result[k] for k in keys} | {"timeout_in_one_run_only": len(timeouts)}))
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
