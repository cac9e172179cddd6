"""Phase 5 rewards: a completion for a task -> (reward, parse-failure reason or None).

The task's kind (`unified.kinds`) reads the answer, says what to run and scores the results:
a readable answer gets what the kind's `reward` says (1 right, 0 wrong; a share of the cases
under partial credit or `solve_reward=fraction`; solve's `graded` levels, where wrong is
negative). An answer that cannot be read gets `format_penalty` (`score_batch`; the
pipeline's default is -0.5). Under `format_penalty_when=no_signal` (the default) the
caller (`phases.score_rollouts`) then applies `penalize_format_only_without_signal`: the
penalty stays only in a batch where correctness alone gives no group any signal, and
elsewhere the answer scores its kind's `readable_floor`.

Split in three so a round's rollouts are scored with ONE executor batch:
`parse_answer` (pure) -> the kind's `calls` (what to execute) -> `reward_from_results` (pure).
"""

from __future__ import annotations

from typing import Sequence

from unified.kinds import BuildOptions, kind_of, raw_answer, readable_floor
from unified.text.extract import answer_text
from unified.types import Task


def parse_answer(task: Task, text: str) -> tuple[object, str | None]:
    """(what the answer says, None) or (None, reason): what the kind's `parse` reads from
    the text inside the last <answer> block (a value, an argument tuple, a program...), or
    from the whole text for a kind whose prompt asks for no tag (`solve`)."""
    answer = text if raw_answer(kind_of(task.kind)) else answer_text(text)
    if answer is None:
        return None, "no_answer"
    return kind_of(task.kind).parse(task, answer)


def reward_from_results(
    task: Task, parsed: object, results: Sequence, partial_credit: bool = False, solve_reward: str = "binary"
) -> float:
    opts = BuildOptions(partial_credit=partial_credit, solve_reward=solve_reward)
    return kind_of(task.kind).reward(task, parsed, results, opts)


def score_batch(
    items: Sequence[tuple[Task, str]],
    run_batch,
    format_penalty: float = 0.0,
    partial_credit: bool = False,
    solve_reward: str = "binary",
) -> list[tuple[float, str | None]]:
    """Rewards for (task, completion text) pairs, executing everything in one batch;
    `partial_credit`: kinds that can give a share of the reward do."""
    parsed, calls, spans = [], [], []
    for task, text in items:
        value, reason = parse_answer(task, text)
        parsed.append((value, reason))
        mine = kind_of(task.kind).calls(task, value) if reason is None else []
        spans.append((len(calls), len(calls) + len(mine)))
        calls.extend(mine)
    results = run_batch(calls) if calls else []
    out = []
    for (task, _), (value, reason), (lo, hi) in zip(items, parsed, spans):
        if reason is not None:
            out.append((float(format_penalty), reason))
        else:
            out.append((reward_from_results(task, value, results[lo:hi], partial_credit, solve_reward), None))
    return out


def penalize_format_only_without_signal(
    tasks: Sequence[Task], scores: Sequence[Sequence[tuple[float, str | None]]], solve_reward: str = "binary"
) -> list[list[tuple[float, str | None]]]:
    """`format_penalty_when="no_signal"`: an unreadable answer scores like the worst readable
    one of its kind (its `readable_floor`), unless then no group's rewards differ: a batch the
    model cannot solve yet keeps the penalty and trains the format, a batch where some answer
    is right trains on correctness alone. A lone answer (n=1) counts as a group of the batch."""
    opts = BuildOptions(solve_reward=solve_reward)
    plain = [
        [(readable_floor(kind_of(t.kind), opts) if why is not None else r, why) for r, why in group]
        for t, group in zip(tasks, scores)
    ]
    groups = [[r for r, _ in g] for g in plain if len(g) > 1] or [[r for g in plain for r, _ in g]]
    return plain if any(g and max(g) > min(g) for g in groups) else [list(g) for g in scores]


def score(task: Task, text: str, executor, format_penalty: float = 0.0, partial_credit: bool = False) -> tuple[float, str | None]:
    """One completion's reward; `executor` is an `Executor` (its run_batch is used)."""
    return score_batch([(task, text)], executor.run_batch, format_penalty, partial_credit)[0]
