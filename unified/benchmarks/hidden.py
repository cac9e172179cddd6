"""The one module that reads `Problem.hidden` (and `hidden_test_code`): hidden tests in, verdicts out.

Its numbers are the test-time improvement curve (pass@1, pass@k, samples scoring, the
agreement labels' accuracy); nothing here feeds tasks or rewards, and the firewall test
(tests/pipeline/test_hidden_firewall.py) fails when a module outside this one and
`unified/eval/` reads the hidden tests.

Every hidden case is one sandbox call of the entry point on the case's input; the
output comes back as a value and is compared HERE, by EvalPlus's rules (`oracle`), with
the expected value that trusted code computed (MBPP+: the canonical solution in the
sandbox, `with_expected_outputs`; HumanEval: `check`'s calls recorded with the canonical
solution, `record_cases`). No test code runs next to the program.

- `hidden_calls` / `passes_hidden` / `right_per_case`: a program's calls and its verdict
  (greedy pass@1 in `eval.greedy`, pass@k in `eval.pass_at_k`); `correct_counts`:
  how many programs of each problem pass, each run on its first case and on the rest only
  when right there;
- `score_samples`: existing solutions (EvalPlus samples: full programs, or HumanEval
  completions), code recovered the way EvalPlus's sanitizer does, EvalPlus's test set
  (MBPP+: base + plus inputs; HumanEval: check's calls). For `python -m unified.eval --samples`;
- `programs_pass_hidden`: the agreement reward's label accuracy (measured, never fed back).
A problem with no hidden tests gets None.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from unified.benchmarks import check_recorder
from unified.benchmarks.oracle import NOT_NONE_ENTRY, not_none_program, output_matches, reduces_to_not_none
from unified.sandbox.executor import ExecCall
from unified.text.extract import sanitize
from unified.text.prompts import with_prompt_imports
from unified.types import Problem, TestCase
from unified.values import from_literal

RunBatch = Callable[[list], list]  # Executor.run_batch


def has_hidden_tests(problem: Problem) -> bool:
    return bool(problem.hidden)


def hidden_count(problem: Problem) -> int:
    """How many hidden cases (HumanEval's unrecorded check code counts as one): Parquet's num_hidden."""
    return len(problem.hidden) + bool(problem.hidden_test_code)


def needs_expected_outputs(problems: Sequence[Problem]) -> bool:
    """Whether a hidden case lacks its expected value (MBPP+: `with_expected_outputs` fills it)."""
    return any(case.expected is None for p in problems for case in p.hidden)


def hidden_calls(problem: Problem, code: str, cases: Sequence[TestCase] | None = None) -> list[ExecCall]:
    """One sandbox call per case (default: the hidden ones); the program returns values only."""
    cases = problem.hidden if cases is None else cases
    entry = problem.entry_point
    if reduces_to_not_none(problem):
        code, entry = not_none_program(code, entry), NOT_NONE_ENTRY
    return [ExecCall(code, entry, case.args) for case in cases]


def right_per_case(problem: Problem, results: Sequence, cases: Sequence[TestCase] | None = None) -> list[bool]:
    """Per result of `hidden_calls` (same order): ok and right by EvalPlus's rules."""
    cases = problem.hidden if cases is None else cases
    return [r.ok and output_matches(problem, case.args, r.value, case.expected) for r, case in zip(results, cases)]


def passes_hidden(problem: Problem, results: Sequence, cases: Sequence[TestCase] | None = None) -> bool:
    """Whether the results of `hidden_calls` (same order) are all right, by EvalPlus's rules."""
    cases = problem.hidden if cases is None else cases
    return len(results) == len(cases) > 0 and all(right_per_case(problem, results, cases))


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
    return {
        problem.problem_id: float(passes_hidden(problem, results[start:end], cases)) if cases else None
        for problem, (start, end, cases) in zip(problems, spans)
    }


def programs_pass_hidden(problems: Sequence[Problem], codes: dict[str, str], run_batch: RunBatch) -> dict[str, bool]:
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


# ---------------------------------------------------------------- expected outputs

_PARTS = ("visible", "hidden")


def with_expected_outputs(problems: Sequence[Problem], run_batch: RunBatch) -> list[Problem]:
    """Fill missing `expected` values (visible and hidden cases) by running each canonical
    solution in the sandbox. Cases where the canonical solution fails are dropped (they test nothing)."""
    calls, where = [], []
    for pi, p in enumerate(problems):
        if not p.canonical_solution:
            continue
        code, entry = p.canonical_solution, p.entry_point
        if reduces_to_not_none(p):  # outputs are match objects: EvalPlus keeps `is not None`
            code, entry = not_none_program(code, entry), NOT_NONE_ENTRY
        for part in _PARTS:
            for ci, case in enumerate(getattr(p, part)):
                if case.expected is None:
                    calls.append(ExecCall(code, entry, case.args))
                    where.append((pi, part, ci))
    results = run_batch(calls) if calls else []
    filled = {key: result.value if result.ok else _FAILED for key, result in zip(where, results)}
    return [replace(p, **{part: _filled(getattr(p, part), filled, pi, part) for part in _PARTS}) for pi, p in enumerate(problems)]


def _filled(cases: Sequence[TestCase], filled: dict, pi: int, part: str) -> tuple[TestCase, ...]:
    out = []
    for ci, case in enumerate(cases):
        value = filled.get((pi, part, ci), case.expected)
        if value is not _FAILED:
            out.append(TestCase(case.args, value))
    return tuple(out)


_FAILED = object()


def record_cases(problems: Sequence[Problem]) -> list[Problem]:
    """Problems with `hidden_test_code` get `hidden` cases recorded from it (`check_recorder`,
    and the code is dropped from the Problem); others are returned as they are."""
    todo = [p for p in problems if p.hidden_test_code and not p.hidden]
    if not todo:
        return list(problems)
    recorded = check_recorder.record(
        [
            {
                "problem_id": p.problem_id,
                "entry_point": p.entry_point,
                "program": p.canonical_solution,
                "test": p.hidden_test_code,
            }
            for p in todo
        ]
    )
    todo_ids = {p.problem_id for p in todo}
    return [
        replace(
            p, hidden=tuple(TestCase(from_literal(a), from_literal(e)) for a, e in recorded[p.problem_id]), hidden_test_code=""
        )
        if p.problem_id in recorded and p.problem_id in todo_ids
        else p
        for p in problems
    ]


def correct_counts(problems: Sequence[Problem], programs: Sequence[tuple[str, str]], run_batch: RunBatch) -> dict[str, int]:
    """problem_id -> how many of `programs` ((problem_id, code) pairs) pass every hidden case,
    for each problem with hidden tests.

    Passing is all cases right, so a program is run on its first case alone and only the
    programs that got it right are run on the rest (one sandbox batch each): the same counts
    as one batch of every case, for a fraction of the calls when most programs fail (MBPP+'s
    plus inputs run to hundreds a problem and most of a small model's programs fail the first)."""
    by_id = {p.problem_id: p for p in problems if has_hidden_tests(p)}
    counts = {problem_id: 0 for problem_id in by_id}
    mine = [(by_id[problem_id], code) for problem_id, code in programs if problem_id in by_id]
    first = run_batch([hidden_calls(problem, code, problem.hidden[:1])[0] for problem, code in mine]) if mine else []
    alive = [(problem, code, r) for (problem, code), r in zip(mine, first) if right_per_case(problem, [r], problem.hidden[:1])[0]]
    calls, spans = [], []
    for problem, code, r in alive:
        rest = hidden_calls(problem, code, problem.hidden[1:])
        spans.append((problem, r, len(calls), len(calls) + len(rest)))
        calls += rest
    results = run_batch(calls) if calls else []
    for problem, r, lo, hi in spans:
        counts[problem.problem_id] += int(passes_hidden(problem, [r, *results[lo:hi]]))
    return counts
