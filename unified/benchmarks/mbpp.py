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
