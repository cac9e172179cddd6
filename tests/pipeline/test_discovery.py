"""Discovery (pipeline/discovery.py): the budget by signal, max-variance down-sampling, the
replay of found answers, the supervised term's answers, and the state that travels in the
checkpoint."""

from __future__ import annotations

import statistics

import pytest

from unified.pipeline.discovery import (
    downsample,
    first_passing,
    found_answers,
    samples_per_problem,
    update_found,
    with_replay,
)
from unified.types import Completion


def _c(text: str, version: int = 0) -> Completion:
    return Completion(text, (1, 2), (3, 4), (-0.5, -1.5), "stop", version)


def test_the_budget_is_wide_only_where_nothing_was_found():
    ids = ["A", "B", "C"]
    assert samples_per_problem(ids, {"B"}, 8, 32) == {"A": 32, "B": 8, "C": 32}
    assert samples_per_problem(ids, set(), 8, 0) == {"A": 8, "B": 8, "C": 8}  # off
    assert samples_per_problem(ids, {"A", "B", "C"}, 8, 32) == {"A": 8, "B": 8, "C": 8}
    assert samples_per_problem(ids, set(), 8, 4) == {"A": 8, "B": 8, "C": 8}  # never narrower than the group
    assert samples_per_problem([], {"A"}, 8, 32) == {}


def test_downsampling_keeps_every_rare_pass_and_the_most_variance():
    rewards = [0.0] * 31 + [1.0]  # one pass in 32: it must survive
    kept = downsample(rewards, 8)
    assert len(kept) == 8 and 31 in kept and kept == sorted(kept)
    assert kept == [0, 1, 2, 3, 4, 5, 6, 31]  # the pass, then the earliest failures
    half = [1.0] * 20 + [0.0] * 12
    kept = downsample(half, 8)
    assert sum(half[i] for i in kept) == 4  # half and half: the largest variance of a binary group
    every = [[half[i] for i in c] for c in ([0, 1, 2, 3, 20, 21, 22, 23], kept)]
    assert statistics.pvariance(every[1]) >= statistics.pvariance(every[0])


@pytest.mark.parametrize(
    "rewards, n, expected",
    [
        ([0.0] * 8, 8, list(range(8))),  # a group of the group size: untouched
        ([1.0, 0.0], 8, [0, 1]),  # a smaller one too
        ([0.0] * 12, 4, [0, 1, 2, 3]),  # silent: the first n (it trains nothing either way)
        ([0.2, -0.5, 1.0, 0.6, 0.0, -0.5], 4, [1, 2, 3, 5]),  # graded rewards: the top two and the bottom two
    ],
)
def test_downsample_cases(rewards, n, expected):
    assert downsample(rewards, n) == expected


def test_downsample_is_a_function_of_the_rewards_alone():
    rewards = [0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert downsample(rewards, 4) == downsample(tuple(rewards), 4) == [0, 1, 2, 4]  # the first two passes, the first two fails


def test_a_replay_enters_only_a_group_where_no_fresh_sample_passes():
    assert with_replay([0.0, 0.0, -0.5], 1.0)
    assert not with_replay([0.0, 1.0], 1.0)  # a fresh pass: on-policy signal, no replay
    assert not with_replay([0.0, 0.0], 0.0)  # the remembered answer fails today (e.g. other visible values)
    assert not with_replay([0.0, 0.0], None)


def test_found_keeps_the_newest_passing_completion_of_each_problem():
    old = {"A": _c("old A"), "B": _c("old B")}
    completions = {"A": [_c("a0", 3), _c("a1", 3), _c("a2", 3)], "B": [_c("b0", 3)], "C": [_c("c0", 3), _c("c1", 3)]}
    passing = {"A#p1", "A#p2", "C#p1"}  # B passed nothing this round
    found = update_found(old, completions, passing)
    assert found == {"A": completions["A"][1], "B": old["B"], "C": completions["C"][1]}
    assert old == {"A": _c("old A"), "B": _c("old B")}  # pure: the input is not changed
    assert first_passing(completions["B"], passing, "B") is None
    assert first_passing(completions["A"], {"A#p10"}, "A") is None  # p10 is not p1


def test_the_supervised_term_takes_this_rounds_pass_else_an_earlier_one():
    """What `run/loop.py` hands phase 5 under `algorithm.sft_coef`: `found` updated with this
    round's phase 1 (before the round's own update of the state), in the round's problem order."""
    earlier = {"A": _c("a-old", 0), "B": _c("b-old", 0), "Z": _c("z-old", 0)}
    this_round = {"A": [_c("a0", 3), _c("a1", 3)], "B": [_c("b0", 3)], "C": [_c("c0", 3), _c("c1", 3)]}
    found = update_found(earlier, this_round, ["A#p1", "C#p0"])
    answers = found_answers(found, ["C", "B", "A", "D"])  # Z: found, not a problem this round; D: never found
    assert [c.text for c in answers] == ["c0", "b-old", "a1"]
    assert found_answers({}, ["A"]) == [] and earlier["A"].text == "a-old"  # pure: the state is not touched
