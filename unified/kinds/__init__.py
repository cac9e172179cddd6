"""The task kinds: one module each (see `base.TaskKind`), one line each here.

Order matters: it is the order of the console's tasks line (I/D/A/S/R) and of the metrics
per kind, and the order kinds take turns in when a cap cuts a round's tasks
(`phases.cap_tasks`). Candidate tasks are built in `pipeline.kinds`' order (`pipeline.tasks`).
"""

from __future__ import annotations

from unified.kinds import abduction, deduction, induction, repair, solve
from unified.kinds.base import BuildOptions, TaskKind, per_problem, raw_answer, readable_floor

KINDS: dict[str, TaskKind] = {k.NAME: k for k in (induction, deduction, abduction, solve, repair)}
TASK_KINDS: tuple[str, ...] = tuple(KINDS)
SELF_PLAY: tuple[str, ...] = tuple(k.NAME for k in (induction, deduction, abduction))  # the original design's kinds
SOLVE: str = solve.NAME  # the problem's own prompt: phase 1's programs are its groups, agreement labels it
# a real model's default `pipeline.mix` (phase 5's share of each kind): the tune sweep's winner, docs/results/README.md
DEFAULT_MIX: dict[str, float] = {SOLVE: 0.7, deduction.NAME: 0.1, abduction.NAME: 0.1, induction.NAME: 0.1}


def kind_of(name: str) -> TaskKind:
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown task kind {name!r}; known: {', '.join(KINDS)}") from None


__all__ = [
    "KINDS",
    "SELF_PLAY",
    "SOLVE",
    "TASK_KINDS",
    "BuildOptions",
    "TaskKind",
    "kind_of",
    "per_problem",
    "raw_answer",
    "readable_floor",
]
