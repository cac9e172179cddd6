"""Phases 1-4 as the round loop runs them, for tests that drive the pipeline without a run."""

from dataclasses import replace

from unified.eval.greedy import pass_at_1
from unified.pipeline.phases import build_round_data
from unified.pipeline.plan import RoundPlan


def round_data(problems, generator, executor, cfg, round_index: int = 1, seed: int = 0, evaluate: bool = False, samples=None):
    """`build_round_data` on a plan drawing every problem (`samples`: phase 1's per problem);
    with `evaluate`, the greedy pass@1 on the hidden tests as the round's measurement takes it
    (run/measure.py `measure_round`: after phases 1-4, on the same weights) in `pass_at_1`."""
    plan = RoundPlan.of([p.problem_id for p in problems], round_index, seed, samples=samples, evaluate=evaluate)
    data = build_round_data(problems, generator, executor, cfg, plan)
    if not evaluate:
        return data
    scored = pass_at_1(problems, generator, executor.run_batch, cfg.require_derived().program_max_tokens, plan.seed)
    return replace(data, pass_at_1=scored)
