"""Exact resume, end to end through the CLI (deterministic CPU mode, real vLLM engine).

One straight 4-round run is the reference. Every interrupted variant must end with
bit-identical policy weights and the same aggregator version:
- 2 rounds, then `--rounds 4 --resume auto`;
- the last checkpoint corrupted: resume falls back to the previous one with a warning;
- `kill -9` in the middle of a round, then `--resume auto`.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
import torch

from e2e import REPO, assert_same_weights, command, env, final_weights, run

pytestmark = pytest.mark.slow
DET = ["trainer.deterministic=true", "trainer.save_every=1", "trainer.keep_checkpoints=3"]


def _state(out_dir: Path) -> dict:
    root = out_dir / "checkpoints"
    return torch.load(root / (root / "latest").read_text().strip() / "state.pt", weights_only=False)


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("straight")
    run(out, "--rounds", "4", *DET)
    return out


def test_straight_run_trains_and_checkpoints(straight):
    state = _state(straight)
    assert state["round"] == 4
    assert state["aggregator"]["version"] >= 4  # at least one optimizer step per round
    rows = [json.loads(line) for line in (straight / "metrics.jsonl").read_text().splitlines()]
    assert [r["round"] for r in rows] == [1, 2, 3, 4]
    assert all(r["engine/creations"] == 1 for r in rows)


def test_two_rounds_then_resume_is_bit_identical(straight, tmp_path):
    run(tmp_path, "--rounds", "2", *DET)
    assert _state(tmp_path)["round"] == 2
    proc = run(tmp_path, "--rounds", "4", "--resume", "auto", *DET)
    assert "continuing at round 3" in proc.stdout
    assert_same_weights(final_weights(straight), final_weights(tmp_path))
    assert _state(tmp_path)["aggregator"]["version"] == _state(straight)["aggregator"]["version"]
    rounds = [json.loads(line)["round"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert rounds == [1, 2, 3, 4]


def test_corrupted_latest_falls_back_to_previous(straight, tmp_path):
    run(tmp_path, "--rounds", "3", *DET)
    weights = tmp_path / "checkpoints" / "round_000003" / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10:] = b"\x00" * 10  # a torn write the manifest's sha256 catches
    weights.write_bytes(bytes(data))
    proc = run(tmp_path, "--rounds", "4", "--resume", "auto", *DET)
    assert "round_000003 is corrupted" in proc.stdout + proc.stderr
    assert "continuing at round 3" in proc.stdout
    assert_same_weights(final_weights(straight), final_weights(tmp_path))


def test_kill_9_mid_round_then_resume_completes(straight, tmp_path):
    proc = subprocess.Popen(command(tmp_path, "--rounds", "4", *DET), cwd=REPO, env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.time() + 400
        first = tmp_path / "checkpoints" / "round_000001"
        while not first.exists():  # killed while round 2 runs
            assert proc.poll() is None, "the run ended before its first checkpoint"
            assert time.time() < deadline, "no checkpoint after 400 s"
            time.sleep(0.2)
        time.sleep(1.0)
    finally:
        proc.kill()  # SIGKILL: no handler, no cleanup
        proc.wait()
    assert not (tmp_path / "checkpoints" / "round_000004").exists()
    run(tmp_path, "--rounds", "4", "--resume", "auto", *DET)
    assert _state(tmp_path)["round"] == 4
    assert_same_weights(final_weights(straight), final_weights(tmp_path))


def test_sigterm_checkpoints_and_exits_cleanly(tmp_path):
    import signal

    proc = subprocess.Popen(command(tmp_path, "--rounds", "50", "trainer.save_every=1000"), cwd=REPO, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.time() + 400
        log = tmp_path / "main.log"
        while not (log.exists() and "round 1/50 |" in log.read_text()):
            assert proc.poll() is None, "the run ended early"
            assert time.time() < deadline, "round 1 never finished"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=300)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, out[-3000:]
    assert "SIGTERM received" in out
    state = _state(tmp_path)  # save_every=1000: this checkpoint exists only because of the signal
    assert 1 <= state["round"] < 50
    proc2 = run(tmp_path, "--rounds", str(state["round"] + 1), "--resume", "auto", "trainer.save_every=1000")
    assert f"continuing at round {state['round'] + 1}" in proc2.stdout
    assert _state(tmp_path)["round"] == state["round"] + 1
