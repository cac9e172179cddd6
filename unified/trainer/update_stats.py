"""What an update did, as one frozen record, and the one token-weighted mean.

`UpdateStats` crosses three boundaries: `train_on_samples` returns one per call, phase 5
merges a round's chunks (`merge_chunks`), the round loop merges the ranks
(`metrics.train_metrics`). Loss metrics (verl's pg_loss, entropy, ppo_kl, ...) are means
over response tokens, so every merge weights them by `tokens`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence


def token_weighted_mean(pairs: Iterable[tuple[float, float]]) -> float:
    """Mean of (value, tokens) pairs weighted by tokens; non-finite values and zero weights
    are left out; NaN when nothing is left."""
    kept = [(v, t) for v, t in pairs if t and math.isfinite(v)]
    weight = sum(t for _, t in kept)
    return sum(v * t for v, t in kept) / weight if weight else float("nan")


@dataclass(frozen=True)
class UpdateStats:
    steps: int = 0  # optimizer steps taken
    skipped_nonfinite: int = 0  # steps skipped for a non-finite gradient norm
    micro_batches: int = 0  # with metrics (padding batches excluded)
    tokens: int = 0  # response tokens the losses were averaged over
    samples: int = 0  # handed in
    used: int = 0  # went through a forward pass
    dropped_empty: int = 0  # empty completions
    dropped_stale: int = 0  # older than max_staleness when their turn came
    groups: int = 0  # prompt groups handed in
    groups_used: int = 0  # groups whose rewards differ (they carry a gradient)
    zero_variance_groups: int = 0  # groups whose answers all got one reward
    dropped_zero_variance: int = 0  # samples of those groups left out (algorithm.zero_variance=drop)
    recomputed: int = 0  # samples decoded in an answer shape whose behaviour log-probs the policy recomputed
    supervised: int = 0  # found answers trained by the supervised term (algorithm.sft_coef)
    push_s: float = 0.0  # seconds spent pushing weights into the engine
    grad_norm: float = float("nan")  # mean global grad norm (before clipping) of the steps
    versions: tuple[int, ...] = ()  # the weight version after each step
    version: int | None = None  # the aggregator's version at the end
    losses: Mapping[str, float] = field(default_factory=dict)  # token-weighted means of verl's loss metrics


COUNTS = (
    "steps",
    "skipped_nonfinite",
    "micro_batches",
    "tokens",
    "samples",
    "used",
    "dropped_empty",
    "dropped_stale",
    "groups",
    "groups_used",
    "zero_variance_groups",
    "dropped_zero_variance",
    "recomputed",
    "supervised",
    "push_s",
)


def merge_chunks(parts: Sequence[UpdateStats]) -> UpdateStats:
    """One rank's round from its chunks: counts summed, versions joined, means token-weighted."""
    if not parts:
        return UpdateStats()
    names = sorted({k for p in parts for k in p.losses})
    return UpdateStats(
        **{k: sum(getattr(p, k) for p in parts) for k in COUNTS},
        grad_norm=token_weighted_mean((p.grad_norm, p.tokens or 1) for p in parts),
        versions=tuple(v for p in parts for v in p.versions),
        version=parts[-1].version,
        losses={k: token_weighted_mean((p.losses[k], p.tokens) for p in parts if k in p.losses) for k in names},
    )
