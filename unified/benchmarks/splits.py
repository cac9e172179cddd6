"""The tune/report split every claim rests on.

MBPP+ ids in a seeded random order (`SPLIT_SEED`), cut in two disjoint sets: `tune` (the
first `TUNE_SIZE`: recipes are chosen on these) and `report` (the rest: results are reported
on the first N, never tuned on). HumanEval: all 164 in order for both. `no_example`: the
problems with no visible example that has an expected value (HumanEval's 48 of 164).

The order must never change for a benchmark and seed: committed results name their problems
by it (tests/benchmarks/test_splits.py pins a digest of the ids).
"""

from __future__ import annotations

import random

from unified.benchmarks.load import load_problems
from unified.errors import UserError

SPLIT_SEED, TUNE_SIZE = 0, 100
SPLITS = ("tune", "report", "no_example")


def split_ids(split: str, benchmark: str = "mbpp", seed: int = SPLIT_SEED) -> list[str]:
    """The split's problem ids, in the order results take their first N from."""
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}: one of {', '.join(SPLITS)}")
    problems = load_problems(benchmark, None, None, [])
    if split == "no_example":  # MBPP+'s examples get their values from the sandbox later: every one has one
        if benchmark == "mbpp":
            raise UserError("split no_example is for benchmark humaneval (every MBPP+ problem has an example)")
        return [p.problem_id for p in problems if not any(c.expected is not None for c in p.visible)]
    return ordered(split, [p.problem_id for p in problems], benchmark, seed)


def ordered(split: str, ids: list[str], benchmark: str = "mbpp", seed: int = SPLIT_SEED) -> list[str]:
    """`ids` (the benchmark's order) cut into `split`: pure, for tests and for callers with ids."""
    if benchmark != "mbpp":
        return list(ids)
    ids = list(ids)
    random.Random(seed).shuffle(ids)
    return ids[:TUNE_SIZE] if split == "tune" else ids[TUNE_SIZE:]
