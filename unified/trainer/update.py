"""Phase 5's update: scored samples -> verl advantages -> micro-batch losses -> aggregator.

    drop empty completions and stale samples (counted)
    advantages over all remaining samples, grouped by `Sample.group` (verl estimator)
    for each PPO epoch, for each optimizer step's worth of samples
        (micro_batch_size x accum_steps x update_steps per rank):
        drop samples that became stale, split into micro-batches, forward, verl loss
        normalised over the micro-batch's contribution, aggregator.backward
        flush: the step happens even when the chunk came up short

Every rank must run the same number of forwards (FSDP2 collectives): ranks agree on the
counts first and a rank that is short runs fully masked padding batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import torch

from unified.trainer.aggregator import Aggregator
from unified.trainer.batching import MicroBatch, collate, dummy_batch, response_mask_of
from unified.trainer.distributed import all_reduce_int
from unified.trainer.losses import AdvantageConfig, LossConfig, advantage_config_from, compute_advantages, loss_config_from, ppo_loss
from unified.trainer.policy import Policy, token_logprobs_and_entropy
from unified.types import Sample


@dataclass(frozen=True)
class UpdateConfig:
    micro_batch_size: int = 4
    ppo_epochs: int = 1
    temperature: float = 1.0  # the sampling temperature, so log-probs match the engine's
    loss: LossConfig = field(default_factory=LossConfig)
    advantage: AdvantageConfig = field(default_factory=AdvantageConfig)


def build_update_config(algorithm_cfg, rollout_cfg) -> UpdateConfig:
    return UpdateConfig(
        micro_batch_size=algorithm_cfg.micro_batch_size,
        ppo_epochs=algorithm_cfg.ppo_epochs,
        temperature=rollout_cfg.temperature,
        loss=loss_config_from(algorithm_cfg),
        advantage=advantage_config_from(algorithm_cfg),
    )


def train_on_samples(
    samples: Sequence[Sample],
    aggregator: Aggregator,
    cfg: UpdateConfig,
    *,
    pad_token_id: int,
    ref_policy: Policy | None = None,
    flush: bool = True,
) -> dict:
    """Train on scored samples; returns averaged metrics and what happened (steps, versions,
    drops). `flush=False` leaves a short last chunk pending in the aggregator."""
    if cfg.loss.use_kl_loss and ref_policy is None:
        raise ValueError("use_kl_loss needs a ref_policy (a frozen build_policy(..., trainable=False))")
    kept = [s for s in samples if s.token_ids]
    dropped_before = aggregator.dropped_stale
    kept = aggregator.filter_stale(kept)
    advantages: list[torch.Tensor] = []
    if kept:
        adv = compute_advantages([s.reward for s in kept], response_mask_of(kept), [s.group for s in kept], cfg.advantage)
        advantages = list(adv)
    per_step = cfg.micro_batch_size * aggregator.accum_steps * aggregator.update_steps
    log = _MetricLog()
    aggregator.policy.module.train()
    for _epoch in range(cfg.ppo_epochs):
        n_chunks = all_reduce_int(math.ceil(len(kept) / per_step), "max")
        for c in range(n_chunks):
            idx = range(c * per_step, min((c + 1) * per_step, len(kept)))
            fresh = [i for i in idx if aggregator.staleness(kept[i].version) <= aggregator.max_staleness]
            aggregator.dropped_stale += len(idx) - len(fresh)
            batches = [
                collate([kept[i] for i in fresh[j : j + cfg.micro_batch_size]], [advantages[i] for i in fresh[j : j + cfg.micro_batch_size]], pad_token_id)
                for j in range(0, len(fresh), cfg.micro_batch_size)
            ]
            n_micro = all_reduce_int(len(batches), "max")
            batches += [dummy_batch(pad_token_id)] * (n_micro - len(batches))
            for batch, norm in zip(batches, _contribution_norms(batches, aggregator)):
                result = _micro_step(batch, norm, aggregator, cfg, ref_policy, log)
                log.step(result)
            if flush:
                log.step(aggregator.flush())
    return log.summary(
        samples=len(samples),
        used=len(kept),
        dropped_empty=len(samples) - len([s for s in samples if s.token_ids]),
        dropped_stale=aggregator.dropped_stale - dropped_before,
        version=aggregator.version,
    )


def _contribution_norms(batches: list[MicroBatch], aggregator: Aggregator) -> list[tuple[int, int]]:
    """(tokens, sequences) of the contribution each micro-batch falls in, aligned with the
    aggregator's open contribution; at least 1 so a padding-only contribution is 0, not NaN."""
    accum = aggregator.accum_steps
    first = accum - aggregator.open_micro_batches
    bounds = [0] + list(range(first, len(batches), accum)) + [len(batches)]
    norms: list[tuple[int, int]] = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        group = batches[lo:hi]
        tokens = sum(b.num_tokens for b in group)
        seqs = sum(int((b.response_mask.sum(-1) > 0).sum()) for b in group)
        norms += [(max(1, tokens), max(1, seqs))] * len(group)
    return norms


def _micro_step(batch: MicroBatch, norm, aggregator: Aggregator, cfg: UpdateConfig, ref_policy, log: "_MetricLog"):
    policy = aggregator.policy
    mb = batch.to(policy.device)
    logp, entropy = token_logprobs_and_entropy(
        policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, cfg.temperature,
        entropy_grad=cfg.loss.entropy_coeff != 0,
    )
    ref = None
    if cfg.loss.use_kl_loss:
        with torch.no_grad():
            ref, _ = token_logprobs_and_entropy(
                ref_policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, cfg.temperature, with_entropy=False
            )
    loss, metrics = ppo_loss(
        logp, mb.old_log_probs, mb.advantages, mb.response_mask, cfg.loss,
        entropy=entropy, ref_log_prob=ref, batch_num_tokens=norm[0], global_batch_size=norm[1],
    )
    if batch.versions:  # padding batches carry no metrics
        log.add(metrics, batch.num_tokens)
    return aggregator.backward(loss, min(batch.versions) if batch.versions else None)


class _MetricLog:
    """Token-weighted means of micro-batch metrics, and the steps taken."""

    def __init__(self):
        self.sums: dict[str, float] = {}
        self.weight = 0
        self.micro_batches = 0
        self.versions: list[int] = []
        self.grad_norms: list[float] = []
        self.push_s: list[float] = []
        self.skipped = 0

    def add(self, metrics: dict, tokens: int) -> None:
        self.micro_batches += 1
        self.weight += tokens
        for k, v in metrics.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v) * tokens

    def step(self, result) -> None:
        if result is None:
            return
        self.grad_norms.append(result.grad_norm)
        if not result.stepped:
            self.skipped += 1
            return
        self.versions.append(result.version)
        if result.push is not None:
            self.push_s.append(result.push.seconds)

    def summary(self, **extra) -> dict:
        out = {k: v / max(1, self.weight) for k, v in self.sums.items()}
        finite = [g for g in self.grad_norms if math.isfinite(g)]
        out.update(
            steps=len(self.versions),
            skipped_nonfinite=self.skipped,
            versions=list(self.versions),
            grad_norm=sum(finite) / len(finite) if finite else float("nan"),
            push_s=sum(self.push_s),
            micro_batches=self.micro_batches,
            tokens=self.weight,
            **extra,
        )
        return out
