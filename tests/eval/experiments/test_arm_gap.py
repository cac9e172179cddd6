"""Arms compared through their own CPU's control: paired where one CPU kind and one control,
else the difference of the two gains with an interval over the shared problems."""

import json

import pytest

from unified.eval.experiments.arm_gap import arm_block, compare, main, to_goal
from unified.errors import UserError

IDS = [f"p{i}" for i in range(10)]


def _result(kind: str, control: dict, afters: list[dict], tokens=None) -> dict:
    seeds = [{"seed": s, "per_problem_after": a} for s, a in enumerate(afters)]
    gains = [sum(a.values()) / len(a) - sum(control.values()) / len(control) for a in afters]
    return {
        "settings": {"cpu": {"kind": kind}},
        "per_problem_before": control,
        "seeds": seeds,
        "pass_at_1_before": 0.1,
        "pass_at_1_after": 0.2,
        "gain": sum(gains) / len(gains),
        "gain_per_seed": gains,
        "flips_gained": 1,
        "flips_lost": 0,
        "per_seed": {str(s): {"mcnemar_p": 0.5} for s in range(len(afters))},
        "generated_tokens": tokens,
    }


CONTROL = {i: 0.0 for i in IDS} | {"p0": 1.0}


def test_one_cpu_kind_and_one_control_is_paired_by_seed():
    a = _result("AMD EPYC", CONTROL, [CONTROL | {"p1": 1.0, "p2": 1.0, "p3": 1.0}])
    b = _result("AMD EPYC", CONTROL, [CONTROL | {"p1": 1.0}])
    out = compare(a, b)
    assert out["kind"].startswith("paired") and out["only_a"] == 2 and out["only_b"] == 0
    assert out["difference"] == pytest.approx(0.2)


def test_other_cpu_kinds_compare_each_gain_over_its_own_control():
    other = {i: 0.0 for i in IDS} | {"p0": 1.0, "p9": 1.0}  # the AMX control passes one more problem
    a = _result("AMD EPYC", CONTROL, [CONTROL | {"p1": 1.0, "p2": 1.0}], tokens={"0": 900})
    b = _result("Intel Xeon (AMX)", other, [other | {"p1": 1.0}, other | {"p1": 1.0, "p3": 1.0}])
    out = compare(a, b)
    assert out["kind"].startswith("difference of gains")
    # a: +2/10; b: +1.5/10 (mean of its seeds): a - b = +0.05, whatever the two controls' levels
    assert out["difference"] == pytest.approx(0.05) and out["problems"] == 10
    lo, hi = out["ci95"]
    assert lo <= 0.05 <= hi
    same_kind_other_control = compare(a, _result("AMD EPYC", other, [other]))
    assert same_kind_other_control["kind"].startswith("difference of gains")  # a different control is never paired
    assert arm_block(a)["tokens_per_gained_problem"] == {"0": 450.0}


def test_the_command_writes_the_comparison_and_refuses_bad_input(tmp_path, capsys):
    for name, r in {
        "a": _result("AMD EPYC", CONTROL, [CONTROL | {"p1": 1.0}]),
        "b": _result("AMD EPYC", CONTROL, [CONTROL]),
    }.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(r))
    out = tmp_path / "cmp.json"
    assert main([f"a={tmp_path / 'a.json'}", f"b={tmp_path / 'b.json'}", "--output", str(out)]) == 0
    body = json.loads(out.read_text())
    assert set(body["pairs"]) == {"a_vs_b"} and body["arms"]["a"]["cpu_kind"] == "AMD EPYC"
    with pytest.raises(UserError, match="NAME=RESULT.json"):
        main([str(tmp_path / "a.json"), f"b={tmp_path / 'b.json'}", "--output", str(out)])


