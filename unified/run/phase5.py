"""Phase 5: rollouts on the round's tasks with the resident engine, rewards from the
sandbox, and the RL update through the aggregator.

    for each chunk of tasks (as many samples as the staleness budget allows):
        engine.generate(n per task prompt)      behaviour log-probs + weight version
        score_rollouts (sandbox)                verifiable rewards, parse failures
        learner.train (train_on_samples)        per optimizer step: verl loss, backward,
                                                aggregator.step(), push_weights(engine)

The `Learner` is built once per run (`components.build_components`): the aggregator, the
algorithm, the pad id, the colocation, the reference policy and the compute ledger; each
phase binds it to its engine (`learner.on(engine)`), the one that generates and is pushed to.

Chunks keep rollouts fresh: a chunk holds `algorithm.steps_per_generation` optimizer steps'
worth of samples, `(max_staleness + 1) // ppo_epochs`, so no sample trained on is older
than `max_staleness` versions. Every rank runs the same number of chunks (FSDP
collectives); a rank out of tasks trains on padding.

Phase 1's samples (the `solve` kind's groups, `reuse`: `phase_1_groups`, when phase 1
sampled exactly as phase 5 does) come first, as one chunk packed by
the samples that will TRAIN: they are scored before any step, groups without signal (all
rewards equal, dropped under `zero_variance=drop`) cost no step and always ride along,
and groups with signal fill the staleness budget; those over it are generated afresh in
the chunks that follow. With most groups silent, a round needs no second generation.
"""

from __future__ import annotations

import math
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from unified.kinds import SOLVE
from unified.pipeline.config import PipelineConfig
from unified.pipeline.discovery import downsample, with_replay
from unified.pipeline.phases import program_sampling, score_rollouts
from unified.pipeline.plan import RoundPlan
from unified.text.prompts import program_prompt
from unified.trainer.aggregator import Aggregator
from unified.trainer.config import AlgorithmConfig
from unified.trainer.distributed import all_reduce_int
from unified.trainer.engine import Engine, SamplingConfig
from unified.trainer.update import has_signal, train_on_samples
from unified.trainer.update_stats import UpdateStats, merge_chunks
from unified.types import Completion, Rollout, Sample, Task

if TYPE_CHECKING:
    from unified.run.colocate import Colocation
    from unified.run.telemetry import ComputeLedger
    from unified.trainer.policy import Policy


@dataclass(frozen=True)
class Phase5Result:
    rollouts: tuple[Rollout, ...]  # one per completion (Parquet: rollouts.parquet)
    train: UpdateStats  # this rank's update, merged over the chunks
    seconds: dict  # generate / score / train
    reused_groups: int = 0  # groups taken from phase 1's samples instead of a new generation
    replayed_groups: int = 0  # groups that took their problem's replayed passing answer
    # after consolidation (run/consolidation.py, when the plan consolidates): every problem's target, and its scalars
    targets: Mapping | None = None
    consolidation: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class Learner:
    """Phase 5's update, built once per run: scored samples in, optimizer steps out, each
    step's weights pushed into `engine`."""

    aggregator: Aggregator
    algorithm: AlgorithmConfig
    engine: Engine | None  # generates phase 5's rollouts and takes the pushes (None: a unit test's)
    pad_token_id: int
    update_weights: bool = True  # False: the no-training control (the same rollouts and rewards, no step)
    colocation: Colocation | None = None  # the engine sleeps during the update, wakes to be pushed to
    ref_policy: Policy | None = None  # the KL reference (algorithm.use_kl_loss only)
    ledger: ComputeLedger | None = None  # accumulates the update's compute

    def on(self, engine) -> Learner:
        """This learner with a phase's engine (the resident one, metered; bench/restart_mode.py: a fresh one)."""
        return replace(self, engine=engine)

    def train(self, samples: Sequence[Sample], temperature: float) -> UpdateStats | None:
        """The update on one chunk's samples (None under `update_weights=False`)."""
        if not self.update_weights:
            return None
        tokens = sum(len(s.prompt_token_ids) + len(s.token_ids) for s in samples)
        with (
            self.ledger.measure("update", tokens) if self.ledger is not None else nullcontext(),
            self.colocation.session() if self.colocation is not None else nullcontext(),
        ):
            return train_on_samples(
                samples,
                self.aggregator,
                self.algorithm,
                engine=self.engine,
                pad_token_id=self.pad_token_id,
                temperature=temperature,
                turns=self.colocation,
                ref_policy=self.ref_policy,
            )


