"""bench/round_split.py reads each commit's round from its own metrics: the round's row (not
the evaluation row beside it), phases 2-4 summed, a key the older commit never wrote left
empty rather than guessed, and the after/before ratios."""

import pytest

from bench import round_split

ROW = {
    "time/round": 300.0,
    "time/phase_1": 200.0,
    "time/phase_2": 5.0,
    "time/phase_3": 1.0,
    "time/phase_4": 0.5,
    "time/phase_5_generate": 0.0,
    "time/phase_5_score": 10.0,
    "time/phase_5_train": 80.0,
    "time/push": 0.4,
    "compute/evaluation_s": 20.0,
    "compute/generation_tokens": 1000.0,
    "compute/update_tokens": 400.0,
    "train/steps": 13,
    "executor/calls": 2900,
}


def test_the_split_is_the_rounds_row_with_phases_2_to_4_summed():
    split = round_split.split_of([{"eval/pass@1": 0.1}, ROW, {"eval/pass@1": 0.12}])
    assert split["round_s"] == 300.0 and split["phase_2_4_s"] == pytest.approx(6.5) and split["update_s"] == 80.0
    assert split["generation_tokens"] == 1000.0 and split["optimizer_steps"] == 13.0
    assert set(split) == set(round_split.SPLIT)


def test_a_key_the_commit_never_wrote_is_empty_and_its_ratio_too():
    old = round_split.split_of([{k: v for k, v in ROW.items() if k != "time/phase_3"}])
    assert old["phase_2_4_s"] is None
    new = round_split.split_of([dict(ROW, **{"time/round": 150.0, "time/phase_5_train": 40.0})])
    assert round_split._ratio(new, old, "round_s") == 0.5 and round_split._ratio(new, old, "update_s") == 0.5
    assert round_split._ratio(new, old, "phase_2_4_s") is None


def test_medians_over_repeats():
    runs = [dict(round_split.split_of([dict(ROW, **{"time/round": t})]), metrics={}) for t in (100.0, 300.0, 200.0)]
    median = round_split._median(runs)
    assert median["round_s"] == 200.0 and "metrics" not in median
