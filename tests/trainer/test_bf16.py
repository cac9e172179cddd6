"""bfloat16 where the CPU has bf16 units (`model.dtype=auto`): the choice follows the CPU's
flags and the deterministic mode; the policy trains under torch.autocast with float32
master weights; and after a push the bf16 engine serves the log-probs the autocast policy
computes, to the tolerance bf16 allows (the engine part runs in a subprocess:
tests/helpers/bf16_checks.py, since vLLM allows one engine per process)."""

import io
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.config import AlgorithmConfig
from unified.trainer import distributed
from unified.trainer.aggregator import build_aggregator
from unified.trainer.batching import collate
from unified.trainer.distributed import cpu_has_bf16, init_distributed, resolve_dtype
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.update import train_on_samples
from unified.types import Sample

REPO = Path(__file__).resolve().parents[2]

# Engine vs policy log-probs, both in bf16 (tests/trainer/test_engine.py holds float32 to 1e-4).
# bf16 keeps 8 significant bits: a value is rounded by up to 2^-9 of itself, so a logit of
# magnitude 8-16 lands on a grid of 1/16 and is off by up to 0.03 once it is rounded to
# bf16. The engine and the policy round at different places (vLLM keeps the weights, the
# residual stream and the norms in bf16; autocast keeps float32 weights, norms and
# residual and rounds only the matrix products' inputs and outputs), so a log-prob (a
# logit minus a log-sum-exp, divided by the temperature) can differ by a few such steps.
# Measured on the tiny model (2026-11-25): at most 0.049 nats at T=1 and 0.078 at T=0.7,
# 0.011 and 0.020 on average (the float32 policy against the same bf16 engine: 0.034 and
# 0.080 at most). Allowed: 0.2 nats on any token, 0.05 on average. The perturbation pushed
# here moves them by 6-11 nats (checked: "before" > 10x the tolerance), so a push that did
# not land, or landed in part (a stale norm, tied head or fused kernel), still fails.
BF16_MAX_GAP = 0.2
BF16_MEAN_GAP = 0.05


# ---------------------------------------------------------------- (b) which dtype `auto` picks

EPYC = "fpu vme de pse avx2 avx512f avx512dq avx512_vnni avx512_bf16 avx512_vpopcntdq"
SAPPHIRE = "fpu avx2 avx512f avx512_vnni avx512_fp16 amx_bf16 amx_tile amx_int8"
NO_BF16 = "fpu avx2 avx512f avx512dq avx512_vnni avx512_fp16 avx512_bf16x"  # lookalikes are not bf16 units


def _cpuinfo(monkeypatch, flags: str | None) -> None:
    """/proc/cpuinfo as `distributed` reads it: two processors with `flags`; None: unreadable."""

    def fake_open(path, *args, **kwargs):
        assert str(path) == "/proc/cpuinfo", path
        if flags is None:
            raise PermissionError(path)
        return io.StringIO("".join(f"processor\t: {i}\nmodel name\t: test cpu\nflags\t\t: {flags}\n\n" for i in range(2)))

    monkeypatch.setattr(distributed, "open", fake_open, raising=False)


@pytest.mark.parametrize(
    "flags, has",
    [(EPYC, True), (SAPPHIRE, True), (NO_BF16, False), ("fpu avx2", False), (None, False)],
    ids=["avx512_bf16", "amx_bf16", "lookalikes", "avx2", "unreadable"],
)
def test_auto_picks_bf16_only_where_the_cpu_flags_show_bf16_units(monkeypatch, flags, has):
    _cpuinfo(monkeypatch, flags)
    assert cpu_has_bf16() is has
    assert resolve_dtype("auto", "cpu") == ("bfloat16" if has else "float32")
    assert resolve_dtype("auto", "cpu", deterministic=True) == "float32"  # exact resume is stated in fp32
    assert resolve_dtype("auto", "cuda") == "bfloat16"
    assert resolve_dtype("float32", "cpu") == "float32" and resolve_dtype("bfloat16", "cpu") == "bfloat16"  # asked for


# ---------------------------------------------------------------- (c) the autocast policy trains


@pytest.fixture()
def bf16_policy():
    policy = build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype="bfloat16")
    assert policy.autocast == torch.bfloat16 and not policy.sharded  # CPU, world size 1: autocast, unwrapped
    return policy


