"""`python -m unified.eval`: greedy pass@1 of a model, or of a samples file, on hidden tests.

    python -m unified.eval --benchmark mbpp --model smollm2                all 399 MBPP+ problems (398 with hidden tests)
    python -m unified.eval --benchmark humaneval --model logs/x/checkpoints/round_000002
    python -m unified.eval ... --resume                                    continue a killed run
    python -m unified.eval ... --n 8 --select visible                      also: the first of 8 samples that passes the visible examples
    python -m unified.eval --benchmark mbpp --samples FILE.jsonl --output DIR

With a model: problems run in batches behind a progress bar; after each batch its rows are
appended to `samples.jsonl` (task_id, solution, completion, passed) and `eval_results.json`
is rewritten (`"complete": false` until the last batch), so a killed run keeps what it
finished and `--resume` picks up the rest. A folder that already holds results is never
written over without `--resume` (the training command's convention).

The budget defaults to the pipeline's `program_max_tokens` for that model, read from a
checkpoint's own config or from the model's config group, so this pass@1 and the round
loop's `eval/pass@1` are one measurement; `eval_results.json` states the budget, where its
max_tokens came from, and the model. The default output folder,
`logs/eval/<benchmark>-<model name>-<key>`, is keyed by a hash of the resolved model folder,
its weight files (size and time), the benchmark and the budget: two checkpoints (or one
path re-trained) never share a folder, and the same evaluation finds its own folder again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Sequence

from unified.errors import ArgumentParser, UserError, whole_number
from unified.files import sha256

RESULTS, SAMPLES = "eval_results.json", "samples.jsonl"
PROG = "python -m unified.eval"


def build_parser(prog: str = PROG) -> argparse.ArgumentParser:
    p = ArgumentParser(prog=prog, description="Greedy pass@1 on a benchmark's hidden tests.")
    _add_what_flags(p)
    _add_engine_flags(p)
    _add_sampling_flags(p)
    return p


def _add_what_flags(p: argparse.ArgumentParser) -> None:
    """What is evaluated (problems, model or samples) and where the results go."""
    p.add_argument("--benchmark", default="mbpp", help="mbpp or humaneval (default mbpp)")
    p.add_argument("--source", default=None, help="a JSONL/Parquet file of problems instead of the bundled set")
    p.add_argument(
        "--problems", type=whole_number("--problems", minimum=1), default=None, help="the first K problems (default: all)"
    )
    p.add_argument("--problem-id", action="append", default=[], metavar="ID", help="a problem id, e.g. Mbpp/2 (repeatable)")
    p.add_argument(
        "--model",
        default=None,
        help="smollm2, tiny, a model folder, hub id, checkpoint folder or checkpoints root (default: tiny)",
    )
    p.add_argument("--samples", default=None, metavar="FILE.jsonl", help="score these EvalPlus-format samples instead of a model")
    p.add_argument("--output", default=None, help="output folder (default logs/eval/<benchmark>-<model>-<key>)")
    p.add_argument("--resume", action="store_true", help="continue the results already in the output folder")


def _add_engine_flags(p: argparse.ArgumentParser) -> None:
    """The engine that generates: backend, lengths, batch, dtype."""
    p.add_argument(
        "--backend",
        choices=("vllm_cpu", "vllm", "hf"),
        default=None,
        help="default: vllm on GPU, vllm_cpu on CPU, hf without vLLM",
    )
    p.add_argument(
        "--max-tokens",
        type=whole_number("--max-tokens", minimum=1),
        default=None,
        help="default: the pipeline's program_max_tokens for the model",
    )
    p.add_argument(
        "--max-model-len", type=whole_number("--max-model-len", minimum=1), default=None, help="default min(4096, the model's)"
    )
    p.add_argument(
        "--batch-size",
        type=whole_number("--batch-size", minimum=1),
        default=16,
        help="problems per batch (results are saved after each)",
    )
    p.add_argument("--dtype", default="auto")


def _add_sampling_flags(p: argparse.ArgumentParser) -> None:
    """The --n samples (pass@k), the seed, the sandbox's workers, the log's verbosity."""
    p.add_argument(
        "--n",
        type=whole_number("--n", minimum=1),
        default=1,
        help="also sample N programs per problem and report unbiased pass@k (k=1,4,16,...,N)",
    )
    p.add_argument(
        "--select",
        choices=("visible",),
        default=None,
        help="with --n: also report the pass@1 of the first sample that passes the visible examples (else the greedy answer)",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=1.0,
        help="sampling temperature of the --n samples (greedy pass@1 is always measured too)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workers", type=whole_number("--workers", minimum=1), default=2, help="sandbox worker processes")
    p.add_argument("-v", "--verbose", action="store_true", help="keep vLLM/torch start-up messages")


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    from unified.cli import exit_code

    return exit_code(lambda: run(argv, prog), resume_hint="run the same command with --resume to continue")


def run(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    args = build_parser(prog).parse_args(list(sys.argv[1:] if argv is None else argv))
    from unified.quiet import quiet_console

    quiet_console(args.verbose)  # before torch and vLLM are imported
    problems = _load(args)
    return score_file(args, problems) if args.samples else evaluate_model(args, problems)


def _load(args) -> list:
    from unified.benchmarks.load import BenchmarkError, load_problems

    try:
        return load_problems(args.benchmark, args.source, args.problems, args.problem_id)
    except BenchmarkError as exc:
        raise UserError(str(exc)) from None


# ------------------------------------------------------------------------------ --samples


def score_file(args, problems: list) -> int:
    from unified.benchmarks.hidden import score_samples
    from unified.eval.samples import program_text, read_samples
    from unified.eval.evaluate import EvalResult, write_results_json
    from unified.sandbox.executor import ExecutorConfig
    from unified.sandbox.executors import build_executor

    if args.model or args.resume:
        raise UserError("--samples scores a file without a model: leave out --model and --resume")
    samples = read_samples(args.samples)
    by_id = {p.problem_id: p for p in problems} if (args.problems or args.problem_id) else {p.problem_id: p for p in _all(args)}
    unknown = [t for t in samples if t not in by_id]
    if unknown:
        raise UserError(
            f"--samples has task {unknown[0]!r}, which is not a problem of --benchmark {args.benchmark} "
            "(or not among the selected problems)"
        )
    chosen = [by_id[t] for t in samples]
    digest = sha256(args.samples)[:10]
    out = Path(args.output or Path("logs") / "eval" / f"{args.benchmark}-samples-{digest}")
    from unified.eval.run import read_json

    previous = read_json(out / RESULTS)
    _check_output(out, resume=previous.get("samples_sha256") == digest and not (out / SAMPLES).exists())  # same file: rescore
    t0 = time.perf_counter()
    with build_executor(ExecutorConfig(workers=args.workers)) as executor:
        scores = score_samples(chosen, {p.problem_id: program_text(p, samples[p.problem_id]) for p in chosen}, executor)
    scored = [v for v in scores.values() if v is not None]
    result = EvalResult(sum(scored) / len(scored) if scored else 0.0, dict(scores), [])
    write_results_json(
        result,
        out / RESULTS,
        benchmark=args.benchmark,
        samples=str(Path(args.samples).resolve()),
        samples_sha256=digest,
        complete=True,
        seconds=round(time.perf_counter() - t0, 2),
    )
    print(
        f"pass@1 {result.pass_at_1:.4f} ({result.passed}/{result.scored} problems) {args.benchmark} samples={args.samples} -> {out}"
    )
    return 0


def _all(args) -> list:
    from unified.benchmarks.load import load_problems

    return load_problems(args.benchmark, args.source)


# ------------------------------------------------------------------------------ a model


def evaluate_model(args, problems: list) -> int:
    from unified.eval.run import EvalRun, model_budget

    if args.select and args.n < 2:
        raise UserError("--select visible picks among sampled programs: give --n K (K >= 2), e.g. --n 8 --select visible")
    model_dir, name = _resolve(args.model)
    max_tokens, source = (args.max_tokens, "--max-tokens") if args.max_tokens else model_budget(args.model, model_dir)
    settings = {
        "benchmark": args.benchmark,
        "source": args.source,
        "model": model_dir,
        "model_arg": args.model or "tiny",
        "max_tokens_from": source,
        "sampling": {"n": args.n, "temperature": args.temperature, **({"select": args.select} if args.select else {})}
        if args.n > 1
        else None,
    }
    key = _key(model_dir, args, max_tokens)
    out = Path(args.output or Path("logs") / "eval" / f"{args.benchmark}-{name}-{key}")
    _check_output(out, resume=args.resume)
    return EvalRun(args, problems, model_dir, max_tokens, settings, out).run()


def _resolve(model: str | None) -> tuple[str, str]:
    """(local model folder, a short name for the output folder)."""
    from unified.eval.evaluate import resolve_eval_model
    from unified.models.resolve import load_tokenizer

    arg = None if model in (None, "tiny") else model
    model_dir = resolve_eval_model(arg)
    load_tokenizer(model_dir)  # an unreadable tokenizer: one line now, not a traceback in the engine
    parts = [p for p in Path(str(model or "tiny").rstrip("/")).parts if p not in ("/", ".", "..", "model", "checkpoints")]
    name = "-".join(parts[-2:]) if parts else "model"
    return model_dir, "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)[:60]


def _key(model_dir: str, args, max_tokens: int) -> str:
    """Model folder + its weight files' sizes and times + benchmark + budget."""
    folder = Path(model_dir).resolve()
    weights = sorted(
        (f.name, f.stat().st_size, f.stat().st_mtime_ns)
        for f in folder.iterdir()
        if f.suffix in (".safetensors", ".bin", ".gguf", ".pt")
    )
    ident = [str(folder), weights, args.benchmark, args.source, max_tokens, args.max_model_len, args.seed]
    if getattr(args, "n", 1) > 1:  # sampled pass@k: its own folder per (n, temperature, selection)
        ident += [args.n, args.temperature] + ([args.select] if getattr(args, "select", None) else [])
    return hashlib.sha256(json.dumps(ident, default=str).encode()).hexdigest()[:10]


def _check_output(out: Path, resume: bool) -> None:
    from unified.config import check_writable

    check_writable(out)
    held = (out / SAMPLES).exists() or (out / RESULTS).exists()
    if held and not resume:
        raise UserError(
            f"{str(out)!r} already holds evaluation results: continue them with --resume, "
            "or choose another folder with --output DIR"
        )
