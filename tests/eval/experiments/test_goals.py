"""Issue 58's goals read off a gain result: a result that meets every one is 13 of 13, and
breaking any one figure fails exactly that goal, with what was reached."""

import copy

import pytest

from unified.eval.experiments.goals import goals, table

MET = {
    "split": "confirm",
    "problems": [f"Mbpp/{k}" for k in range(1000, 1094)],
    "recipe_commit": "b9d33c9",
    "seeds": [{"seed": s} for s in range(5)],
    "control_repeats": 3,
    "settings": {"cpu": {"kind": "Intel Xeon"}},
    "gain": 0.14,
    "per_seed": {str(s): {"mcnemar_p": 0.01} for s in range(5)},
    "permutation_p": 0.001,
    "sample_filter_baseline": {"samples_per_problem": 56, "pass_at_1": 0.15, "trained_select_visible_n8": 0.25},
    "consolidation": {str(s): [{"targets": 10, "reproduced": 5}, {"targets": 30, "reproduced": 27}] for s in range(5)},
    "to_goal": {"median_minutes": 14.0},
    "generated_tokens_per_gained_problem": {str(s): 40000.0 for s in range(5)},
}

BROKEN = {
    "split": lambda r: r.update(split="report"),
    "problems": lambda r: r["problems"].append("Mbpp/442"),
    "recipe_commit": lambda r: r.update(recipe_commit=None),
    "seeds": lambda r: r["seeds"].pop(),
    "control_repeats": lambda r: r.update(control_repeats=1),
    "settings.cpu": lambda r: r.update(settings={}),
    "gain": lambda r: r.update(gain=0.129),
    "every seed's McNemar p": lambda r: r["per_seed"]["3"].update(mcnemar_p=0.06),
    "permutation_p": lambda r: r.update(permutation_p=0.01),
    "select_visible vs sample_filter_baseline": lambda r: r["sample_filter_baseline"].update(pass_at_1=0.25),
    "consolidation reproduced / targets, last round": lambda r: r["consolidation"]["4"][-1].update(reproduced=23),
    "to_goal, median seed": lambda r: r.update(to_goal={"median_minutes": 15.5}),
    "generated_tokens_per_gained_problem": lambda r: r.pop("generated_tokens_per_gained_problem"),
}


def test_a_result_meeting_every_goal():
    checked = goals(MET)
    assert (checked["met"], checked["of"]) == (13, 13), [r for r in checked["rows"] if not r["met"]]
    assert "13 of 13 met" in table(checked)


@pytest.mark.parametrize("goal", sorted(BROKEN))
def test_breaking_one_figure_fails_that_goal_alone(goal):
    result = copy.deepcopy(MET)
    BROKEN[goal](result)
    checked = goals(result)
    assert [r["goal"] for r in checked["rows"] if not r["met"]] == [goal]
    assert "**no**" in table(checked)


def test_what_was_reached_is_said():
    result = copy.deepcopy(MET)
    result["per_seed"]["3"]["mcnemar_p"] = 0.2
    row = next(r for r in goals(result)["rows"] if r["goal"] == "every seed's McNemar p")
    assert row["reached"].startswith("max 0.2") and not row["met"]


def test_a_tiny_p_is_not_rounded_to_zero():
    result = {**copy.deepcopy(MET), "permutation_p": 1.99998e-05, "gain": 0.18924731}
    rows = {r["goal"]: r["reached"] for r in goals(result)["rows"]}
    assert rows["permutation_p"] == 2e-05 and rows["gain"] == 0.1892


def test_an_unmet_time_goal_says_where_the_minutes_went():
    result = copy.deepcopy(MET)
    steps = {"phase_1_4": 25.0, "phase_5": 4.0, "consolidation": 5.0}
    result["to_goal"] = {"median_minutes": 34.0, "per_seed": {"0": {"minutes": 34.0, "minutes_by_step": steps}, "1": None}}
    row = next(r for r in goals(result)["rows"] if r["goal"] == "to_goal, median seed")
    assert row["reached"] == "34.0 min (phases 1-4 25.0, phase 5 4.0, consolidation 5.0)" and not row["met"]
