"""Phase 5's update, in the shape of torchtune's GRPO recipe:

    advantages over the non-empty samples, grouped by `Sample.group` (verl estimator)
    for each PPO epoch:
        for each optimizer step's samples (micro_batch_size x accum_steps x update_steps per rank):
            drop the samples that are too stale (counted by the aggregator)
            for each micro-batch: forward, verl loss normalised over its contribution, loss.backward()
            aggregator.step()                  average, clip, NaN guard, AdamW, zero_grad, version += 1
            push_weights(engine, version)      the new weights into the engine, in place

`turns` (unified/run/colocate.py's `Colocation`, for vLLM's sleep mode) hears when the
policy's turn starts (`updating()`, before every forward: the engine sleeps) and when the
engine's does (`pushing()`, between the optimizer step and the push: it wakes). The
caller wraps the call in `turns.session()`, which leaves the engine awake whatever happens.

Every rank must run the same number of forwards (FSDP2 collectives): ranks agree on the
counts first and a rank that is short runs fully masked padding batches.
"""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from typing import Sequence

import torch

from unified.trainer.config import AlgorithmConfig
from unified.trainer.aggregator import Aggregator, StepResult
from unified.trainer.batching import MicroBatch, collate, dummy_batch, response_mask_of
from unified.trainer.distributed import all_reduce_int
from unified.trainer.engine import Engine, PushResult
from unified.trainer.frozen_prefix import PrefixCache, prefix_blocks
from unified.trainer.losses import compute_advantages, ppo_loss
from unified.trainer.policy import Policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.update_stats import UpdateStats, token_weighted_mean
from unified.types import Sample

log = logging.getLogger("unified")


def train_on_samples(
    samples: Sequence[Sample],
    aggregator: Aggregator,
    cfg: AlgorithmConfig,
    *,
    engine: Engine | None,
    temperature: float = 1.0,
    pad_token_id: int,
    ref_policy: Policy | None = None,
    turns: Turns | None = None,
) -> UpdateStats:
    """The RL update on scored samples; every optimizer step's weights are pushed into `engine`
    (None: no engine, e.g. a unit test). `temperature` is the sampling temperature, so that
    log-probs match the engine's."""
    if cfg.use_kl_loss and ref_policy is None:
        raise ValueError("use_kl_loss needs a ref_policy (a frozen build_policy(..., trainable=False))")
    pairs, counts = trainable(samples, cfg)
    policy, turns, record = aggregator.policy, turns or Turns(), _Record()
    policy.module.train()
    start = prefix_blocks(policy.module) if cfg.reuse_frozen_prefix and not policy.sharded else 0
    prefix = PrefixCache(start) if start else None  # the recompute fills it, the steps read it
    pairs, counts["recomputed"] = recompute_constrained(pairs, policy, cfg, temperature, pad_token_id, turns, prefix)
    if prefix is not None:
        prefix.recording = False
    for _epoch in range(cfg.ppo_epochs):
        for chunk in _step_chunks(pairs, cfg.samples_per_step):  # one chunk = one optimizer step
            fresh = within_staleness(chunk, aggregator)
            record.used += len(fresh)
            record.dropped_stale += len(chunk) - len(fresh)
            batches = _micro_batches(fresh, cfg, pad_token_id)  # as many on every rank
            if not batches:
                continue
            for batch, norm in batches:
                turns.updating()  # the policy's turn: a colocated engine sleeps
                _micro_batch_loss(batch, norm, policy, cfg, temperature, ref_policy, record, prefix).backward()
            result = aggregator.step(contributions=math.ceil(len(batches) / cfg.accum_steps))
            push = None
            if result.stepped and engine is not None:
                turns.pushing()  # the engine's turn: it wakes
                push = push_weights(engine, policy, result.version)
            record.step(result, push)
    return record.stats(samples=len(samples), version=aggregator.version, **counts)


