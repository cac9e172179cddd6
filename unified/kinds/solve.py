"""Solve: the problem's own prompt -> a program, rewarded on the problem's VISIBLE examples.

The prompt is phase 1's program prompt (`text.prompts.program_prompt`), the one greedy pass@1
is measured with, so what this kind trains is what the benchmark scores. The answer is the
completion as the model writes it (a ```python block, no <answer> tag: `RAW_ANSWER`), read
like phase 1 reads programs. The reward runs it on the visible examples only (hidden tests
are for evaluation and never reach a task) and grades it (`BuildOptions.solve_reward`):

    binary    1 when every visible example passes, else 0
    fraction  the share of visible examples that pass
    graded    1 pass, -0.3 a wrong value, -0.6 an error or timeout (CodeRL's outcome
              classes); unreadable code gets the pipeline's `format_penalty` like any kind

One task per problem (`PER_PROBLEM`), from all of the problem's programs (`build_problem`). Its
gold is a model program that passes the visible examples, when phase 1 found one, else
empty (nothing to check: the task still trains when its group has signal). Phase 1 already
sampled this prompt K times; phase 5 reuses those completions as the group when their
weight version is current and the sampling settings match (`run/phase5.py`).
"""

from __future__ import annotations

import re
from typing import Sequence

from unified.kinds import agreement, shapes
from unified.kinds.base import BuildOptions, cases_passed, code_block, new_task
from unified.text.extract import code_key, extract_program
from unified.text.prompts import program_prompt, with_prompt_imports
from unified.sandbox.exec_types import ExecCall
from unified.types import IOTriple, Problem, Program, Rejection, Task
from unified.values import to_literal

NAME, LETTER = "solve", "S"
PER_PROBLEM = True  # one task per problem, from `build_problem`
RAW_ANSWER = True  # the completion itself is the answer (the benchmark's format)
REWARDS = ("binary", "fraction", "graded")
GRADED = {"pass": 1.0, "wrong": -0.3, "error": -0.6}


def readable_floor(opts: BuildOptions) -> float:
    """The lowest reward readable code gets: an error under `graded`, else 0."""
    return GRADED["error"] if opts.solve_reward == "graded" else 0.0


def build_problem(
    problem: Problem, programs: Sequence[Program], triples: Sequence[IOTriple], opts: BuildOptions
) -> tuple[list[Task], list[Rejection]]:
    """The problem's solve task; `programs` and `triples` are phases 1-2's for this problem.
    Its cases come from `opts.solve_source`:

        visible    the visible examples; gold: the first program that passes them
        agreement  the largest cluster's outputs on every input (kinds/agreement.py); gold:
                   one of its programs. No example's expected value is read.
        both       the visible examples, plus the outputs on the other inputs of the
                   largest cluster that passes every visible example (when one does)
    """
    task_id = f"{problem.problem_id}#solve:{NAME}:0"
    visible = [c for c in problem.visible if c.expected is not None] if opts.solve_source != "agreement" else []
    passing = [p for p in programs if opts.visible_passing is None or p.program_id in opts.visible_passing]
    cases, gold = visible, (passing[0].code if passing else "")
    if opts.solve_source != "visible":
        found, why = agreement.consensus(
            problem,
            programs,
            triples,
            opts.program_votes or {},
            opts.samples_per_problem,
            min_votes=opts.agreement_min_votes,
            visible=opts.solve_source == "both",
            atol=problem.atol,
        )
        if found is None and opts.solve_source == "agreement":
            return [], [Rejection("task", why, problem.problem_id, task_id, NAME, f"{len(programs)} programs")]
        if found is not None and found.visible_matched == len(visible):
            shown = {to_literal(c.args) for c in visible}
            cases = visible + [c for c in found.cases if to_literal(c.args) not in shown]
            gold = next(p.code for p in programs if p.program_id == found.program_id)
    if not cases:
        return [], [Rejection("task", "too_few_pairs", problem.problem_id, task_id, NAME, "no visible example with a value")]
    # the task belongs to the problem (id "<problem>#solve:solve:0"), whichever program is its gold
    task = new_task(
        NAME,
        0,
        problem,
        Program(problem.problem_id, f"{problem.problem_id}#solve", gold, problem.entry_point),
        program_prompt(problem),
        code_block(gold) if gold else "",
        cases,
    )
    return [task], []


def parse(task: Task, answer: str) -> tuple[object, str | None]:
    code, reason = extract_program(answer, task.entry_point)
    if code is None:
        return None, reason
    # HumanEval prompts declare imports the answer often leaves out (as phase 1 adds them)
    return with_prompt_imports(_prompt_problem(task), code), None


def calls(task: Task, parsed: object) -> list[ExecCall]:
    return [ExecCall(parsed, task.entry_point, case.args) for case in task.cases]


def reward(task: Task, parsed: object, results: Sequence, opts: BuildOptions) -> float:
    passed = cases_passed(task, results)
    if not passed:
        return 0.0 if opts.solve_reward != "graded" else GRADED["error"]
    if opts.solve_reward == "fraction":
        return sum(passed) / len(passed)
    if opts.solve_reward == "graded":
        if all(passed):
            return GRADED["pass"]
        return GRADED["error"] if any(not r.ok for r in results) else GRADED["wrong"]
    return float(all(passed))


def answer_shape(task: Task) -> str:
    return shapes.code_answer(task.entry_point, tagged=False)


def is_trivial(task: Task, program_outputs: Sequence) -> bool:
    return False


def gold_is_own(task: Task, parsed_gold: object) -> bool:
    return code_key(parsed_gold) == code_key(with_prompt_imports(_prompt_problem(task), task.program))


def _prompt_problem(task: Task) -> Problem:
    """Enough of a Problem for `with_prompt_imports`: the code a code prompt quotes (HumanEval's
    signature and docstring, with its imports), or the prose of an MBPP prompt (no imports)."""
    quoted = re.search(r"```python\n(.*?)\n```", task.prompt, re.S)
    return Problem(task.problem_id, "", quoted.group(1) if quoted else "", task.entry_point, ())
