"""The statistics a test-time result is reported with, against hand-computed values."""

import pytest

from unified.eval.gain_stats import flips, gain, mcnemar_exact_p, paired_bootstrap_ci, summary

CONTROL = {"a": 0, "b": 0, "c": 1, "d": 1, "e": 0}


def test_flips_and_gain():
    after = {"a": 1, "b": 0, "c": 0, "d": 1, "e": 1}
    assert flips(CONTROL, after) == (2, 1)
    assert gain(CONTROL, after) == pytest.approx(1 / 5)


@pytest.mark.parametrize(
    "gained, lost, p",
    [
        (0, 0, 1.0),
        (5, 0, 2 * 0.5**5),  # 0.0625
        (6, 0, 2 * 0.5**6),  # 0.03125
        (7, 2, 2 * (1 + 9 + 36) / 512),  # P(X <= 2) for Bin(9, 1/2), two-sided
        (3, 3, 1.0),
    ],
)
def test_mcnemar_exact(gained, lost, p):
    assert mcnemar_exact_p(gained, lost) == pytest.approx(p)


def test_bootstrap_interval_is_paired_and_covers_the_gain():
    control = {str(i): 0 for i in range(100)}
    seeds = [{str(i): int(i < 10) for i in range(100)}, {str(i): int(i < 6) for i in range(100)}]
    lo, hi = paired_bootstrap_ci(control, seeds)
    assert lo < 0.08 < hi and lo > 0  # mean gain 0.08; every problem moved up or not at all
    same = paired_bootstrap_ci(control, [control])
    assert same == (0.0, 0.0)


def test_summary_pools_seeds():
    s = summary(CONTROL, {0: {**CONTROL, "a": 1}, 1: {**CONTROL, "c": 0}})
    assert s["gain_per_seed"] == [pytest.approx(0.2), pytest.approx(-0.2)] and s["gain"] == pytest.approx(0.0)
    assert (s["flips_gained"], s["flips_lost"]) == (1, 1) and s["mcnemar_p"] == 1.0
    assert s["per_seed"][0]["flips_gained"] == 1 and s["per_seed"][1]["flips_lost"] == 1


def test_a_problem_no_evaluation_could_score_is_left_out_of_every_figure():
    """MBPP+ v0.1's Mbpp/793 has no plus inputs: every evaluation scores it None. The summary
    (the confirm run's collect step) must give the figures of the other problems, not fail."""
    after = {**CONTROL, "a": 1}
    with_none = summary({**CONTROL, "x": None}, {0: {**after, "x": None}, 1: {**CONTROL, "x": None}})
    without = summary(CONTROL, {0: after, 1: CONTROL})
    assert with_none == without and with_none["gain_per_seed"][0] == pytest.approx(1 / 5)
    # scored in the control but not after (or the other way round): left out too, like Record.aligned
    assert summary({**CONTROL, "x": 1.0}, {0: {**after, "x": None}, 1: {**CONTROL, "x": 1.0}}) == without


def test_mcnemar_is_per_seed_against_hand_computed_values():
    from unified.eval.gain_stats import summary

    ids = [f"P/{i}" for i in range(20)]
    control = {i: 0.0 for i in ids}
    seed0 = {i: 1.0 if n < 10 else 0.0 for n, i in enumerate(ids)}  # 10 gained, 0 lost: p = 2 * 0.5**10
    seed1 = {i: 1.0 if n in (0, 1, 2) else 0.0 for n, i in enumerate(ids)}  # 3 gained, 0 lost: p = 2 * 0.5**3
    out = summary(control, {0: seed0, 1: seed1})
    assert out["mcnemar_p_per_seed"] == [2 * 0.5**10, 2 * 0.5**3]
    assert out["per_seed"][1]["flips_gained"] == 3 and out["mcnemar_p_pooled"] == 2 * 0.5**13


def test_a_control_outcome_that_flips_between_repeats_is_noise_not_a_gain():
    from unified.eval.gain_stats import noisy_problems, summary

    repeats = [{"A": 1.0, "B": 0.0, "C": 0.0}, {"A": 0.0, "B": 0.0, "C": 0.0}, {"A": 1.0, "B": 0.0, "C": 0.0}]
    assert noisy_problems(repeats) == ["A"]
    after = {"A": 1.0, "B": 1.0, "C": 0.0}
    out = summary(repeats[1], {0: after}, noisy=noisy_problems(repeats))
    assert out["flips_gained"] == 1 and out["gain"] == 0.5 and out["noisy_problems"] == ["A"]  # B only; A is noise