def within_staleness(chunk: list, aggregator: Aggregator) -> list:
    """The (sample, advantage) pairs of one step that are fresh enough to train, in order: a
    replayed answer (`Sample.replayed`, from an earlier round) is exempt from `max_staleness`,
    the PPO clip against its recorded log-probs bounds its update instead; so is a supervised
    one (`Sample.supervised`), whose log-probs the policy recomputed this call."""
    exempt = lambda pair: pair[0].replayed or pair[0].supervised  # noqa: E731
    kept = {id(pair) for pair in aggregator.filter_stale([p for p in chunk if not exempt(p)], version_of=lambda p: p[0].version)}
    return [pair for pair in chunk if exempt(pair) or id(pair) in kept]


def trainable(samples: Sequence[Sample], cfg: AlgorithmConfig) -> tuple[list[tuple[Sample, torch.Tensor]], dict]:
    """(sample, advantage) pairs of the samples that train, and what was left out: empty
    completions, and under `zero_variance=drop` the groups without signal. A supervised
    sample (`Sample.supervised`, a found passing answer) is in no group: its advantage is
    `cfg.sft_coef` on every token (at ratio 1 the clipped loss's gradient is the
    coefficient times the answer's log-likelihood gradient: a supervised term), and the
    supervised samples are spread evenly through the others so every optimizer step takes
    its share (`spread`); with `sft_coef` 0 they are left out."""
    kept = [s for s in samples if s.token_ids]
    supervised = [s for s in kept if s.supervised] if cfg.sft_coef > 0 else []
    kept = [s for s in kept if not s.supervised]
    signal = group_signal(kept)
    if cfg.zero_variance == "drop":  # no gradient under a group baseline: no forward for them
        kept = [s for s in kept if signal[s.group]]
    advantages = (
        list(compute_advantages([s.reward for s in kept], response_mask_of(kept), [s.group for s in kept], cfg)) if kept else []
    )
    fixed = [(s, torch.full((len(s.token_ids),), float(cfg.sft_coef))) for s in supervised]
    counts = dict(
        dropped_empty=sum(not s.token_ids for s in samples),
        groups=len(signal),
        groups_used=sum(signal.values()),
        zero_variance_groups=len(signal) - sum(signal.values()),
        dropped_zero_variance=sum(not signal[s.group] for s in samples if s.token_ids and not s.supervised)
        if cfg.zero_variance == "drop"
        else 0,
        supervised=len(fixed),
    )
    return spread(list(zip(kept, advantages)), fixed), counts


def spread(main: list, extra: list) -> list:
    """`main` with `extra` spread evenly through it, both in their order: `extra[j]` follows
    the first `(j + 1) * len(main) // (len(extra) + 1)` items of `main` (none: `extra` alone)."""
    out, taken = [], 0
    for j, item in enumerate(extra):
        upto = (j + 1) * len(main) // (len(extra) + 1)
        out += main[taken:upto]
        taken = upto
        out.append(item)
    return out + main[taken:]


def recompute_constrained(
    pairs: list,
    policy: Policy,
    cfg: AlgorithmConfig,
    temperature: float,
    pad_token_id: int,
    turns: Turns,
    prefix: PrefixCache | None = None,
) -> tuple[list, int]:
    """Behaviour log-probs of the samples decoded in an answer shape, recomputed by the policy
    before its first step. The engine's are of the grammar-masked distribution (vLLM masks
    the logits before sampling), the learner scores the unmasked one: left as they are, the
    PPO ratio would start below 1 on every forced token. Recomputed at the version that
    sampled them (phase 5 generates each chunk at the current version, and phase 1's reused
    groups are sampled before any step of the round), the ratio is 1 at the first step, as
    verl's recomputed `old_log_prob` makes it. A supervised answer (`Sample.supervised`, found in
    this or an earlier round) is recomputed too: its ratio starts at 1 whatever version sampled
    it. Returns the pairs and how many were recomputed.
    `prefix`: where each answer's frozen blocks' output is kept for its training step."""
    todo = [i for i, (s, _) in enumerate(pairs) if s.constrained or s.supervised]
    if not all_reduce_int(len(todo), "max"):
        return pairs, 0
    out = list(pairs)
    block = cfg.micro_batch_size * cfg.accum_steps
    order = {id(pairs[i]): i for i in todo}
    todo = [order[id(pair)] for pair in by_length([pairs[i] for i in todo], block)]  # the order the batches take
    batches = _micro_batches([pairs[i] for i in todo], cfg, pad_token_id)  # as many on every rank
    rows = iter(todo)
    with torch.no_grad():
        for batch, _ in batches:
            turns.updating()
            mb = batch.to(policy.device)
            with policy.compute():
                logp, _ = token_logprobs_and_entropy(
                    policy.module,
                    mb.input_ids,
                    mb.attention_mask,
                    mb.response_mask,
                    temperature,
                    with_entropy=False,
                    share_prompts=cfg.share_prompts,
                    from_hidden=cfg.logprobs_from_hidden,
                    prefix=prefix,
                )
            logp = logp.float().cpu()
            for row in range(batch.size if batch.versions else 0):
                i = next(rows)
                sample, advantage = out[i]
                out[i] = (replace(sample, logprobs=tuple(logp[row, : len(sample.token_ids)].tolist())), advantage)
    return out, len(todo)


