"""Phase 3: the round's candidate tasks, built by each task kind (`unified.kinds`).

Per problem, every configured kind builds its tasks (`build_problem`, the one builder of
the kind contract): a per-problem kind (`solve`) one task from the problem's prompt,
visible examples and programs, the others tasks from each program's IPO triples. The
per-problem kinds' tasks come first; then, per program, the other kinds take turns (I0,
D0, A0, D1, A1, ...), so a later cap keeps a mix. Builders are pure, and none reads the
problem's hidden tests (tests/pipeline/test_hidden_firewall.py).
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
    problem first the kinds that build one task per problem, then, per program, the others
    taking turns."""
    kinds = [kind_of(name) for name in kind_names]
    programs_of: dict[str, list[Program]] = {}
    triples_of: dict[str, list[IOTriple]] = {}
    for p in programs:
        programs_of.setdefault(p.problem_id, []).append(p)
    for t in triples:
        triples_of.setdefault(t.problem_id, []).append(t)
    tasks, rejections = [], []
    for problem in problems:
        pid = problem.problem_id
        built = [(kind, kind.build_problem(problem, programs_of.get(pid, []), triples_of.get(pid, []), opts)) for kind in kinds]
        rejections += [r for _, (_, rejected) in built for r in rejected]
        tasks += [t for kind, (made, _) in built if per_problem(kind) for t in made]
        for program in programs_of.get(pid, []):
            mine = [[t for t in made if t.program_id == program.program_id] for kind, (made, _) in built if not per_problem(kind)]
            for turn in zip_longest(*mine):
                tasks.extend(t for t in turn if t is not None)
    return tasks, rejections
