"""Groups whose answers all got one reward carry no gradient under a group baseline: with
`algorithm.zero_variance=drop` they never reach a forward pass, and are counted."""

import math

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.config import AlgorithmConfig
from unified.trainer.aggregator import build_aggregator
from unified.trainer.distributed import init_distributed
from unified.trainer.policy import build_policy
from unified.trainer.update import group_signal, train_on_samples
from unified.types import Sample


def _samples(rewards_by_group: dict) -> list[Sample]:
    gen = torch.Generator().manual_seed(0)
    return [
        Sample((5, 6, 7), tuple(torch.randint(10, 4000, (4,), generator=gen).tolist()), (-8.3,) * 4, r, g, 0)
        for g, rewards in rewards_by_group.items()
        for r in rewards
    ]


def test_group_signal():
    got = group_signal(_samples({"a": [1.0, 0.0, 0.0], "b": [0.0, 0.0], "c": [-0.5, -0.5, -0.5], "d": [1.0]}))
    assert got == {"a": True, "b": False, "c": False, "d": True}  # one sample: no group baseline to cancel it


@pytest.fixture(scope="module")
def policy():
    return build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype="float32")


@pytest.mark.parametrize("mode", ["drop", "keep"])
def test_zero_variance_groups_are_dropped_before_the_update_and_counted(policy, mode):
    cfg = AlgorithmConfig(lr=1e-3, micro_batch_size=4, accum_steps=1, update_steps=1, max_staleness=10, zero_variance=mode)
    samples = _samples({"live": [1.0, 0.0, 0.0, 1.0], "dead0": [0.0] * 4, "dead1": [-0.5] * 4})
    before = {n: t.clone() for n, t in policy.full_state_dict().items()}
    summary = train_on_samples(samples, build_aggregator(cfg, policy), cfg, engine=None, pad_token_id=0)
    assert (summary.groups, summary.groups_used, summary.zero_variance_groups) == (3, 1, 2)
    if mode == "drop":
        assert summary.used == 4 and summary.dropped_zero_variance == 8 and summary.steps == 1
    else:
        assert summary.used == 12 and summary.dropped_zero_variance == 0 and summary.steps == 3
    assert math.isfinite(summary.grad_norm) and summary.grad_norm > 0  # the live group trained
    after = policy.full_state_dict()
    assert any(not torch.equal(before[n], after[n]) for n in before)


def test_only_dead_groups_train_nothing(policy):
    cfg = AlgorithmConfig(lr=1e-3, micro_batch_size=4, accum_steps=1, update_steps=1)
    before = {n: t.clone() for n, t in policy.full_state_dict().items()}
    summary = train_on_samples(_samples({"dead": [0.0] * 4}), build_aggregator(cfg, policy), cfg, engine=None, pad_token_id=0)
    assert summary.steps == 0 and summary.used == 0 and summary.zero_variance_groups == 1
    after = policy.full_state_dict()
    assert all(torch.equal(before[n], after[n]) for n in before)


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="zero_variance must be one of"):
        AlgorithmConfig(zero_variance="resample")
