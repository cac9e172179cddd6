"""Induction: problem text + shown I/O pairs -> program. The answer is the function; the
reward runs it on held-out pairs of the same program ("all" of them, or with
`partial_credit` the share that pass). Built only from programs that pass the problem's
visible examples when `visible_passing` is given: its pairs must agree with the text."""

from __future__ import annotations

from typing import Sequence

from unified.kinds import shapes
from unified.kinds.base import (
    from_each_program,
    no_floor,
    ANSWER_RULE,
    BuildOptions,
    all_same,
    call_text,
    cases_passed,
    code_block,
    new_task,
)
from unified.sandbox.exec_types import ExecCall
from unified.text.extract import code_key, extract_program
from unified.values import to_literal
from unified.types import IOTriple, Problem, Program, Rejection, Task, TestCase

NAME, LETTER = "induction", "I"
PER_PROBLEM = False  # tasks from each program's triples (`build`)
RAW_ANSWER = False  # the text inside <answer>
readable_floor = no_floor


def prompt(problem: Problem, shown: Sequence[TestCase]) -> str:
    pairs = "\n".join(f">>> {call_text(problem.entry_point, c.args)}\n{to_literal(c.expected)}" for c in shown)
    return (
        f"{problem.prompt.rstrip()}\n\n"
        f"Write a Python function `{problem.entry_point}` that behaves like this:\n{pairs}\n\n"
        "Answer with the complete function as a ```python code block inside <answer></answer>.\n" + ANSWER_RULE
    )


def build(
    problem: Problem, program: Program, triples: Sequence[IOTriple], opts: BuildOptions
) -> tuple[list[Task], list[Rejection]]:
    """One task: up to `shown_pairs` pairs shown (at least one held out), visible inputs
    first, so programs that behave alike give the same prompt (a duplicate)."""
    if opts.visible_passing is not None and program.program_id not in opts.visible_passing:
        return [], []
    task_id = f"{program.program_id}:{NAME}:0"
    ordered = sorted(triples, key=lambda t: t.input_source != "visible")
    if len(ordered) < 2:
        return [], [Rejection("task", "too_few_pairs", problem.problem_id, task_id, NAME, f"{len(ordered)} pairs")]
    shown = max(1, min(opts.shown_pairs, len(ordered) - 1))
    cases = [TestCase(t.args, t.output) for t in ordered]
    gold = f"<answer>\n{code_block(program.code)}\n</answer>"
    task = new_task(NAME, 0, problem, program, prompt(problem, cases[:shown]), gold, cases[shown:], shown=cases[:shown])
    return [task], []


def parse(task: Task, answer: str) -> tuple[object, str | None]:
    return extract_program(answer, task.entry_point)


def calls(task: Task, parsed: object) -> list[ExecCall]:
    return [ExecCall(parsed, task.entry_point, case.args) for case in task.cases]


def reward(task: Task, parsed: object, results: Sequence, opts: BuildOptions) -> float:
    passed = cases_passed(task, results)
    if not passed:
        return 0.0
    return sum(passed) / len(passed) if opts.partial_credit else float(all(passed))


def answer_shape(task: Task) -> str:
    return shapes.code_answer(task.entry_point, tagged=True)


def is_trivial(task: Task, program_outputs: Sequence) -> bool:
    return all_same([c.expected for c in task.shown + task.cases])


def gold_is_own(task: Task, parsed_gold: object) -> bool:
    return code_key(parsed_gold) == code_key(task.program)


build_problem = from_each_program(build)