def tasks_per_chunk(algorithm: AlgorithmConfig, n: int) -> int:
    """Tasks (`n` samples each) per generation: `steps_per_generation` optimizer steps' worth
    of samples, rounded up to whole tasks; at least one."""
    return max(1, math.ceil(algorithm.steps_per_generation * algorithm.samples_per_step / n))


def train_on_tasks(
    data, learner: Learner, executor, pipeline: PipelineConfig, plan: RoundPlan, on_chunk: Callable[[], object] | None = None
) -> Phase5Result:
    """Rollouts, rewards and updates on the round's tasks (`data.tasks`), generated by
    `learner.engine` with `plan.sampling`. Phase 1's samples (`phase_1_groups`: prompt text ->
    completions sampled with these settings) are a task's group instead of a new generation
    while their weight version is fresh enough (`_reusable`); a group larger than `n` trains on
    its max-variance subset. `plan.replay`: an earlier round's passing answer, which joins its
    prompt's reused group when no fresh sample passes. `plan.supervised_answers(data)`: found
    passing answers, trained once, in the round's first chunk, by the supervised term
    (`algorithm.sft_coef`)."""
    tasks, sampling = data.tasks, plan.sampling
    reuse, replay = phase_1_groups(data, pipeline, sampling), replay_answers(plan.replay, data.problems)
    supervised = [_supervised(c, j) for j, c in enumerate(plan.supervised_answers(data))]
    chunks = _Chunks(learner, executor, pipeline.require_derived(), sampling, plan.round_index, on_chunk, replay, supervised)
    reusable = _reusable(reuse, learner.aggregator.version, learner.algorithm)
    fresh = [t for t in tasks if t.prompt not in reusable]
    if all_reduce_int(sum(t.prompt in reusable for t in tasks), "max"):  # phase 1's groups: one chunk on every rank
        fresh = chunks.reused([t for t in tasks if t.prompt in reusable], reusable) + fresh  # over the budget: afresh
    size = tasks_per_chunk(learner.algorithm, sampling.n)
    for c in range(all_reduce_int(math.ceil(len(fresh) / size), "max")):  # every rank runs as many chunks
        chunks.generated(list(fresh[c * size : (c + 1) * size]), c)
    return Phase5Result(
        tuple(chunks.rows), merge_chunks(chunks.summaries), chunks.seconds, chunks.reused_groups, chunks.replayed_groups
    )


@dataclass
class _Chunks:
    """One phase 5's chunks: each is scored, trained on, and its rows and update kept."""

    learner: Learner
    executor: object
    pipeline: PipelineConfig
    sampling: SamplingConfig
    round_index: int
    on_chunk: Callable[[], object] | None
    replay: dict = field(default_factory=dict)  # prompt -> a passing answer of an earlier round
    supervised: list = field(default_factory=list)  # found answers' samples, taken by the first chunk that trains
    rows: list[Rollout] = field(default_factory=list)
    summaries: list[UpdateStats] = field(default_factory=list)
    seconds: dict = field(default_factory=lambda: {"generate": 0.0, "score": 0.0, "train": 0.0})
    reused_groups: int = 0
    replayed_groups: int = 0

    def reused(self, tasks: list[Task], reusable: dict) -> list[Task]:
        """Phase 1's groups as one chunk (each with its replayed answer where no fresh sample
        passes, down-sampled to the group size), packed by signal; -> the tasks over the budget."""
        algorithm = self.learner.algorithm
        with _timed(self.seconds, "score"):
            offered = [self.replay.get(t.prompt) if t.kind == SOLVE else None for t in tasks]
            candidates = [list(reusable[t.prompt]) + ([r] if r is not None else []) for t, r in zip(tasks, offered)]
            scored = score_rollouts(tasks, candidates, self.executor, self.pipeline) if tasks else []
        groups, scores = [], []
        for fresh, group, score, r in zip(reusable_sizes(tasks, reusable), candidates, scored, offered):
            take = r is not None and with_replay([x for x, _ in score[:fresh]], score[fresh][0])
            self.replayed_groups += take
            group, score = (group, score) if take else (group[:fresh], score[:fresh])
            chosen = downsample([x for x, _ in score], self.sampling.n)
            groups.append([group[i] for i in chosen])
            scores.append([score[i] for i in chosen])
        keep = pack_by_signal(
            [[r for r, _ in s] for s in scores],
            algorithm.steps_per_generation * algorithm.samples_per_step,
            algorithm.zero_variance == "drop",
        )
        kept, groups, scores = ([x for x, k in zip(xs, keep) if k] for xs in (tasks, groups, scores))
        self.reused_groups = len(kept)
        self.train(kept, groups, scores)
        return [t for t, k in zip(tasks, keep) if not k]

    def generated(self, chunk: list[Task], c: int) -> None:
        """Chunk `c`, generated afresh (an empty chunk: this rank trains on padding)."""
        seed = None if self.sampling.seed is None else self.sampling.seed + 1000 * c
        with _timed(self.seconds, "generate"):
            shapes = [self.pipeline.shape(t) for t in chunk]  # answers decoded in their kind's shape (pipeline.constrain)
            ends = [self.pipeline.answer_end(t) for t in chunk]  # free-text answers stop where they end (stop_at_answer)
            outputs = (
                self.learner.engine.generate([t.messages for t in chunk], replace(self.sampling, seed=seed), shapes, ends)
                if chunk
                else []
            )
        with _timed(self.seconds, "score"):
            scores = score_rollouts(chunk, outputs, self.executor, self.pipeline) if chunk else []
        self.train(chunk, outputs, scores)

    def train(self, chunk: list[Task], outputs: list, scores: list) -> None:
        samples, rollouts = _scored(chunk, outputs, scores, self.round_index)
        samples, self.supervised = samples + self.supervised, []  # not rows: rollouts.parquet holds what was sampled
        self.rows.extend(rollouts)
        with _timed(self.seconds, "train"):
            stats = self.learner.train(samples, self.sampling.temperature)
        if stats is not None:
            self.summaries.append(stats)
        if self.on_chunk is not None:
            self.on_chunk()


