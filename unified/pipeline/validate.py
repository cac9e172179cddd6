"""Phase 4: which candidate tasks are kept, and a counted reason for every one that is not.

Execution checks (runs, deterministic across two runs, time, memory, banned code, output
size, literal round trip) already happened per (program, input) in phase 2's single
`run_twice` batch; those rejections have stage "triple". This module does the task-level
checks, in order:
  trivial        any answer would do (each kind's `is_trivial`: e.g. output None, or a
                 program that returns one value for every input)
  duplicate      same kind and same prompt as an earlier task
  gold_mismatch  the task's own gold answer, read back through the reward parser and
                 scored against the known outputs, does not earn 1 (e.g. a string output
                 containing "</answer>")
  over_cap       more than `max_per_kind_per_problem` of one kind for one problem
                 (a seeded random subset is kept)
  balance        trimmed so every kind present keeps the same count (problems round-robin)
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Sequence

from unified import kinds
from unified.kinds import kind_of
from unified.sandbox.exec_types import ExecResult
from unified.pipeline.rewards import parse_answer, reward_from_results
from unified.types import IOTriple, Rejection, Task

REASONS = {
    "program": ("no_code", "syntax", "no_entry_point", "duplicate", "fails_visible"),
    "input": ("no_inputs", "syntax", "not_a_literal", "wrong_arity", "unserialisable", "duplicate"),
    "triple": (
        "runtime_error",
        "timeout",
        "memory",
        "banned",
        "crashed",
        "nondeterministic",
        "output_too_large",
        "unserialisable",
    ),
    "task": ("too_few_pairs", "trivial", "duplicate", "gold_mismatch", "over_cap", "balance"),
}


def _outputs_by_program(triples: Sequence[IOTriple]) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for t in triples:
        out[t.program_id].append(t.output)
    return out


def gold_earns_one(task: Task, partial_credit: bool = False) -> bool:
    """Score the gold answer through the reward path; the sandbox results it would get are
    known from phase 2 (the gold program/arguments are the ones that produced the outputs)."""
    parsed, reason = parse_answer(task, task.gold)
    if reason is not None or not kind_of(task.kind).gold_is_own(task, parsed):
        return False
    known = [ExecResult(status="ok", value=c.expected) for c in task.cases]
    return reward_from_results(task, parsed, known, partial_credit) == 1.0


def _round_robin(tasks: Sequence[Task]) -> list[Task]:
    """Interleave problems so a cut keeps every problem represented."""
    groups: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        groups[t.problem_id].append(t)
    order, queues = [], list(groups.values())
    while any(queues):
        for q in queues:
            if q:
                order.append(q.pop(0))
    return order


def validate_tasks(
    tasks: Sequence[Task],
    triples: Sequence[IOTriple],
    max_per_kind_per_problem: int | None,
    balance_kinds: bool,
    seed: int = 0,
    partial_credit: bool = False,
) -> tuple[list[Task], list[Rejection]]:
    """Kept tasks (input order) and one Rejection per dropped task: each task checked on its
    own, then the per-problem cap, then the balance between kinds (one seeded RNG, in that
    order, so the same inputs keep the same tasks)."""
    rejected = _check_each(tasks, _outputs_by_program(triples), partial_credit)
    rng = random.Random(seed)
    if max_per_kind_per_problem is not None:
        _cap_per_problem([t for t in tasks if t.task_id not in rejected], max_per_kind_per_problem, rng, rejected)
    if balance_kinds:
        _balance_kinds([t for t in tasks if t.task_id not in rejected], rng, rejected)
    kept = [t for t in tasks if t.task_id not in rejected]
    rejections = [
        Rejection("task", reason, t.problem_id, t.task_id, t.kind, detail)
        for t in tasks
        if t.task_id in rejected
        for reason, detail in [rejected[t.task_id]]
    ]
    return kept, rejections


def _check_each(tasks: Sequence[Task], outputs: dict, partial_credit: bool) -> dict[str, tuple[str, str]]:
    """task id -> (reason, detail) for trivial tasks, repeated prompts and golds that do not
    earn 1 through their own reward."""
    rejected: dict[str, tuple[str, str]] = {}
    seen_prompts = set()
    for task in tasks:
        if kind_of(task.kind).is_trivial(task, outputs.get(task.program_id, [])):
            rejected[task.task_id] = ("trivial", "")
        elif (task.kind, task.prompt) in seen_prompts:
            rejected[task.task_id] = ("duplicate", "")
        elif task.gold and not gold_earns_one(task, partial_credit):  # no gold: nothing to check (solve)
            rejected[task.task_id] = ("gold_mismatch", task.gold[:200])
        seen_prompts.add((task.kind, task.prompt))
    return rejected


def _cap_per_problem(alive: list[Task], cap: int, rng: random.Random, rejected: dict) -> None:
    """At most `cap` tasks of each kind per problem (a seeded random choice)."""
    groups: dict[tuple[str, str], list[Task]] = defaultdict(list)
    for t in alive:
        groups[(t.problem_id, t.kind)].append(t)
    for group in groups.values():
        rng.shuffle(group)
        for t in group[cap:]:
            rejected[t.task_id] = ("over_cap", "")


def _balance_kinds(alive: list[Task], rng: random.Random, rejected: dict) -> None:
    """As many tasks of each present kind as of the rarest one (round-robin over problems)."""
    per_kind = {k: [t for t in alive if t.kind == k] for k in kinds.KINDS}
    present = [len(v) for v in per_kind.values() if v]
    target = min(present) if present else 0
    for kind_tasks in per_kind.values():
        shuffled = list(kind_tasks)
        rng.shuffle(shuffled)
        for t in _round_robin(shuffled)[target:]:
            rejected[t.task_id] = ("balance", "")
