"""Frozen linear weights cast to bf16 once (`frozen_cast.py`): under autocast the log-probs
and the gradient are bitwise those of autocast's own per-forward cast, under top-layer and
LoRA tuning; the copy follows the float32 weight when it changes; outside autocast the
module is the float32 one; and the casts per forward actually drop."""

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.batching import collate
from unified.trainer.distributed import init_distributed
from unified.trainer.frozen_cast import hold_frozen_weights, release_frozen_weights
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.tuning import TuningConfig
from unified.types import Sample


def _batch():
    gen = torch.Generator().manual_seed(3)
    tok = lambda n: tuple(torch.randint(10, 4000, (n,), generator=gen).tolist())  # noqa: E731
    prompts = [tok(9), tok(6)]
    samples = [Sample(prompts[i % 2], tok(3 + i), (-1.0,) * (3 + i), float(i % 2), i % 2, 0) for i in range(4)]
    return collate(samples, [torch.ones(3 + i) for i in range(4)], 0)


def _policy(method: str):
    """bf16 autocast at world size 1 (any CPU runs it; bf16 units only make it fast)."""
    tuning = TuningConfig(method=method, trainable_layers=1)
    return build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype="bfloat16", tuning=tuning)


def _scores(policy, batch, share=True):
    policy.module.zero_grad()
    with policy.compute():
        logp, entropy = token_logprobs_and_entropy(
            policy.module, batch.input_ids, batch.attention_mask, batch.response_mask, share_prompts=share
        )
        ((logp * batch.response_mask).sum() + 0.1 * (entropy * batch.response_mask).sum()).backward()
    grads = {n: p.grad.clone() for n, p in policy.module.named_parameters() if p.grad is not None}
    return logp.detach(), grads


def _frozen_linears(model):
    return [m for m in model.modules() if isinstance(m, torch.nn.Linear) and not any(p.requires_grad for p in m.parameters())]


@pytest.mark.parametrize("method", ["top_layers", "lora"])
def test_held_weights_give_autocasts_values_and_gradient_bitwise(method):
    policy = _policy(method)
    assert policy.autocast == torch.bfloat16
    frozen = _frozen_linears(policy.module)
    assert frozen and all("_held_dtype" in m.__dict__ for m in frozen)
    assert not any(
        "_held_dtype" in m.__dict__ for m in policy.module.modules() if isinstance(m, torch.nn.Linear) and m not in frozen
    )
    batch = _batch()
    logp_held, grads_held = _scores(policy, batch)
    assert all(m._held is not None and m._held[1].dtype == torch.bfloat16 for m in frozen)  # the copies were used
    release_frozen_weights(policy.module)
    logp, grads = _scores(policy, batch)
    assert torch.equal(logp_held, logp)
    assert grads.keys() == grads_held.keys() and grads
    for name in grads:
        assert torch.equal(grads_held[name], grads[name]), name


def test_the_copy_follows_the_float32_weight():
    """A checkpoint load (an in-place copy) or a replaced parameter remakes the copy: a copy
    made once and never again would give the old weights' log-probs here."""
    policy = _policy("top_layers")
    batch = _batch()
    before, _ = _scores(policy, batch)
    frozen = _frozen_linears(policy.module)
    state = {k: v.clone() for k, v in policy.module.state_dict().items()}
    with torch.no_grad():
        for m in frozen:
            m.weight.mul_(1.5)
    moved, _ = _scores(policy, batch)
    assert (moved - before).abs().max() > 1e-2
    policy.module.load_state_dict(state)
    back, _ = _scores(policy, batch)
    assert torch.equal(back, before)
    layer = frozen[0]
    layer.weight = torch.nn.Parameter(layer.weight.detach() * 3, requires_grad=False)
    replaced, _ = _scores(policy, batch)
    assert (replaced - before).abs().max() > 1e-3


def test_outside_autocast_it_is_the_float32_module():
    policy = _policy("top_layers")
    batch = _batch()
    with torch.no_grad():
        held, _ = token_logprobs_and_entropy(policy.module, batch.input_ids, batch.attention_mask, batch.response_mask)
        release_frozen_weights(policy.module)
        plain, _ = token_logprobs_and_entropy(policy.module, batch.input_ids, batch.attention_mask, batch.response_mask)
    assert held.dtype == torch.float32 and torch.equal(held, plain)


def test_frozen_weights_are_no_longer_cast_in_every_forward():
    """What it is for: counted by the profiler, the casts to bf16 per forward drop by the
    number of frozen linear weights (a held copy that is remade every forward would not)."""
    policy = _policy("top_layers")
    batch = _batch()
    n_frozen = len(_frozen_linears(policy.module))

    def casts():
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            _scores(policy, batch, share=False)
        return sum(e.count for e in prof.key_averages() if e.key == "aten::_to_copy")

    _scores(policy, batch, share=False)  # first use makes the copies
    held = casts()
    release_frozen_weights(policy.module)
    plain = casts()
    assert plain - held >= n_frozen, (plain, held, n_frozen)


def test_only_the_unsharded_bf16_policy_holds_copies():
    """float32 compute has nothing to cast: no module is touched."""
    policy = build_policy(
        str(default_model_dir()),
        device=init_distributed("cpu").device,
        dtype="float32",
        tuning=TuningConfig(method="top_layers", trainable_layers=1),
    )
    assert policy.autocast is None
    assert not any("_held_dtype" in m.__dict__ for m in policy.module.modules())
    assert hold_frozen_weights(torch.nn.Linear(2, 2), torch.bfloat16) == 0  # trainable: not held
