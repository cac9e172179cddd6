"""Phase 5: rollouts on the round's tasks with the resident engine, rewards from the
sandbox, and the RL update through the aggregator.

    for each chunk of tasks (as many samples as the staleness budget allows):
        engine.generate(n per task prompt)      behaviour log-probs + weight version
        score_rollouts (sandbox)                verifiable rewards, parse failures
        train_on_samples                        verl advantages + loss -> aggregator
                                                (optimizer steps push into the engine)

Chunks keep rollouts fresh: a chunk holds `steps_per_generation` optimizer steps' worth of
samples, where `steps_per_generation = (max_staleness + 1) // ppo_epochs`, so no sample
trained on is older than `max_staleness` versions. Every rank runs the same number of
chunks (FSDP collectives); a rank out of tasks trains on padding.
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Callable, Sequence

from unified.pipeline.phases import PipelineConfig, score_rollouts
from unified.trainer.aggregator import Aggregator
from unified.trainer.distributed import all_reduce_int
from unified.trainer.engine import Engine, SamplingConfig
from unified.trainer.update import UpdateConfig, train_on_samples
from unified.types import Sample, Task


@dataclass(frozen=True)
class Phase5Result:
    rollouts: tuple[dict, ...]  # one row per completion (Parquet: rollouts.parquet)
    train: dict  # averaged update metrics over the chunks (losses, grad norm, steps, ...)
    seconds: dict  # generate / score / train


def tasks_per_chunk(aggregator: Aggregator, update: UpdateConfig, n: int) -> int:
    steps = max(1, (aggregator.max_staleness + 1) // max(1, update.ppo_epochs))
    per_step = update.micro_batch_size * aggregator.accum_steps * aggregator.update_steps
    return max(1, math.ceil(steps * per_step / n))


def run_phase_5(
    tasks: Sequence[Task],
    engine: Engine,
    executor,
    aggregator: Aggregator,
    update: UpdateConfig,
    pipeline: PipelineConfig,
    sampling: SamplingConfig,
    *,
    round_index: int,
    pad_token_id: int,
    on_chunk: Callable[[], object] | None = None,
    update_weights: bool = True,
    ledger=None,
) -> Phase5Result:
    """`update_weights=False` is the no-training control: the same rollouts and rewards, no
    step. `ledger` (telemetry.ComputeLedger) accumulates the update's compute."""
    size = tasks_per_chunk(aggregator, update, sampling.n)
    chunks = all_reduce_int(math.ceil(len(tasks) / size), "max")
    rows: list[dict] = []
    summaries: list[dict] = []
    seconds = {"generate": 0.0, "score": 0.0, "train": 0.0}
    for c in range(chunks):
        chunk = list(tasks[c * size : (c + 1) * size])
        seed = None if sampling.seed is None else sampling.seed + 1000 * c
        clock = time.perf_counter()
        outputs = engine.generate([t.messages for t in chunk], replace(sampling, seed=seed)) if chunk else []
        seconds["generate"] += time.perf_counter() - clock
        clock = time.perf_counter()
        scores = score_rollouts(chunk, outputs, executor, pipeline) if chunk else []
        seconds["score"] += time.perf_counter() - clock
        samples = []
        for g, (task, group, scored) in enumerate(zip(chunk, outputs, scores)):
            for completion, (reward, failure) in zip(group, scored):
                samples.append(
                    Sample(completion.prompt_token_ids, completion.token_ids, completion.logprobs, reward,
                           group=g, version=completion.version, kind=task.kind)
                )
                rows.append(
                    dict(round=round_index, task_id=task.task_id, kind=task.kind, completion=completion.text,
                         reward=float(reward), parse_failure=failure, finish_reason=completion.finish_reason,
                         num_tokens=len(completion.token_ids), version=completion.version)
                )
        clock = time.perf_counter()
        if update_weights:
            with ledger.measure("update") if ledger is not None else nullcontext():
                summaries.append(train_on_samples(samples, aggregator, update, pad_token_id=pad_token_id))
            if ledger is not None:
                ledger.add_tokens("update", sum(len(s.prompt_token_ids) + len(s.token_ids) for s in samples))
        seconds["train"] += time.perf_counter() - clock
        if on_chunk is not None:
            on_chunk()
    return Phase5Result(tuple(rows), merge_summaries(summaries), seconds)


def merge_summaries(summaries: Sequence[dict]) -> dict:
    """Token-weighted means of the per-chunk metrics; counts summed; versions joined."""
    if not summaries:
        return {}
    counts = ("steps", "skipped_nonfinite", "micro_batches", "tokens", "samples", "used", "dropped_empty",
              "dropped_stale", "push_s")  # fmt: skip
    out: dict = {k: sum(s.get(k, 0) for s in summaries) for k in counts}
    out["versions"] = [v for s in summaries for v in s.get("versions", [])]
    out["version"] = summaries[-1].get("version")
    weight = sum(s.get("tokens", 0) for s in summaries)
    means = {k for s in summaries for k, v in s.items() if k not in out and isinstance(v, float)}
    for key in means:
        pairs = [(s[key], s.get("tokens", 0)) for s in summaries if key in s and math.isfinite(s[key])]
        w = sum(t for _, t in pairs)
        out[key] = sum(v * t for v, t in pairs) / w if w else (pairs[0][0] if pairs else float("nan"))
    out["tokens"] = weight
    return out
