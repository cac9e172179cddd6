"""Failure behaviour of the pieces the round loop relies on: generation errors are retried
with back-off, and a non-finite loss skips the optimizer step (counted, weights untouched).
(A round with no valid tasks is covered end to end in tests/e2e/test_loop.py.)"""

from __future__ import annotations

import math

import pytest
import torch

from unified.trainer.engine import Engine, SamplingConfig
from unified.types import Sample


class _FlakyBackend(Engine):
    """The real Engine retry logic over a backend that fails its first `fails` calls."""

    def __init__(self, tokenizer, fails: int):
        super().__init__(tokenizer, max_model_len=256, retries=3, retry_backoff_s=0.01)
        self.fails, self.calls, self.cleanups = fails, 0, 0

    def _generate_ids(self, requests, sampling):
        self.calls += 1
        if self.calls <= self.fails:
            raise RuntimeError(f"transient failure {self.calls}")
        return [[((5, 6), (-0.5, -0.25), "stop")] * sampling.n for _ in requests]

    def _after_error(self):
        self.cleanups += 1


@pytest.fixture(scope="module")
def tokenizer():
    from unified.models.resolve import load_tokenizer
    from unified.models.tiny_model import default_model_dir

    return load_tokenizer(str(default_model_dir()))


def test_generation_errors_are_retried_with_exponential_backoff(tokenizer, monkeypatch):
    waits = []
    monkeypatch.setattr("unified.trainer.engine_base.time.sleep", waits.append)
    engine = _FlakyBackend(tokenizer, fails=2)
    out = engine.generate(["def f(x):"], SamplingConfig(n=2, max_tokens=4))
    assert engine.calls == 3 and engine.cleanups == 2
    assert waits == [0.01, 0.02]
    assert [c.token_ids for c in out[0]] == [(5, 6), (5, 6)] and out[0][0].logprobs == (-0.5, -0.25)


def test_generation_gives_up_after_the_configured_retries(tokenizer, monkeypatch):
    monkeypatch.setattr("unified.trainer.engine_base.time.sleep", lambda s: None)
    engine = _FlakyBackend(tokenizer, fails=10)
    with pytest.raises(RuntimeError, match="generation failed after 4 attempts"):
        engine.generate(["def f(x):"], SamplingConfig(n=1, max_tokens=4))
    assert engine.calls == 4


def test_nonfinite_loss_skips_the_step_and_is_counted(tokenizer):
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.aggregator import Aggregator
    from unified.trainer.distributed import init_distributed
    from unified.trainer.policy import build_policy
    from unified.trainer.config import AlgorithmConfig
    from unified.trainer.update import train_on_samples

    info = init_distributed("cpu")
    policy = build_policy(default_model_dir(), device=info.device)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    cfg = AlgorithmConfig(micro_batch_size=4, accum_steps=1, update_steps=1)
    agg = Aggregator(policy, optimizer, cfg)
    before = {k: v.clone() for k, v in policy.full_state_dict().items()}
    prompt = tuple(tokenizer("def f(x):")["input_ids"])

    def sample(reward, group, logprob):
        return Sample(prompt, (11, 12, 13), (logprob,) * 3, reward, group=group, version=0)

    # an infinite reward (a broken reward function) makes the advantages, loss and gradient non-finite
    poisoned = [sample(math.inf, 0, -1.0), sample(0.0, 0, -1.0), sample(1.0, 1, -1.0), sample(0.0, 1, -1.0)]
    summary = train_on_samples(poisoned, agg, cfg, engine=None, pad_token_id=tokenizer.pad_token_id)
    assert summary.skipped_nonfinite == 1 and summary.steps == 0
    assert agg.skipped_nonfinite == 1 and agg.version == 0
    after = policy.full_state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not optimizer.state  # AdamW never stepped: no moments were created

    healthy = [sample(1.0, 0, -1.0), sample(0.0, 0, -1.0), sample(1.0, 1, -1.0), sample(0.0, 1, -1.0)]
    summary = train_on_samples(healthy, agg, cfg, engine=None, pad_token_id=tokenizer.pad_token_id)
    assert summary.steps == 1 and agg.version == 1  # the run goes on
    assert any(not torch.equal(before[k], v) for k, v in policy.full_state_dict().items())
