"""A round's consolidation step, after its update (`algorithm.consolidate_passes` > 0):

    greedy answers of the round's problems          (which pass their visible example: "before")
    targets = pipeline/consolidation.round_targets   (one fixed answer per found problem)
    trainer/consolidate.consolidate(targets)         (NLL passes until greedy holds them)
    greedy answers again                             ("after": reproduced, lost)

It reports per round `consolidation/targets` (this round's, over ranks), `reproduced` (targets
whose greedy program after it is the target's, by syntax tree), `lost` (problems whose greedy
answer passed the visible example before it and not after), `passes`, `steps`, `held_before`
and `held_after` (targets every token of which is the argmax by the margin under teacher
forcing) and `seconds`. No hidden test is read: what it measures is on visible examples.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import replace
from typing import Mapping

from unified.pipeline.consolidation import Greedy, Target, greedy_answers, round_targets
from unified.run.components import Components, phase_engine
from unified.run.phase5 import Phase5Result
from unified.text.extract import code_key
from unified.trainer.consolidate import consolidate
from unified.trainer.distributed import all_reduce_int
from unified.types import Sample

KIND = "consolidation"


def consolidate_round(run: Components, targets: Mapping[str, Target], data, result: Phase5Result) -> Phase5Result:
    """`result` with every target after this round (`targets`: the state's, before it) and the
    round's `consolidation/*` scalars (run when the round's plan consolidates)."""
    learner, algorithm = run.learner, run.cfg.algorithm
    start, pipeline = time.perf_counter(), run.cfg.pipeline
    greedy = lambda problems: greedy_answers(
        problems,
        engine,
        run.executor.run_batch,
        pipeline.program_max_tokens,  # noqa: E731
        pipeline.program_end,
    )
    with phase_engine(run) as engine:
        before = greedy(data.problems)
        targets = round_targets(targets, data, before, run.executor.run_batch)
        mine = [targets[p.problem_id] for p in data.problems if p.problem_id in targets]
        with learner.colocation.session() if learner.colocation is not None else nullcontext():
            stats = consolidate(
                [target_sample(t, run.aggregator.version) for t in mine],
                run.aggregator,
                algorithm,
                engine=engine,
                pad_token_id=learner.pad_token_id,
                turns=learner.colocation,
            )
        watched = [
            p for p in data.problems if p.problem_id in targets or (p.problem_id in before and before[p.problem_id].passes)
        ]
        after = {**before, **(greedy(watched) if watched else {})} if stats.steps else before
    counts = {
        "targets": len(mine),
        "reproduced": sum(reproduced(after.get(t.problem_id), t) for t in mine),
        "lost": sum(before[p].passes and not after[p].passes for p in before if p in after),
        "held_before": stats.held_before,
        "held_after": stats.held_after,
    }
    scalars = {f"consolidation/{k}": all_reduce_int(v, "sum") for k, v in counts.items()}
    scalars.update(
        {
            "consolidation/passes": stats.passes,
            "consolidation/steps": stats.steps,
            "consolidation/nll": stats.nll,
            "time/consolidation": time.perf_counter() - start,
        }
    )
    return replace(result, targets=targets, consolidation=scalars)


def reproduced(greedy: Greedy | None, target: Target) -> bool:
    """Whether greedy decoding's program is the target's (the same syntax tree)."""
    return greedy is not None and greedy.program is not None and code_key(greedy.program.code) == code_key(target.code)


def target_sample(target: Target, version: int) -> Sample:
    """The target as a trainable sample: its prompt and answer tokens (log-probs unused: NLL)."""
    c = target.completion
    return Sample(c.prompt_token_ids, c.token_ids, c.logprobs, 1.0, -1, version, kind=KIND, supervised=True)