def test_seeds_of_one_control_from_two_runs_join_into_one_arm_and_other_controls_are_refused(tmp_path):
    def seed(s, after, tokens):
        r = _result("AMD EPYC", CONTROL, [after], tokens={str(s): tokens})
        r["seeds"][0]["seed"] = s
        r["seeds"][0]["pass_at_1_after"] = sum(after.values()) / len(after)
        return r

    (tmp_path / "s0.json").write_text(json.dumps(seed(0, CONTROL | {"p1": 1.0, "p2": 1.0}, 100)))
    (tmp_path / "s1.json").write_text(json.dumps(seed(1, CONTROL | {"p2": 1.0, "p0": 0.0}, 300)))
    out = tmp_path / "cmp.json"
    b = tmp_path / "b.json"
    b.write_text(json.dumps(_result("AMD EPYC", CONTROL, [CONTROL])))
    assert main([f"n8={tmp_path / 's0.json'}+{tmp_path / 's1.json'}", f"b={b}", "--output", str(out)]) == 0
    arm = json.loads(out.read_text())["arms"]["n8"]
    assert arm["seeds"] == [0, 1] and arm["gain_per_seed"] == pytest.approx([0.2, 0.0])  # recomputed, not copied
    assert (arm["flips_gained"], arm["flips_lost"]) == (3, 1) and arm["distinct_gained"] == 2
    assert arm["generated_tokens"] == {"0": 100, "1": 300} and arm["pass_at_1_after"] == pytest.approx(0.2)
    (tmp_path / "amx.json").write_text(json.dumps(_result("Intel Xeon (AMX)", CONTROL, [CONTROL])))
    with pytest.raises(UserError, match="different controls"):
        main([f"n8={tmp_path / 's0.json'}+{tmp_path / 'amx.json'}", f"b={b}", "--output", str(out)])
    with pytest.raises(UserError, match="seed 0 appears in two"):
        main([f"n8={tmp_path / 's0.json'}+{tmp_path / 's0.json'}", f"b={b}", "--output", str(out)])


def test_time_to_goal_sums_the_rounds_before_the_first_evaluation_at_control_plus_a_tenth():
    rounds = [
        {"eval/pass@1": 0.08, "time/round": 600.0},
        {"eval/pass@1": 0.14, "time/round": 540.0},
        {"eval/pass@1": 0.18, "time/round": 480.0},
    ]
    # round 3's own evaluation (after 2 trained rounds) is the first at 0.08 + 0.10
    assert to_goal({"metrics_per_round": rounds, "pass_at_1_after": 0.17}, 0.08) == {
        "after_rounds": 2,
        "pass_at_1": 0.18,
        "minutes": 19.0,
    }
    # only the evaluation after the last round reaches it: every round counts
    late = [dict(r, **{"eval/pass@1": 0.1}) for r in rounds]
    assert to_goal({"metrics_per_round": late, "pass_at_1_after": 0.19}, 0.08)["after_rounds"] == 3
    assert to_goal({"metrics_per_round": late, "pass_at_1_after": 0.17}, 0.08) is None  # never
    assert to_goal({"metrics_per_round": late, "pass_at_1_after": 0.19}, 0.08, margin=0.2) is None
    assert to_goal({"per_problem_after": {}}, 0.08) is None  # an older result without its rounds
    # round 1's own evaluation is the untrained model: a lucky 0.18 there is not a gain
    lucky = [dict(rounds[0], **{"eval/pass@1": 0.18}), *rounds[1:]]
    assert to_goal({"metrics_per_round": lucky, "pass_at_1_after": 0.0}, 0.08)["after_rounds"] == 2


def test_time_to_goal_says_which_steps_the_minutes_went_to():
    rounds = [
        {"eval/pass@1": 0.08, "time/round": 600.0, "time/phase_1_4": 420.0, "time/phase_5": 120.0, "time/consolidation": 60.0},
        {"eval/pass@1": 0.18, "time/round": 300.0, "time/phase_1_4": 120.0, "time/phase_5": 120.0, "time/consolidation": 60.0},
    ]
    reached = to_goal({"metrics_per_round": rounds, "pass_at_1_after": 0.2}, 0.08)
    assert reached["after_rounds"] == 1 and reached["minutes"] == 10.0
    assert reached["minutes_by_step"] == {"phase_1_4": 7.0, "phase_5": 2.0, "consolidation": 1.0}  # round 1 only
    no_consolidation = [{k: v for k, v in r.items() if k != "time/consolidation"} for r in rounds]
    assert to_goal({"metrics_per_round": no_consolidation, "pass_at_1_after": 0.2}, 0.08)["minutes_by_step"] == {
        "phase_1_4": 7.0,
        "phase_5": 2.0,
    }
