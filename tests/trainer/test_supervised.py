"""The supervised term on found answers (`algorithm.sft_coef`, `Sample.supervised`): a found
passing answer trains outside any group with the coefficient as its advantage on every token,
its behaviour log-probs recomputed (ratio 1: the clipped loss's gradient is the coefficient
times the log-likelihood's), exempt from `max_staleness`, spread through the optimizer steps."""

import math
from dataclasses import replace

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.aggregator import build_aggregator
from unified.trainer.batching import collate
from unified.trainer.config import AlgorithmConfig
from unified.trainer.distributed import init_distributed
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.update import spread, train_on_samples, trainable
from unified.types import Sample


@pytest.mark.parametrize(
    "main, extra, expected",
    [
        ([1, 2, 3, 4, 5, 6], ["a", "b"], [1, 2, "a", 3, 4, "b", 5, 6]),
        ([1, 2, 3], ["a"], [1, "a", 2, 3]),
        ([], ["a", "b"], ["a", "b"]),
        ([1, 2], [], [1, 2]),
        ([1], ["a", "b", "c"], ["a", "b", "c", 1]),
    ],
)
def test_spread_keeps_both_orders_and_spaces_the_extra_evenly(main, extra, expected):
    assert spread(main, extra) == expected


def test_spread_gives_every_step_its_share():
    out = spread(list(range(90)), [f"s{j}" for j in range(30)])
    steps = [out[i : i + 30] for i in range(0, len(out), 30)]
    shares = [sum(isinstance(x, str) for x in step) for step in steps]
    assert sum(shares) == 30 and set(shares) <= {7, 8}  # 30 of 120 in each step of 30, within one
    assert [x for x in out if not isinstance(x, str)] == list(range(90))


def _sample(reward, group, tokens=(11, 12, 13), version=0, **kw) -> Sample:
    return Sample((5, 6, 7), tokens, (-1.0,) * len(tokens), reward, group, version, **kw)


def test_a_supervised_answer_takes_the_coefficient_outside_every_group():
    cfg = AlgorithmConfig(sft_coef=0.7)
    live = [_sample(1.0, "a"), _sample(0.0, "a")]
    dead = [_sample(0.0, "b"), _sample(0.0, "b")]
    found = _sample(1.0, -1, tokens=(21, 22, 23, 24), supervised=True)
    pairs, counts = trainable([*live, *dead, found], cfg)
    assert counts["supervised"] == 1 and counts["groups"] == 2 and counts["groups_used"] == 1
    assert counts["dropped_zero_variance"] == 2  # the supervised answer is not counted as a group's
    by_sample = {id(s): a for s, a in pairs}
    assert id(found) in by_sample and all(id(s) not in by_sample for s in dead)
    assert torch.equal(by_sample[id(found)], torch.full((4,), 0.7))
    assert by_sample[id(live[0])][0] > 0 > by_sample[id(live[1])][0]  # the group's own GRPO advantages
    # alone (no group with signal) it still trains; under sft_coef 0 it is left out
    assert [s for s, _ in trainable([*dead, found], cfg)[0]] == [found]
    pairs, counts = trainable([*live, found], AlgorithmConfig(sft_coef=0.0))
    assert counts["supervised"] == 0 and all(not s.supervised for s, _ in pairs)


@pytest.fixture(scope="module")
def policy():
    return build_policy(str(default_model_dir()), device=init_distributed("cpu").device, dtype="float32")


def _loglik(policy, sample: Sample) -> float:
    mb = collate([sample], [torch.zeros(len(sample.token_ids))], pad_id=0)
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, with_entropy=False)
    return float((logp * mb.response_mask).sum())


def test_a_stale_found_answer_trains_up_its_likelihood_at_ratio_one(policy):
    """An answer sampled 50 versions ago, its recorded log-probs far off (-20): recomputed,
    its ratio is 1 (nothing clipped, no approximate KL), it is not dropped as stale, and one
    step raises its likelihood. Under sft_coef 0 the same call trains nothing."""
    cfg = AlgorithmConfig(lr=1e-3, micro_batch_size=4, accum_steps=1, update_steps=1, max_staleness=1, sft_coef=1.0)
    agg = build_aggregator(cfg, policy)
    agg.version = 50
    found = Sample((5, 6, 9), (17, 18, 19, 20), (-20.0,) * 4, 1.0, -1, 0, supervised=True)
    dead = [Sample((5, 6, 9), (30, 31), (-8.0, -8.0), 0.0, "g", 50) for _ in range(2)]  # a silent group: no step of its own
    before_state = {n: t.clone() for n, t in policy.full_state_dict().items()}
    before = _loglik(policy, found)
    summary = train_on_samples([*dead, found], agg, cfg, engine=None, pad_token_id=0)
    assert summary.supervised == 1 and summary.used == 1 and summary.dropped_stale == 0 and summary.steps == 1
    assert summary.recomputed == 1
    assert summary.losses["pg_clipfrac"] == 0 and summary.losses["ppo_kl"] == pytest.approx(0.0, abs=1e-5)
    assert math.isfinite(summary.grad_norm) and summary.grad_norm > 0
    assert _loglik(policy, found) > before + 1e-3  # supervised: the answer became likelier
    after_state = policy.full_state_dict()
    assert any(not torch.equal(before_state[n], after_state[n]) for n in before_state)

    off = replace(cfg, sft_coef=0.0)
    summary = train_on_samples([*dead, found], build_aggregator(off, policy), off, engine=None, pad_token_id=0)
    assert summary.steps == 0 and summary.used == 0 and summary.supervised == 0
