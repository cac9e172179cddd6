"""unified/eval/experiments/transfer.py: the JSON that issue 35's `transfer` keys come from, assembled over every
seed's weights against one control (the evaluations replaced by fixed outcomes: this tests the
bookkeeping, not the model), and a bad `--seed-weights` is one line."""

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

from unified.benchmarks.splits import split_ids
from unified.eval.experiments import transfer

IDS = split_ids("report", "mbpp")[100:110]


def _run(tmp_path, monkeypatch, seeds: dict[str, list[int]], *extra: str) -> dict:
    source = tmp_path / "test_time_gain_x.json"
    source.write_text(
        json.dumps(
            {
                "benchmark": "mbpp",
                "problems": split_ids("report", "mbpp")[:100],
                "model_path": "docs/results/weights/mbpp-seed0",
                "settings": {"model": "smollm2"},
            }
        )
    )
    control = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0]

    def evaluate(bench, model, ids, out, n=1):
        name = Path(out).name
        outcome = control if name.startswith("control") else seeds[name]
        return {"per_problem": {i: float(v) for i, v in zip(ids, outcome)}}

    monkeypatch.setattr(transfer, "evaluate", evaluate)
    out = tmp_path / "transfer.json"
    monkeypatch.setattr(
        sys,
        "argv",
        [
            "transfer.py",
            str(source),
            "--problems",
            "10",
            "--repeats",
            "2",
            "--runs-dir",
            str(tmp_path / "runs"),
            "--output",
            str(out),
            *extra,
        ],
    )
    assert transfer.main() == 0
    return json.loads(out.read_text())


def test_every_seed_is_read_against_the_same_control(tmp_path, monkeypatch):
    (tmp_path / "w1").mkdir()
    body = _run(
        tmp_path,
        monkeypatch,
        {"seed0": [1, 1, 1, 0, 0, 0, 0, 0, 0, 0], "seed1": [0, 1, 0, 0, 0, 0, 0, 0, 0, 0]},
        "--seed-weights",
        f"1={tmp_path / 'w1'}",
    )
    t = body["transfer"]
    assert t["problems"] == IDS and t["seeds"] == [0, 1]
    assert t["control_pass_at_1"] == 0.1 and t["pass_at_1_after_per_seed"] == [0.3, 0.1]
    assert t["pass_at_1_after"] == pytest.approx(0.2) and t["gain"] == pytest.approx(0.1)
    assert t["gain_per_seed"] == pytest.approx([0.2, 0.0])
    assert (t["flips_gained"], t["flips_lost"]) == (3, 1)  # seed 0 +2, seed 1 +1 / -1
    assert set(body["per_problem"]) == {"control", "seed0", "seed1"}
    assert {"ci95", "mcnemar_p", "mcnemar_p_per_seed"} <= set(t)


def test_one_seed_by_default(tmp_path, monkeypatch):
    body = _run(tmp_path, monkeypatch, {"seed0": [1, 1, 0, 0, 0, 0, 0, 0, 0, 0]})
    assert body["transfer"]["seeds"] == [0] and body["transfer"]["pass_at_1_after"] == 0.2


@pytest.mark.parametrize("pair", ["1", "x=/tmp", "1=/no/such/folder", "0=/tmp"])
def test_a_bad_seed_weights_pair_is_one_line(pair):
    with pytest.raises(SystemExit) as exc:
        transfer.seed_weights([pair])
    assert "--seed-weights" in str(exc.value) and "\n" not in str(exc.value)
