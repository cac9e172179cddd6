"""Phase 3: tasks from IPO triples, built by each task kind (`unified.kinds`).

Per program, every configured kind builds its tasks from the program's triples; the
kinds then take turns (I0, D0, A0, D1, A1, ...), so a later cap keeps a mix. Builders are
pure: they read triples, never the problem's hidden tests.
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Sequence

from unified.kinds import BuildOptions, kind_of, per_problem
from unified.types import IOTriple, Problem, Program, Rejection, Task


def build_tasks(
    problems: Sequence[Problem],
    programs: Sequence[Program],
    triples: Sequence[IOTriple],
    kind_names: Sequence[str],
    opts: BuildOptions,
) -> tuple[list[Task], list[Rejection]]:
    """All candidate tasks of the round (phase 4 filters them), in a stable order: per
    problem first the kinds that build one task per problem, then per program the others."""
    tasks, rejections = _per_problem_tasks(problems, programs, triples, kind_names, opts)
    by_problem = {p.problem_id: p for p in problems}
    by_program: dict[str, list[IOTriple]] = {}
    for t in triples:
        by_program.setdefault(t.program_id, []).append(t)
    kinds = [kind_of(name) for name in kind_names if not per_problem(kind_of(name))]
    for program in programs:
        mine = by_program.get(program.program_id, [])
        if not mine:
            continue
        built = [kind.build(by_problem[program.problem_id], program, mine, opts) for kind in kinds]
        for turn in zip_longest(*(made for made, _ in built)):
            tasks.extend(t for t in turn if t is not None)
        rejections.extend(r for _, rejected in built for r in rejected)
    return tasks, rejections


def _per_problem_tasks(problems, programs, triples, kind_names, opts: BuildOptions) -> tuple[list[Task], list[Rejection]]:
    tasks, rejections = [], []
    for kind in [kind_of(name) for name in kind_names if per_problem(kind_of(name))]:
        for problem in problems:
            pid = problem.problem_id
            made, rejected = kind.build_problem(problem, [p for p in programs if p.problem_id == pid],
                                                [t for t in triples if t.problem_id == pid], opts)  # fmt: skip
            tasks += made
            rejections += rejected
    return tasks, rejections
