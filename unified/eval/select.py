"""The answer a user gets from K samples: the first that passes the problem's VISIBLE examples.

    chosen = select_visible(problems, programs, executor.run_batch)   # problem id -> Program or None

CodeT / AlphaCode-style filtering: of a problem's samples (in the order they were sampled),
the first whose program returns every visible example's expected value is the answer; a
problem where none passes has no pick (None), and the caller falls back to its greedy answer.
Only `Problem.visible` is read here (the same check phase 1 runs, `pipeline.programs.
check_visible`); the pick is scored on the hidden tests afterwards, by `benchmarks.hidden`,
and never chosen by them (tests/pipeline/test_hidden_firewall.py seals them).
"""

from __future__ import annotations

from typing import Sequence

from unified.pipeline.programs import check_visible
from unified.types import Problem, Program


def select_visible(problems: Sequence[Problem], programs: Sequence[Program], run_batch) -> dict[str, Program | None]:
    """Problem id -> the first of its `programs` (in order) that passes its visible examples
    with values, or None (no such program, or no visible example with a value to filter by)."""
    checked = {p.problem_id for p in problems if any(c.expected is not None for c in p.visible)}
    mine = [prog for prog in programs if prog.problem_id in checked]
    passing, _ = check_visible(mine, [p for p in problems if p.problem_id in checked], run_batch) if mine else (set(), [])
    chosen: dict[str, Program | None] = {p.problem_id: None for p in problems}
    for prog in mine:
        if prog.program_id in passing and chosen[prog.problem_id] is None:
            chosen[prog.problem_id] = prog
    return chosen
