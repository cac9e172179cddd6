"""Greedy pass@1 on a benchmark's HIDDEN tests, for any model or checkpoint.

    python -m unified.evaluate --benchmark mbpp --problems 20 [--problem-id Mbpp/2 ...]
                               [--model PATH_OR_CHECKPOINT] [--output DIR] [--backend vllm_cpu|vllm|hf]

`--model` takes a Hugging Face model folder or hub id, a checkpoint folder (the model is
in `<ckpt>/model/`), or a checkpoints root with a `latest` pointer; default: the embedded
tiny model. Writes to `--output` (default logs/eval/<benchmark>-<model>):
- `samples.jsonl`: one `{"task_id", "solution"}` per problem, the full extracted program
  (or the raw completion when no code could be extracted), as EvalPlus reads samples;
- `eval_results.json`: pass@1 overall and per problem, plus the settings used;
and prints one summary line.

Scoring is the pipeline's own (`pipeline.evaluation.pass_at_1`: the phase-1 prompt, one
greedy sample, extraction, all hidden cases in one sandbox batch), so the numbers match
the round loop's `eval/pass@1`. For MBPP+ the hidden tests are the `plus_input`s only
(the `base_input`s are the visible examples), so EvalPlus's "plus" score, which needs
both, can be slightly lower than ours on the same samples.

The round loop calls `evaluate(problems, engine, executor, max_tokens, seed)` with its
resident engine every E rounds; nothing here builds a second engine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from unified.config import UserError

DEFAULT_MAX_TOKENS = 256  # the pipeline's program_max_tokens (its pass@1 budget)


@dataclass(frozen=True)
class EvalResult:
    pass_at_1: float  # mean over the problems that have hidden tests (0.0 when none do)
    per_problem: dict = field(default_factory=dict)  # task_id -> 1.0 / 0.0 / None (no hidden tests)
    samples: list = field(default_factory=list)  # [{"task_id", "solution"}] in problem order

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

    def generate(self, prompts, sampling):
        out = self.generator.generate(prompts, sampling)
        self.outputs = out
        return out


def _needs_expected(problems) -> bool:
    return any(case.expected is None for p in problems for case in p.hidden)


def evaluate(problems: Sequence, engine, executor, max_tokens: int = DEFAULT_MAX_TOKENS, seed: int | None = 0) -> EvalResult:
    """Greedy pass@1 of `engine`'s current weights on the problems' hidden tests.

    `engine`: anything with `generate(prompts, SamplingConfig)` (the resident Engine, or a
    scripted generator). `executor`: an Executor (or anything with `run_batch`). Hidden
    cases still lacking an expected value get it from the canonical solution first."""
    from unified.pipeline.benchmarks import with_expected_outputs
    from unified.pipeline.evaluation import pass_at_1
    from unified.pipeline.extract import extract_code
    from unified.pipeline.programs import with_prompt_imports

    problems = list(problems)
    if not problems:
        return EvalResult(0.0, {}, [])
    run_batch = executor.run_batch if hasattr(executor, "run_batch") else executor
    if _needs_expected(problems):
        problems = with_expected_outputs(problems, run_batch)
    recorder = _Recorder(engine)
    scores = pass_at_1(problems, recorder, run_batch, max_tokens, seed)
    samples = []
    for problem, completions in zip(problems, recorder.outputs):
        text = completions[0].text if completions else ""
        code = extract_code(text, problem.entry_point)
        samples.append({"task_id": problem.task_id, "solution": with_prompt_imports(problem, code) if code is not None else text})
    scored = [v for v in scores.values() if v is not None]
    return EvalResult(sum(scored) / len(scored) if scored else 0.0, dict(scores), samples)


def write_samples_jsonl(samples: Sequence[dict], path: str | Path) -> Path:
    """EvalPlus-style samples file: one JSON object per line with task_id and solution."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as f:
        for s in samples:
            f.write(json.dumps({"task_id": s["task_id"], "solution": s["solution"]}) + "\n")
    os.replace(tmp, path)
    return path


