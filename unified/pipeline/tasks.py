"""Phase 3: Absolute-Zero-style tasks from IPO triples, with prompts and gold answers.

One answer format for all three kinds: the answer goes inside `<answer>...</answer>`
(`rewards` reads the last such block; a ```python fence inside it is allowed).
- deduction (program + input -> output): the answer is the output as a Python literal.
- abduction (program + output -> input): the answer is a call `f(arg, ...)` with literal
  arguments; any input that makes the program return the output earns the reward.
- induction (problem text + shown I/O pairs -> program): the answer is the function; the
  reward runs it on held-out pairs of the same program.

Builders are pure: they read triples, never the problem's hidden tests.
"""

from __future__ import annotations

from typing import Sequence

from unified.pipeline.values import to_literal
from unified.types import IOTriple, Problem, Program, Rejection, Task, TestCase

ANSWER_RULE = "Put your final answer inside <answer></answer> and write nothing after it."


def call_text(entry_point: str, args: tuple) -> str:
    return f"{entry_point}({', '.join(to_literal(a) for a in args)})"


def _code_block(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def deduction_prompt(program: Program, args: tuple) -> str:
    return (
        "Here is a Python function.\n\n"
        f"{_code_block(program.code)}\n\n"
        f"What does `{call_text(program.entry_point, args)}` return?\n"
        "Answer with the exact return value as a Python literal, e.g. <answer>[1, 2]</answer>.\n" + ANSWER_RULE
    )


def abduction_prompt(program: Program, output: object) -> str:
    return (
        "Here is a Python function.\n\n"
        f"{_code_block(program.code)}\n\n"
        f"Find arguments for which `{program.entry_point}` returns exactly `{to_literal(output)}`.\n"
        f"Answer with the call, using Python literals as arguments, e.g. <answer>{program.entry_point}(...)</answer>.\n"
        + ANSWER_RULE
    )


def induction_prompt(problem: Problem, shown: Sequence[TestCase]) -> str:
    pairs = "\n".join(f">>> {call_text(problem.entry_point, c.args)}\n{to_literal(c.expected)}" for c in shown)
    return (
        f"{problem.prompt.rstrip()}\n\n"
        f"Write a Python function `{problem.entry_point}` that behaves like this:\n{pairs}\n\n"
        "Answer with the complete function as a ```python code block inside <answer></answer>.\n" + ANSWER_RULE
    )


def deduction_task(problem: Problem, program: Program, triple: IOTriple, index: int) -> Task:
    return Task(
        task_id=f"{program.program_id}:deduction:{index}",
        kind="deduction",
        problem_id=problem.task_id,
        program_id=program.program_id,
        prompt=deduction_prompt(program, triple.args),
        gold=f"<answer>{to_literal(triple.output)}</answer>",
        entry_point=program.entry_point,
        program=program.code,
        cases=(TestCase(triple.args, triple.output),),
        atol=problem.atol,
    )


def abduction_task(problem: Problem, program: Program, triple: IOTriple, index: int) -> Task:
    return Task(
        task_id=f"{program.program_id}:abduction:{index}",
        kind="abduction",
        problem_id=problem.task_id,
        program_id=program.program_id,
        prompt=abduction_prompt(program, triple.output),
        gold=f"<answer>{call_text(program.entry_point, triple.args)}</answer>",
        entry_point=program.entry_point,
        program=program.code,
        cases=(TestCase(triple.args, triple.output),),
        atol=problem.atol,
    )


def induction_task(problem: Problem, program: Program, triples: Sequence[IOTriple], shown_count: int) -> Task | None:
    """Up to `shown_count` pairs are shown (at least one is held out), visible inputs
    first, so programs that behave alike give the same prompt (a duplicate). None with
    fewer than two pairs."""
    ordered = sorted(triples, key=lambda t: t.input_source != "visible")
    if len(ordered) < 2:
        return None
    shown_count = max(1, min(shown_count, len(ordered) - 1))
    cases = [TestCase(t.args, t.output) for t in ordered]
    return Task(
        task_id=f"{program.program_id}:induction:0",
        kind="induction",
        problem_id=problem.task_id,
        program_id=program.program_id,
        prompt=induction_prompt(problem, cases[:shown_count]),
        gold=f"<answer>\n{_code_block(program.code)}\n</answer>",
        entry_point=program.entry_point,
        program=program.code,
        cases=tuple(cases[shown_count:]),
        shown=tuple(cases[:shown_count]),
        atol=problem.atol,
    )


def build_tasks(
    problems: Sequence[Problem],
    programs: Sequence[Program],
    triples: Sequence[IOTriple],
    task_types: Sequence[str],
    induction_shown: int,
    induction_from: set[str] | None = None,
) -> tuple[list[Task], list[Rejection]]:
    """All candidate tasks of the round (phase 4 filters them), in a stable order.
    `induction_from`: the program ids induction tasks may come from (None: all)."""
    by_problem = {p.task_id: p for p in problems}
    by_program: dict[str, list[IOTriple]] = {}
    for t in triples:
        by_program.setdefault(t.program_id, []).append(t)
    tasks, rejections = [], []
    for program in programs:
        problem, mine = by_problem[program.problem_id], by_program.get(program.program_id, [])
        if not mine:
            continue
        if "induction" in task_types and (induction_from is None or program.program_id in induction_from):
            task = induction_task(problem, program, mine, induction_shown)
            if task is None:
                task_id = f"{program.program_id}:induction:0"
                rejections.append(
                    Rejection("task", "too_few_pairs", problem.task_id, task_id, "induction", f"{len(mine)} pairs")
                )
            else:
                tasks.append(task)
        for i, triple in enumerate(mine):
            if "deduction" in task_types:
                tasks.append(deduction_task(problem, program, triple, i))
            if "abduction" in task_types:
                tasks.append(abduction_task(problem, program, triple, i))
    return tasks, rejections
