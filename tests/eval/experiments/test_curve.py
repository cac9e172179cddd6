"""The learning curve's points (unified/eval/experiments/curve.py): issue 35's keys per round, FLOPs from the
run's cumulative tokens, and where greedy pass@1 stopped rising."""

import json

import pytest

from unified.eval.experiments import curve


def test_curve_points_carry_the_issues_keys_and_flops_from_cumulative_tokens(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(
        "".join(
            json.dumps(r) + "\n"
            for r in (
                {"round": 1, "compute/generation_tokens": 100, "compute/update_tokens": 10},
                {"round": 2, "compute/generation_tokens": 250, "compute/update_tokens": 30},
            )
        )
    )
    evals = {r: {"pass@1": p, "pass_at_k": {"1": p / 2, "16": p * 3}} for r, p in ((0, 0.1), (1, 0.2), (2, 0.15))}
    points = curve.curve_points(evals, curve.cumulative_tokens(tmp_path), per_generated=2.0, per_trained=5.0, n=16)
    assert [set(p) for p in points] == [{"round", "pass_at_1", "sampled_pass_at_1", "pass_at_16", "flops"}] * 3
    assert [p["round"] for p in points] == [0, 1, 2] and [p["flops"] for p in points] == [0.0, 250.0, 650.0]
    assert points[1]["sampled_pass_at_1"] == pytest.approx(0.1) and points[2]["pass_at_16"] == pytest.approx(0.45)
    assert curve.saturation(points) == {"best_round": 1, "best_pass_at_1": 0.2, "after_best": pytest.approx(-0.05)}
    assert curve.saturation(points[:2])["after_best"] is None  # still rising at the last round


def test_sampled_rounds_are_every_kth_and_the_last_and_greedy_only_rounds_carry_no_sampled_figures(tmp_path):
    assert [r for r in range(1, 9) if curve.sampled(r, 8, 2)] == [2, 4, 6, 8]
    assert [r for r in range(1, 8) if curve.sampled(r, 7, 3)] == [3, 6, 7]  # the last round always
    assert all(curve.sampled(r, 8, 1) for r in range(1, 9))
    with pytest.raises(SystemExit, match="must be >= 1"):
        curve.sampled(1, 8, 0)
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"round": 1, "compute/generation_tokens": 10}) + "\n")
    evals = {0: {"pass@1": 0.1, "pass_at_k": {"1": 0.05, "16": 0.3}}, 1: {"pass@1": 0.2}}  # round 1: greedy alone
    points = curve.curve_points(evals, curve.cumulative_tokens(tmp_path), per_generated=1.0, per_trained=1.0, n=16)
    assert points[1]["pass_at_1"] == 0.2 and points[1]["sampled_pass_at_1"] is None and points[1]["pass_at_16"] is None
    curve.plot(points, 16, tmp_path / "c.png")  # the gaps do not break the picture
    assert (tmp_path / "c.png").stat().st_size > 0