def write_results_json(result: EvalResult, path: str | Path, **settings) -> Path:
    path = Path(path)
    body = {
        "pass@1": result.pass_at_1,
        "passed": result.passed,
        "scored": result.scored,
        "problems": len(result.per_problem),
        "per_problem": result.per_problem,
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
    from unified.models import resolve_model_path

    if path:
        local = Path(str(path)).expanduser()
        looks_local = str(path).startswith((".", "/", "~")) or local.exists() or str(path).count("/") > 1
        if looks_local and not local.exists():
            raise UserError(f"model path {str(path)!r} does not exist: give a model folder, a checkpoint folder, or a Hugging Face id")
        if local.is_dir() and not (local / "config.json").exists():
            latest = local / "latest"
            if latest.is_file():
                local = local / latest.read_text().strip()
            if (local / "model" / "config.json").exists():
                local = local / "model"
            elif not (local / "config.json").exists():
                raise UserError(
                    f"{str(path)!r} is neither a model folder (config.json) nor a checkpoint folder (model/config.json)"
                )
        path = str(local) if local.exists() else str(path)
    return resolve_model_path(path)


def default_backend() -> str:
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None:
        return "hf"
    return "vllm" if torch.cuda.is_available() else "vllm_cpu"


def _model_max_len(model_dir: str, wanted: int | None) -> int:
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
        limit = int(cfg.get("max_position_embeddings") or 4096)
    except (OSError, ValueError):
        limit = 4096
    return min(wanted or 4096, limit)


# ------------------------------------------------------------------------------ CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, no usage dump
        raise UserError(message)


def _positive(flag: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise UserError(f"{flag} needs a whole number, got {text!r}") from None
        if value < 1:
            raise UserError(f"{flag} must be at least 1 (got {value})")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m unified.evaluate", description="Greedy pass@1 on a benchmark's hidden tests.")
    p.add_argument("--benchmark", default="mbpp", help="mbpp or humaneval (default mbpp)")
    p.add_argument("--source", default=None, help="a JSONL/Parquet file of problems instead of the bundled set")
    p.add_argument("--problems", type=_positive("--problems"), default=None, help="the first K problems (default: all)")
    p.add_argument("--problem-id", action="append", default=[], metavar="ID", help="a problem id, e.g. Mbpp/2 (repeatable)")
    p.add_argument("--model", default=None, help="model folder, hub id, checkpoint folder or checkpoints root (default: tiny)")
    p.add_argument("--output", default=None, help="output folder (default logs/eval/<benchmark>-<model>)")
    p.add_argument("--backend", choices=("vllm_cpu", "vllm", "hf"), default=None, help="default: vllm on GPU, vllm_cpu on CPU, hf without vLLM")
    p.add_argument("--max-tokens", type=_positive("--max-tokens"), default=DEFAULT_MAX_TOKENS)
    p.add_argument("--max-model-len", type=_positive("--max-model-len"), default=None, help="default min(4096, the model's)")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=int, default=2, help="sandbox worker processes")
    return p


def _build_engine(backend: str, model_dir: str, dtype: str, max_model_len: int, seed: int):
    from unified.trainer.engine import build_engine

    if backend != "hf":
        from unified.trainer.distributed import init_distributed

        init_distributed("cpu" if backend == "vllm_cpu" else "auto")  # before vLLM, always
    return build_engine(backend, model_dir, dtype=dtype, max_model_len=max_model_len, seed=seed, kv_cache_gib=1)


def run(argv: Sequence[str] | None = None) -> int:
    from unified.config import check_writable
    from unified.pipeline.benchmarks import BenchmarkError, load_problems

    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        problems = load_problems(args.benchmark, args.source, args.problems, args.problem_id)
    except BenchmarkError as exc:
        raise UserError(str(exc)) from None
    model_dir = resolve_eval_model(args.model)
    from unified.models import load_tokenizer

    load_tokenizer(model_dir)  # unreadable tokenizer -> one line now, not a traceback in the engine
    name = "tiny" if not args.model else Path(str(args.model).rstrip("/")).name or "model"
    out = Path(args.output or Path("logs") / "eval" / f"{args.benchmark}-{name}")
    check_writable(out)
    backend = args.backend or default_backend()

    from unified.pipeline.executor import ExecutorConfig, build_executor

    t0 = time.perf_counter()
    engine = _build_engine(backend, model_dir, args.dtype, _model_max_len(model_dir, args.max_model_len), args.seed)
    try:
        with build_executor(ExecutorConfig(workers=args.workers)) as executor:
            result = evaluate(problems, engine, executor, args.max_tokens, args.seed)
    finally:
        engine.close()
    seconds = time.perf_counter() - t0
    write_samples_jsonl(result.samples, out / "samples.jsonl")
    write_results_json(
        result, out / "eval_results.json", benchmark=args.benchmark, model=model_dir, backend=backend,
        max_tokens=args.max_tokens, seed=args.seed, seconds=round(seconds, 2),
    )  # fmt: skip
    print(
        f"pass@1 {result.pass_at_1:.4f} ({result.passed}/{result.scored} problems) {args.benchmark} "
        f"model={model_dir} backend={backend} {seconds:.1f}s -> {out}"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from unified.cli import exit_code

    return exit_code(lambda: run(argv))


if __name__ == "__main__":
    sys.exit(main())
