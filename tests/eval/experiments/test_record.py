"""The one result record: every committed gain result's per-seed figures (flips, gain,
McNemar p) are what its per-problem outcomes give, and every JSON a claim writes carries
the CPU kind and the commit."""

import json
from pathlib import Path

import pytest

from unified.errors import UserError
from unified.eval.experiments.record import Record, settings, write_json

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"
GAINS = sorted(RESULTS.glob("test_time_gain*.json"))


@pytest.mark.parametrize("path", GAINS, ids=[p.name for p in GAINS])
def test_committed_gains_are_their_outcomes(path):
    body = json.loads(path.read_text())
    record = Record.from_gain(path.name, body)
    figures = record.figures()
    if not figures:
        pytest.skip("no per-seed outcomes")
    stated = body.get("per_seed") or {}
    for f in figures:
        mine = stated.get(str(f.seed)) or stated.get(f.seed)
        if mine is None:
            continue
        assert (f.gained, f.lost) == (mine["flips_gained"], mine["flips_lost"])
        assert f.gain == pytest.approx(mine["gain"]) and f.mcnemar_p == pytest.approx(mine["mcnemar_p"])


def test_figures_leave_noise_out_and_count_flips():
    record = Record("x", "mbpp", {"a": 0.0, "b": 1.0, "c": 0.0, "d": None}, ((0, {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}),),
                    noisy=("c",))  # fmt: skip
    [f] = record.figures()
    assert (f.gained, f.lost, f.gain, f.pass_at_1) == (1, 1, 0.0, 0.5)  # d unscored, c noise
    assert record.control_pass_at_1() == 0.5


def test_written_results_carry_the_cpu_and_the_commit(tmp_path):
    path = write_json(tmp_path / "r.json", {"gain": 0.1, "settings": {"model": "smollm2"}})
    body = json.loads(path.read_text())
    assert body["settings"]["model"] == "smollm2" and body["gain"] == 0.1
    assert {"model", "kind", "amx_bf16"} <= set(body["settings"]["cpu"]) and "commit" in body["settings"]
    assert {"date", "machine", "cpu", "commit", "command"} <= set(settings())


def test_the_front_page_picture_is_drawn_from_the_json(tmp_path):
    from unified.eval.experiments import summary_plot

    result = tmp_path / "r.json"
    rounds = [{"round": 1, "eval/pass@1": 0.5}, {"round": 2, "eval/pass@1": 0.5}]
    result.write_text(json.dumps({"benchmark": "mbpp", "rounds": 2, "per_problem_before": {"a": 0.0, "b": 1.0},
                                  "seeds": [{"seed": 0, "per_problem_after": {"a": 1.0, "b": 1.0}, "pass_at_1_after": 1.0,
                                             "metrics_per_round": rounds},
                                            {"seed": 1, "per_problem_after": {"a": 0.0, "b": 1.0}, "pass_at_1_after": 0.5}]}))  # fmt: skip
    assert summary_plot.curves(json.loads(result.read_text())) == {0: [(0, 0.5), (1, 0.5), (2, 1.0)]}  # seed 1: no rounds
    out = summary_plot.plot(result, tmp_path / "s.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    curve = tmp_path / "c.json"
    curve.write_text(json.dumps({"problems": ["a", "b"], "curve": [{"round": 0, "pass_at_1": 0.5}]}))
    with pytest.raises(UserError, match="no per-seed outcomes"):
        summary_plot.plot(curve, tmp_path / "t.png")


def test_the_front_page_picture_defaults_to_the_headline_result():
    from unified.eval.experiments import summary_plot

    args = summary_plot.parser().parse_args([])
    assert args.result == summary_plot.REPO / "docs" / "results" / "test_time_gain.json"
    assert args.output == summary_plot.REPO / "docs" / "summary.png"
