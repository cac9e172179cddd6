"""unified/eval/experiments/gain.py --collect on hand-made run folders: every flip keeps its failure
class before and after, the gain splits into format and logic fixes (issue 35's keys), and a
problem whose control differs between repeats is left out as noise."""

import json
from argparse import Namespace
from pathlib import Path

import pytest

from unified.eval.experiments import gain as learning_gain

IDS = ["p1", "p2", "p3", "p4", "p5"]
CONTROL = {"p1": 0.0, "p2": 0.0, "p3": 1.0, "p4": 0.0, "p5": 0.0}
CONTROL_CLASS = {"p1": "syntax", "p2": "wrong_answer", "p3": "pass", "p4": "exception", "p5": "wrong_answer"}


def _eval(folder: Path, per_problem: dict, classes: dict) -> None:
    folder.mkdir(parents=True)
    body = {
        "complete": True,
        "pass@1": sum(per_problem.values()) / len(per_problem),
        "per_problem": per_problem,
        "per_problem_class": classes,
        "pass_at_k": {"1": 0.1, "16": 0.3},
    }
    (folder / "eval_results.json").write_text(json.dumps(body))
    (folder / "samples.jsonl").write_text("".join(json.dumps({"task_id": i, "correct": 0}) + "\n" for i in per_problem))


def test_collect_reports_each_flips_class_and_the_net_format_logic_split(tmp_path):
    _eval(tmp_path / "before", CONTROL, CONTROL_CLASS)
    _eval(tmp_path / "control_2", {**CONTROL, "p5": 1.0}, {**CONTROL_CLASS, "p5": "pass"})  # p5 flickers: noise
    # seed 0 fixes a syntax error (format) and a wrong answer (logic), loses p3 to an exception, and "gains" p5
    _eval(
        tmp_path / "seed0" / "after",
        {"p1": 1.0, "p2": 1.0, "p3": 0.0, "p4": 0.0, "p5": 1.0},
        {"p1": "pass", "p2": "pass", "p3": "exception", "p4": "exception", "p5": "pass"},
    )
    (tmp_path / "seed0" / "run").mkdir()
    (tmp_path / "seed0" / "run" / "metrics.jsonl").write_text(json.dumps({"round": 1, "reward/mean": 0.2}) + "\n")
    args = Namespace(
        seeds=[0],
        control_repeats=2,
        benchmark="mbpp",
        rounds=1,
        weights=str(tmp_path / "w"),
        model="tiny",
        split="tune",
        offset=0,
        n=16,
        temperature=1.0,
        parallel=False,
    )
    out = learning_gain.collect(args, IDS, tmp_path, [])
    assert out["noisy_problems"] == ["p5"]
    (seed,) = out["seeds"]
    flips = seed["flip_classes"]
    assert [f["problem"] for f in flips["gained"]] == ["p1", "p2"]  # the counted flips (not noisy p5), classes attached
    assert flips["lost"] == [{"problem": "p3", "before": "pass", "after": "exception"}]
    assert (flips["net_format"], flips["net_logic"]) == (1, 0)  # p1 format; p2 logic minus p3's exception
    assert out["gain_split"] == {"format": 1.0, "logic": 0.0}
    assert out["pass_at_k_before"]["16"] == 0.3 and seed["pass_at_k_after"]["16"] == 0.3
    assert out["flips_gained"] == 2 and out["flips_lost"] == 1  # p5 left out of the statistics
    assert out["gained_problems"] == {"0": ["p1", "p2"]} and out["distinct_gained"] == 2  # noisy p5 is no gain
    assert out["settings"]["cpu"]["kind"] and out["settings"]["commit"]


