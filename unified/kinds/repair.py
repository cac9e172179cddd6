"""Repair: the problem's prompt, one of the model's own programs that FAILED the visible
example and what the sandbox said about it -> a fixed program, rewarded on the visible
examples exactly as `solve` is.

Phase 1 already runs every program on the visible examples (`programs.check_visible`); a
program that fails leaves its failure there (the error, or the value it returned), which
phase 3 passes on as `BuildOptions.visible_failures`. The task shows the first failing
program of the problem (in phase 1's order) with that failure, and asks for the complete
corrected function in one ```python block (`RAW_ANSWER`, read like phase 1 reads programs).
A model that often writes almost-right code gets a second, better-aimed try at it, with
a reward no harder to check than `solve`'s (CodeRL's critic-guided repair, executed).

One task per problem (`PER_PROBLEM`), only where a program failed and an example has a
value (the reward needs one: this kind reads visible examples whatever
`solve_source` says). Gold: a phase-1 program that passes, when there is one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from unified.kinds import shapes, solve
from unified.kinds.base import BuildOptions, code_block, new_task
from unified.text.extract import code_key
from unified.text.prompts import program_prompt, with_prompt_imports
from unified.types import IOTriple, Problem, Program, Rejection, Task

NAME, LETTER = "repair", "R"
PER_PROBLEM = True
RAW_ANSWER = True  # the completion itself is the answer: a ```python block
ATTEMPT = "\n\nThis attempt fails the example"  # where the problem's own prompt ends in a repair prompt


def readable_floor(opts: BuildOptions) -> float:
    return solve.readable_floor(opts)


def build_problem(
    problem: Problem, programs: Sequence[Program], triples: Sequence[IOTriple], opts: BuildOptions
) -> tuple[list[Task], list[Rejection]]:
    task_id = f"{problem.problem_id}#repair:{NAME}:0"
    cases = [c for c in problem.visible if c.expected is not None]
    failures = opts.visible_failures or {}
    failed = [p for p in programs if p.program_id in failures]
    if not cases or not failed:
        why = "too_few_pairs" if not cases else "no_failing_program"
        return [], [Rejection("task", why, problem.problem_id, task_id, NAME, f"{len(programs)} programs")]
    attempt = failed[0]
    passing = [p for p in programs if opts.visible_passing is not None and p.program_id in opts.visible_passing]
    gold = passing[0].code if passing else ""
    prompt = (
        f"{program_prompt(problem)}{ATTEMPT}:\n\n{code_block(attempt.code)}\n\n"
        f"Running it on the example gave: {failures[attempt.program_id]}\n\n"
        f"Write the corrected `{problem.entry_point}` as one complete function in one ```python code block."
    )
    program = Program(problem.problem_id, f"{problem.problem_id}#repair", gold, problem.entry_point)
    return [new_task(NAME, 0, problem, program, prompt, code_block(gold) if gold else "", cases)], []


def parse(task: Task, answer: str) -> tuple[object, str | None]:
    return solve.parse(_as_solve(task), answer)


def calls(task: Task, parsed: object):
    return solve.calls(task, parsed)


def reward(task: Task, parsed: object, results: Sequence, opts: BuildOptions) -> float:
    return solve.reward(task, parsed, results, opts)


def answer_shape(task: Task) -> str:
    return shapes.code_answer(task.entry_point, tagged=False)


def is_trivial(task: Task, program_outputs: Sequence) -> bool:
    return False


def gold_is_own(task: Task, parsed_gold: object) -> bool:
    solve_task = _as_solve(task)
    return code_key(parsed_gold) == code_key(with_prompt_imports(solve._prompt_problem(solve_task), task.program))


def _as_solve(task: Task) -> Task:
    """The task with only the problem's own prompt (the code it quotes declares the imports)."""
    return replace(task, prompt=task.prompt.split(ATTEMPT)[0])
