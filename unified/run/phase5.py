"""Phase 5: rollouts on the round's tasks with the resident engine, rewards from the
sandbox, and the RL update through the aggregator.

    for each chunk of tasks (as many samples as the staleness budget allows):
        engine.generate(n per task prompt)      behaviour log-probs + weight version
        score_rollouts (sandbox)                verifiable rewards, parse failures
        train_on_samples                        per optimizer step: verl loss, backward,
                                                aggregator.step(), push_weights(engine)

Chunks keep rollouts fresh: a chunk holds `algorithm.steps_per_generation` optimizer steps'
worth of samples, `(max_staleness + 1) // ppo_epochs`, so no sample trained on is older
than `max_staleness` versions. Every rank runs the same number of chunks (FSDP
collectives); a rank out of tasks trains on padding.

Phase 1's samples (the `solve` kind's groups, `reuse`) come first, as one chunk packed by
the samples that will TRAIN: they are scored before any step, groups without signal (all
rewards equal, dropped under `zero_variance=drop`) cost no step and always ride along,
and groups with signal fill the staleness budget; those over it are generated afresh in
the chunks that follow. With most groups silent, a round needs no second generation.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from typing import Callable, Mapping, Sequence

from unified.pipeline.config import PipelineConfig
from unified.pipeline.phases import score_rollouts
from unified.trainer.aggregator import Aggregator
from unified.trainer.distributed import all_reduce_int
from unified.trainer.engine import Engine, SamplingConfig
from unified.trainer.config import AlgorithmConfig
from unified.trainer.update import has_signal, train_on_samples
from unified.trainer.update_stats import UpdateStats, merge_chunks
from unified.types import Completion, Rollout, Sample, Task


@dataclass(frozen=True)
class Phase5Result:
    rollouts: tuple[Rollout, ...]  # one per completion (Parquet: rollouts.parquet)
    train: UpdateStats  # this rank's update, merged over the chunks
    seconds: dict  # generate / score / train
    reused_groups: int = 0  # groups taken from phase 1's samples instead of a new generation


def tasks_per_chunk(algorithm: AlgorithmConfig, n: int) -> int:
    """Tasks (`n` samples each) per generation: `steps_per_generation` optimizer steps' worth
    of samples, rounded up to whole tasks; at least one."""
    return max(1, math.ceil(algorithm.steps_per_generation * algorithm.samples_per_step / n))


def train_on_tasks(
    tasks: Sequence[Task],
    engine: Engine,
    executor,
    aggregator: Aggregator,
    algorithm: AlgorithmConfig,
    pipeline: PipelineConfig,
    sampling: SamplingConfig,
    *,
    round_index: int,
    pad_token_id: int,
    on_chunk: Callable[[], object] | None = None,
    update_weights: bool = True,
    ledger=None,
    reuse: Mapping[str, Sequence[Completion]] | None = None,
    colocation=None,
    ref_policy=None,
) -> Phase5Result:
    """`update_weights=False` is the no-training control: the same rollouts and rewards, no
    step. `ledger` (telemetry.ComputeLedger) accumulates the update's compute. `reuse`:
    prompt text -> completions already sampled from it with these sampling settings (phase
    1's programs for the `solve` kind); a task with that prompt takes them as its group
    instead of a new generation while their weight version is fresh enough (`_reusable`).
    `colocation` (run/colocate.py): the engine sleeps during the update, wakes to be pushed to."""
    size = tasks_per_chunk(algorithm, sampling.n)
    rows: list[Rollout] = []
    summaries: list[UpdateStats] = []
    seconds = {"generate": 0.0, "score": 0.0, "train": 0.0}

    def run_chunk(chunk: list[Task], outputs: list, scores: list) -> None:
        samples, rollouts = _scored(chunk, outputs, scores, round_index)
        rows.extend(rollouts)
        with _timed(seconds, "train"):
            if update_weights:
                with ledger.measure("update", _tokens(samples)) if ledger is not None else nullcontext(), \
                        colocation.session() if colocation is not None else nullcontext():
                    summaries.append(train_on_samples(samples, aggregator, algorithm, engine=engine, pad_token_id=pad_token_id,
                                                      temperature=sampling.temperature, turns=colocation,
                                                      ref_policy=ref_policy))  # fmt: skip
        if on_chunk is not None:
            on_chunk()

    reusable = _reusable(reuse, aggregator.version, algorithm)
    reused, tasks = [t for t in tasks if t.prompt in reusable], [t for t in tasks if t.prompt not in reusable]
    if all_reduce_int(len(reused), "max"):  # phase 1's groups: one chunk on every rank
        with _timed(seconds, "score"):
            groups = [list(reusable[t.prompt]) for t in reused]
            scores = score_rollouts(reused, groups, executor, pipeline) if reused else []
        keep = pack_by_signal([[r for r, _ in s] for s in scores], algorithm.steps_per_generation * algorithm.samples_per_step,
                              algorithm.zero_variance == "drop")  # fmt: skip
        tasks = [t for t, k in zip(reused, keep) if not k] + tasks  # over the budget: generated afresh below
        reused, groups, scores = ([x for x, k in zip(xs, keep) if k] for xs in (reused, groups, scores))
        run_chunk(reused, groups, scores)
    for c in range(all_reduce_int(math.ceil(len(tasks) / size), "max")):  # every rank runs as many chunks
        chunk = list(tasks[c * size : (c + 1) * size])
        seed = None if sampling.seed is None else sampling.seed + 1000 * c
        with _timed(seconds, "generate"):
            shapes = [pipeline.shape(t) for t in chunk]  # answers decoded in their kind's shape (pipeline.constrain)
            ends = [pipeline.answer_end(t) for t in chunk]  # free-text answers stop where they end (stop_at_answer)
            outputs = engine.generate([t.messages for t in chunk], replace(sampling, seed=seed), shapes, ends) if chunk else []
        with _timed(seconds, "score"):
            scores = score_rollouts(chunk, outputs, executor, pipeline) if chunk else []
        run_chunk(chunk, outputs, scores)
    return Phase5Result(tuple(rows), merge_chunks(summaries), seconds, len(reused))


def pack_by_signal(rewards: Sequence[Sequence[float]], budget: int, drop_silent: bool) -> list[bool]:
    """Which of phase 1's groups (their rewards, in order) one chunk takes: every group whose
    samples will train counts against `budget` samples (the staleness budget), in order, while
    it fits; a silent group (one reward for all, dropped under `drop_silent`) costs nothing."""
    keep, used = [], 0
    for group in rewards:
        cost = 0 if drop_silent and not has_signal(group) else len(group)
        keep.append(used + cost <= budget)
        used += cost if keep[-1] else 0
    return keep


def _reusable(reuse, version: int, algorithm: AlgorithmConfig) -> dict:
    """The reusable groups whose samples are still within `max_staleness` at the chunk's
    last optimizer step (`version` now + steps_per_generation - 1)."""
    if not reuse:
        return {}
    limit = version + algorithm.steps_per_generation - 1 - algorithm.max_staleness
    return {prompt: group for prompt, group in reuse.items() if group and min(c.version for c in group) >= limit}


def _scored(chunk: Sequence[Task], outputs, scores, round_index: int) -> tuple[list[Sample], list[Rollout]]:
    """What the trainer consumes (one group per task) and what rollouts.parquet keeps."""
    samples, rows = [], []
    for g, (task, group, scored) in enumerate(zip(chunk, outputs, scores)):
        for completion, (reward, failure) in zip(group, scored):
            samples.append(Sample(completion.prompt_token_ids, completion.token_ids, completion.logprobs, reward,
                                  group=g, version=completion.version, kind=task.kind,
                                  constrained=completion.constrained))  # fmt: skip
            rows.append(Rollout(round_index, task.task_id, task.kind, completion.text, float(reward), failure,
                                completion.finish_reason, len(completion.token_ids), completion.version))  # fmt: skip
    return samples, rows


def _tokens(samples: Sequence[Sample]) -> int:
    return sum(len(s.prompt_token_ids) + len(s.token_ids) for s in samples)


@contextmanager
def _timed(seconds: dict, key: str):
    clock = time.perf_counter()
    try:
        yield
    finally:
        seconds[key] += time.perf_counter() - clock
