"""Deduction: program + input -> output. The answer is the output as a Python literal,
compared by VALUE (`values_equal`, the problem's atol): `(1, 2)` and `(1,2)` are one answer."""

from __future__ import annotations

from typing import Sequence

from unified.kinds import shapes
from unified.kinds.base import (
    from_each_program,
    no_floor,
    BuildOptions,
    about_program,
    call_text,
    one_task_per_triple,
    values_equal,
)
from unified.text.extract import read_literal
from unified.values import to_literal
from unified.types import IOTriple, Problem, Program, Rejection, Task

NAME, LETTER = "deduction", "D"
PER_PROBLEM = False  # tasks from each program's triples (`build`)
RAW_ANSWER = False  # the text inside <answer>
readable_floor = no_floor


def prompt(program: Program, args: tuple) -> str:
    return about_program(
        program,
        f"What does `{call_text(program.entry_point, args)}` return?\n"
        "Answer with the exact return value as a Python literal, e.g. <answer>[1, 2]</answer>.",
    )


def build(
    problem: Problem, program: Program, triples: Sequence[IOTriple], opts: BuildOptions
) -> tuple[list[Task], list[Rejection]]:
    return one_task_per_triple(
        NAME, problem, program, triples, lambda t: prompt(program, t.args), lambda t: to_literal(t.output)
    ), []


def parse(task: Task, answer: str) -> tuple[object, str | None]:
    ok, value = read_literal(answer)
    return (value, None) if ok else (None, "not_a_literal")


def calls(task: Task, parsed: object) -> list:
    return []  # the answer is compared with the known output: nothing to run


def reward(task: Task, parsed: object, results: Sequence, opts: BuildOptions) -> float:
    return float(values_equal(parsed, task.cases[0].expected, atol=task.atol))


def answer_shape(task: Task) -> str:
    return shapes.literal_answer()


def is_trivial(task: Task, program_outputs: Sequence) -> bool:
    return task.cases[0].expected is None


def gold_is_own(task: Task, parsed_gold: object) -> bool:
    return True  # the gold is the output itself; `reward` checks it


build_problem = from_each_program(build)
