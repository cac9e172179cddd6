"""The sampled tokens' log-probs straight from the hidden states (`vocab.target_logprobs`):
values and gradients (hidden states, a trainable projection and its bias, the entropy's
own gradient) equal the plain logits -> log-softmax path's, across chunk boundaries, at a
temperature, in float32 and under bf16 autocast; and the policy's log-probs through it
equal the full forward's."""

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer import logprobs as logprobs_mod
from unified.trainer import vocab
from unified.trainer.batching import collate
from unified.trainer.distributed import init_distributed
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.tuning import TuningConfig
from unified.types import Sample


def _plain(h, head, targets, temperature):
    z = head(h).float() / temperature
    log_p = torch.log_softmax(z, dim=-1)
    return log_p.gather(-1, targets[:, None]).squeeze(-1), -(log_p.exp() * log_p).sum(-1)


def _run(fn, h, head, targets, temperature, g_lp, g_ent):
    h = h.detach().requires_grad_(True)
    head.zero_grad()
    lp, ent = fn(h, head, targets, temperature)
    ((lp * g_lp).sum() + (ent * g_ent).sum()).backward()
    return lp.detach(), ent.detach(), h.grad, head.weight.grad.clone(), head.bias.grad.clone()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_values_and_gradients_equal_the_plain_path_in_float32(monkeypatch, temperature):
    gen = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(16, 300)
    h, targets = torch.randn(23, 16, generator=gen), torch.randint(0, 300, (23,), generator=gen)
    g_lp, g_ent = torch.randn(23, generator=gen), torch.randn(23, generator=gen)
    monkeypatch.setattr(vocab, "CHUNK_ELEMENTS", 300 * 5)  # 5 rows a chunk: 23 rows end mid-chunk
    fused = _run(vocab.target_logprobs, h, head, targets, temperature, g_lp, g_ent)
    plain = _run(_plain, h, head, targets, temperature, g_lp, g_ent)
    for name, a, b in zip(["logp", "entropy", "grad h", "grad W", "grad b"], fused, plain):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5, msg=name)


def test_under_bf16_autocast_the_values_are_the_module_calls_to_bf16_rounding():
    gen = torch.Generator().manual_seed(1)
    head = torch.nn.Linear(64, 500)
    h, targets = torch.randn(40, 64, generator=gen), torch.randint(0, 500, (40,), generator=gen)
    g = torch.randn(40, generator=gen)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = _run(vocab.target_logprobs, h, head, targets, 1.0, g, g)
        plain = _run(_plain, h, head, targets, 1.0, g, g)
    torch.testing.assert_close(fused[0], plain[0], rtol=0, atol=1e-4)  # the same bf16 logits, float32 after
    for a, b in zip(fused[2:], plain[2:]):
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-3)


def test_a_wrong_target_or_sign_would_show():
    """The comparisons above can fail: a gradient without the one-hot term differs."""
    gen = torch.Generator().manual_seed(2)
    head = torch.nn.Linear(8, 50)
    h, targets = torch.randn(6, 8, generator=gen), torch.randint(0, 50, (6,), generator=gen)
    g = torch.ones(6)
    fused = _run(vocab.target_logprobs, h, head, targets, 1.0, g, torch.zeros(6))
    shifted = _run(_plain, h, head, (targets + 1) % 50, 1.0, g, torch.zeros(6))
    assert (fused[2] - shifted[2]).abs().max() > 1e-2


@pytest.mark.parametrize("method,dtype", [("full", "float32"), ("top_layers", "bfloat16"), ("lora", "bfloat16")])
def test_policy_logprobs_through_hidden_states_equal_the_full_forwards(method, dtype):
    tuning = TuningConfig(method=method, trainable_layers=1) if method != "full" else None
    policy = build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype=dtype, tuning=tuning)
    gen = torch.Generator().manual_seed(4)
    tok = lambda n: tuple(torch.randint(10, 4000, (n,), generator=gen).tolist())  # noqa: E731
    prompts = [tok(8), tok(5)]
    samples = [Sample(prompts[i % 2], tok(2 + i), (-1.0,) * (2 + i), 0.0, i % 2, 0) for i in range(5)]
    batch = collate(samples, [torch.ones(2 + i) for i in range(5)], 0)
    mask = batch.response_mask.bool()

    def grads_of(fn):
        policy.module.zero_grad()
        with policy.compute():
            logp = fn()
        (logp * batch.response_mask).sum().backward()
        return logp.detach(), {n: p.grad.clone() for n, p in policy.module.named_parameters() if p.grad is not None}

    def reference():
        r = batch.response_mask.shape[1]
        logits = logprobs_mod._answer_states(policy.module, batch.input_ids, batch.attention_mask, r, False, hidden=False) / 0.8
        return torch.log_softmax(logits, -1).gather(-1, batch.input_ids[:, -r:, None]).squeeze(-1)

    fused, g_fused = grads_of(
        lambda: token_logprobs_and_entropy(
            policy.module, batch.input_ids, batch.attention_mask, batch.response_mask, temperature=0.8
        )[0]
    )
    plain, g_plain = grads_of(reference)
    tol = 1e-5 if dtype == "float32" else 2e-3
    torch.testing.assert_close(fused[mask], plain[mask], rtol=tol, atol=tol)
    assert g_fused.keys() == g_plain.keys() and g_fused
    for name in g_plain:
        scale = g_plain[name].abs().max().clamp(min=1e-6)
        assert (g_fused[name] - g_plain[name]).abs().max() / scale < (1e-4 if dtype == "float32" else 3e-2), name


def test_without_entropy_the_log_probs_and_gradient_are_the_same():
    gen = torch.Generator().manual_seed(5)
    head = torch.nn.Linear(16, 120)
    h, targets = torch.randn(9, 16, generator=gen), torch.randint(0, 120, (9,), generator=gen)
    g = torch.randn(9, generator=gen)
    full = _run(vocab.target_logprobs, h, head, targets, 0.9, g, torch.zeros(9))
    lean = _run(
        lambda *a: (vocab.target_logprobs(*a, with_entropy=False)[0], torch.zeros(9)), h, head, targets, 0.9, g, torch.zeros(9)
    )
    assert vocab.target_logprobs(h, head, targets, with_entropy=False)[1] is None
    for a, b in zip(full[:1] + full[2:], lean[:1] + lean[2:]):
        assert torch.equal(a, b)
