"""Selective sampling: spend a round's samples on the problems that can teach.

A problem teaches in a round when one of its phase-5 groups has signal (rewards that
differ); a group where every answer fails, or every answer passes, trains nothing. Most
problems are silent round after round (in the MBPP+ report run 21-25 of 100 carried
signal), so, as in GRESO (selective rollouts that skip prompts predicted to be
zero-variance, 2025), a problem's own history predicts its next round:

    streak  = the rounds it was drawn and silent, counted back from its last drawn round
    P(draw) = 1                              streak = 0 (signal last time, or never drawn)
            = max(keep ** streak, floor)     otherwise

`keep = 1` draws every problem every round (selection off). `floor > 0` keeps exploring:
a silent problem is never skipped for good, so one that starts to pass (a headroom
problem passing in 1 of 16 samples) is still found, at a cost `unified/eval/experiments/selective_cost.py`
measures from saved runs. The draw is a hash of (seed, round, problem id): the same on a
busy machine, on any number of ranks, and on resume (the history is in the checkpoint).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence


@dataclass(frozen=True)
class Selection:
    """One round's draw: the problems phases 1-5 run on, and the ones skipped."""

    drawn: tuple[str, ...]
    skipped: tuple[str, ...]


def silent_streak(history: Sequence[bool]) -> int:
    """Drawn rounds without signal at the end of `history` (one bool per drawn round: signal)."""
    streak = 0
    for signal in reversed(history):
        if signal:
            break
        streak += 1
    return streak


def draw_probability(history: Sequence[bool], keep: float, floor: float) -> float:
    streak = silent_streak(history)
    return 1.0 if streak == 0 else max(keep**streak, floor)


def uniform(seed: int, round_index: int, problem_id: str) -> float:
    """A number in [0, 1) fixed by (seed, round, problem): no process RNG is touched."""
    digest = hashlib.sha256(f"{seed}/{round_index}/{problem_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def select(
    problem_ids: Sequence[str], history: Mapping[str, Sequence[bool]], keep: float, floor: float, seed: int, round_index: int
) -> Selection:
    """Which problems this round draws, in their given order."""
    chosen = [uniform(seed, round_index, pid) < draw_probability(history.get(pid, ()), keep, floor) for pid in problem_ids]
    return Selection(tuple(p for p, c in zip(problem_ids, chosen) if c), tuple(p for p, c in zip(problem_ids, chosen) if not c))


def problems_with_signal(groups: Iterable[tuple[str, Sequence[float]]]) -> set[str]:
    """(problem id, a group's rewards) pairs -> the problems with at least one group whose
    rewards differ."""
    return {pid for pid, rewards in groups if len(set(rewards)) > 1}


def observe(history: Mapping[str, Sequence[bool]], drawn: Iterable[str], signal: set[str]) -> dict[str, tuple[bool, ...]]:
    """The history after a round: each drawn problem gains one entry (signal or not);
    skipped problems keep theirs (a skip is no observation)."""
    out = {pid: tuple(h) for pid, h in history.items()}
    for pid in drawn:
        out[pid] = out.get(pid, ()) + (pid in signal,)
    return out