def _batch(responses, advantages=None, prompt=(5, 6, 7, 8)):
    samples = [Sample(prompt, tuple(r), (0.0,) * len(r), 0.0, "g", 0) for r in responses]
    return collate(
        samples, [torch.full((len(r),), float(a)) for r, a in zip(responses, advantages or [0] * len(responses))], pad_id=0
    )


def _logprobs(policy, mb, grad: bool = False) -> torch.Tensor:
    with torch.set_grad_enabled(grad), policy.compute():
        logp, _ = token_logprobs_and_entropy(policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, with_entropy=False)
    return logp


def test_the_autocast_policy_learns_a_toy_with_float32_master_weights(bf16_policy):
    policy = bf16_policy
    mb = _batch([[40, 41, 42, 43, 44, 45], [50, 51, 52, 53, 54, 55]])
    seen = set()  # the dtypes the matrix products produced: bf16 means autocast really ran
    hooks = [
        m.register_forward_hook(lambda _m, _i, out: seen.add(out.dtype))
        for m in policy.module.modules()
        if isinstance(m, torch.nn.Linear)
    ]
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-2)
    losses, norms = [], []
    for _ in range(12):
        loss = -(_logprobs(policy, mb, grad=True) * mb.response_mask).sum() / mb.response_mask.sum()
        loss.backward()
        assert all(p.grad.dtype == torch.float32 for p in policy.trainable_parameters() if p.grad is not None)
        norms.append(float(torch.nn.utils.clip_grad_norm_(policy.trainable_parameters(), float("inf"))))
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    for h in hooks:
        h.remove()
    assert seen == {torch.bfloat16}, seen
    assert losses[-1] < 0.5 * losses[0], losses  # the toy's NLL falls
    assert all(math.isfinite(n) and n > 0 for n in norms), norms
    assert {p.dtype for p in policy.parameters()} == {torch.float32}
    assert {t.dtype for s in optimizer.state.values() for k, t in s.items() if k != "step"} == {torch.float32}


def test_the_trainers_update_on_the_autocast_policy_moves_towards_the_rewarded_answer(bf16_policy):
    """train_on_samples (verl GRPO + PPO loss, aggregator, AdamW) under Policy.compute()."""
    policy, good, bad = bf16_policy, [60, 61, 62, 63, 64], [70, 71, 72, 73, 74]
    cfg = AlgorithmConfig(lr=1e-2, micro_batch_size=4, accum_steps=1, update_steps=1, max_staleness=100)
    aggregator = build_aggregator(cfg, policy)
    probe = _batch([good, bad])

    def margin() -> float:  # log-prob of the rewarded answer over the other one
        logp = (_logprobs(policy, probe) * probe.response_mask).sum(-1)
        return float(logp[0] - logp[1])

    start = margin()
    for _ in range(4):
        responses = [good, bad, good, bad]
        old = _logprobs(policy, _batch(responses))  # behaviour log-probs: the current policy's
        samples = [
            Sample((5, 6, 7, 8), tuple(r), tuple(old[i].tolist()), float(r == good), "g", aggregator.version)
            for i, r in enumerate(responses)
        ]
        stats = train_on_samples(samples, aggregator, cfg, engine=None, pad_token_id=0)
        assert stats.steps == 1 and math.isfinite(stats.grad_norm) and stats.grad_norm > 0, stats
    assert margin() > start + 1.0, (start, margin())
    assert {p.dtype for p in policy.parameters()} == {torch.float32}


# ---------------------------------------------------------------- (a) the bf16 engine after a push


@pytest.mark.skipif(not cpu_has_bf16(), reason="no bf16 units on this CPU: model.dtype=auto serves float32 here")
@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_the_bf16_engine_serves_the_autocast_policys_logprobs_after_a_push(compiled):
    """`compiled` (rollout.compile=true): the model vLLM traced and compiled once must read
    the pushed weights, not constants captured at compile time."""
    pytest.importorskip("vllm")
    flags = ["--compile"] if compiled else []
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "helpers" / "bf16_checks.py"), *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (r,) = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert r["compiled"] is compiled and r["enforce_eager"] is not compiled, r
    assert r["engine_dtype"] == "torch.bfloat16" and r["policy_autocast"] == "torch.bfloat16", r
    assert r["master_dtypes"] == ["torch.float32"] and r["path"] == "direct", r
    for t in (1.0, 0.7):
        assert r[f"before_{t}"] > 10 * BF16_MAX_GAP, r  # the perturbation is visible far above the tolerance
        assert r[f"after_{t}"] <= BF16_MAX_GAP and r[f"after_mean_{t}"] <= BF16_MEAN_GAP, r
