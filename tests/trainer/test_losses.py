"""Advantages and the policy loss come from verl's core_algos registries, selected by the
algorithm config; signs, clipping, entropy/KL terms and loss aggregation modes."""

import pytest
import torch
from verl.trainer.ppo import core_algos

from unified.config import compose_config, typed
from unified.trainer.config import AlgorithmConfig
from unified.trainer.losses import (
    compute_advantages,
    outcome_token_rewards,
    ppo_loss,
)

EXPECTED = {"grpo": "grpo", "rloo": "rloo", "reinforce_pp": "reinforce_plus_plus"}
VERL_FN = {
    "grpo": core_algos.compute_grpo_outcome_advantage,
    "rloo": core_algos.compute_rloo_outcome_advantage,
    "reinforce_plus_plus": core_algos.compute_reinforce_plus_plus_outcome_advantage,
}


def _batch():
    mask = torch.ones(4, 5)
    mask[0, 3:] = 0
    mask[3, 1:] = 0
    return [1.0, 0.0, 1.0, 0.5], mask, ["a", "a", "b", "b"]


@pytest.mark.parametrize("config_name", sorted(EXPECTED))
def test_loss_and_advantage_estimator_from_config_come_from_verl_registries(config_name, monkeypatch):
    cfg = typed(compose_config([f"algorithm={config_name}"])).algorithm  # option files: deltas over grpo
    asked = {"adv": [], "loss": []}
    real_adv, real_loss = core_algos.get_adv_estimator_fn, core_algos.get_policy_loss_fn
    monkeypatch.setattr(core_algos, "get_adv_estimator_fn", lambda name: asked["adv"].append(name) or real_adv(name))
    monkeypatch.setattr(core_algos, "get_policy_loss_fn", lambda name: asked["loss"].append(name) or real_loss(name))

    adv_cfg = loss_cfg = cfg
    rewards, mask, groups = _batch()
    adv = compute_advantages(rewards, mask, groups, adv_cfg)
    assert asked["adv"] == [EXPECTED[config_name]]
    assert real_adv(EXPECTED[config_name]) is VERL_FN[EXPECTED[config_name]]

    # the same numbers as calling verl's function directly, reward on the last token
    import numpy as np
    from verl.trainer.config import AlgoConfig

    kwargs = dict(
        token_level_rewards=outcome_token_rewards(torch.tensor(rewards), mask),
        response_mask=mask,
        index=np.array(groups, dtype=object),
        config=AlgoConfig(adv_estimator=EXPECTED[config_name]),
    )
    if EXPECTED[config_name] == "grpo":
        kwargs["norm_adv_by_std_in_grpo"] = True
    direct, _ = VERL_FN[EXPECTED[config_name]](**kwargs)
    torch.testing.assert_close(adv, direct)
    assert (adv * (1 - mask)).abs().max() == 0  # nothing outside the response
    assert adv[0, 0] > 0 > adv[1, 0]  # in group "a" the rewarded sample is pushed up

    log_prob, old, a = torch.randn(4, 5), torch.randn(4, 5), torch.randn(4, 5)
    loss, metrics = ppo_loss(log_prob, old, a, mask, loss_cfg)
    assert asked["loss"] == [cfg.policy_loss] == ["vanilla"]
    from unified.trainer.losses import verl_actor_config

    ref, _ = core_algos.compute_policy_loss_vanilla(
        old_log_prob=old,
        log_prob=log_prob,
        advantages=a,
        response_mask=mask.bool(),
        loss_agg_mode=cfg.loss_agg_mode,
        config=verl_actor_config(loss_cfg),
    )
    torch.testing.assert_close(loss, ref)
    assert metrics["loss"] == pytest.approx(float(ref)) and "kl" not in metrics  # KL off by default


