"""MBPP+ (EvalPlus), bundled in unified/data: one built-in benchmark (`load.BUILTIN`).

Visible examples are the `base_input`s (typed from the `assertion` field: `arg_types`), the
hidden tests the `plus_input`s. Expected outputs are what the canonical solution returns,
computed in the sandbox (`hidden.with_expected_outputs`), as EvalPlus does.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from unified.text.arg_types import apply_template, arg_templates, calls_of, child_template
from unified.types import Problem, TestCase

NAME = "mbpp"
ID_PREFIX = "Mbpp/"
BUNDLED = Path(__file__).resolve().parent.parent / "data" / "MbppPlus.jsonl.gz"

# The 21 tasks EvalPlus v0.2 (MBPP+ 378) removed from v0.1 (399, bundled) for ill-formed tests
# (its tools/mbpp/fix_v011.py; EvalPlus issue 147). The bundled data keeps them; every split
# leaves them out (`splits.split_ids`).
REMOVED_IN_V02 = frozenset(
    f"{ID_PREFIX}{n}"
    for n in (83, 115, 117, 143, 164, 229, 249, 295, 396, 400, 407, 431, 438, 442, 461, 574, 582, 595, 640, 746, 783)
)


def matches(row: dict) -> bool:
    """A row in MBPP+'s schema (from any source)."""
    return "base_input" in row


def rows() -> list[dict]:
    with gzip.open(BUNDLED, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def problem(row: dict, benchmark: str = NAME) -> Problem:
    entry = row["entry_point"]
    calls = calls_of(row.get("assertion", ""), entry)
    templates = arg_templates(calls)

    def typed(args: list) -> tuple:
        return tuple(apply_template(a, child_template(templates, i)) for i, a in enumerate(args))

    base = [typed(a) for a in row.get("base_input", [])]
    if len(calls) == len(base):  # the assertion's own literals are the exact types
        base = calls
    return Problem(
        problem_id=row["task_id"],
        benchmark=benchmark,
        prompt=row["prompt"].strip().strip("'\"").strip(),
        entry_point=entry,
        visible=tuple(TestCase(args, None) for args in base),
        hidden=tuple(TestCase(typed(a), None) for a in row.get("plus_input", [])),
        canonical_solution=row.get("canonical_solution", ""),
        atol=float(row.get("atol") or 0.0),
    )
