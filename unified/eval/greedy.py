"""Greedy pass@1 on the HIDDEN tests: phase 1's baseline each round, and `unified.eval`'s.

One greedy sample per problem (temperature 0), the phase-1 prompt, the pipeline's
extraction; the program's calls and verdict come from `benchmarks.hidden` (the one module
that reads the hidden tests: MBPP+'s plus inputs, HumanEval's recorded check calls). Its
numbers are the test-time improvement curve; nothing here feeds tasks or rewards.
A problem with no hidden tests gets None.
"""

from __future__ import annotations

from typing import Sequence

from unified.benchmarks.hidden import correct_counts, has_hidden_tests, hidden_calls, passes_hidden, right_per_case
from unified.eval.failures import extraction_class, run_class
from unified.pipeline.generation import Generator, SamplingConfig, user_message
from unified.text.extract import extract_program
from unified.text.prompts import program_prompt, with_prompt_imports
from unified.types import Problem


def pass_at_1(
    problems: Sequence[Problem], generator: Generator, run_batch, max_tokens: int, seed: int | None = None
) -> dict[str, float | None]:
    """problem_id -> 1.0 / 0.0 (None without hidden tests): `graded`'s verdicts, for far fewer
    sandbox calls: each program runs on its first hidden case, and on the rest only when right
    there (`hidden.correct_counts`); `graded` runs every case, which its failure classes need."""
    codes = {problem.problem_id: code for problem, code, _ in _greedy_programs(problems, generator, max_tokens, seed)}
    passing = correct_counts(problems, [(pid, code) for pid, code in codes.items() if code is not None], run_batch)
    return {p.problem_id: (float(passing[p.problem_id] > 0) if p.problem_id in passing else None) for p in problems}


def graded(
    problems: Sequence[Problem], generator: Generator, run_batch, max_tokens: int, seed: int | None = None
) -> dict[str, tuple[float | None, str | None]]:
    """problem_id -> (1.0 / 0.0 / None without hidden tests, its failure class: `eval.failures`)
    for one greedy sample per problem, all problems in one executor batch."""
    calls, spans = [], []
    for problem, code, why in _greedy_programs(problems, generator, max_tokens, seed):
        if code is None or not has_hidden_tests(problem):
            spans.append(why)
            continue
        batch = hidden_calls(problem, code)
        spans.append((len(calls), len(calls) + len(batch)))
        calls.extend(batch)
    results = run_batch(calls) if calls else []
    out: dict[str, tuple[float | None, str | None]] = {}
    for problem, span in zip(problems, spans):
        if not has_hidden_tests(problem):
            out[problem.problem_id] = (None, None)
        elif not isinstance(span, tuple):
            out[problem.problem_id] = (0.0, extraction_class(span))
        else:
            mine = results[span[0] : span[1]]
            out[problem.problem_id] = (
                float(passes_hidden(problem, mine)),
                run_class([r.status for r in mine], right_per_case(problem, mine)),
            )
    return out


def _greedy_programs(problems: Sequence[Problem], generator: Generator, max_tokens: int, seed: int | None):
    """(problem, its greedy program with the prompt's imports or None, why none) per problem, one generate call."""
    sampling = SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_tokens=max_tokens, seed=seed)
    outputs = generator.generate([user_message(program_prompt(p)) for p in problems], sampling)
    out = []
    for problem, completions in zip(problems, outputs):
        code, why = extract_program(completions[0].text, problem.entry_point) if completions else (None, "no_code")
        out.append((problem, with_prompt_imports(problem, code) if code is not None else None, why))
    return out
