"""Phase 1 evaluation: the policy's pass@1 on each problem's HIDDEN tests.

This is the only module that reads `Problem.hidden` / `hidden_test_code`. Its numbers are
the test-time improvement curve; nothing here feeds tasks or rewards.

One greedy sample per problem (temperature 0), the same prompt as program sampling.
MBPP+-style problems: every hidden case must return its expected value (within the
problem's atol). HumanEval-style problems: the program plus the benchmark's `check` code
must run, via the `__unified_check` entry that `benchmarks` appends. A problem with no
hidden tests gets None.
"""

from __future__ import annotations

from typing import Sequence

from unified.pipeline.executor import ExecCall
from unified.pipeline.extract import extract_code
from unified.pipeline.generation import Generator, SamplingConfig, user_message
from unified.pipeline.programs import program_prompt, with_prompt_imports
from unified.pipeline.values import values_equal
from unified.types import Problem

CHECK_ENTRY = "__unified_check"


def hidden_calls(problem: Problem, code: str) -> list[ExecCall]:
    if problem.hidden_test_code:
        return [ExecCall(code + "\n\n" + problem.hidden_test_code, CHECK_ENTRY, ())]
    return [ExecCall(code, problem.entry_point, case.args) for case in problem.hidden]


def passes_hidden(problem: Problem, results: Sequence) -> bool:
    """Whether the results of `hidden_calls` (same order) are all correct."""
    if problem.hidden_test_code:
        return len(results) == 1 and results[0].ok and results[0].value is True
    return len(results) == len(problem.hidden) and all(
        r.ok and values_equal(r.value, case.expected, atol=problem.atol) for r, case in zip(results, problem.hidden)
    )


def has_hidden_tests(problem: Problem) -> bool:
    return bool(problem.hidden_test_code or problem.hidden)


def pass_at_1(
    problems: Sequence[Problem], generator: Generator, run_batch, max_tokens: int, seed: int | None = None
) -> dict[str, float | None]:
    """task_id -> 1.0 / 0.0 (None without hidden tests), all problems in one executor batch."""
    sampling = SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_tokens=max_tokens, seed=seed)
    outputs = generator.generate([user_message(program_prompt(p)) for p in problems], sampling)
    calls, spans = [], []
    for problem, completions in zip(problems, outputs):
        code = extract_code(completions[0].text, problem.entry_point) if completions else None
        if code is None or not has_hidden_tests(problem):
            spans.append(None)
            continue
        batch = hidden_calls(problem, with_prompt_imports(problem, code))
        spans.append((len(calls), len(calls) + len(batch)))
        calls.extend(batch)
    results = run_batch(calls) if calls else []
    scores: dict[str, float | None] = {}
    for problem, span in zip(problems, spans):
        if not has_hidden_tests(problem):
            scores[problem.task_id] = None
        elif span is None:
            scores[problem.task_id] = 0.0
        else:
            scores[problem.task_id] = float(passes_hidden(problem, results[span[0] : span[1]]))
    return scores
