"""unified/eval/experiments/compare_arms.py on hand-made learning_gain results: arms are paired by seed, the
difference and its counts match hand-computed values, noise in either control is left out,
each arm's round cost is read from its metrics, and results that are not paired are one
clear error line."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

from unified.errors import UserError
from unified.eval.experiments import compare_arms

IDS = [f"Mbpp/{i}" for i in range(10)]
CONTROL = {i: float(n == 0) for n, i in enumerate(IDS)}


def _result(afters: dict[int, dict], seconds: float, tokens: float, noisy=()) -> dict:
    """Two rounds per seed, `tokens` generated in each: telemetry's totals are cumulative."""
    seeds = [
        {
            "seed": s,
            "per_problem_after": a,
            "pass_at_1_after": sum(a.values()) / len(a),
            "metrics_per_round": [{"round": r, "time/round": seconds, "compute/generation_tokens": tokens * r} for r in (1, 2)],
        }
        for s, a in afters.items()
    ]
    return {
        "benchmark": "mbpp",
        "problems": IDS,
        "per_problem_before": CONTROL,
        "seeds": seeds,
        "gain": 0.1,
        "noisy_problems": list(noisy),
        "settings": {"overrides": ["x=1"]},
    }


def _solves(*ns: int) -> dict:
    return {i: float(n in ns) for n, i in enumerate(IDS)}


def test_arms_are_compared_seed_by_seed_with_their_cost():
    mix = _result({0: _solves(0, 1, 2, 3), 1: _solves(0, 1)}, seconds=120.0, tokens=2000.0)
    solo = _result({0: _solves(0, 1), 1: _solves(0, 2)}, seconds=100.0, tokens=1000.0)
    out = compare_arms.compare(mix, solo, ("mix", "solo"))
    v = out["versus"]
    assert v["difference_per_seed"] == [pytest.approx(0.2), 0.0] and v["difference"] == pytest.approx(0.1)
    assert (v["only_mix"], v["only_solo"]) == (3, 1) and v["per_seed"][1] == {
        "difference": 0.0,
        "only_a": 1,
        "only_b": 1,
        "mcnemar_p": 1.0,
    }
    assert out["arms"]["mix"]["round_cost"] == {
        "rounds": 4,
        "generation_tokens": 2000.0,
        "seconds": 120.0,
        "seconds_per_round": [[120.0, 120.0], [120.0, 120.0]],
    }
    assert out["round_time_ratio"] == pytest.approx(1.2) and out["arms"]["solo"]["overrides"] == ["x=1"]


def test_noise_in_either_control_is_left_out():
    mix = _result({0: _solves(0, 5)}, 1.0, 1.0, noisy=["Mbpp/5"])
    solo = _result({0: _solves(0, 6)}, 1.0, 1.0, noisy=["Mbpp/6"])
    v = compare_arms.compare(mix, solo, ("mix", "solo"))["versus"]
    assert v["problems"] == 8 and (v["only_a"], v["only_b"]) == (0, 0) and v["noisy_problems"] == ["Mbpp/5", "Mbpp/6"]


@pytest.mark.parametrize(
    "change, words",
    [
        ({"problems": IDS[:5]}, "differ in 'problems'"),
        ({"per_problem_before": {**CONTROL, "Mbpp/3": 1.0}}, "different controls"),
    ],
)
def test_results_that_are_not_paired_are_refused(change, words):
    solo = _result({0: _solves(0)}, 1.0, 1.0)
    with pytest.raises(UserError, match=words):
        compare_arms.compare({**solo, **change}, solo, ("a", "b"))
    with pytest.raises(UserError, match="share no seed"):
        compare_arms.compare(_result({1: _solves(0)}, 1.0, 1.0), solo, ("a", "b"))


def test_command_line_writes_the_json_and_a_bad_file_is_one_line(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_result({0: _solves(0, 1)}, 1.0, 1.0)))
    b.write_text(json.dumps(_result({0: _solves(0)}, 1.0, 1.0)))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "unified.eval.experiments.compare_arms",
            str(a),
            str(b),
            "--names",
            "mix,solo",
            "--output",
            str(tmp_path / "out.json"),
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "out.json").read_text())["versus"]["only_mix"] == 1
    bad = subprocess.run(
        [sys.executable, "-m", "unified.eval.experiments.compare_arms", str(a), str(tmp_path / "none.json")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "cannot read" in bad.stderr
