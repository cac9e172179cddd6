"""Helpers for end-to-end tests: run the real CLI in a subprocess on the embedded tiny model."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[2]

# Small but complete: every phase runs, phase 5 makes optimizer steps and pushes, and the
# steps MOVE the weights. The tiny model's build-time warm-up makes it write
# `<answer>...</answer>`; with 24 tokens most answers close (12 truncated nearly all of them
# into the format penalty) and with 4 samples per task the rewards of a group differ
# (-0.5 unreadable / 0 wrong / 1 right), so GRPO advantages and gradients are non-zero.
# `model=tiny` always: the default model (SmolLM2) is far too slow for tests.
FAST = [
    "model=tiny",
    "--problems",
    "2",
    "benchmark.problem_ids=[Mbpp/2,Mbpp/3]",
    "pipeline.num_programs=1",
    "pipeline.num_proposed_inputs=1",
    "pipeline.program_max_tokens=24",
    "pipeline.input_max_tokens=24",
    "rollout.n=4",
    "rollout.max_tokens=24",
    "algorithm.micro_batch_size=4",
    "algorithm.accum_steps=1",
    "algorithm.update_steps=1",
    "algorithm.lr=1e-3",
    "trainer.log_samples=2",
]


def env() -> dict:
    # this pytest process may hold a world-size-1 process group: its rendezvous must not leak
    drop = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
    e = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("TORCHELASTIC_")}
    e.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    e["PYTHONUNBUFFERED"] = "1"
    return e


def command(out_dir: Path, *extra: str, script: str = "train_unified.py") -> list[str]:
    target = script.split() if script.startswith("-m ") else [str(REPO / script)]  # a file, or "-m package.module"
    return [sys.executable, *target, f"--output-dir={out_dir}", *FAST, *extra]


def run(out_dir: Path, *extra: str, timeout: float = 600, script: str = "train_unified.py") -> subprocess.CompletedProcess:
    proc = subprocess.run(
        command(out_dir, *extra, script=script), cwd=REPO, env=env(), capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        raise AssertionError(f"run failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def final_weights(out_dir: Path) -> dict:
    root = out_dir / "checkpoints"
    latest = (root / "latest").read_text().strip()
    return load_file(root / latest / "model" / "model.safetensors")


def initial_weights() -> dict:
    """The embedded tiny model's weights (after its build-time warm-up): where runs start."""
    from unified.models.tiny_model import default_model_dir

    return load_file(default_model_dir() / "model.safetensors")


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys() and a, "no tensors to compare"
    different = [k for k in a if not (a[k].dtype == b[k].dtype and a[k].equal(b[k]))]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"


def metrics_rows(out_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


def rollouts(out_dir: Path) -> pd.DataFrame:
    parts = [pd.read_parquet(p) for p in sorted(out_dir.glob("round_*/rollouts.parquet"))]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def assert_trained(out_dir: Path) -> None:
    """Training happened: some rollout group's rewards differ (a non-zero GRPO advantage),
    some optimizer step saw a non-zero gradient, and the final weights are not the initial
    ones. A run whose every step is a no-op fails here."""
    rows = rollouts(out_dir)
    assert len(rows) > 0, "no rollouts"
    spread = rows.groupby(["round", "task_id", "version"])["reward"].agg(lambda r: r.max() - r.min())
    assert (spread > 0).any(), "every rollout group has equal rewards: all advantages are zero"
    norms = [r.get("train/grad_norm") for r in metrics_rows(out_dir)]
    assert any(n is not None and n > 0 for n in norms), f"grad norm never > 0: {norms}"
    start, end = initial_weights(), final_weights(out_dir)
    assert start.keys() == end.keys()
    moved = [k for k in start if not start[k].equal(end[k])]
    assert moved, "the final weights equal the initial ones: no optimizer step changed anything"
    last = metrics_rows(out_dir)[-1]  # the compute ledger saw the learner (the test-time gain bench reads it)
    assert last.get("compute/update_s", 0) > 0 and last.get("compute/update_tokens", 0) > 0, last


def parquet_tables(out_dir: Path) -> dict[str, pd.DataFrame]:
    """Every round's Parquet files, keyed 'round_<n>/<name>' (no timing columns in them)."""
    return {f"{p.parent.name}/{p.stem}": pd.read_parquet(p) for p in sorted(out_dir.glob("round_*/*.parquet"))}


def assert_same_parquet(a: Path, b: Path) -> None:
    ta, tb = parquet_tables(a), parquet_tables(b)
    assert ta and ta.keys() == tb.keys(), (sorted(ta), sorted(tb))
    for name in ta:
        pd.testing.assert_frame_equal(ta[name], tb[name], obj=name)


@contextlib.contextmanager
def busy_cores(count: int | None = None):
    """`count` CPU-burning processes (default: one per core) for the duration of the block,
    ended by their pids. They inherit this process's niceness, so they compete with the run
    under test as equals: it gets about half the CPU it would alone, so every wall-clock
    reading differs from an idle run's. (Two per core made the runs under load ~10x slower,
    the largest single cost of CI, and showed nothing one per core does not.)"""
    count = count or (os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            os.kill(p.pid, signal.SIGKILL)
        for p in procs:
            p.wait()