def has_signal(rewards: Sequence[float]) -> bool:
    """A group's rewards carry signal when they differ, or when it has one sample (no group
    baseline to cancel it: n=1 estimators such as REINFORCE++ compare across groups)."""
    return len(rewards) == 1 or len(set(rewards)) > 1


def group_signal(samples: Sequence[Sample]) -> dict:
    """group -> whether its rewards carry signal (`has_signal`)."""
    rewards: dict = {}
    for s in samples:
        rewards.setdefault(s.group, []).append(s.reward)
    return {g: has_signal(r) for g, r in rewards.items()}


def _step_chunks(pairs: list, per_step: int):
    """Each optimizer step's samples; every rank runs as many steps (FSDP collectives)."""
    for c in range(all_reduce_int(math.ceil(len(pairs) / per_step), "max")):
        yield pairs[c * per_step : (c + 1) * per_step]


class Turns:
    """The turns of an engine that never sleeps: nothing happens at either
    (unified/run/colocate.py's `Colocation` is the one that puts the engine to sleep)."""

    def updating(self) -> None:
        """The policy's turn starts (before a forward)."""

    def pushing(self) -> None:
        """The engine's turn starts (before a push)."""


def push_weights(engine: Engine, policy: Policy, version: int, retries: int = 1) -> PushResult:
    """Push the policy's weights as `version`; ranks agree on success, so a retry (a
    collective gather) happens on all of them. Raises after `retries` failed retries.

    When training changes only part of the model (`top_layers`, LoRA: `policy.changing`)
    and every rank's engine serves a complete, intact set, only that part travels (a
    partial push); otherwise, and after any failure, the whole model."""
    for attempt in range(retries + 1):
        partial = policy.changing is not None and all_reduce_int(int(engine.accepts_partial), "min") == 1
        result = engine.push(policy.named_full_weights(changing_only=partial), version, partial=partial)
        if all_reduce_int(int(result.ok), "min") == 1:
            return result
        log.warning("push of version %d failed (attempt %d): %s", version, attempt + 1, result.error)
    raise RuntimeError(f"engine push of version {version} failed {retries + 1} times: {result.error}")


def _micro_batches(fresh, cfg: AlgorithmConfig, pad_token_id: int) -> list[tuple[MicroBatch, tuple[int, int]]]:
    """(micro-batch, contribution norm) pairs; every rank runs the same number (padding).
    Within each contribution the samples go by length (`by_length`): fewer pad tokens, and
    the same gradient, since every micro-batch's loss is normalised over its contribution."""
    size = cfg.micro_batch_size
    fresh = by_length(fresh, size * cfg.accum_steps)
    batches = [
        collate([s for s, _ in fresh[j : j + size]], [a for _, a in fresh[j : j + size]], pad_token_id)
        for j in range(0, len(fresh), size)
    ]
    batches += [dummy_batch(pad_token_id)] * (all_reduce_int(len(batches), "max") - len(batches))
    return list(zip(batches, _contribution_norms(batches, cfg.accum_steps)))


def by_length(pairs: list, block: int) -> list:
    """(sample, advantage) pairs sorted by sequence length within each run of `block` (one
    contribution): which samples share a contribution is unchanged, and neighbours in a
    micro-batch pad each other less. Stable, so equal lengths keep their order."""
    length = lambda pair: len(pair[0].prompt_token_ids) + len(pair[0].token_ids)  # noqa: E731
    return [pair for lo in range(0, len(pairs), block) for pair in sorted(pairs[lo : lo + block], key=length)]


