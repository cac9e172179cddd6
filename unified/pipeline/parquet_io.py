"""Each round's phase 1-4 data as Parquet under `round_<n>/`:

    problems.parquet     problem text, visible examples, baseline pass@1 (hidden tests: count only)
    programs.parquet     every extracted program, kept or not, with its rejection reason
    ipo_triples.parquet  (input, program, output) triples
    tasks.parquet        every candidate task, kept or not, with its rejection reason
    rejections.parquet   every rejection of the round (all stages), by reason and kind
    rollouts.parquet     phase 5: every completion with its reward and weight version

Python values (arguments, outputs, test cases) are stored as literal text (`to_literal`),
so pandas and `datasets` read the files without pickles and `read_tasks` gets the values
back. Schemas are explicit, so an empty round still writes typed files (pandas and
pyarrow read them; `datasets.Dataset.from_parquet` refuses any file with no rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import pyarrow as pa
import pyarrow.parquet as pq

from unified.values import from_literal, to_literal
from unified.types import Task, TestCase

FILES = ("problems", "programs", "ipo_triples", "tasks", "rejections")

_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
SCHEMAS = {
    "problems": [("round", _I), ("problem_id", _S), ("benchmark", _S), ("entry_point", _S), ("prompt", _S),
                 ("visible", _S), ("num_visible", _I), ("num_hidden", _I), ("pass_at_1", _F)],
    "programs": [("round", _I), ("problem_id", _S), ("program_id", _S), ("source", _S), ("code", _S),
                 ("kept", _B), ("rejection", _S)],
    "ipo_triples": [("round", _I), ("problem_id", _S), ("program_id", _S), ("input", _S), ("output", _S),
                    ("input_source", _S)],
    "tasks": [("round", _I), ("task_id", _S), ("kind", _S), ("problem_id", _S), ("program_id", _S),
              ("prompt", _S), ("gold", _S), ("entry_point", _S), ("program", _S), ("cases", _S), ("shown", _S),
              ("atol", _F), ("kept", _B), ("rejection", _S), ("rejection_detail", _S)],
    "rejections": [("round", _I), ("stage", _S), ("reason", _S), ("kind", _S), ("problem_id", _S),
                   ("subject", _S), ("detail", _S)],
    "rollouts": [("round", _I), ("task_id", _S), ("kind", _S), ("completion", _S), ("reward", _F),
                 ("parse_failure", _S), ("finish_reason", _S), ("num_tokens", _I), ("version", _I)],
}  # fmt: skip  # table: one file's columns an entry


def _cases_text(cases) -> str:
    return to_literal(tuple((c.args, c.expected) for c in cases))


def _cases(text: str) -> tuple[TestCase, ...]:
    return tuple(TestCase(tuple(args), expected) for args, expected in from_literal(text))


def round_rows(data, hidden_counts: Mapping[str, int] | None = None) -> dict[str, list[dict]]:
    """Rows per file for a `phases.RoundData`; `hidden_counts`: problem id -> its number of
    hidden cases (`benchmarks.hidden.hidden_count`, given by the caller: this folder reads no
    hidden test; None: not recorded)."""
    return {
        "problems": _problem_rows(data, hidden_counts or {}),
        "programs": _program_rows(data),
        "ipo_triples": _triple_rows(data),
        "tasks": _task_rows(data),
        "rejections": _rejection_rows(data),
    }


def _problem_rows(data, hidden_counts: Mapping[str, int]) -> list[dict]:
    return [
        dict(
            round=data.round_index,
            problem_id=p.problem_id,
            benchmark=p.benchmark,
            entry_point=p.entry_point,
            prompt=p.prompt,
            visible=_cases_text(p.visible),
            num_visible=len(p.visible),
            num_hidden=hidden_counts.get(p.problem_id),
            pass_at_1=data.pass_at_1.get(p.problem_id),
        )
        for p in data.problems
    ]


def _program_rows(data) -> list[dict]:
    """Every candidate program, kept or not (its rejection's reason)."""
    program_why = {r.subject: r.reason for r in data.rejections if r.stage == "program"}
    return [
        dict(
            round=data.round_index,
            problem_id=p.problem_id,
            program_id=p.program_id,
            source=p.source,
            code=p.code,
            kept=p.program_id not in program_why,
            rejection=program_why.get(p.program_id),
        )
        for p in data.program_candidates
    ]


def _triple_rows(data) -> list[dict]:
    return [
        dict(
            round=data.round_index,
            problem_id=t.problem_id,
            program_id=t.program_id,
            input=to_literal(t.args),
            output=to_literal(t.output),
            input_source=t.input_source,
        )
        for t in data.triples
    ]


def _task_rows(data) -> list[dict]:
    """Every candidate task, kept or not (its rejection's reason and detail)."""
    why = {(r.stage, r.subject): r for r in data.rejections}
    rows = []
    for t in data.candidate_tasks:
        r = why.get(("task", t.task_id))
        rows.append(
            dict(
                round=data.round_index,
                task_id=t.task_id,
                kind=t.kind,
                problem_id=t.problem_id,
                program_id=t.program_id,
                prompt=t.prompt,
                gold=t.gold,
                entry_point=t.entry_point,
                program=t.program,
                cases=_cases_text(t.cases),
                shown=_cases_text(t.shown),
                atol=t.atol,
                kept=r is None,
                rejection=r.reason if r else None,
                rejection_detail=r.detail if r else None,
            )
        )
    return rows


def _rejection_rows(data) -> list[dict]:
    n = data.round_index
    return [
        dict(round=n, stage=r.stage, reason=r.reason, kind=r.kind, problem_id=r.problem_id, subject=r.subject, detail=r.detail)
        for r in data.rejections
    ]


def write_round(round_dir: str | Path, data, hidden_counts: Mapping[str, int] | None = None) -> dict[str, Path]:
    """Write the five files into `round_dir` (created); returns name -> path."""
    return {name: write_rows(round_dir, name, rows) for name, rows in round_rows(data, hidden_counts).items()}


def write_rows(round_dir: str | Path, name: str, rows: list[dict]) -> Path:
    """`round_dir/<name>.parquet` with the schema of `name` (an empty list writes a typed file)."""
    round_dir = Path(round_dir)
    round_dir.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=pa.schema(SCHEMAS[name]))
    path = round_dir / f"{name}.parquet"
    tmp = path.with_suffix(".parquet.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)  # readers never see a half-written file
    return path


def read_tasks(path: str | Path, kept_only: bool = True) -> list[Task]:
    """Tasks back from a tasks.parquet (values re-read from their literal text)."""
    rows = pq.read_table(path).to_pylist()
    return [
        Task(
            task_id=r["task_id"],
            kind=r["kind"],
            problem_id=r["problem_id"],
            program_id=r["program_id"],
            prompt=r["prompt"],
            gold=r["gold"],
            entry_point=r["entry_point"],
            program=r["program"],
            cases=_cases(r["cases"]),
            shown=_cases(r["shown"]),
            atol=r["atol"],
        )
        for r in rows
        if r["kept"] or not kept_only
    ]
