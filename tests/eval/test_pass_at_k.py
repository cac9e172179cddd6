"""Unbiased pass@k (Chen et al. 2021, as EvalPlus reports it) against hand-computed values,
and `python -m unified.eval --n N --temperature T` writing it next to greedy pass@1."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from unified.eval.pass_at_k import ks_up_to, pass_at_k

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("n, c, k, expected", [
    (4, 1, 1, 1 / 4),            # c/n
    (4, 1, 4, 1.0),              # all n drawn: solved if any sample is
    (5, 2, 2, 1 - 3 / 10),       # 1 - C(3,2)/C(5,2)
    (16, 3, 4, 1 - 715 / 1820),  # 1 - C(13,4)/C(16,4)
    (16, 0, 16, 0.0),
    (16, 16, 1, 1.0),
])  # fmt: skip
def test_the_estimator_matches_hand_computed_values(n, c, k, expected):
    assert pass_at_k({"p": c}, n, [k])[k] == [pytest.approx(expected)]


def test_not_best_of_the_first_k_and_per_problem_order_kept():
    got = pass_at_k({"a": 2, "b": 0, "c": 8}, 8, [1, 4, 8])
    assert got[1] == [pytest.approx(0.25), 0.0, 1.0]
    assert got[4] == [pytest.approx(1 - 15 / 70), 0.0, 1.0]  # 1 - C(6,4)/C(8,4)
    assert got[8] == [1.0, 0.0, 1.0]
    assert 16 not in pass_at_k({"a": 1}, 8, [16])  # k > n: not estimable, left out


def test_reported_ks():
    assert ks_up_to(16) == [1, 4, 16] and ks_up_to(1) == [1] and ks_up_to(10) == [1, 4, 10]


def test_evaluate_cli_writes_sampled_pass_at_k_next_to_greedy(tmp_path):
    out = tmp_path / "eval"
    run = subprocess.run([sys.executable, "-m", "unified.eval", "--problems", "2", "--backend", "hf", "--n", "4",
                          "--temperature", "1.0", "--output", str(out)], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    results = json.loads((out / "eval_results.json").read_text())
    assert set(results["pass_at_k"]) == {"1", "4"} and results["sampled"] == {"n": 4, "temperature": 1.0, "problems": 2}
    assert "pass@1" in results or "pass_at_1" in results  # greedy, as before
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert all(r["n"] == 4 and 0 <= r["correct"] <= 4 for r in rows)
    assert "pass@4" in run.stdout
