"""Phase 5 rewards: a completion for a task -> (reward, parse-failure reason or None).

- deduction: the answer literal equals the output by VALUE (`values_equal`, the
  problem's atol), not by string; `(1, 2)` and `(1,2)` are the same answer.
- abduction: the program runs on the proposed arguments in the sandbox; any input that
  returns the output counts.
- induction: the candidate function runs on the held-out pairs; `induction_reward` "all"
  gives 1 only if every pair passes, "fraction" the share that pass.
An answer that cannot be read gets `format_penalty` (e.g. -0.5, or 0 to not punish
format), a readable wrong answer 0, a right one 1.

Split in three so a round's rollouts are scored with ONE executor batch:
`parse_answer` (pure) -> `reward_calls` (what to execute) -> `reward_from_results` (pure).
"""

from __future__ import annotations

from typing import Sequence

from unified.pipeline.executor import ExecCall
from unified.pipeline.extract import answer_text, call_args, extract_program, read_literal
from unified.pipeline.values import values_equal
from unified.types import Task

INDUCTION_REWARDS = ("all", "fraction")


def parse_answer(task: Task, text: str) -> tuple[object, str | None]:
    """(what the answer says, None) or (None, reason): the output value (deduction), the
    argument tuple (abduction), or the program code (induction)."""
    answer = answer_text(text)
    if answer is None:
        return None, "no_answer"
    if task.kind == "deduction":
        ok, value = read_literal(answer)
        return (value, None) if ok else (None, "not_a_literal")
    if task.kind == "abduction":
        return call_args(answer, task.entry_point, len(task.cases[0].args))
    if task.kind == "induction":
        return extract_program(answer, task.entry_point)
    raise ValueError(f"unknown task kind {task.kind!r}")


def reward_calls(task: Task, parsed: object) -> list[ExecCall]:
    """Sandbox calls the reward needs (none for deduction)."""
    if task.kind == "abduction":
        return [ExecCall(task.program, task.entry_point, parsed)]
    if task.kind == "induction":
        return [ExecCall(parsed, task.entry_point, case.args) for case in task.cases]
    return []


def reward_from_results(task: Task, parsed: object, results: Sequence, induction_reward: str = "all") -> float:
    if task.kind == "deduction":
        return float(values_equal(parsed, task.cases[0].expected, atol=task.atol))
    passed = [r.ok and values_equal(r.value, c.expected, atol=task.atol) for r, c in zip(results, task.cases)]
    if len(passed) != len(task.cases) or not passed:
        return 0.0
    if task.kind == "induction" and induction_reward == "fraction":
        return sum(passed) / len(passed)
    return float(all(passed))


def score_batch(
    items: Sequence[tuple[Task, str]], run_batch, format_penalty: float = 0.0, induction_reward: str = "all"
) -> list[tuple[float, str | None]]:
    """Rewards for (task, completion text) pairs, executing everything in one batch."""
    if induction_reward not in INDUCTION_REWARDS:
        raise ValueError(f"induction_reward must be one of {INDUCTION_REWARDS}, got {induction_reward!r}")
    parsed, calls, spans = [], [], []
    for task, text in items:
        value, reason = parse_answer(task, text)
        parsed.append((value, reason))
        mine = reward_calls(task, value) if reason is None else []
        spans.append((len(calls), len(calls) + len(mine)))
        calls.extend(mine)
    results = run_batch(calls) if calls else []
    out = []
    for (task, _), (value, reason), (lo, hi) in zip(items, parsed, spans):
        if reason is not None:
            out.append((float(format_penalty), reason))
        else:
            out.append((reward_from_results(task, value, results[lo:hi], induction_reward), None))
    return out


def score(
    task: Task, text: str, executor, format_penalty: float = 0.0, induction_reward: str = "all"
) -> tuple[float, str | None]:
    """One completion's reward; `executor` is an `Executor` (its run_batch is used)."""
    return score_batch([(task, text)], executor.run_batch, format_penalty, induction_reward)[0]
