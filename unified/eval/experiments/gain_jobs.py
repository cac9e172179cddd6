"""The gain bench's jobs (`gain.py` steps 1-3): the commands it launches, one after another or
side by side, each resuming; the folders they write, and reading back what they wrote (an
evaluation's JSON, a run's per-round metrics, the CPU kinds its jobs ran on)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from unified.eval.experiments.planned import baseline_samples
from unified.eval.experiments.record import REPO, settings
from unified.files import read_jsonl
from unified.machine import cpu_info, git_commit


def launch(cmd: list[str], log: Path, env: dict) -> subprocess.Popen:
    log.parent.mkdir(parents=True, exist_ok=True)
    _note_machine(log.parent / "machines.jsonl", log.stem)
    return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=open(log, "a"), stderr=subprocess.STDOUT)


def _note_machine(path: Path, job: str) -> None:
    """One line per job launched in a folder: the CPU and commit it ran on (a resumed run may
    continue on another machine; results compare only within one CPU kind)."""
    with open(path, "a") as f:
        f.write(json.dumps({"job": job, "date": settings()["date"], "cpu": cpu_info(), "commit": git_commit(REPO)}) + "\n")


def machines(folder: Path) -> list[str]:
    """The CPU kinds that jobs in `folder` ran on (sorted, distinct)."""
    return sorted({row["cpu"]["kind"] for row in read_jsonl(folder / "machines.jsonl") if row.get("cpu")})


def evaluate_cmd(args, ids: list[str], model: str, out: Path, n: int | None = None) -> list[str]:
    pids = [a for i in ids for a in ("--problem-id", i)]
    return [
        sys.executable,
        "-m",
        "unified.eval",
        "--benchmark",
        args.benchmark,
        "--model",
        model,
        *pids,
        "--n",
        str(args.n if n is None else n),
        "--temperature",
        str(args.temperature),
        "--output",
        str(out),
        "--resume",
    ]


def train_cmd(args, ids: list[str], seed: int, out: Path, overrides: list[str]) -> list[str]:
    return [
        sys.executable,
        str(REPO / "train_unified.py"),
        "--benchmark",
        args.benchmark,
        f"--rounds={args.rounds}",
        f"--output-dir={out}",
        "--resume",
        "auto",
        f"model={args.model}",
        f"benchmark.problem_ids=[{','.join(ids)}]",
        f"benchmark.problems={len(ids)}",
        f"seed={seed}",
        *([] if any(o.startswith("trainer.eval_every=") for o in overrides) else ["trainer.eval_every=0"]),
        *overrides,
    ]


def done(out: Path) -> bool:
    body = read_json(out / "eval_results.json")
    return bool(body.get("complete"))


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run_all(args, ids, base: Path, overrides: list[str]) -> int:
    """Steps 1-3; seeds one after another, or all at once with --parallel (one thread each)."""
    solo = {**os.environ, "PYTHONUNBUFFERED": "1"}  # one job at a time: every core
    env = {**solo, **({"OMP_NUM_THREADS": "1"} if args.parallel else {})}
    for name in control_dirs(args):  # the control, measured like every "after": same threads, dtype, greedy batches
        n = None if name == "before" else 1  # greedy requests are batched apart from the samples: repeats need none
        if not done(base / name):
            if launch(evaluate_cmd(args, ids, args.model, base / name, n), base / f"{name}.log", env).wait() != 0:
                return fail(name, base / f"{name}.log")
    jobs = [(s, base / f"seed{s}") for s in args.seeds]
    for batch in [jobs] if args.parallel else [[j] for j in jobs]:
        procs = [(s, d, launch(train_cmd(args, ids, s, d / "run", overrides), d / "train.log", env)) for s, d in batch]
        for s, d, proc in procs:
            if proc.wait() != 0:
                return fail(f"seed {s} training", d / "train.log")
        procs = [
            (s, d, launch(evaluate_cmd(args, ids, str(d / "run" / "checkpoints"), d / "after"), d / "after.log", env))
            for s, d in batch
            if not done(d / "after")
        ]
        for s, d, proc in procs:
            if proc.wait() != 0:
                return fail(f"seed {s} evaluation", d / "after.log")
    return 0


def run_select(args, ids, base: Path, env: dict) -> int:
    """`--select-visible N`: the answer a user gets (the first of N samples that passes the
    visible examples, else the greedy one) for the control and every seed's weights, and for
    the untrained model at the samples the recipe drew plus N (`sample_filter_baseline`)."""
    if not args.select_visible:
        return 0
    jobs = [(args.model, base / "select_control", args.select_visible)]
    jobs += [
        (str(base / f"seed{s}" / "run" / "checkpoints"), base / f"seed{s}" / "select_after", args.select_visible)
        for s in args.seeds
    ]
    budget = baseline_samples(per_round(base / f"seed{args.seeds[0]}" / "run"), len(ids), args.select_visible)
    jobs += [(args.model, base / "sample_filter", budget)] if budget else []
    for model, out, n in jobs:
        if not done(out):
            cmd = evaluate_cmd(args, ids, model, out, n) + ["--select", "visible"]
            if launch(cmd, out.with_suffix(".log"), env).wait() != 0:
                return fail(f"--select visible of {model}", out.with_suffix(".log"))
    return 0


def control_dirs(args) -> list[str]:
    """The base model's evaluations: `before` and `--control-repeats` - 1 more (`control_2`, ...)."""
    return ["before", *(f"control_{k}" for k in range(2, args.control_repeats + 1))]


def fail(what: str, log: Path) -> int:
    print(f"{what} failed: see {log}", file=sys.stderr)
    return 1


def per_round(run: Path) -> list[dict]:
    keep = (
        "round",
        "reward/mean",
        "reward/solve",
        "train/groups",
        "train/groups_used",
        "train/steps",
        "train/grad_norm",
        "losses/total",
        "reward/parse_failure_rate",
        "time/round",
        "train/recomputed",
        "compute/generation_tokens",
        "compute/update_tokens",
        "tasks/found_problems",
        "tasks/found_total",
        "tasks/samples_phase_1",
        "train/replayed_groups",
        "train/supervised",
        "selective/signal",
        "eval/pass@1",
        "time/phase_1_4",
        "time/phase_5",
        "time/consolidation",
    )
    prefixes = (
        "consolidation/",
        "agreement/",
        "reward/parse_failure_rate_",
        "tasks/signal_",
        "tasks/groups_",
        "reward/",
    )  # per kind, and the labels' quality
    return [{k: v for k, v in row.items() if k in keep or k.startswith(prefixes)} for row in read_jsonl(run / "metrics.jsonl")]