def phase_1_groups(data, pipeline: PipelineConfig, sampling: SamplingConfig) -> dict:
    """Phase 1's samples (`RoundData.program_completions`) by prompt text, when phase 1
    sampled as phase 5 would (temperature, top-p, budget; at least `n` samples: a wider
    discovery group trains on its max-variance `n`): the `solve` kind's groups need no second
    generation."""
    phase_1 = program_sampling(pipeline, 0)
    if phase_1.n < sampling.n or (phase_1.temperature, phase_1.top_p, phase_1.max_tokens) != (
        sampling.temperature,
        sampling.top_p,
        sampling.max_tokens,
    ):
        return {}
    prompts = {p.problem_id: program_prompt(p) for p in data.problems}
    return {prompts[pid]: group for pid, group in data.program_completions.items() if pid in prompts and len(group) >= sampling.n}


def replay_answers(found: Mapping[str, Completion], problems) -> dict:
    """The replay offered to phase 5: prompt text -> each problem's found passing answer,
    marked as replayed."""
    prompts = {p.problem_id: program_prompt(p) for p in problems}
    return {prompts[pid]: replace(c, replayed=True) for pid, c in found.items() if pid in prompts}


def reusable_sizes(tasks: Sequence[Task], reusable: Mapping) -> list[int]:
    """How many fresh samples each task's reused group holds (a replayed answer comes after them)."""
    return [len(reusable[t.prompt]) for t in tasks]


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
            samples.append(
                Sample(
                    completion.prompt_token_ids,
                    completion.token_ids,
                    completion.logprobs,
                    reward,
                    group=g,
                    version=completion.version,
                    kind=task.kind,
                    constrained=completion.constrained,
                    replayed=completion.replayed,
                )
            )
            rows.append(
                Rollout(
                    round_index,
                    task.task_id,
                    task.kind,
                    completion.text,
                    float(reward),
                    failure,
                    completion.finish_reason,
                    len(completion.token_ids),
                    completion.version,
                    completion.replayed,
                )
            )
    return samples, rows


def _supervised(completion: Completion, j: int) -> Sample:
    """A found answer as the supervised term's sample: a `solve` pass, alone in its group (-1 - j)."""
    return Sample(
        completion.prompt_token_ids,
        completion.token_ids,
        completion.logprobs,
        1.0,
        group=-1 - j,
        version=completion.version,
        kind=SOLVE,
        supervised=True,
    )


@contextmanager
def _timed(seconds: dict, key: str):
    clock = time.perf_counter()
    try:
        yield
    finally:
        seconds[key] += time.perf_counter() - clock
