"""Scoring programs on HIDDEN tests: phase 1's pass@1, and `score_samples` for any samples.

This is the only module that reads `Problem.hidden`. Its numbers are the test-time
improvement curve; nothing here feeds tasks or rewards.

Every hidden case is one sandbox call of the entry point on the case's input; the
output comes back as a value and is compared HERE, by EvalPlus's rules (`oracle`), with
the expected value that trusted code computed (MBPP+: the canonical solution in the
sandbox; HumanEval: `check`'s calls recorded with the canonical solution,
`check_recorder`). No test code runs next to the program.

- `pass_at_1`: one greedy sample per problem (temperature 0), the phase-1 prompt, the
  pipeline's extraction, hidden cases only (MBPP+'s plus inputs).
- `score_samples`: existing solutions (EvalPlus samples: full programs, or HumanEval
  completions), code recovered the way EvalPlus's sanitizer does, EvalPlus's test set
  (MBPP+: base + plus inputs; HumanEval: check's calls). For `unified.eval.evaluate --samples`.
A problem with no hidden tests gets None.
"""

from __future__ import annotations

from typing import Sequence

from unified.pipeline.failures import extraction_class, run_class
from unified.sandbox.executor import ExecCall
from unified.text.extract import extract_program, sanitize
from unified.pipeline.generation import Generator, SamplingConfig, user_message
from unified.pipeline.oracle import NOT_NONE_ENTRY, not_none_program, output_matches, reduces_to_not_none
from unified.text.prompts import program_prompt, with_prompt_imports
from unified.types import Problem, TestCase


def has_hidden_tests(problem: Problem) -> bool:
    return bool(problem.hidden)


def hidden_calls(problem: Problem, code: str, cases: Sequence[TestCase] | None = None) -> list[ExecCall]:
    """One sandbox call per case (default: the hidden ones); the program returns values only."""
    cases = problem.hidden if cases is None else cases
    entry = problem.entry_point
    if reduces_to_not_none(problem):
        code, entry = not_none_program(code, entry), NOT_NONE_ENTRY
    return [ExecCall(code, entry, case.args) for case in cases]


def passes_hidden(problem: Problem, results: Sequence, cases: Sequence[TestCase] | None = None) -> bool:
    """Whether the results of `hidden_calls` (same order) are all right, by EvalPlus's rules."""
    cases = problem.hidden if cases is None else cases
    return len(results) == len(cases) > 0 and all(
        r.ok and output_matches(problem, case.args, r.value, case.expected) for r, case in zip(results, cases)
    )


def evalplus_cases(problem: Problem) -> tuple[TestCase, ...]:
    """The cases EvalPlus's "plus" verdict uses: MBPP+'s base (our visible) and plus
    (hidden) inputs; HumanEval's check calls (hidden; the docstring examples are not tests)."""
    visible = tuple(c for c in problem.visible if c.expected is not None) if problem.benchmark == "mbpp" else ()
    return visible + problem.hidden


def solution_code(problem: Problem, text: str) -> str | None:
    """A sample's program: sanitized like EvalPlus's sanitizer; a HumanEval-style completion
    (a function body) is read after its prompt."""
    for candidate in (text, problem.prompt + text):
        code = sanitize(candidate, problem.entry_point)
        if code is not None:
            return with_prompt_imports(problem, code)
    return None


def score_samples(problems: Sequence[Problem], solutions: dict, executor) -> dict[str, float | None]:
    """problem_id -> 1.0 / 0.0 (None: no tests) for solution texts keyed by problem_id; a problem
    without a solution scores 0.0. `executor`: an Executor or its `run_batch`. Cases
    lacking an expected value get it from the canonical solution first."""
    from unified.pipeline.benchmarks import with_expected_outputs

    run_batch = executor.run_batch if hasattr(executor, "run_batch") else executor
    problems = list(problems)
    if any(c.expected is None for p in problems for c in evalplus_cases(p)):
        problems = with_expected_outputs(problems, run_batch)
    calls, spans = [], []
    for problem in problems:
        text = solutions.get(problem.problem_id)
        code = solution_code(problem, text) if isinstance(text, str) else None
        cases = evalplus_cases(problem)
        batch = hidden_calls(problem, code, cases) if code is not None and cases else []
        spans.append((len(calls), len(calls) + len(batch), cases))
        calls.extend(batch)
    results = run_batch(calls) if calls else []
    scores: dict[str, float | None] = {}
    for problem, (start, end, cases) in zip(problems, spans):
        scores[problem.problem_id] = float(passes_hidden(problem, results[start:end], cases)) if cases else None
    return scores


def pass_at_1(
    problems: Sequence[Problem], generator: Generator, run_batch, max_tokens: int, seed: int | None = None
) -> dict[str, float | None]:
    """problem_id -> 1.0 / 0.0 (None without hidden tests), all problems in one executor batch."""
    return {pid: score for pid, (score, _) in graded(problems, generator, run_batch, max_tokens, seed).items()}


def graded(
    problems: Sequence[Problem], generator: Generator, run_batch, max_tokens: int, seed: int | None = None
) -> dict[str, tuple[float | None, str | None]]:
    """problem_id -> (1.0 / 0.0 / None without hidden tests, its failure class: `pipeline.failures`)
    for one greedy sample per problem, all problems in one executor batch."""
    sampling = SamplingConfig(n=1, temperature=0.0, top_p=1.0, max_tokens=max_tokens, seed=seed)
    outputs = generator.generate([user_message(program_prompt(p)) for p in problems], sampling)
    calls, spans = [], []
    for problem, completions in zip(problems, outputs):
        code, why = extract_program(completions[0].text, problem.entry_point) if completions else (None, "no_code")
        if code is None or not has_hidden_tests(problem):
            spans.append(why)
            continue
        batch = hidden_calls(problem, with_prompt_imports(problem, code))
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
            right = _right_per_case(problem, mine)
            out[problem.problem_id] = (float(len(mine) == len(problem.hidden) > 0 and all(right)),
                                       run_class([r.status for r in mine], right))
    return out


def _right_per_case(problem: Problem, results: Sequence, cases: Sequence[TestCase] | None = None) -> list[bool]:
    cases = problem.hidden if cases is None else cases
    return [r.ok and output_matches(problem, case.args, r.value, case.expected) for r, case in zip(results, cases)]


def programs_pass_hidden(problems: Sequence[Problem], codes: dict[str, str], run_batch) -> dict[str, bool]:
    """problem_id -> whether `codes[problem_id]` passes every hidden case, for the problems
    that have hidden tests and a code (the agreement reward's label accuracy: measured, never
    fed back)."""
    calls, spans = [], []
    for problem in problems:
        code = codes.get(problem.problem_id)
        if code and has_hidden_tests(problem):
            batch = hidden_calls(problem, code)
            spans.append((problem, len(calls), len(calls) + len(batch)))
            calls.extend(batch)
    results = run_batch(calls) if calls else []
    return {problem.problem_id: passes_hidden(problem, results[lo:hi]) for problem, lo, hi in spans}
