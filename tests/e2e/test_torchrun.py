"""`torchrun --nproc_per_node=2 train_unified.py` on CPU (gloo): problems split across
ranks, FSDP2 shards the policy, each rank's resident engine gets the same weights,
metrics are merged, and only rank 0 writes logs and checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from tests.helpers.e2e import FAST, REPO, assert_trained, env

pytestmark = pytest.mark.slow


def test_two_ranks_on_cpu(tmp_path):
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(REPO / "train_unified.py"),
        f"--output-dir={tmp_path}",
        *FAST,
        "--rounds",
        "2",
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "over 2 rank(s)" in proc.stdout
    # rank 0 writes everything, once: one event file, one line per round
    assert len(list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))) == 1
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2]
    # both ranks' problems are in the merged round data (Mbpp/2 on rank 0, Mbpp/3 on rank 1)
    problems = pd.read_parquet(tmp_path / "round_1" / "problems.parquet")
    assert sorted(problems["problem_id"]) == ["Mbpp/2", "Mbpp/3"]
    for r in rows:
        assert r["engine/creations"] == 1
        assert r["engine/ranks_agree"] == 1.0  # every engine answers the probe identically
    assert rows[-1]["weights/version"] >= 2 and rows[-1]["engine/failed_pushes"] == 0
    assert_trained(tmp_path)  # the checkpoint (written by rank 0) loads, and its weights moved
