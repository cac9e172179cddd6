"""Exact resume, end to end through the CLI (deterministic CPU mode, real vLLM engine), on a
busy machine, with weights that move.

One straight 4-round run on the machine as it is is the reference; it must have trained
(`assert_trained`: a group with differing rewards, grad norm > 0, final weights != initial
ones), or "bit-identical" would compare weights that never changed. Every interrupted
variant runs while this test keeps every core busy with CPU-burning processes of its own
(ended by pid), so anything that depends on timing (a wall-clock timeout deciding which
program, triple or task survives, a retry, a clock read) would show up as a difference. Each
must end with bit-identical policy weights, the same aggregator version and counters, and
the same Parquet rows (programs, triples, tasks, rejections, rollouts: none holds a timing):
- 2 rounds, then `--rounds 4 --resume auto`;
- its latest checkpoint corrupted: resume falls back to the previous one with a warning;
- `kill -9` in the middle of a round (after phases 1-4 of round 4 wrote their Parquet),
  then `--resume auto`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import torch

from tests.helpers.e2e import (
    REPO,
    assert_same_parquet,
    assert_same_weights,
    assert_trained,
    busy_cores,
    command,
    env,
    final_weights,
    metrics_rows,
    run,
)

# several full runs per test (fixtures included) with every core busy: the per-test hang guard
# is wider than the suite's 900 s (no assertion depends on timing)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2700)]
# selective sampling on: which problems a resumed round draws depends on the signal history
# the checkpoint carries
DET = [
    "trainer.deterministic=true",
    "trainer.save_every=1",
    "trainer.keep_checkpoints=3",
    "pipeline.selective_keep=0.5",
    "pipeline.discovery_n=6",
]  # a wider phase 1 where nothing passed yet: the budget follows the checkpointed state
# what must agree between runs; the rest of metrics.jsonl is timing, memory or engine counts.
# (executor/ counters are compared apart: a process's first round also counts the calls made
# at start-up to compute the problems' expected outputs.)
SAME_METRICS = ("tasks/", "reward/", "eval/pass@1", "losses/", "train/", "weights/", "selective/")
TIMING = {"last_push_s", "pushes"}  # aggregator state that is timing, or counts the start-up sync push


def _state(out_dir: Path, name: str | None = None) -> dict:
    root = out_dir / "checkpoints"
    name = name or (root / "latest").read_text().strip()
    return torch.load(root / name / "state.pt", weights_only=False)


def _comparable(row: dict) -> dict:
    return {k: v for k, v in row.items() if k.startswith(SAME_METRICS)}


def assert_same_run(reference: Path, other: Path) -> None:
    assert_same_weights(final_weights(reference), final_weights(other))
    a, b = _state(reference), _state(other)
    assert a["round"] == b["round"] == 4
    assert b["aggregator"]["version"] == a["aggregator"]["version"]
    same = lambda state: {k: v for k, v in state["aggregator"].items() if k not in TIMING}  # noqa: E731
    assert same(b) == same(a), "aggregator state differs (counters, version, last grad norm)"
    assert_same_parquet(reference, other)
    ra, rb = metrics_rows(reference), metrics_rows(other)
    assert [r["round"] for r in rb] == [1, 2, 3, 4]
    assert [_comparable(r) for r in ra] == [_comparable(r) for r in rb]
    # every timeout is counted, the same ones in both; none decided by the wall clock (load-
    # dependent): the worker's backstop, or the parent's hard deadline (a worker restart)
    timeouts = lambda rows: [(r["executor/timeout_cpu"], r["executor/timeout_wall"], r["executor/worker_restarts"]) for r in rows]  # noqa: E731
    assert timeouts(ra) == timeouts(rb)
    assert all(wall == restarts == 0 for _, wall, restarts in timeouts(ra) + timeouts(rb))


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("straight")
    run(out, "--rounds", "4", *DET)
    return out


@pytest.fixture(scope="module")
def after_two(tmp_path_factory) -> Path:
    """A 2-round run (under load): the start of the resume variants, copied by each."""
    out = tmp_path_factory.mktemp("two")
    with busy_cores():
        run(out, "--rounds", "2", *DET)
    assert _state(out)["round"] == 2
    return out


@pytest.fixture(scope="module")
def resumed(after_two, tmp_path_factory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("resumed") / "run"
    shutil.copytree(after_two, out)
    with busy_cores():
        proc = run(out, "--rounds", "4", "--resume", "auto", *DET)
    return out, proc


def test_straight_run_trains_and_checkpoints(straight):
    assert_trained(straight)
    state = _state(straight)
    assert state["round"] == 4
    assert state["aggregator"]["version"] >= 4  # at least one optimizer step per round
    rows = metrics_rows(straight)
    assert [r["round"] for r in rows] == [1, 2, 3, 4]
    assert all(r["engine/creations"] == 1 for r in rows)
    assert all("executor/calls" in r and r["executor/calls"] > 0 for r in rows)
    assert rows[0]["selective/skipped"] == 0 and sum(r["selective/skipped"] for r in rows) > 0  # silent problems skipped
    assert state["signal_history"] and all(len(h) <= 4 for h in state["signal_history"].values())


def test_two_rounds_then_resume_under_load_is_bit_identical(straight, resumed):
    out, proc = resumed
    assert "continuing at round 3" in proc.stdout
    assert_trained(out)
    assert_same_run(straight, out)


def test_corrupted_latest_falls_back_to_previous(straight, resumed, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(resumed[0], out)
    weights = out / "checkpoints" / "round_000004" / "model" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-10:] = bytes(b ^ 0xFF for b in data[-10:])  # a torn write the manifest's sha256 catches
    weights.write_bytes(bytes(data))
    with busy_cores():
        proc = run(out, "--rounds", "4", "--resume", "auto", *DET)
    assert "round_000004 is corrupted" in proc.stdout + proc.stderr
    assert "continuing at round 4" in proc.stdout
    assert_same_run(straight, out)


def test_kill_9_mid_round_then_resume_completes(straight, after_two, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(after_two, out)
    with busy_cores():
        proc = subprocess.Popen(
            command(out, "--rounds", "4", "--resume", "auto", *DET),
            cwd=REPO,
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.time() + 1200  # a hang guard only: no assertion depends on timing
            mid_round = out / "round_4" / "tasks.parquet"  # phases 1-4 of round 4 done, phase 5 running
            while not mid_round.exists():
                assert proc.poll() is None, "the run ended before round 4"
                assert time.time() < deadline, "round 4 never started"
                time.sleep(0.05)
        finally:
            proc.kill()  # SIGKILL: no handler, no cleanup
            proc.wait()
        assert _state(out)["round"] == 3, "killed mid-round 4: the newest checkpoint is round 3's"
        assert not (out / "checkpoints" / "round_000004").exists()
        run(out, "--rounds", "4", "--resume", "auto", *DET)
    assert_same_run(straight, out)


def test_sigterm_checkpoints_and_exits_cleanly(tmp_path):
    import signal

    proc = subprocess.Popen(
        command(tmp_path, "--rounds", "50", "trainer.save_every=1000"),
        cwd=REPO,
        env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 400
        log = tmp_path / "main.log"
        while not (log.exists() and "round 1/50 grpo |" in log.read_text()):
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


def test_a_finished_run_asked_again_returns_without_an_engine(straight, tmp_path):
    """A driver that reruns its commands after a cut must not pay an engine start (about a
    minute on SmolLM2) nor a second final evaluation for a run that is already done; a run
    whose final evaluation is missing still gets it."""
    out = tmp_path / "run"
    shutil.copytree(straight, out)
    weights, rows = final_weights(out), metrics_rows(out)
    final = out / "eval" / "eval_results.json"
    stamp, log = final.stat().st_mtime_ns, (out / "main.log").read_text()
    proc = run(out, "--rounds", "4", "--resume", "auto", *DET)
    assert "is finished: its checkpoint covers round 4 of 4" in proc.stdout
    assert "engine created" not in proc.stdout and (out / "main.log").read_text() == log  # the folder untouched
    assert final.stat().st_mtime_ns == stamp and metrics_rows(out) == rows
    assert_same_weights(weights, final_weights(out))
    final.unlink()  # killed between the last checkpoint and the final evaluation: that evaluation runs
    proc = run(out, "--rounds", "4", "--resume", "auto", *DET)
    assert "is finished" not in proc.stdout and "nothing to run" in proc.stdout
    assert json.loads(final.read_text())["version"] == _state(out)["aggregator"]["version"]
    assert_same_weights(weights, final_weights(out))
