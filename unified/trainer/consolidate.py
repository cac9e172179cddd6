"""Consolidation: make each found problem's one answer the greedy answer.

After a round's update, the answers chosen for consolidation (`pipeline/consolidation.py`:
one fixed target per problem) are trained by plain negative log-likelihood, outside the PPO
clip, in passes: before each pass every target is scored under teacher forcing, and only
the targets whose tokens are not all the argmax by `algorithm.consolidate_margin` (the
target's logit minus the largest other logit, the smallest over its tokens) train in it;
it stops when every target holds or after `algorithm.consolidate_passes` passes; a pass
makes one optimizer step per `algorithm.consolidate_batch` targets. Greedy
decoding of a held target reproduces it (up to the engine's own rounding, which the margin
absorbs). The weights reach the engine once, at the end.

    for each pass:
        margins = teacher-forced margins of every target         (no grad)
        train the targets below the margin: NLL, optimizer steps of micro_batch_size x accum_steps
    push_weights(engine, version)

Every rank runs as many forwards and steps (FSDP2 collectives): counts are agreed first and
a short rank runs fully masked padding batches, as in `update.py`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import torch

from unified.trainer.aggregator import Aggregator
from unified.trainer.batching import MicroBatch, collate, dummy_batch
from unified.trainer.config import AlgorithmConfig
from unified.trainer.distributed import all_reduce_int
from unified.trainer.engine import Engine
from unified.trainer.policy import Policy
from unified.trainer.logprobs import answer_logits, token_logprobs_and_entropy
from unified.trainer.update import Turns, push_weights
from unified.types import Sample


@dataclass(frozen=True)
class ConsolidationStats:
    """What one consolidation did on this rank: its targets, how many hold the margin before
    and after, the passes and optimizer steps it made (the same on every rank), the mean
    NLL per token of the trained targets in its first pass, and its seconds."""

    targets: int
    held_before: int
    held_after: int
    passes: int
    steps: int
    nll: float
    seconds: float


def consolidate(
    targets: Sequence[Sample],
    aggregator: Aggregator,
    cfg: AlgorithmConfig,
    *,
    engine: Engine | None,
    pad_token_id: int,
    turns: Turns | None = None,
) -> ConsolidationStats:
    """Train `targets` (each one answer's prompt and tokens) until greedy decoding holds them or
    `cfg.consolidate_passes` passes are made; the final weights are pushed into `engine`."""
    start, turns, policy = time.perf_counter(), turns or Turns(), aggregator.policy
    passes = steps = 0
    nll: list[float] = []
    held = margins(targets, policy, pad_token_id, cfg.micro_batch_size, turns) >= cfg.consolidate_margin
    first = int(held.sum())
    while passes < cfg.consolidate_passes and all_reduce_int(int((~held).sum()), "sum") > 0:
        todo = [t for t, ok in zip(targets, held.tolist()) if not ok]
        made, loss = nll_pass(todo, aggregator, cfg, pad_token_id, turns)
        steps, passes = steps + made, passes + 1
        nll += [loss] if passes == 1 else []
        held = margins(targets, policy, pad_token_id, cfg.micro_batch_size, turns) >= cfg.consolidate_margin
    if steps and engine is not None:
        turns.pushing()
        push_weights(engine, policy, aggregator.version)
    return ConsolidationStats(
        len(targets), first, int(held.sum()), passes, steps, nll[0] if nll else 0.0, time.perf_counter() - start
    )


def margins(targets: Sequence[Sample], policy: Policy, pad_token_id: int, batch: int, turns: Turns) -> torch.Tensor:
    """Per target, the smallest over its tokens of (its logit - the largest other logit) under
    teacher forcing: > 0 where greedy decoding reproduces every token."""
    out = []
    policy.module.eval()
    with torch.no_grad():
        for mb in _batches(list(targets), batch, pad_token_id):
            turns.updating()
            out.append(token_margins(mb, policy).min(dim=1).values[: len(mb.versions)])  # a padding batch: no row
    policy.module.train()
    return torch.cat(out) if out else torch.zeros(0)


def token_margins(mb: MicroBatch, policy: Policy) -> torch.Tensor:
    """(B, R): each response token's logit minus the largest other logit (+inf at padding)."""
    batch = mb.to(policy.device)
    r = batch.response_mask.shape[1]
    with policy.compute():
        logits = answer_logits(policy.module, batch.input_ids, batch.attention_mask, r).float()
    chosen = batch.input_ids[:, -r:]
    own = logits.gather(-1, chosen[..., None]).squeeze(-1)
    others = logits.scatter(-1, chosen[..., None], float("-inf")).max(dim=-1).values
    return (own - others).masked_fill(batch.response_mask == 0, float("inf")).cpu()


def nll_pass(
    todo: Sequence[Sample], aggregator: Aggregator, cfg: AlgorithmConfig, pad_token_id: int, turns: Turns
) -> tuple[int, float]:
    """One pass over `todo`: optimizer steps of `consolidate_batch` targets, each micro-batch's
    NLL summed over its tokens and divided by the step's tokens (token-mean over the step).
    Returns the steps made and the pass's mean NLL per token."""
    policy, per_step = aggregator.policy, cfg.consolidate_batch
    steps = all_reduce_int(-(-len(todo) // per_step), "max")
    total, tokens, made = 0.0, 0, 0
    for s in range(steps):
        chunk = list(todo[s * per_step : (s + 1) * per_step])
        norm = max(1, all_reduce_int(sum(len(t.token_ids) for t in chunk), "sum"))
        for mb in _batches(chunk, min(cfg.micro_batch_size, per_step), pad_token_id):
            turns.updating()
            batch = mb.to(policy.device)
            with policy.compute():
                logp, _ = token_logprobs_and_entropy(
                    policy.module,
                    batch.input_ids,
                    batch.attention_mask,
                    batch.response_mask,
                    1.0,
                    with_entropy=False,
                    share_prompts=False,
                )
            loss = -(logp * batch.response_mask).sum()
            (loss / norm).backward()
            total, tokens = total + float(loss.detach()), tokens + mb.num_tokens
        made += int(aggregator.step(contributions=1).stepped)
    return made, total / max(1, tokens)


def _batches(samples: list[Sample], size: int, pad_token_id: int) -> list[MicroBatch]:
    """Micro-batches of `size`; every rank gets as many (padding batches: fully masked)."""
    out = [
        collate(samples[j : j + size], [torch.ones(len(s.token_ids)) for s in samples[j : j + size]], pad_token_id)
        for j in range(0, len(samples), size)
    ]
    want = all_reduce_int(len(out), "max")
    return out + [dummy_batch(pad_token_id)] * (want - len(out))
