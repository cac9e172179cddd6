"""Micro-batches go by length within each contribution (`update.by_length`): fewer pad
tokens, the same samples per contribution, and the same gradient as the order they came in."""

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer import update
from unified.trainer.config import AlgorithmConfig
from unified.trainer.distributed import init_distributed
from unified.trainer.policy import build_policy
from unified.types import Sample


def _pairs(lengths, seed=0):
    gen = torch.Generator().manual_seed(seed)
    pairs = []
    for i, (p, r) in enumerate(lengths):
        sample = Sample(
            tuple(torch.randint(10, 4000, (p,), generator=gen).tolist()),
            tuple(torch.randint(10, 4000, (r,), generator=gen).tolist()),
            (-8.3,) * r,
            float(i % 2),
            i // 4,
            0,
        )
        pairs.append((sample, torch.full((r,), 1.0 if i % 2 else -1.0)))
    return pairs


LENGTHS = [(5, 40), (9, 3), (5, 2), (9, 37), (5, 18), (9, 4), (5, 33), (9, 5)]


def test_sorting_keeps_each_contribution_and_pads_less():
    cfg = AlgorithmConfig(micro_batch_size=2, accum_steps=2, update_steps=2)
    pairs = _pairs(LENGTHS)
    ordered = update.by_length(pairs, 4)
    assert [set(map(id, ordered[lo : lo + 4])) for lo in (0, 4)] == [set(map(id, pairs[lo : lo + 4])) for lo in (0, 4)]
    width = lambda batches: sum(b.input_ids.numel() for b, _ in batches)  # noqa: E731
    batches = update._micro_batches(pairs, cfg, 0)
    assert width(batches) < sum(len(s.prompt_token_ids) + len(s.token_ids) for s, _ in pairs) * 1.6
    unsorted = [update.collate([s for s, _ in pairs[j : j + 2]], [a for _, a in pairs[j : j + 2]], 0) for j in range(0, 8, 2)]
    assert width(batches) < sum(b.input_ids.numel() for b in unsorted) * 0.75
    assert [n for _, n in batches] == [(sum(len(s.token_ids) for s, _ in pairs[lo : lo + 4]), 4) for lo in (0, 0, 4, 4)]


@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_the_gradient_is_the_unsorted_one(agg, monkeypatch):
    policy = build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype="float32")
    cfg = AlgorithmConfig(micro_batch_size=2, accum_steps=2, update_steps=2, loss_agg_mode=agg)
    pairs = _pairs(LENGTHS, seed=1)

    def grads():
        policy.module.zero_grad()
        for batch, norm in update._micro_batches(pairs, cfg, 0):
            update._micro_batch_loss(batch, norm, policy, cfg, 1.0, None, update._Record()).backward()
        return {n: p.grad.clone() for n, p in policy.module.named_parameters() if p.grad is not None}

    sorted_grads = grads()
    monkeypatch.setattr(update, "by_length", lambda pairs, block: list(pairs))
    plain = grads()
    assert sorted_grads.keys() == plain.keys() and any(g.abs().sum() > 0 for g in plain.values())
    for name in plain:
        torch.testing.assert_close(sorted_grads[name], plain[name], rtol=1e-4, atol=1e-6)
