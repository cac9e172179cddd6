"""Selective sampling's choices on hand-made histories (pipeline/selective.py): a problem
with signal is always drawn, a silent one less and less but never never, and the draw is a
pure function of (seed, round, problem)."""

import pytest

from unified.pipeline.config import PipelineConfig
from unified.pipeline.selective import draw_probability, observe, problems_with_signal, select, silent_streak, uniform

IDS = [f"Mbpp/{i}" for i in range(400)]


def test_the_streak_counts_silent_drawn_rounds_back_from_the_last():
    assert silent_streak(()) == 0 and silent_streak((True,)) == 0
    assert silent_streak((True, False, False)) == 2 and silent_streak((False, True, False)) == 1


def test_signal_or_no_history_is_always_drawn_and_silence_lowers_the_chance_to_the_floor():
    assert draw_probability((), 0.5, 0.25) == draw_probability((False, True), 0.5, 0.25) == 1.0
    assert [draw_probability((False,) * z, 0.5, 0.25) for z in (1, 2, 3, 9)] == [0.5, 0.25, 0.25, 0.25]
    assert draw_probability((False,) * 50, 1.0, 0.25) == 1.0  # keep = 1: selection off


def test_draws_follow_the_probabilities_and_never_skip_a_problem_with_signal():
    history = {pid: (True,) if i % 4 == 0 else (False,) * (1 + i % 3) for i, pid in enumerate(IDS)}
    sel = select(IDS, history, keep=0.5, floor=0.2, seed=3, round_index=4)
    assert set(sel.drawn) | set(sel.skipped) == set(IDS) and not set(sel.drawn) & set(sel.skipped)
    assert all(pid in sel.drawn for pid in IDS if history[pid] == (True,))
    for streak, p in ((1, 0.5), (2, 0.25), (3, 0.2)):
        mine = [pid for pid in IDS if history[pid] == (False,) * streak]
        share = sum(pid in sel.drawn for pid in mine) / len(mine)
        assert abs(share - p) < 0.15, (streak, share)  # ~100 problems each
    assert select(IDS, history, 0.5, 0.2, 3, 4) == sel  # the same draw again (resume, a busy machine)
    assert select(IDS, history, 0.5, 0.2, 3, 5) != sel  # another round, another draw
    assert select(IDS, history, 1.0, 0.2, 3, 4).skipped == ()


def test_a_silent_problem_is_drawn_again_within_a_few_rounds():
    history = {"Mbpp/7": (False,) * 20}
    drawn = [r for r in range(1, 200) if select(["Mbpp/7"], history, 0.5, 0.25, 0, r).drawn]
    assert 25 < len(drawn) < 75 and max(b - a for a, b in zip(drawn, drawn[1:])) < 40


def test_the_history_gains_one_entry_per_drawn_problem_and_skips_are_no_observation():
    groups = [("A", [0.0, 1.0]), ("A", [0.0, 0.0]), ("B", [1.0, 1.0]), ("C", [0.0, 0.0])]
    signal = problems_with_signal(groups)
    assert signal == {"A"}
    after = observe({"B": (True,), "D": (False,)}, ["A", "B", "C"], signal)
    assert after == {"A": (True,), "B": (True, False), "C": (False,), "D": (False,)}
    assert 0 <= uniform(0, 1, "A") < 1 and uniform(0, 1, "A") == uniform(0, 1, "A") != uniform(1, 1, "A")


@pytest.mark.parametrize("keep,floor", [(0.0, 0.25), (0.5, 0.0), (1.5, 0.25)])
def test_a_floor_or_keep_outside_0_1_is_refused(keep, floor):
    with pytest.raises(ValueError, match="never skipped for good"):
        PipelineConfig(selective_keep=keep, selective_floor=floor)
