"""Scored samples -> padded tensors in verl's layout.

    input_ids       (B, P+R)  [left-padded prompt | right-padded response]
    attention_mask  (B, P+R)  1 on real tokens
    response_mask   (B, R)    1 on real response tokens
    old_log_probs   (B, R)    behaviour log-probs recorded by the engine at sampling
    advantages      (B, R)

Each micro-batch is padded to its own longest prompt and response, not the batch's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from unified.types import Sample


@dataclass(frozen=True)
class MicroBatch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    response_mask: torch.Tensor
    old_log_probs: torch.Tensor
    advantages: torch.Tensor
    versions: tuple[int, ...]

    @property
    def num_tokens(self) -> int:
        return int(self.response_mask.sum().item())

    @property
    def size(self) -> int:
        return int(self.response_mask.shape[0])

    def to(self, device: torch.device) -> "MicroBatch":
        move = lambda t: t.to(device, non_blocking=True)  # noqa: E731
        return MicroBatch(
            move(self.input_ids),
            move(self.attention_mask),
            move(self.response_mask),
            move(self.old_log_probs),
            move(self.advantages),
            self.versions,
        )


def response_mask_of(samples: Sequence[Sample]) -> torch.Tensor:
    """(N, R_max) mask over all samples, for advantage estimation."""
    width = max(len(s.token_ids) for s in samples)
    mask = torch.zeros(len(samples), width)
    for i, s in enumerate(samples):
        mask[i, : len(s.token_ids)] = 1
    return mask


def collate(samples: Sequence[Sample], advantages: Sequence[torch.Tensor], pad_id: int) -> MicroBatch:
    """`advantages[i]` is sample i's advantage row (at least as long as its response)."""
    p = max(len(s.prompt_token_ids) for s in samples)
    r = max(len(s.token_ids) for s in samples)
    b = len(samples)
    input_ids = torch.full((b, p + r), pad_id, dtype=torch.long)
    attention = torch.zeros((b, p + r), dtype=torch.long)
    response_mask = torch.zeros((b, r))
    old = torch.zeros((b, r))
    adv = torch.zeros((b, r))
    for i, s in enumerate(samples):
        n_p, n_r = len(s.prompt_token_ids), len(s.token_ids)
        input_ids[i, p - n_p : p] = torch.tensor(s.prompt_token_ids, dtype=torch.long)
        input_ids[i, p : p + n_r] = torch.tensor(s.token_ids, dtype=torch.long)
        attention[i, p - n_p : p + n_r] = 1
        response_mask[i, :n_r] = 1
        old[i, :n_r] = torch.tensor(s.logprobs, dtype=torch.float32)
        adv[i, :n_r] = advantages[i][:n_r]
    return MicroBatch(input_ids, attention, response_mask, old, adv, tuple(s.version for s in samples))


def dummy_batch(pad_id: int) -> MicroBatch:
    """One fully masked token: a rank with no data left runs it so that FSDP's collectives
    stay matched across ranks; it adds nothing to the gradient."""
    ids = torch.full((1, 2), pad_id, dtype=torch.long)
    zeros = torch.zeros((1, 1))
    return MicroBatch(ids, torch.ones_like(ids), zeros, zeros, zeros, ())