def test_versus_pairs_arms_by_seed_against_hand_computed_values():
    from unified.eval.gain_stats import versus

    ids = [f"P/{i}" for i in range(20)]
    solo = {0: {i: float(n < 2) for n, i in enumerate(ids)}, 1: {i: float(n < 4) for n, i in enumerate(ids)}}
    # seed 0: mix solves P/0-P/7 (6 only it, none only solo); seed 1: mix solves P/1-P/4 (1 only it, 1 only solo)
    mix = {0: {i: float(n < 8) for n, i in enumerate(ids)}, 1: {i: float(1 <= n <= 4) for n, i in enumerate(ids)}}
    out = versus(mix, solo)
    assert out["per_seed"][0] == {"difference": pytest.approx(6 / 20), "only_a": 6, "only_b": 0, "mcnemar_p": 2 * 0.5**6}
    assert (out["per_seed"][1]["only_a"], out["per_seed"][1]["only_b"], out["per_seed"][1]["mcnemar_p"]) == (1, 1, 1.0)
    assert out["difference"] == pytest.approx((6 / 20 + 0) / 2) and out["difference_per_seed"] == [0.3, 0.0]
    assert (out["only_a"], out["only_b"]) == (7, 1) and out["mcnemar_p_pooled"] == pytest.approx(2 * 9 / 256)
    lo, hi = out["ci95"]
    assert 0 < lo < 0.15 < hi  # every problem moves toward mix or not at all on average but one
    # swapped arms: the same evidence with its sign turned
    back = versus(solo, mix)
    assert back["difference"] == pytest.approx(-0.15) and (back["only_a"], back["only_b"]) == (1, 7)


def test_versus_leaves_out_noise_and_seeds_only_one_arm_has():
    from unified.eval.gain_stats import versus

    a = {0: {"A": 1.0, "B": 1.0, "C": 0.0}, 2: {"A": 1.0, "B": 1.0, "C": 1.0}}
    b = {0: {"A": 0.0, "B": 0.0, "C": 0.0}, 1: {"A": 0.0, "B": 0.0, "C": 0.0}}
    out = versus(a, b, noisy=["A"])
    assert out["seeds"] == [0] and out["problems"] == 2 and (out["only_a"], out["only_b"]) == (1, 0)
    assert out["difference"] == 0.5 and out["noisy_problems"] == ["A"]


def test_the_permutation_p_is_small_for_a_consistent_gain_and_one_for_none():
    from unified.eval.gain_stats import permutation_p

    ids = [f"p{i}" for i in range(40)]
    control = {i: 0 for i in ids}
    gained = [{i: int(k < 12) for k, i in enumerate(ids)} for _ in range(3)]  # 12 of 40 gained by every seed
    assert permutation_p(control, gained, resamples=20_000) < 0.001
    assert permutation_p(control, [dict(control)] * 3) == 1.0
    solved = {i: int(k < 6) for k, i in enumerate(ids)}  # the control solves 6
    swapped = [{i: int(k < 3 or 10 <= k < 13) for k, i in enumerate(ids)}] * 2  # 3 lost, 3 others gained
    assert permutation_p(solved, swapped, resamples=20_000) > 0.5
    lost = [{i: int(k < 3) for k, i in enumerate(ids)}, {i: int(3 <= k < 6) for k, i in enumerate(ids)}]
    assert permutation_p(solved, lost, resamples=20_000) == pytest.approx(2 / 64, abs=0.005)  # 6 halves, all down: 2/2^6


def test_the_problems_and_seeds_interval_is_wider_than_problems_alone_when_seeds_disagree():
    from unified.eval.gain_stats import paired_bootstrap_ci, problems_seeds_ci

    ids = [f"p{i}" for i in range(60)]
    control = {i: 0 for i in ids}
    seeds = [{i: int(k < 20) for k, i in enumerate(ids)}, {i: int(k < 2) for k, i in enumerate(ids)}]
    lo, hi = problems_seeds_ci(control, seeds)
    plo, phi = paired_bootstrap_ci(control, seeds)
    assert lo <= plo and hi >= phi and hi - lo > phi - plo
    assert lo < sum(sum(s.values()) for s in seeds) / (2 * 60) < hi


def test_holm_adjusts_step_down_and_keeps_the_order():
    from unified.eval.gain_stats import holm

    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5]) == [0.5] and holm([]) == []