def test_loss_grpo_advantages_are_group_normalised():
    rewards, mask, groups = _batch()
    adv = compute_advantages(rewards, mask, groups)  # defaults: grpo, std-normalised
    # group "a": rewards (1, 0) -> +-(0.5 / std) with torch's unbiased std 0.7071
    assert adv[0, 0] == pytest.approx(0.7071, abs=1e-3) and adv[1, 0] == pytest.approx(-0.7071, abs=1e-3)
    assert torch.allclose(adv[0, :3], adv[0, 0].expand(3))  # one value per sequence
    unscaled = compute_advantages(rewards, mask, groups, AlgorithmConfig(norm_adv_by_std_in_grpo=False))
    assert unscaled[0, 0] == pytest.approx(0.5) and unscaled[3, 0] == pytest.approx(-0.25)
    same = compute_advantages([1.0, 1.0], torch.ones(2, 3), ["x", "x"])
    assert same.abs().max() == 0  # no signal in a group with equal rewards


@pytest.mark.parametrize("estimator", ["grpo", "rloo", "reinforce_plus_plus"])
def test_loss_positive_advantage_raises_sampled_token_logprob(estimator):
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.batching import collate
    from unified.trainer.distributed import init_distributed
    from unified.trainer.policy import build_policy
    from unified.trainer.logprobs import token_logprobs_and_entropy
    from unified.types import Sample

    info = init_distributed("cpu")
    policy = build_policy(str(default_model_dir()), device=info.device, dtype="float32")
    gen = torch.Generator().manual_seed(5)
    prompt = tuple(torch.randint(10, 4000, (6,), generator=gen).tolist())
    samples = [
        Sample(prompt, tuple(torch.randint(10, 4000, (5,), generator=gen).tolist()), (0.0,) * 5, reward, "p", 0)
        for reward in (1.0, 0.0, 0.0, 1.0)
    ]
    mb = collate(samples, [torch.zeros(5)] * 4, pad_id=0)

    def logprobs():
        return token_logprobs_and_entropy(policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, with_entropy=False)[0]

    with torch.no_grad():
        before = logprobs()
    adv = compute_advantages(
        [s.reward for s in samples], mb.response_mask, [s.group for s in samples], AlgorithmConfig(adv_estimator=estimator)
    )
    assert (adv[[0, 3]] > 0).all() and (adv[[1, 2]] < 0).all()
    optimizer = torch.optim.SGD(policy.parameters(), lr=0.05)
    loss, _ = ppo_loss(logprobs(), before, adv, mb.response_mask, AlgorithmConfig())  # on-policy: ratio 1
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        change = (logprobs() - before).sum(-1)
    assert change[0] > 0 and change[3] > 0, change  # rewarded completions became likelier
    # unrewarded ones fell behind; with the warmed-up tiny model the gradients of unrelated
    # sequences are correlated, so their own change may be slightly positive, never the same
    assert min(change[0], change[3]) > max(change[1], change[2]), change


def test_loss_clipping_of_the_ratio_against_behaviour_logprobs():
    cfg = AlgorithmConfig(clip_ratio_low=0.2, clip_ratio_high=0.3, clip_ratio_c=3.0)
    mask = torch.ones(1, 1)

    def run(ratio: float, advantage: float):
        log_prob = torch.tensor([[float(torch.log(torch.tensor(ratio)))]], requires_grad=True)
        loss, metrics = ppo_loss(log_prob, torch.zeros(1, 1), torch.tensor([[advantage]]), mask, cfg)
        loss.backward()
        return float(loss.detach()), float(log_prob.grad), metrics

    # inside the trust region: plain -A * ratio, gradient -A * ratio
    loss, grad, m = run(1.1, 2.0)
    assert loss == pytest.approx(-2.2) and grad == pytest.approx(-2.2) and m["pg_clipfrac"] == 0
    # A > 0 and ratio above 1 + clip_high (0.3): clipped, no gradient
    loss, grad, m = run(1.5, 2.0)
    assert loss == pytest.approx(-2.0 * 1.3) and grad == 0 and m["pg_clipfrac"] == 1
    # A > 0 and ratio below 1 - clip_low: the pessimistic (unclipped) term, still a gradient
    loss, grad, m = run(0.5, 2.0)
    assert loss == pytest.approx(-1.0) and grad == pytest.approx(-1.0) and m["pg_clipfrac"] == 0
    # A < 0 and ratio below 1 - clip_low (0.2): clipped at 0.8, no gradient
    loss, grad, m = run(0.5, -1.0)
    assert loss == pytest.approx(0.8) and grad == 0 and m["pg_clipfrac"] == 1
    # A < 0 and ratio beyond clip_ratio_c: dual clip caps the loss at -A * c
    loss, grad, m = run(5.0, -1.0)
    assert loss == pytest.approx(3.0) and grad == 0 and m["pg_clipfrac_lower"] == 1
    # A < 0 and 1.3 < ratio < c: unclipped (pessimistic), gradient flows
    loss, grad, m = run(2.0, -1.0)
    assert loss == pytest.approx(2.0) and grad == pytest.approx(2.0) and m["pg_clipfrac_lower"] == 0


