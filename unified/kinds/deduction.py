"""Deduction: program + input -> output. The answer is the output as a Python literal,
compared by VALUE (`values_equal`, the problem's atol): `(1, 2)` and `(1,2)` are one answer."""

from __future__ import annotations

from typing import Sequence

from unified.kinds.base import ANSWER_RULE, BuildOptions, call_text, code_block, new_task, values_equal
from unified.text.extract import read_literal
from unified.values import to_literal
from unified.types import IOTriple, Problem, Program, Rejection, Task, TestCase

NAME, LETTER = "deduction", "D"


def prompt(program: Program, args: tuple) -> str:
    return (
        "Here is a Python function.\n\n"
        f"{code_block(program.code)}\n\n"
        f"What does `{call_text(program.entry_point, args)}` return?\n"
        "Answer with the exact return value as a Python literal, e.g. <answer>[1, 2]</answer>.\n" + ANSWER_RULE
    )


def build(
    problem: Problem, program: Program, triples: Sequence[IOTriple], opts: BuildOptions
) -> tuple[list[Task], list[Rejection]]:
    tasks = [
        new_task(NAME, i, problem, program, prompt(program, t.args), f"<answer>{to_literal(t.output)}</answer>", [TestCase(t.args, t.output)])
        for i, t in enumerate(triples)
    ]
    return tasks, []


def parse(task: Task, answer: str) -> tuple[object, str | None]:
    ok, value = read_literal(answer)
    return (value, None) if ok else (None, "not_a_literal")


def calls(task: Task, parsed: object) -> list:
    return []  # the answer is compared with the known output: nothing to run


def reward(task: Task, parsed: object, results: Sequence, opts: BuildOptions) -> float:
    return float(values_equal(parsed, task.cases[0].expected, atol=task.atol))


def is_trivial(task: Task, program_outputs: Sequence) -> bool:
    return task.cases[0].expected is None


def gold_is_own(task: Task, parsed_gold: object) -> bool:
    return True  # the gold is the output itself; `reward` checks it