def _contribution_norms(batches: list[MicroBatch], accum_steps: int) -> list[tuple[int, int]]:
    """(tokens, sequences) of the contribution (`accum_steps` micro-batches) each micro-batch
    falls in; at least 1 so a padding-only contribution is 0, not NaN."""
    norms: list[tuple[int, int]] = []
    for lo in range(0, len(batches), accum_steps):
        group = batches[lo : lo + accum_steps]
        tokens = sum(b.num_tokens for b in group)
        seqs = sum(int((b.response_mask.sum(-1) > 0).sum()) for b in group)
        norms += [(max(1, tokens), max(1, seqs))] * len(group)
    return norms


def _micro_batch_loss(
    batch: MicroBatch,
    norm,
    policy: Policy,
    cfg: AlgorithmConfig,
    temperature: float,
    ref_policy,
    record: _Record,
    prefix: PrefixCache | None = None,
) -> torch.Tensor:
    """Forward, verl loss normalised over the micro-batch's contribution; metrics logged."""
    mb = batch.to(policy.device)
    with policy.compute():
        logp, entropy = token_logprobs_and_entropy(
            policy.module,
            mb.input_ids,
            mb.attention_mask,
            mb.response_mask,
            temperature,
            entropy_grad=cfg.entropy_coeff != 0,
            share_prompts=cfg.share_prompts,
            from_hidden=cfg.logprobs_from_hidden,
            prefix=prefix,
        )
    loss, metrics = ppo_loss(
        logp,
        mb.old_log_probs,
        mb.advantages,
        mb.response_mask,
        cfg,
        entropy=entropy,
        ref_log_prob=_reference_logprobs(mb, ref_policy, cfg, temperature) if cfg.use_kl_loss else None,
        batch_num_tokens=norm[0],
        global_batch_size=norm[1],
    )
    if batch.versions:  # padding batches carry no metrics
        record.add(metrics, batch.num_tokens)
    return loss


def _reference_logprobs(mb: MicroBatch, ref_policy, cfg: AlgorithmConfig, temperature: float) -> torch.Tensor:
    """The reference policy's log-probabilities of the micro-batch's answers (the KL loss's), without a graph."""
    with torch.no_grad(), ref_policy.compute():
        ref, _ = token_logprobs_and_entropy(
            ref_policy.module,
            mb.input_ids,
            mb.attention_mask,
            mb.response_mask,
            temperature,
            with_entropy=False,
            share_prompts=cfg.share_prompts,
            from_hidden=cfg.logprobs_from_hidden,
        )
    return ref


class _Record:
    """What the micro-batches and steps of one call did; `stats()` freezes it."""

    def __init__(self):
        self.sums: dict[str, float] = {}
        self.tokens = 0
        self.micro_batches = 0
        self.versions: list[int] = []
        self.grad_norms: list[float] = []
        self.push_s = 0.0
        self.skipped = 0
        self.used = self.dropped_stale = 0  # samples that reached a forward / were too stale

    def add(self, metrics: dict, tokens: int) -> None:
        self.micro_batches += 1
        self.tokens += tokens
        for k, v in metrics.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v) * tokens

    def step(self, result: StepResult, push: PushResult | None) -> None:
        self.grad_norms.append(result.grad_norm)
        if not result.stepped:
            self.skipped += 1
            return
        self.versions.append(result.version)
        self.push_s += push.seconds if push is not None else 0.0

    def stats(self, **counts) -> UpdateStats:
        return UpdateStats(
            steps=len(self.versions),
            skipped_nonfinite=self.skipped,
            micro_batches=self.micro_batches,
            tokens=self.tokens,
            push_s=self.push_s,
            grad_norm=token_weighted_mean((g, 1) for g in self.grad_norms),
            versions=tuple(self.versions),
            losses={k: v / max(1, self.tokens) for k, v in self.sums.items()},
            used=self.used,
            dropped_stale=self.dropped_stale,
            **counts,
        )
