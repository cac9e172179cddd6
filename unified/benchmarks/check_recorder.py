"""HumanEval's `check(candidate)` code -> (input, expected) cases, recorded from trusted code.

HumanEval ships its hidden tests as assertion code. Running that code next to a model's
program would let the program reach the checker, so it never is: instead this module
runs `check` ONCE per problem with a spy in place of the candidate. The spy calls the
CANONICAL solution, and records each call's arguments (copied before the call) and the
canonical output. Those pairs become `Problem.hidden` (`hidden.record_cases`), and a program is then run on the
inputs alone and its outputs compared in the parent (`oracle`), as EvalPlus does with
HumanEval+ (expected outputs are the canonical solution's).

Only benchmark code runs here (the package's or the user's own benchmark file), in a
separate process (`python -m unified.benchmarks.check_recorder`, JSON in on stdin, JSON out)
so that its imports, seeds and globals stay out of the trainer. `random` is seeded, so a
check that draws random inputs records the same ones every time.

Not covered: assertions that do not compare the candidate's output with a fixed value
(e.g. find_zero's |poly(x)| < 1e-4) are replaced by the canonical output plus the
oracle's special rule; calls whose arguments or outputs are not literal values are
skipped; a problem whose canonical solution fails its own check gets no cases.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
from typing import Sequence

from unified.values import to_literal

TIMEOUT_S = 300.0


def record(items: Sequence[dict]) -> dict[str, list[tuple[str, str]]]:
    """problem_id -> its recorded (args, expected) pairs as literal text, for items with
    problem_id, entry_point, program (the canonical solution) and test (the check code).
    The Problem side of this (which problems, what becomes `Problem.hidden`) is
    `hidden.record_cases`."""
    out = subprocess.run(
        [sys.executable, "-m", "unified.benchmarks.check_recorder"],
        input=json.dumps(list(items)),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    if out.returncode != 0:
        raise RuntimeError(f"recording HumanEval checks failed: {out.stderr.strip()[-500:]}")
    return json.loads(out.stdout)


def _record_one(entry_point: str, program: str, test: str) -> list[tuple[str, str]]:
    namespace: dict = {"__name__": "__check__"}
    exec(program, namespace)  # noqa: S102 - the benchmark's canonical solution (trusted)
    canonical = namespace[entry_point]
    calls: list[tuple[str, str]] = []

    def spy(*args):
        before = copy.deepcopy(args)
        out = canonical(*args)
        try:
            calls.append((to_literal(before), to_literal(out)))
        except (ValueError, RecursionError):  # not literal values: cannot be a sandbox call
            pass
        return out

    random.seed(0)
    exec(test, namespace)  # noqa: S102 - the benchmark's check code (trusted)
    namespace["check"](spy)
    return list(dict.fromkeys(calls))  # the same call twice is one case


def main() -> int:
    recorded, stdout = {}, sys.stdout
    sys.stdout = sys.stderr  # what the checks print must not corrupt the JSON answer
    for item in json.load(sys.stdin):
        try:
            recorded[item["problem_id"]] = _record_one(item["entry_point"], item["program"], item["test"])
        except Exception as e:  # noqa: BLE001 - a canonical solution failing its own check: no cases
            print(f"{item['problem_id']}: {type(e).__name__}: {e}", file=sys.stderr)
            recorded[item["problem_id"]] = []
    json.dump(recorded, stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
