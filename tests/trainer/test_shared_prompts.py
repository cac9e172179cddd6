"""A group's samples share their prompt: `share_prompts` runs each distinct prompt once and the
responses on its KV cache. The log-probs, the entropy and the gradient must be the full
forward's, with left-padded prompts of different lengths in one micro-batch, under full
fine-tuning, the top layers and LoRA."""

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer import update
from unified.trainer.batching import collate
from unified.trainer.config import AlgorithmConfig
from unified.trainer.distributed import init_distributed
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.tuning import TuningConfig
from unified.types import Sample


def _group_samples(seed: int = 0) -> list[tuple[Sample, torch.Tensor]]:
    """Two groups (prompts of 7 and 12 tokens) of 3 samples each, answers of 2-9 tokens, and
    one sample with a prompt of its own."""
    gen = torch.Generator().manual_seed(seed)
    tok = lambda n: tuple(torch.randint(10, 4000, (n,), generator=gen).tolist())  # noqa: E731
    prompts = [tok(7), tok(12), tok(5)]
    layout = [(0, 5), (0, 2), (0, 9), (1, 4), (1, 8), (1, 3), (2, 6)]
    pairs = []
    for i, (g, r) in enumerate(layout):
        sample = Sample(prompts[g], tok(r), (-8.3,) * r, float(i % 2), g, 0)
        pairs.append((sample, torch.full((r,), 1.0 if i % 2 else -1.0)))
    return pairs


def _policy(method: str):
    tuning = TuningConfig(method=method, trainable_layers=1) if method != "full" else None
    return build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype="float32", tuning=tuning)


def _scores(policy, batch, share: bool):
    policy.module.zero_grad()
    logp, entropy = token_logprobs_and_entropy(
        policy.module, batch.input_ids, batch.attention_mask, batch.response_mask, temperature=0.7, share_prompts=share
    )
    ((logp * batch.response_mask).sum() + (entropy * batch.response_mask).sum() * 0.1).backward()
    grads = {n: p.grad.clone() for n, p in policy.module.named_parameters() if p.grad is not None}
    return logp.detach(), entropy.detach(), grads


@pytest.mark.parametrize("method", ["full", "top_layers", "lora"])
def test_shared_prompts_give_the_full_forwards_values_and_gradient(method):
    policy = _policy(method)
    pairs = _group_samples()
    batch = collate([s for s, _ in pairs], [a for _, a in pairs], 0)
    mask = batch.response_mask.bool()
    logp, entropy, grads = _scores(policy, batch, share=False)
    logp_s, entropy_s, grads_s = _scores(policy, batch, share=True)
    torch.testing.assert_close(logp_s[mask], logp[mask], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(entropy_s[mask], entropy[mask], rtol=1e-5, atol=1e-5)
    assert grads.keys() == grads_s.keys() and any(g.abs().sum() > 0 for g in grads.values())  # LoRA: A has none while B is 0
    for name in grads:
        torch.testing.assert_close(grads_s[name], grads[name], rtol=1e-4, atol=1e-5)


def test_a_wrong_cache_row_would_show():
    """The check above can fail: giving every row the first prompt's cache changes the log-probs."""
    policy = _policy("full")
    pairs = _group_samples()
    batch = collate([s for s, _ in pairs], [a for _, a in pairs], 0)
    wrong = batch.input_ids.clone()
    p = wrong.shape[1] - batch.response_mask.shape[1]
    wrong[:, :p] = wrong[0, :p]
    with torch.no_grad():
        right, _ = token_logprobs_and_entropy(
            policy.module, batch.input_ids, batch.attention_mask, batch.response_mask, share_prompts=True
        )
        moved, _ = token_logprobs_and_entropy(policy.module, wrong, batch.attention_mask, batch.response_mask, share_prompts=True)
    mask = batch.response_mask.bool()
    assert (right[mask] - moved[mask]).abs().max() > 1e-3


def test_the_update_step_is_the_same_with_and_without_sharing():
    """The learner's own micro-batch loss (`algorithm.share_prompts`), summed over a step's
    micro-batches: the same gradient either way."""
    policy = _policy("top_layers")
    pairs = _group_samples(seed=3)
    grads = {}
    for share in (False, True):
        cfg = AlgorithmConfig(micro_batch_size=4, accum_steps=2, update_steps=1, share_prompts=share)
        policy.module.zero_grad()
        for batch, norm in update._micro_batches(pairs, cfg, 0):
            update._micro_batch_loss(batch, norm, policy, cfg, 1.0, None, update._Record()).backward()
        grads[share] = {n: p.grad.clone() for n, p in policy.module.named_parameters() if p.grad is not None}
    assert grads[True].keys() == grads[False].keys() and any(g.abs().sum() > 0 for g in grads[False].values())
    for name in grads[False]:
        torch.testing.assert_close(grads[True][name], grads[False][name], rtol=1e-4, atol=1e-5)
