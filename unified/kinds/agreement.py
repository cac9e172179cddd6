"""Execution agreement: a pseudo-label for a problem from what its own sampled programs do.

TTRL's majority vote, taken by running code instead of comparing text (CodeT's dual
agreement is the reference): every program phase 1 sampled for a problem ran on the same
phase-2 inputs (the visible examples' arguments and the model's proposed inputs). Programs
that behave alike on every input form a cluster; the largest cluster's outputs become the
expected values of the problem's `solve` task, so an answer is rewarded for doing what most
of the model's own programs do. No test a person wrote is read (`source="agreement"`); with
`source="both"` the visible examples rank the clusters first and keep their own expected
values (CodeT: agreement with the tests, then with each other).

How the cases are counted, and why:
- **Votes are samples, not distinct programs.** Phase 1 deduplicates programs by their AST,
  so a program written 5 times out of 16 carries 5 votes (`votes`); a completion with no
  readable program votes for nothing but still counts in `total`.
- **Errors are behaviour.** A run that raised, timed out or was not deterministic on an
  input reads as "error" there: two programs that fail on the same input and agree
  elsewhere are one cluster (functional equivalence on the inputs, as in functional
  majority voting). The label keeps only the inputs where the winner returns a value.
- **A program with no value on any input abstains.** It says nothing about what the
  function returns, and at 135M it is the usual case: on 100 report problems most programs
  raise on every input, so when they voted their cluster won 77 problems and gave no label
  (`all_errors`). They still count in `total`; `all_errors` now means no program returned a
  value anywhere. (`abstain=False` restores the old vote, for `unified/eval/experiments/agreement_labels.py`.)
- **Inputs nobody ran are dropped.** An input on which no program returned a value says
  nothing about any of them (a proposal of the wrong type, say).
- **A cluster of one is no agreement** (`min_votes`): any program agrees with itself, and
  training toward a lone program is training toward noise (`too_few_votes`). The pipeline
  asks for 3 (`pipeline.agreement_min_votes`), tuned on the tune split with
  `unified/eval/experiments/agreement_labels.py`: of SmolLM2's two-vote winners 1 in 30 passed the hidden
  tests, of the rest 14 in 67.
- **Ties give no label** (`tied`): a coin flip between two behaviours is a wrong label half
  the time, and a wrong label trains with the full weight of a right one.
- **A winner that returns None everywhere gives no label** (`returns_none`): small models
  print instead of returning, and such programs agree with each other about nothing.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

from unified.text.extract import code_key
from unified.types import IOTriple, Problem, Program, TestCase
from unified.values import to_literal, values_equal

SOURCES = ("visible", "agreement", "both")  # where the solve kind's expected values come from
ERROR = "<error>"  # an input on which a program returned no value


@dataclass(frozen=True)
class Consensus:
    """The winning cluster of one problem."""

    cases: tuple[TestCase, ...]  # (input, the winners' output) where the winners return a value
    program_id: str  # a member of the winning cluster (the task's gold)
    votes: int  # samples in the winning cluster
    total: int  # samples that voted (every completion phase 1 sampled for the problem)
    clusters: int  # distinct behaviours among the programs that ran
    runner_up: int  # votes of the second cluster (0 if none)
    visible_matched: int = 0  # visible examples the winners' outputs match (source "both")


def consensus(
    problem: Problem,
    programs: Sequence[Program],
    triples: Sequence[IOTriple],
    votes: Mapping[str, int],
    total: int,
    *,
    min_votes: int = 2,
    visible: bool = False,
    atol: float = 0.0,
    abstain: bool = True,
) -> tuple[Consensus | None, str | None]:
    """(the winning cluster, None) or (None, why there is none). `programs` and `triples` are
    the problem's; `votes` maps a program id to the samples it stands for (1 if missing);
    `visible=True` ranks clusters by the visible examples they match first (source "both")."""
    inputs = _inputs(triples)
    if not inputs:
        return None, "no_inputs"
    outputs = {(t.program_id, to_literal(t.args)): t.output for t in triples}
    counts, members = _clusters(programs, inputs, outputs, votes, abstain)
    if not counts:
        return None, "all_errors" if programs else "no_programs"
    example = {to_literal(c.args): c.expected for c in problem.visible if c.expected is not None} if visible else {}
    rank = {sig: (_matched(sig, inputs, outputs, members[sig][0], example, atol), counts[sig]) for sig in counts}
    ranked = sorted(counts, key=lambda sig: rank[sig], reverse=True)
    best = ranked[0]
    score = rank[best]
    runner_up = counts[ranked[1]] if len(ranked) > 1 else 0
    if len(ranked) > 1 and rank[ranked[1]] == score:
        return None, "tied"
    if counts[best] < min_votes:
        return None, "too_few_votes"
    values = [(args, outputs[(members[best][0], key)]) for (key, args), mark in zip(inputs, best) if mark != ERROR]
    if not values:
        return None, "all_errors"
    if all(v is None for _, v in values):
        return None, "returns_none"
    return Consensus(
        cases=tuple(TestCase(args, value) for args, value in values),
        program_id=members[best][0],
        votes=counts[best],
        total=max(total, sum(counts.values())),
        clusters=len(counts),
        runner_up=runner_up,
        visible_matched=score[0],
    ), None


def _clusters(
    programs: Sequence[Program], inputs, outputs: dict, votes: Mapping[str, int], abstain: bool
) -> tuple[Counter, dict]:
    """Programs grouped by their behaviour on every input: (behaviour -> its votes, behaviour ->
    its programs' ids); with `abstain`, a program with no value on any input votes for nothing."""
    counts: Counter = Counter()
    members: dict[tuple, list[str]] = {}
    for prog in programs:
        sig = tuple(_key(outputs, prog.program_id, key) for key, _ in inputs)  # its behaviour on every input
        if abstain and all(mark == ERROR for mark in sig):
            continue
        counts[sig] += max(1, int(votes.get(prog.program_id, 1)))
        members.setdefault(sig, []).append(prog.program_id)
    return counts, members


def _matched(sig: tuple, inputs, outputs: dict, program_id: str, example: dict, atol: float) -> int:
    """Visible examples whose expected value this behaviour (`program_id` shows it) returns (0 without `example`)."""
    return sum(
        mark != ERROR and values_equal(outputs[(program_id, key)], example[key], atol=atol)
        for (key, _), mark in zip(inputs, sig)
        if key in example
    )


def _inputs(triples: Sequence[IOTriple]) -> list[tuple[str, tuple]]:
    """The inputs some program returned a value on, in first-seen order: (literal key, args)."""
    seen: dict[str, tuple] = {}
    for t in triples:
        seen.setdefault(to_literal(t.args), t.args)
    return list(seen.items())


def _key(outputs: dict, program_id: str, key: str) -> str:
    """One program's behaviour on one input, as comparable text (`ERROR` without a value)."""
    if (program_id, key) not in outputs:
        return ERROR
    return to_literal(outputs[(program_id, key)])


def votes_per_program(candidates: Sequence[Program], kept: Sequence[Program]) -> dict[str, int]:
    """Kept program id -> how many sampled programs it stands for (itself and its duplicates,
    by AST, as `programs.deduplicate` merged them)."""
    owner = {(p.problem_id, code_key(p.code)): p.program_id for p in kept}
    counts: Counter = Counter()
    for p in candidates:
        pid = owner.get((p.problem_id, code_key(p.code)))
        if pid is not None:
            counts[pid] += 1
    return dict(counts)
