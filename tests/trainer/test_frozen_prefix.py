"""The frozen blocks' output kept from an answer's first forward (`frozen_prefix.py`): the
training forward that starts at the first trainable block gives the whole model's log-probs
and gradient (float32, shared prompts or not, logits or hidden states), the model is whole
again afterwards, a row the cache does not hold runs the whole model, and models where
nothing can be skipped say 0."""

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.batching import collate
from unified.trainer.distributed import init_distributed
from unified.trainer.frozen_prefix import PrefixCache, prefix_blocks, top_blocks
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.tuning import TuningConfig
from unified.types import Sample


def _policy(method="top_layers", layers=1, dtype="float32"):
    tuning = TuningConfig(method=method, trainable_layers=layers) if method != "full" else None
    return build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype=dtype, tuning=tuning)


def _batch(seed=0):
    gen = torch.Generator().manual_seed(seed)
    tok = lambda n: tuple(torch.randint(10, 4000, (n,), generator=gen).tolist())  # noqa: E731
    prompts = [tok(9), tok(6)]
    layout = [(0, 4), (0, 2), (0, 7), (1, 5), (1, 3)]
    samples = [Sample(prompts[g], tok(n), (-1.0,) * n, 0.0, g, 0) for g, n in layout]
    return collate(samples, [torch.ones(n) for _, n in layout], 0)


def _scores(policy, batch, share, hidden, prefix=None):
    policy.module.zero_grad()
    with policy.compute():
        logp, ent = token_logprobs_and_entropy(
            policy.module,
            batch.input_ids,
            batch.attention_mask,
            batch.response_mask,
            temperature=0.7,
            share_prompts=share,
            from_hidden=hidden,
            prefix=prefix,
        )
        ((logp * batch.response_mask).sum() + 0.1 * (ent * batch.response_mask).sum()).backward()
    grads = {n: p.grad.clone() for n, p in policy.module.named_parameters() if p.grad is not None}
    return logp.detach(), grads


@pytest.mark.parametrize("share", [False, True])
@pytest.mark.parametrize("hidden", [False, True])
def test_starting_at_the_first_trainable_block_gives_the_whole_models_values(share, hidden):
    policy = _policy()
    assert prefix_blocks(policy.module) == 3
    batch = _batch()
    mask = batch.response_mask.bool()
    whole, g_whole = _scores(policy, batch, share, hidden)
    prefix = PrefixCache(3)
    with torch.no_grad():
        first, _ = token_logprobs_and_entropy(
            policy.module,
            batch.input_ids,
            batch.attention_mask,
            batch.response_mask,
            temperature=0.7,
            share_prompts=share,
            from_hidden=hidden,
            prefix=prefix,
        )
    assert len(prefix) == 5
    calls = []
    hook = policy.module.model.layers[0].register_forward_hook(lambda *a: calls.append(1))
    cached, g_cached = _scores(policy, batch, share, hidden, prefix)
    assert calls == []  # the frozen blocks did not run
    hook.remove()
    torch.testing.assert_close(first[mask], whole[mask], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cached[mask], whole[mask], rtol=1e-5, atol=1e-5)
    assert g_whole.keys() == g_cached.keys() and g_whole
    for name in g_whole:
        torch.testing.assert_close(g_cached[name], g_whole[name], rtol=1e-4, atol=1e-6)
    # the model is whole again: all blocks, their own cache slots
    assert len(policy.module.model.layers) == 4
    assert [layer.self_attn.layer_idx for layer in policy.module.model.layers] == [0, 1, 2, 3]


def test_wrong_states_would_show_and_a_missing_row_runs_the_whole_model():
    policy = _policy()
    batch = _batch()
    mask = batch.response_mask.bool()
    prefix = PrefixCache(3)
    with torch.no_grad():
        right, _ = token_logprobs_and_entropy(
            policy.module, batch.input_ids, batch.attention_mask, batch.response_mask, prefix=prefix
        )
        key = next(iter(prefix._rows))
        prefix._rows[key] = prefix._rows[key] * 1.5
        wrong, _ = token_logprobs_and_entropy(
            policy.module, batch.input_ids, batch.attention_mask, batch.response_mask, prefix=prefix
        )
        assert (wrong[mask] - right[mask]).abs().max() > 1e-3
        del prefix._rows[key]  # one row not held: the whole model, and the row is recorded again
        again, _ = token_logprobs_and_entropy(
            policy.module, batch.input_ids, batch.attention_mask, batch.response_mask, prefix=prefix
        )
    torch.testing.assert_close(again[mask], right[mask], rtol=1e-5, atol=1e-5)
    assert len(prefix) == 5


def test_top_blocks_restores_the_model_when_the_forward_fails():
    policy = _policy()
    with pytest.raises(RuntimeError):
        with top_blocks(policy.module, 3):
            assert len(policy.module.model.layers) == 1 and policy.module.model.layers[0].self_attn.layer_idx == 0
            raise RuntimeError("boom")
    assert [layer.self_attn.layer_idx for layer in policy.module.model.layers] == [0, 1, 2, 3]


@pytest.mark.parametrize("method", ["full", "lora"])
def test_nothing_to_skip_where_every_block_trains(method):
    assert prefix_blocks(_policy(method).module) == 0


def _update(reuse: bool):
    from unified.trainer.aggregator import build_aggregator
    from unified.trainer.config import AlgorithmConfig
    from unified.trainer.update import train_on_samples

    torch.manual_seed(0)
    policy = _policy()
    gen = torch.Generator().manual_seed(7)
    tok = lambda n: tuple(torch.randint(10, 4000, (n,), generator=gen).tolist())  # noqa: E731
    prompts = [tok(8), tok(11), tok(5)]
    samples = [
        Sample(prompts[g], tok(2 + (i * 3) % 7), (-2.0,) * (2 + (i * 3) % 7), float(i % 2), g, 0, "deduction", constrained=g != 2)
        for g in range(3)
        for i in range(4)
    ]
    cfg = AlgorithmConfig(lr=1e-3, micro_batch_size=4, accum_steps=1, update_steps=1, reuse_frozen_prefix=reuse)
    calls = []
    hook = policy.module.model.layers[0].register_forward_hook(lambda *a: calls.append(1))
    stats = train_on_samples(samples, build_aggregator(cfg, policy), cfg, engine=None, pad_token_id=0)
    hook.remove()
    return stats, {n: p.detach().clone() for n, p in policy.module.named_parameters() if p.requires_grad}, len(calls)


def test_an_update_reusing_the_frozen_prefix_trains_as_the_whole_model_does():
    """Same steps and the same weights after (float32), and the frozen blocks ran fewer times."""
    on, w_on, calls_on = _update(True)
    off, w_off, calls_off = _update(False)
    assert on.steps == off.steps == 3 and on.recomputed == off.recomputed == 8
    assert on.grad_norm > 0
    for name in w_off:
        torch.testing.assert_close(w_on[name], w_off[name], rtol=1e-4, atol=1e-6)
    assert calls_on < calls_off
