"""Abduction: program + output -> input. The answer is a call `f(arg, ...)` with literal
arguments; the program runs on them in the sandbox and any input that returns the output
earns the reward."""

from __future__ import annotations

from typing import Sequence

from unified.kinds.base import ANSWER_RULE, BuildOptions, all_same, call_text, cases_passed, code_block, new_task, values_equal
from unified.sandbox.exec_types import ExecCall
from unified.text.extract import call_args
from unified.values import to_literal
from unified.types import IOTriple, Problem, Program, Rejection, Task, TestCase

NAME, LETTER = "abduction", "A"


def prompt(program: Program, output: object) -> str:
    return (
        "Here is a Python function.\n\n"
        f"{code_block(program.code)}\n\n"
        f"Find arguments for which `{program.entry_point}` returns exactly `{to_literal(output)}`.\n"
        f"Answer with the call, using Python literals as arguments, e.g. <answer>{program.entry_point}(...)</answer>.\n"
        + ANSWER_RULE
    )


def build(
    problem: Problem, program: Program, triples: Sequence[IOTriple], opts: BuildOptions
) -> tuple[list[Task], list[Rejection]]:
    tasks = [
        new_task(NAME, i, problem, program, prompt(program, t.output), f"<answer>{call_text(program.entry_point, t.args)}</answer>", [TestCase(t.args, t.output)])
        for i, t in enumerate(triples)
    ]
    return tasks, []


def parse(task: Task, answer: str) -> tuple[object, str | None]:
    return call_args(answer, task.entry_point, len(task.cases[0].args))


def calls(task: Task, parsed: object) -> list[ExecCall]:
    return [ExecCall(task.program, task.entry_point, parsed)]


def reward(task: Task, parsed: object, results: Sequence, opts: BuildOptions) -> float:
    passed = cases_passed(task, results)
    return float(bool(passed) and all(passed))


def is_trivial(task: Task, program_outputs: Sequence) -> bool:
    # no output to aim at, or a program that returns one value for every input (any input works)
    return task.cases[0].expected is None or all_same(program_outputs)


def gold_is_own(task: Task, parsed_gold: object) -> bool:
    return values_equal(parsed_gold, task.cases[0].args)
