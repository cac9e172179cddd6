"""Abduction: program + output -> input. The answer is a call `f(arg, ...)` with literal
arguments; the program runs on them in the sandbox and any input that returns the output
earns the reward."""

from __future__ import annotations

from typing import Sequence

from unified.kinds import shapes
from unified.kinds.base import (
    from_each_program,
    no_floor,
    BuildOptions,
    about_program,
    all_same,
    call_text,
    cases_passed,
    one_task_per_triple,
    values_equal,
)
from unified.sandbox.exec_types import ExecCall
from unified.text.extract import call_args
from unified.values import to_literal
from unified.types import IOTriple, Problem, Program, Rejection, Task

NAME, LETTER = "abduction", "A"
PER_PROBLEM = False  # tasks from each program's triples (`build`)
RAW_ANSWER = False  # the text inside <answer>
readable_floor = no_floor


def prompt(program: Program, output: object) -> str:
    return about_program(
        program,
        f"Find arguments for which `{program.entry_point}` returns exactly `{to_literal(output)}`.\n"
        f"Answer with the call, using Python literals as arguments, e.g. <answer>{program.entry_point}(...)</answer>.",
    )


def build(
    problem: Problem, program: Program, triples: Sequence[IOTriple], opts: BuildOptions
) -> tuple[list[Task], list[Rejection]]:
    gold = lambda t: call_text(program.entry_point, t.args)  # noqa: E731
    return one_task_per_triple(NAME, problem, program, triples, lambda t: prompt(program, t.output), gold), []


def parse(task: Task, answer: str) -> tuple[object, str | None]:
    return call_args(answer, task.entry_point, len(task.cases[0].args))


def calls(task: Task, parsed: object) -> list[ExecCall]:
    return [ExecCall(task.program, task.entry_point, parsed)]


def reward(task: Task, parsed: object, results: Sequence, opts: BuildOptions) -> float:
    passed = cases_passed(task, results)
    return float(bool(passed) and all(passed))


def answer_shape(task: Task) -> str:
    return shapes.call_answer(task.entry_point, len(task.cases[0].args))


def is_trivial(task: Task, program_outputs: Sequence) -> bool:
    # no output to aim at, or a program that returns one value for every input (any input works)
    return task.cases[0].expected is None or all_same(program_outputs)


def gold_is_own(task: Task, parsed_gold: object) -> bool:
    return values_equal(parsed_gold, task.cases[0].args)


build_problem = from_each_program(build)
