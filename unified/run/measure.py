"""What a round measures (never fed back into training), in ONE call, `measure_round`, made
once a round between its tasks (phases 1-4) and its update: the greedy pass@1 on the hidden
tests of the weights the round started with (nothing trains before phase 5), unbiased pass@k
from phase 1's samples, and the agreement labels' quality. The report adds compute per role
and the ScaleRL fit of the evaluation history (`fit`); the run's final evaluation is here too.

The training folders (pipeline/, kinds/, trainer/) read no hidden test; this module and
unified/eval/ do (tests/test_layout.py).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from unified.benchmarks.hidden import hidden_count, programs_pass_hidden
from unified.eval.evaluate import EvalResult, evaluate, write_results_json, write_samples_jsonl
from unified.eval.greedy import pass_at_1
from unified.eval.pass_at_k import round_pass_at_k
from unified.eval.scaling_fit import fit_metrics, write_fit_summary
from unified.kinds import SOLVE
from unified.pipeline.plan import RoundPlan, RunState
from unified.run import metrics
from unified.run.components import Components, phase_engine
from unified.run.runlog import RunLog
from unified.trainer.distributed import all_gather

log = logging.getLogger("unified")


@dataclass(frozen=True)
class Measured:
    """A round's measurement: greedy pass@1 per problem (every problem of this rank when the
    round evaluates, else None each) and the scalars (`eval/pass@k`, `agreement/*`, `time/baseline`)."""

    pass_at_1: dict
    scalars: dict


def hidden_counts(problems) -> dict[str, int]:
    """problem id -> its number of hidden cases (Parquet's `num_hidden`)."""
    return {p.problem_id: hidden_count(p) for p in problems}


def measure_round(run: Components, plan: RoundPlan, data, engine) -> Measured:
    """The round's one measurement (`plan.evaluate`: the greedy pass@1 of every problem, drawn or
    not), on phases 1-4's engine (`engine`: one phase, so restart mode builds no engine for it)."""
    clock, scored = time.perf_counter(), {p.problem_id: None for p in run.problems}
    if plan.evaluate:
        scored = pass_at_1(run.problems, engine, run.executor.run_batch, run.cfg.pipeline.program_max_tokens, plan.seed)
    seconds = time.perf_counter() - clock
    evaluated = any(v is not None for v in scored.values())
    return Measured(scored, {**(_pass_at_k(run, data) if evaluated else {}), **_agreement(run, data), "time/baseline": seconds})


def _pass_at_k(run: Components, data) -> dict:
    """`eval/pass@k` (unbiased) from phase 1's samples, for the k in `trainer.pass_at_k`."""
    ks = list(run.cfg.trainer.pass_at_k)
    if not ks:
        return {}
    parts = all_gather(round_pass_at_k(data, run.executor, run.cfg.pipeline.num_programs, ks))
    return {
        _pass_at_k_key(k): sum(v for p in parts for v in p.get(k, [])) / max(1, sum(len(p.get(k, [])) for p in parts))
        for k in ks
        if any(k in p for p in parts)
    }


def _agreement(run: Components, data) -> dict:
    """`agreement/*` when the solve kind's labels come from execution agreement: how many
    problems got one, how often it passes the hidden tests (evaluation only: measured here,
    never fed back) and how often it contradicts a visible example. Every round."""
    pipeline = run.cfg.pipeline
    if pipeline.solve_source == "visible" or SOLVE not in pipeline.kinds:
        return {}
    solve = [t for t in data.candidate_tasks if t.kind == SOLVE]
    passes = programs_pass_hidden(data.problems, {t.problem_id: t.program for t in solve}, run.executor.run_batch)
    return metrics.agreement_metrics(all_gather(metrics.agreement_counts(data.problems, solve, passes)))


def _pass_at_k_key(k: int) -> str:
    """`eval/pass@k`; k=1 from samples is not the greedy `eval/pass@1`, so it has its own name."""
    return "eval/pass@1_sampled" if k == 1 else f"eval/pass@{k}"


def fit(run: Components, history, compute: dict) -> dict:
    """The ScaleRL fit of the evaluation history so far (`RunState.eval_history`: (compute, pass@1)
    per evaluated round), written to eval_fit_summary.json by rank 0."""
    if not run.dist.is_main:
        return {}
    summary = write_fit_summary(
        run.out_dir / "eval_fit_summary.json", run.cfg.benchmark.name, [h[0] for h in history], [h[1] for h in history], compute
    )
    return fit_metrics(run.cfg.benchmark.name, summary)


def compute_scalars(run: Components) -> dict:
    """`compute/*`: device-seconds and tokens per role, summed over ranks (cumulative)."""
    parts = all_gather(run.ledger.metrics())
    return {k: sum(p[k] for p in parts) for k in parts[0]}


def final_evaluation(run: Components, state: RunState, runlog: RunLog) -> EvalResult:
    """Greedy pass@1 of the final weights on the hidden tests; EvalPlus samples.jsonl."""
    with phase_engine(run) as engine:
        parts = all_gather(evaluate(run.problems, engine, run.executor, run.cfg.pipeline.program_max_tokens, seed=run.cfg.seed))
    per_problem = {k: v for p in parts for k, v in p.per_problem.items()}
    scored = [v for v in per_problem.values() if v is not None]
    result = EvalResult(
        sum(scored) / len(scored) if scored else 0.0, per_problem, [s for p in parts for s in p.samples], parts[0].budget
    )
    compute = compute_scalars(run)
    fitted = fit(run, state.evaluated(compute["compute/total_s"], result.pass_at_1).eval_history, compute)  # the final weights
    if run.dist.is_main:
        write_samples_jsonl(result.samples, run.out_dir / "eval" / "samples.jsonl")
        write_results_json(result, run.out_dir / "eval" / "eval_results.json", version=run.aggregator.version)
        runlog.scalars(run.cfg.trainer.rounds, {"eval/final_pass@1": result.pass_at_1, **compute, **fitted})
    log.info(
        "final pass@1 %.3f (%d/%d problems) at version %d: %s",
        result.pass_at_1,
        result.passed,
        result.scored,
        run.aggregator.version,
        run.out_dir / "eval" / "samples.jsonl",
    )
    return result


def verdict(before: float | None, after: float, problems: int) -> str:
    """The run's last words on pass@1: before -> after, and what so few problems can show."""
    head = f"greedy pass@1 on these {problems} problems: " + (
        f"{before:.3f} -> {after:.3f}" if before is not None else f"{after:.3f} after training"
    )
    if problems >= 100:
        return head
    return (
        f"{head}. {problems} problems cannot show a gain (one problem moves pass@1 by {1 / max(problems, 1):.2f}); "
        "the measured gain (5 seeds on 94 problems no decision saw, against the untrained control) is in docs/results/README.md"
    )
