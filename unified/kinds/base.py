"""What a task kind is: one module that builds, prompts, parses and rewards its tasks.

A kind module defines the names in `TaskKind` below; `unified.kinds.KINDS` lists the
modules, one line each. Everything else (phase 3's builder, phase 4's checks, phase 5's
rewards, metrics and plots) goes through the registry and never names a kind.

One answer format for every kind: the answer goes inside `<answer>...</answer>`;
`unified.pipeline.rewards` cuts it out before the kind's `parse` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

from unified.sandbox.exec_types import ExecCall, ExecResult
from unified.values import to_literal, values_equal
from unified.types import IOTriple, Problem, Program, Rejection, Task, TestCase

ANSWER_RULE = "Put your final answer inside <answer></answer> and write nothing after it."


@dataclass(frozen=True)
class BuildOptions:
    """What phase 3 tells every kind's builder (from `PipelineConfig`)."""

    shown_pairs: int = 3  # pairs an induction-like prompt shows (>= 1 held out)
    visible_passing: frozenset[str] | None = None  # program ids that pass the visible examples (None: all count)
    partial_credit: bool = False  # reward the share of held-out pairs passed, not all-or-nothing
    solve_reward: str = "binary"  # how the solve kind grades a program on its cases
    solve_source: str = "visible"  # where the solve kind's expected values come from (kinds/agreement.py)
    program_votes: Mapping[str, int] | None = None  # program id -> samples it stands for (duplicates merged)
    samples_per_problem: int = 0  # completions phase 1 sampled per problem (the vote's total)
    agreement_min_votes: int = 3  # the smallest cluster that is a label
    visible_failures: Mapping[str, str] | None = None  # program id -> what it did on a visible example it fails


class TaskKind(Protocol):
    """The names a kind module defines: every one of them, no optional ones."""

    NAME: str  # "deduction": Task.kind, metric keys (reward/deduction), config pipeline.kinds
    LETTER: str  # "D": its column in the console's tasks line
    PER_PROBLEM: bool  # True: one task per problem from all its programs; False: tasks from each program's triples
    RAW_ANSWER: bool  # True: the whole completion is the answer; False: the text inside <answer>

    def build_problem(
        self, problem: Problem, programs: Sequence[Program], triples: Sequence[IOTriple], opts: BuildOptions
    ) -> tuple[list[Task], list[Rejection]]:
        """Candidate tasks of one problem from its phase-1 programs and phase-2 triples; a
        kind built per program returns them program by program (`from_each_program`)."""

    def readable_floor(self, opts: BuildOptions) -> float:
        """The lowest reward a readable answer gets: what an unreadable one scores when the
        format is not penalized (`PipelineConfig.format_penalty_when`)."""

    def parse(self, task: Task, answer: str) -> tuple[object, str | None]:
        """(what the answer says, None) or (None, reason it cannot be read)."""

    def calls(self, task: Task, parsed: object) -> list[ExecCall]:
        """Sandbox calls the reward needs (may be none)."""

    def reward(self, task: Task, parsed: object, results: Sequence[ExecResult], opts: BuildOptions) -> float:
        """The reward of a readable answer, given the results of `calls` (pure)."""

    def answer_shape(self, task: Task) -> str | None:
        """The grammar its answer is decoded in when the kind is constrained (`kinds.shapes`;
        `pipeline.constrain`), or None for free text."""

    def is_trivial(self, task: Task, program_outputs: Sequence) -> bool:
        """Any answer would do (phase 4 drops it); `program_outputs`: all its program's outputs."""

    def gold_is_own(self, task: Task, parsed_gold: object) -> bool:
        """The parsed gold answer is the one the task was built from (phase 4's gold check)."""


# ---------------------------------------------------------------- helpers kinds share


def per_problem(kind: TaskKind) -> bool:
    """The kind builds one task per problem, needing no IPO triples of its own."""
    return kind.PER_PROBLEM


def raw_answer(kind: TaskKind) -> bool:
    """The kind reads the whole completion (its prompt asks for no <answer> tag)."""
    return kind.RAW_ANSWER


def readable_floor(kind: TaskKind, opts: BuildOptions) -> float:
    """The lowest reward a readable answer of this kind gets (`TaskKind.readable_floor`)."""
    return float(kind.readable_floor(opts))


def no_floor(opts: BuildOptions) -> float:
    """`readable_floor` of a kind whose readable answers can score 0."""
    return 0.0


BuildOne = Callable[[Problem, Program, Sequence[IOTriple], BuildOptions], tuple[list[Task], list[Rejection]]]


def from_each_program(build: BuildOne):
    """`build_problem` for a kind built per program: `build(problem, program, its triples,
    opts)` for each program that has triples, in program order."""

    def build_problem(
        problem: Problem, programs: Sequence[Program], triples: Sequence[IOTriple], opts: BuildOptions
    ) -> tuple[list[Task], list[Rejection]]:
        by_program: dict[str, list[IOTriple]] = {}
        for t in triples:
            by_program.setdefault(t.program_id, []).append(t)
        tasks, rejections = [], []
        for program in programs:
            if by_program.get(program.program_id):
                made, rejected = build(problem, program, by_program[program.program_id], opts)
                tasks += made
                rejections += rejected
        return tasks, rejections

    return build_problem


def new_task(
    kind: str,
    index: int,
    problem: Problem,
    program: Program,
    prompt: str,
    gold: str,
    cases: Sequence[TestCase],
    shown: Sequence[TestCase] = (),
) -> Task:
    """A task of `kind` on `program`: ids are "<program_id>:<kind>:<index>", unique in a round."""
    return Task(
        task_id=f"{program.program_id}:{kind}:{index}",
        kind=kind,
        problem_id=problem.problem_id,
        program_id=program.program_id,
        prompt=prompt,
        gold=gold,
        entry_point=program.entry_point,
        program=program.code,
        cases=tuple(cases),
        shown=tuple(shown),
        atol=problem.atol,
    )


def one_task_per_triple(
    kind: str,
    problem: Problem,
    program: Program,
    triples: Sequence[IOTriple],
    prompt: Callable[[IOTriple], str],
    gold: Callable[[IOTriple], str],
) -> list[Task]:
    """One task per (input, output) pair of `program`, checked against that pair (deduction, abduction)."""
    return [
        new_task(kind, i, problem, program, prompt(t), f"<answer>{gold(t)}</answer>", [TestCase(t.args, t.output)])
        for i, t in enumerate(triples)
    ]


def about_program(program: Program, question: str) -> str:
    """The prompt of a kind that shows the program and asks one question about it."""
    return f"Here is a Python function.\n\n{code_block(program.code)}\n\n{question}\n" + ANSWER_RULE


def call_text(entry_point: str, args: tuple) -> str:
    return f"{entry_point}({', '.join(to_literal(a) for a in args)})"


def code_block(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def cases_passed(task: Task, results: Sequence[ExecResult]) -> list[bool]:
    """Per case: the call returned the case's expected value; [] when results are missing."""
    if len(results) != len(task.cases):
        return []
    return [r.ok and values_equal(r.value, c.expected, atol=task.atol) for r, c in zip(results, task.cases)]


def all_same(values: Sequence) -> bool:
    return len(values) >= 2 and all(values_equal(v, values[0]) for v in values[1:])
