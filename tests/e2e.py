"""Helpers for end-to-end tests: run the real CLI in a subprocess on the embedded tiny model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[1]

# Small but complete: every phase runs, phase 5 makes optimizer steps and pushes.
FAST = [
    "model=tiny", "--problems", "2", "benchmark.problem_ids=[Mbpp/2,Mbpp/3]", "pipeline.num_programs=1",
    "pipeline.num_proposed_inputs=1", "pipeline.program_max_tokens=24", "pipeline.input_max_tokens=24",
    "rollout.n=2", "rollout.max_tokens=12", "algorithm.micro_batch_size=2", "algorithm.accum_steps=1",
    "algorithm.update_steps=1", "algorithm.lr=1e-3", "trainer.log_samples=2",
]  # fmt: skip


def env() -> dict:
    # this pytest process may hold a world-size-1 process group: its rendezvous must not leak
    drop = {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"}
    e = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("TORCHELASTIC_")}
    e.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    e["PYTHONUNBUFFERED"] = "1"
    return e


def command(out_dir: Path, *extra: str) -> list[str]:
    return [sys.executable, str(REPO / "train_unified.py"), f"--output-dir={out_dir}", *FAST, *extra]


def run(out_dir: Path, *extra: str, timeout: float = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(command(out_dir, *extra), cwd=REPO, env=env(), capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise AssertionError(f"run failed (rc {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc


def final_weights(out_dir: Path) -> dict:
    root = out_dir / "checkpoints"
    latest = (root / "latest").read_text().strip()
    return load_file(root / latest / "model" / "model.safetensors")


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    different = [k for k in a if not (a[k].dtype == b[k].dtype and a[k].equal(b[k]))]
    assert not different, f"{len(different)} tensors differ, e.g. {different[:3]}"
