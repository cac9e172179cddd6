"""The tune/report/confirm splits every claim rests on.

MBPP+ ids in a seeded random order (`SPLIT_SEED`), cut in three disjoint sets: `tune` (the
first `TUNE_SIZE`: recipes are chosen on these), `report` (the next `REPORT_SIZE`: the
exploratory results of earlier recipes, all chosen on these) and `confirm` (the rest of the
order's first 399, positions 300-398 of the order, 0-based 200-298 of the old `report`: no
decision has seen them; a claim runs on them once, after its recipe is frozen in a commit,
`eval/experiments/gain.py --split confirm --recipe-commit`). HumanEval: all 164 in order for
`report`. `no_example`: the problems with no visible example that has an expected value
(HumanEval's 48 of 164).

Every split leaves out the 21 MBPP+ tasks EvalPlus v0.2 removed for broken tests
(`mbpp.REMOVED_IN_V02`), AFTER the seeded order: the order, and so every committed result's
problem list, is the same as before the filter (`keep_removed=True` gives the unfiltered
list that results before 2026-11-29 took their first N from). The order must never change
for a benchmark and seed: tests/benchmarks/test_splits.py pins a digest of each split.
"""

from __future__ import annotations

import random

from unified.benchmarks.load import load_problems
from unified.benchmarks.mbpp import REMOVED_IN_V02
from unified.errors import UserError

SPLIT_SEED, TUNE_SIZE, REPORT_SIZE = 0, 100, 200
SPLITS = ("tune", "report", "confirm", "no_example")


def split_ids(split: str, benchmark: str = "mbpp", seed: int = SPLIT_SEED, keep_removed: bool = False) -> list[str]:
    """The split's problem ids, in the order results take their first N from."""
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}: one of {', '.join(SPLITS)}")
    problems = load_problems(benchmark, None, None, [])
    if split == "no_example":  # MBPP+'s examples get their values from the sandbox later: every one has one
        if benchmark == "mbpp":
            raise UserError("split no_example is for benchmark humaneval (every MBPP+ problem has an example)")
        return [p.problem_id for p in problems if not any(c.expected is not None for c in p.visible)]
    if split == "confirm" and benchmark != "mbpp":
        raise UserError(f"split confirm is for benchmark mbpp ({benchmark} has one split of all its problems: report)")
    ids = ordered(split, [p.problem_id for p in problems], benchmark, seed)
    return ids if keep_removed else [i for i in ids if i not in REMOVED_IN_V02]


def ordered(split: str, ids: list[str], benchmark: str = "mbpp", seed: int = SPLIT_SEED) -> list[str]:
    """`ids` (the benchmark's order) cut into `split`, removed tasks kept: pure, for tests and
    for callers with ids."""
    if benchmark != "mbpp":
        return list(ids)
    ids = list(ids)
    random.Random(seed).shuffle(ids)
    cuts = {"tune": (0, TUNE_SIZE), "report": (TUNE_SIZE, TUNE_SIZE + REPORT_SIZE), "confirm": (TUNE_SIZE + REPORT_SIZE, None)}
    lo, hi = cuts[split]
    return ids[lo:hi]
