"""The one result record: every committed result's stated figures (flips, gain, McNemar p, per
seed and pooled) are what its per-problem outcomes give, a result with nothing to check fails,
and every JSON a claim writes carries the CPU kind and the commit."""

import json
from pathlib import Path

import pytest

from unified.errors import UserError
from unified.eval.experiments.record import REPO as REPO_ROOT
from unified.eval.experiments.record import UNKNOWN, Inconsistent, Record, portable, settings, stated, write_json

RESULTS = Path(__file__).resolve().parents[3] / "docs" / "results"
CLAIMED = sorted(RESULTS.glob("test_time_gain*.json")) + sorted(RESULTS.glob("transfer*.json"))
# the claims (eval/experiments/) and the results they write into docs/results/
CLAIMS = {
    "gain": "test_time_gain*.json",
    "transfer": "transfer*.json",
    "sweep": "sweep*.json",
    "agreement_labels": "agreement_labels*.json",
    "answer_shapes": "answer_shapes*.json",
    "curve": "curve_*.json",
    "levers": "*_levers*.json",
    "arm_gap": "*_arms_*.json",
    "compare_arms": "*_vs_*.json",
    "selective_cost": "selective_cost.json",
    "evalplus_check": "evalplus_check.json",
    "targets": "targets_*.json",
}
NOT_CLAIMS = {
    "record",
    "results_table",
    "summary_plot",
    "rescore",
    "planned",
    "gain_args",
    "gain_jobs",
    "goals",
}  # goals: reads a gain result's own figures; rescore: test_time_gain_*rescored.json; planned, gain_args, gain_jobs: parts of gain


@pytest.mark.parametrize("path", CLAIMED, ids=[p.name for p in CLAIMED])
def test_committed_results_are_their_outcomes(path):
    body = json.loads(path.read_text())
    record = Record.read(path.name, body)
    assert record is not None and record.figures(), f"{path.name} holds no per-problem outcomes: nothing to check"
    assert record.check(stated(body)) >= 1, f"{path.name} states no figure its outcomes could contradict"


def test_a_result_with_nothing_to_check_fails():
    outcomes = {"per_problem_before": {"a": 0.0}, "seeds": [{"seed": 0, "per_problem_after": {"a": 1.0}}]}
    assert Record.read("r", {"gain": 0.1}) is None
    assert Record.read("r", outcomes).check(stated(outcomes)) == 0


@pytest.mark.parametrize(
    "claim",
    [
        {"flips_gained": 2, "flips_lost": 0},
        {"gain_per_seed": [0.0]},
        {"per_seed": {"0": {"flips_gained": 1, "flips_lost": 0, "gain": 0.5, "mcnemar_p": 0.5}}},
        {"gain": 0.4},
    ],
)
def test_a_figure_its_outcomes_do_not_give_is_found(claim):
    body = {"per_problem_before": {"a": 0.0, "b": 0.0}, "seeds": [{"seed": 0, "per_problem_after": {"a": 1.0, "b": 0.0}}]}
    record = Record.read("r.json", body)
    honest = {
        "flips_gained": 1,
        "flips_lost": 0,
        "gain_per_seed": [0.5],
        "gain": 0.5,
        "per_seed": {"0": {"flips_gained": 1, "flips_lost": 0, "gain": 0.5, "mcnemar_p": 1.0}},
    }
    assert record.check(stated({**body, **honest})) == 6
    with pytest.raises(Inconsistent, match="r.json"):
        record.check(stated({**body, **claim}))


def test_every_claim_result_carries_the_commit_and_the_cpu():
    """Older results say `unknown`; a claim module with no results pattern here fails (a new one is a decision)."""
    modules = {p.stem for p in (Path(__file__).resolve().parents[3] / "unified" / "eval" / "experiments").glob("*.py")}
    assert modules - NOT_CLAIMS - {"__init__"} == set(CLAIMS)
    paths = {p for pattern in CLAIMS.values() for p in RESULTS.glob(pattern)}
    assert len(paths) >= 30
    for path in sorted(paths):
        body = json.loads(path.read_text())
        stamp = body["run_settings"] if isinstance(body.get("settings"), list) else body.get("settings") or {}
        assert {"commit", "cpu"} <= set(stamp), f"{path.name}: settings.commit and settings.cpu (older: {UNKNOWN!r})"