def test_loss_agg_modes():
    torch.manual_seed(0)
    loss_mat_adv = torch.randn(3, 4)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.float32)
    zeros = torch.zeros(3, 4)  # log_prob == old: ratio 1, per-token loss = -advantage
    per_token = -loss_mat_adv
    token_sum = (per_token * mask).sum(-1)
    expected = {
        "token-mean": token_sum.sum() / mask.sum(),
        "seq-mean-token-mean": (token_sum / mask.sum(-1)).mean(),
        "seq-mean-token-sum": token_sum.mean(),
        "token-sum": token_sum.sum(),
    }
    for mode, value in expected.items():
        loss, _ = ppo_loss(zeros, zeros, loss_mat_adv, mask, AlgorithmConfig(loss_agg_mode=mode))
        assert float(loss) == pytest.approx(float(value), abs=1e-6), mode
    with pytest.raises(ValueError):
        ppo_loss(zeros, zeros, loss_mat_adv, mask, AlgorithmConfig(loss_agg_mode="no-such-mode"))

    # normalised over the contribution: micro-batch losses sum to the whole batch's loss
    for mode, key in (("token-mean", int(mask.sum())), ("seq-mean-token-mean", 3)):
        parts = [
            ppo_loss(
                zeros[rows],
                zeros[rows],
                loss_mat_adv[rows],
                mask[rows],
                AlgorithmConfig(loss_agg_mode=mode),
                batch_num_tokens=int(mask.sum()),
                global_batch_size=3,
            )[0]
            for rows in ([0], [1, 2])
        ]
        assert float(sum(parts)) == pytest.approx(float(expected[mode]), abs=1e-6), (mode, key)


def test_loss_entropy_coeff_and_optional_kl_to_reference():
    torch.manual_seed(1)
    lp, old, adv, ent = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3), torch.rand(2, 3)
    mask = torch.ones(2, 3)
    base, m0 = ppo_loss(lp, old, adv, mask, AlgorithmConfig(), entropy=ent)
    assert m0["entropy"] == pytest.approx(float(ent.mean())) and float(base) == pytest.approx(m0["pg_loss"])
    with_ent, _ = ppo_loss(lp, old, adv, mask, AlgorithmConfig(entropy_coeff=0.1), entropy=ent)
    assert float(with_ent) == pytest.approx(float(base) - 0.1 * float(ent.mean()), abs=1e-6)

    ref = lp - 0.3
    with pytest.raises(ValueError, match="ref_log_prob"):
        ppo_loss(lp, old, adv, mask, AlgorithmConfig(use_kl_loss=True))
    with_kl, m = ppo_loss(lp, old, adv, mask, AlgorithmConfig(use_kl_loss=True, kl_loss_coef=0.5), ref_log_prob=ref)
    kl = core_algos.kl_penalty(logprob=lp, ref_logprob=ref, kl_penalty="low_var_kl").mean()
    assert m["kl"] == pytest.approx(float(kl), abs=1e-6) and m["kl"] > 0
    assert float(with_kl) == pytest.approx(float(base) + 0.5 * float(kl), abs=1e-6)


def test_a_pass_at_k_advantage_from_verls_registry_credits_only_a_groups_unique_best():
    """`algorithm.adv_estimator=grpo_passk` (issue 35's pass@k-aware lever): a rare success is
    all of its group's advantage; a group with two equal bests trains nothing."""
    mask = torch.ones(7, 2)
    adv = compute_advantages(
        [1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.0], mask, ["a"] * 4 + ["b"] * 3, AlgorithmConfig(adv_estimator="grpo_passk")
    )
    assert adv[0, 0] > 0 and adv[1:4].abs().max() == 0  # a: 1 of 4 right -> only it
    assert adv[4:].abs().max() == 0  # b: two right -> r_max - r_second = 0
