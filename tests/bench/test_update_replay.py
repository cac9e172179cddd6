"""bench/update_replay.py rebuilds a round's phase-5 samples from its Parquet files: one group
per kept task, its prompt chat-templated as the engine encodes it, each answer re-tokenized
with its reward, self-play answers marked for recomputed behaviour log-probs, rollouts of
unkept tasks left out; and one replayed update trains (weights move, same steps either arm)."""

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from unified.models.tiny_model import default_model_dir

REPO = Path(__file__).resolve().parents[2]
from bench import update_replay as ur


def _round(tmp_path: Path) -> Path:
    tasks = [
        {"task_id": "P/1#solve", "kind": "solve", "prompt": "Write add(a, b).", "kept": True},
        {"task_id": "P/1#ded", "kind": "deduction", "prompt": "What does f(2) give?", "kept": True},
        {"task_id": "P/2#ded", "kind": "deduction", "prompt": "Not kept.", "kept": False},
    ]
    rollouts = [
        {"task_id": "P/1#solve", "kind": "solve", "completion": "def add(a, b):\n    return a + b", "reward": 1.0},
        {"task_id": "P/1#ded", "kind": "deduction", "completion": "4", "reward": 0.0},
        {"task_id": "P/1#solve", "kind": "solve", "completion": "def add(a, b):\n    return a - b", "reward": 0.0},
        {"task_id": "P/2#ded", "kind": "deduction", "completion": "3", "reward": 1.0},
        {"task_id": "P/1#ded", "kind": "deduction", "completion": "5", "reward": 1.0},
    ]
    pq.write_table(pa.Table.from_pylist(tasks), tmp_path / "tasks.parquet")
    pq.write_table(pa.Table.from_pylist(rollouts), tmp_path / "rollouts.parquet")
    return tmp_path


def test_samples_are_rebuilt_per_kept_task(tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_model_dir()))
    samples = ur.round_samples(_round(tmp_path), tok)
    assert [(s.kind, s.group, s.reward, s.constrained) for s in samples] == [
        ("solve", 0, 1.0, False),
        ("deduction", 1, 0.0, True),
        ("solve", 0, 0.0, False),
        ("deduction", 1, 1.0, True),
    ]
    text = tok.apply_chat_template([{"role": "user", "content": "Write add(a, b)."}], tokenize=False, add_generation_prompt=True)
    assert samples[0].prompt_token_ids == tuple(tok(text, add_special_tokens=False)["input_ids"])
    assert samples[0].prompt_token_ids == samples[2].prompt_token_ids != samples[1].prompt_token_ids
    assert tok.decode(samples[0].token_ids) == "def add(a, b):\n    return a + b"
    assert all(len(s.logprobs) == len(s.token_ids) for s in samples)


def test_the_bench_refuses_an_unknown_arm_and_a_folder_without_rollouts(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["update_replay.py", str(tmp_path), "--arms", "now,fast"])
    with pytest.raises(SystemExit):
        ur.main()
    assert "unknown arm" in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", ["update_replay.py", str(tmp_path)])
    with pytest.raises(SystemExit):
        ur.main()
    assert "no rollouts.parquet" in capsys.readouterr().err


@pytest.mark.parametrize("arm", ["before", "now"])
def test_a_replayed_update_trains(tmp_path, monkeypatch, arm):
    """Either arm takes the same optimizer steps over the same samples, and the weights move."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(default_model_dir()))
    samples = ur.round_samples(_round(tmp_path), tok)
    monkeypatch.setattr(ur.smollm2, "model_dir", default_model_dir)  # the tiny model stands in for SmolLM2's weights
    moved = {}
    real_build = ur.build_policy

    def build(*a, **k):
        k["tuning"] = ur.TuningConfig(method="top_layers", trainable_layers=1)
        policy = real_build(*a, **k)
        moved["before"] = [p.detach().clone() for p in policy.trainable_parameters()]
        moved["policy"] = policy
        return policy

    monkeypatch.setattr(ur, "build_policy", build)
    result = ur.run_arm(arm, samples, tok.eos_token_id)
    assert result["steps"] >= 1 and result["used"] == 4 and result["recomputed"] == 2
    after = moved["policy"].trainable_parameters()
    assert any(not torch.equal(a, b) for a, b in zip(moved["before"], after))