def test_collect_reports_discovery_per_round_and_the_filtered_pass_at_1(tmp_path):
    _eval(tmp_path / "before", CONTROL, CONTROL_CLASS)
    _eval(tmp_path / "seed0" / "after", {**CONTROL, "p1": 1.0}, {**CONTROL_CLASS, "p1": "pass"})
    rows = [
        {"round": 1, "tasks/found_problems": 3, "tasks/found_total": 3, "compute/generation_tokens": 100},
        {"round": 2, "tasks/found_problems": 2, "tasks/found_total": 4, "compute/generation_tokens": 180},
    ]
    (tmp_path / "seed0" / "run").mkdir()
    (tmp_path / "seed0" / "run" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    select = lambda per: {  # noqa: E731
        "complete": True,
        "pass@1": 0.2,
        "pass@1_select_visible": sum(per.values()) / len(per),
        "per_problem_select_visible": per,
        "select_visible": {"filter_passed": 2},
    }
    (tmp_path / "select_control").mkdir()
    (tmp_path / "select_control" / "eval_results.json").write_text(json.dumps(select(CONTROL)))
    (tmp_path / "seed0" / "select_after").mkdir()
    (tmp_path / "seed0" / "select_after" / "eval_results.json").write_text(json.dumps(select({**CONTROL, "p2": 1.0, "p4": 1.0})))
    args = Namespace(
        seeds=[0],
        control_repeats=1,
        benchmark="mbpp",
        rounds=2,
        weights=str(tmp_path / "w"),
        model="tiny",
        split="tune",
        offset=0,
        n=16,
        temperature=1.0,
        parallel=False,
        select_visible=8,
    )
    out = learning_gain.collect(args, IDS, tmp_path, [])
    assert out["signal_problems"] == {"0": [3, 2]} and out["signal_problems_any_round"] == {"0": 4}
    assert out["generated_tokens"] == {"0": 180}
    block = learning_gain.select_block(args, IDS, tmp_path)
    assert (block["control_pass_at_1"], block["pass_at_1_after"]) == (0.2, 0.6)
    assert (block["flips_gained"], block["flips_lost"]) == (2, 0) and block["n"] == 8
    (tmp_path / "seed0" / "select_after" / "eval_results.json").write_text(json.dumps({"complete": False}))
    assert learning_gain.select_block(args, IDS, tmp_path) is None  # an unfinished evaluation reports nothing


def _result(rounds=8):
    return {"problems": IDS, "rounds": rounds, "gain": 0.1}


def _curve(rounds=8, problems=IDS):
    points = [
        {"round": r, "pass_at_1": 0.1 + r / 100, "sampled_pass_at_1": 0.05, "pass_at_16": 0.3, "flops": r * 1e15}
        for r in range(rounds + 1)
    ]
    return {
        "run": "logs/bench/x/seed0/run",
        "problems": problems,
        "n": 16,
        "curve": points,
        "saturation": {"best_round": rounds, "best_pass_at_1": 0.1 + rounds / 100, "after_best": None},
    }


def _transfer(trained=IDS):
    block = {
        "problems": ["q1", "q2"],
        "control_pass_at_1": 0.1,
        "pass_at_1_after": 0.2,
        "gain": 0.1,
        "ci95": [0.0, 0.2],
        "mcnemar_p": 0.5,
    }
    return {"trained_on": list(trained), "transfer": block}


def test_attach_keeps_the_curve_and_the_transfer_under_the_issues_keys():
    out = learning_gain.attach(_result(), curve=_curve(), transfer=_transfer())
    assert [p["round"] for p in out["curve"]] == list(range(9))
    assert set(out["curve"][0]) == {"round", "pass_at_1", "sampled_pass_at_1", "pass_at_16", "flops"}
    assert out["curve_saturation"]["best_round"] == 8 and out["curve_run"] == "logs/bench/x/seed0/run"
    assert {"problems", "control_pass_at_1", "pass_at_1_after", "gain", "ci95", "mcnemar_p"} <= set(out["transfer"])
    assert out["gain"] == 0.1  # the result's own keys untouched
    assert learning_gain.attach(_result()) == _result()  # nothing asked, nothing added


@pytest.mark.parametrize(
    "curve, transfer, says",
    [
        (_curve(rounds=3), None, "ends at round 3"),  # a curve of another run
        (_curve(problems=["p1", "p9"]), None, "other problems"),
        ({"run": "x"}, None, "no `curve` points"),
        (None, _transfer(trained=["p1"]), "trained on other problems"),
        (None, {"trained_on": IDS}, "no `transfer` block"),
    ],
)
def test_attach_refuses_keys_that_describe_another_result_with_one_line(curve, transfer, says):
    with pytest.raises(SystemExit, match=says):
        learning_gain.attach(_result(), curve=curve, transfer=transfer)


def test_the_planned_keys_come_from_the_runs_metrics_and_outcomes():
    """Consolidation per round, to_goal's median, tokens per gained problem, the equal-samples
    baseline and the permutation p, read from a result body and its runs' rows, never typed."""
    from unified.eval.experiments.planned import baseline_samples, planned

    rows = [
        {
            "round": 1,
            "tasks/samples_phase_1": 800,
            "time/round": 600.0,
            "eval/pass@1": 0.05,
            "consolidation/targets": 20,
            "consolidation/reproduced": 15,
            "consolidation/lost": 1,
            "consolidation/passes": 4,
            "time/consolidation": 50.0,
        },
        {
            "round": 2,
            "tasks/samples_phase_1": 800,
            "time/round": 300.0,
            "eval/pass@1": 0.20,
            "consolidation/targets": 25,
            "consolidation/reproduced": 24,
            "consolidation/lost": 0,
            "consolidation/passes": 2,
            "time/consolidation": 30.0,
        },
    ]
    assert baseline_samples(rows, 100) == 16 + 8 and baseline_samples([], 100) is None
    ids = [f"p{i}" for i in range(30)]
    control = {i: 0.0 for i in ids}
    seeds = [
        {
            "seed": s,
            "per_problem_after": {i: float(k < 8 + s) for k, i in enumerate(ids)},
            "metrics_per_round": rows,
            "pass_at_1_after": 0.3,
        }
        for s in (0, 1, 2)
    ]
    result = {
        "problems": ids,
        "per_problem_before": control,
        "pass_at_1_before": 0.05,
        "seeds": seeds,
        "noisy_problems": [],
        "gained_problems": {"0": ids[:8], "1": ids[:9], "2": []},
        "generated_tokens": {"0": 8000, "1": 9000, "2": 100},
    }
    out = planned(
        result,
        {"pass@1_select_visible": 0.15},
        {0: {"complete": True, "pass@1_select_visible": 0.3}, 1: {"complete": True, "pass@1_select_visible": 0.2}},
    )
    assert out["consolidation"]["1"] == [
        {
            "round": 1,
            "targets": 20,
            "reproduced": 15,
            "lost": 1,
            "passes": 4,
            "held_before": None,
            "held_after": None,
            "steps": None,
            "seconds": 50.0,
        },
        {
            "round": 2,
            "targets": 25,
            "reproduced": 24,
            "lost": 0,
            "passes": 2,
            "held_before": None,
            "held_after": None,
            "steps": None,
            "seconds": 30.0,
        },
    ]
    # control 0.05 + 0.10: round 2's start (after 1 trained round, 10 minutes) reaches 0.20
    assert out["to_goal"]["per_seed"]["0"] == {
        "after_rounds": 1,
        "pass_at_1": 0.20,
        "minutes": 10.0,
        "minutes_by_step": {"consolidation": 0.8},  # the fixture's rounds time their consolidation alone
    }
    assert out["to_goal"]["median_minutes"] == 10.0
    assert out["generated_tokens_per_gained_problem"] == {"0": 1000.0, "1": 1000.0, "2": None}
    assert out["sample_filter_baseline"] == {
        "samples_per_problem": 1600 // 30 + 1 + 8,
        "pass_at_1": 0.15,
        "trained_select_visible_n8": 0.25,
        "trained_seeds": [0, 1],
    }
    assert out["permutation_p"] < 0.01 and out["ci95_problems_seeds"][0] > 0


def test_the_confirm_split_runs_only_for_a_recipe_frozen_in_an_ancestor_commit():
    from unified.eval.experiments.gain_args import frozen_recipe

    with pytest.raises(SystemExit, match="--recipe-commit"):
        frozen_recipe("confirm", None)
    with pytest.raises(SystemExit, match="not a commit the running code descends from"):
        frozen_recipe("confirm", "0" * 40)
    head = frozen_recipe("confirm", "HEAD")
    assert len(head) == 40 and frozen_recipe("tune", None) is None