def test_a_record_writes_its_figures_over_the_claim(tmp_path):
    record = Record(
        "r",
        "mbpp",
        {"a": 0.0, "b": 1.0, "c": 0.0},
        ((0, {"a": 1.0, "b": 1.0, "c": 1.0}), (1, {"a": 0.0, "b": 1.0, "c": 0.0})),
        settings={"model": "smollm2"},
    )
    typed = {"gain": 9.9, "flips_gained": 99, "seeds": [{"seed": 1, "metrics_per_round": [{"round": 1}]}], "note": "kept"}
    body = json.loads(record.write(tmp_path / "r.json", typed).read_text())
    assert (body["gain"], body["flips_gained"], body["flips_lost"], body["gain_per_seed"]) == (
        pytest.approx(1 / 3),
        2,
        0,
        [pytest.approx(2 / 3), 0.0],
    )
    assert body["note"] == "kept" and body["seeds"][1]["metrics_per_round"] == [{"round": 1}]
    assert body["settings"]["model"] == "smollm2" and body["settings"]["commit"] and body["settings"]["cpu"]
    again = Record.read("r.json", body)
    assert (
        again == Record("r.json", "?", record.control, record.seeds, settings=body["settings"])
        and again.check(stated(body)) == 11
    )


def test_figures_leave_noise_out_and_count_flips():
    record = Record(
        "x", "mbpp", {"a": 0.0, "b": 1.0, "c": 0.0, "d": None}, ((0, {"a": 1.0, "b": 0.0, "c": 1.0, "d": 1.0}),), noisy=("c",)
    )
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
    result.write_text(
        json.dumps(
            {
                "benchmark": "mbpp",
                "rounds": 2,
                "per_problem_before": {"a": 0.0, "b": 1.0},
                "seeds": [
                    {"seed": 0, "per_problem_after": {"a": 1.0, "b": 1.0}, "pass_at_1_after": 1.0, "metrics_per_round": rounds},
                    {"seed": 1, "per_problem_after": {"a": 0.0, "b": 1.0}, "pass_at_1_after": 0.5},
                ],
            }
        )
    )
    assert summary_plot.curves(json.loads(result.read_text())) == {0: [(0, 0.5), (1, 0.5), (2, 1.0)]}  # seed 1: no rounds
    out = summary_plot.plot(result, tmp_path / "s.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary_plot.drawn_from(out) == summary_plot.source(result)
    result.write_text(result.read_text().replace('"rounds": 2', '"rounds": 2, "note": 1'))  # the result changed, the picture not
    assert summary_plot.drawn_from(out) != summary_plot.source(result)
    curve = tmp_path / "c.json"
    curve.write_text(json.dumps({"problems": ["a", "b"], "curve": [{"round": 0, "pass_at_1": 0.5}]}))
    with pytest.raises(UserError, match="no per-seed outcomes"):
        summary_plot.plot(curve, tmp_path / "t.png")


def test_the_front_page_picture_defaults_to_the_headline_result():
    from unified.eval.experiments import summary_plot

    args = summary_plot.parser().parse_args([])
    assert args.result == summary_plot.REPO / "docs" / "results" / "test_time_gain.json"
    assert args.output == summary_plot.REPO / "docs" / "summary.png"


def test_the_committed_picture_is_drawn_from_the_committed_headline_result():
    """Redraw docs/summary.png (`python -m unified.eval.experiments.summary_plot`) whenever
    test_time_gain.json changes: the picture names the digest of the result it was drawn from."""
    from unified.eval.experiments import summary_plot

    args = summary_plot.parser().parse_args([])
    assert summary_plot.drawn_from(args.output) == summary_plot.source(args.result)


def test_a_gain_result_without_a_finished_seed_still_writes(tmp_path):
    body = {"per_problem_before": {"a": 0.0}, "seeds": [], "complete": False}
    written = json.loads(Record.read("r.json", body).write(tmp_path / "r.json", body).read_text())
    assert written["seeds"] == [] and written["complete"] is False and "gain" not in written and written["settings"]["commit"]


def test_a_command_line_names_no_path_of_this_machine():
    """Result JSONs record their command; absolute paths in it become repo-relative, beside-the-repo
    relative (`../runs/x`, where long runs live) or their last three folders."""
    inside, beside = REPO_ROOT / "docs" / "results" / "x.json", REPO_ROOT.parent / "runs" / "tune" / "D"
    assert portable(str(inside)) == "docs/results/x.json" and portable(f"--output={inside}") == "--output=docs/results/x.json"
    assert portable(str(beside)) == "../runs/tune/D" and portable("/srv/a/b/c/d") == "b/c/d"
    assert portable("--seeds") == "--seeds" and portable("pipeline.discovery_n=32") == "pipeline.discovery_n=32"
