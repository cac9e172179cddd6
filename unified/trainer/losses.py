"""Advantages and the policy loss, from verl's `core_algos` registries (no math of our own).

- `compute_advantages`: verl's advantage estimator by name (`grpo` default, `rloo`,
  `reinforce_plus_plus`, ...), called the way `verl.trainer.ppo.ray_trainer.
  compute_advantage` calls it (that module is not importable here: it needs peft). The
  outcome reward sits on the last response token, as verl's reward managers put it.
- `ppo_loss`: the composition of verl's `workers.utils.losses.ppo_loss`: the registered
  policy loss (clipped ratio against the behaviour log-probs recorded at sampling),
  minus `entropy_coeff` x entropy, plus `kl_loss_coef` x `kl_penalty` to a frozen
  reference, each aggregated with `agg_loss`. Normalisation: `batch_num_tokens` /
  `global_batch_size` are the totals of the batch the gradient is averaged over (one
  gradient contribution; see the aggregator), so the micro-batch losses of a contribution
  sum to its mean.

All functions are pure: tensors in, tensors and floats out.
"""

from __future__ import annotations

import inspect
from typing import Sequence

import numpy as np
import torch

from verl.trainer.config import AlgoConfig
from verl.trainer.ppo import core_algos
from verl.workers.config import ActorConfig

from unified.trainer.config import AlgorithmConfig


def verl_actor_config(cfg: AlgorithmConfig) -> ActorConfig:
    """The smallest ActorConfig verl's policy-loss functions accept (they read clip ratios,
    `policy_loss.*` sub-settings and `global_batch_info`)."""
    return ActorConfig(
        strategy="fsdp2",
        rollout_n=1,
        ppo_micro_batch_size_per_gpu=1,
        use_torch_compile=False,
        clip_ratio=cfg.clip_ratio_low,
        clip_ratio_low=cfg.clip_ratio_low,
        clip_ratio_high=cfg.clip_ratio_high,
        clip_ratio_c=cfg.clip_ratio_c,
        loss_agg_mode=cfg.loss_agg_mode,
        entropy_coeff=cfg.entropy_coeff,
        use_kl_loss=cfg.use_kl_loss,
        kl_loss_coef=cfg.kl_loss_coef,
        kl_loss_type=cfg.kl_loss_type,
    )


def check_algorithm(cfg: AlgorithmConfig) -> None:
    """The names `cfg` gives verl exist (advantage estimator, policy loss, loss aggregation,
    KL type): a typo is one ValueError at start-up, not a traceback at the first update."""
    tiny = torch.zeros(1, 1)
    uses = {
        "adv_estimator": lambda: core_algos.get_adv_estimator_fn(cfg.adv_estimator),
        "policy_loss": lambda: core_algos.get_policy_loss_fn(cfg.policy_loss),
        "loss_agg_mode": lambda: core_algos.agg_loss(tiny, torch.ones(1, 1), cfg.loss_agg_mode),
        "kl_loss_type": lambda: core_algos.kl_penalty(tiny, tiny, cfg.kl_loss_type),
    }
    for key, use in uses.items():
        try:
            use()
        except (ValueError, KeyError, NotImplementedError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else "not one of verl's names"
            raise ValueError(f"algorithm.{key}={getattr(cfg, key)!r} is not known to verl ({reason})") from None


def outcome_token_rewards(rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """(B,) scalar rewards -> (B, R) with each reward on its last response token."""
    token_rewards = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = (response_mask.long().sum(-1) - 1).clamp(min=0)
    token_rewards[torch.arange(len(rewards)), last] = rewards.float()
    return token_rewards * response_mask


def compute_advantages(
    rewards: Sequence[float] | torch.Tensor,
    response_mask: torch.Tensor,
    groups: Sequence[int],
    cfg: AlgorithmConfig = AlgorithmConfig(),
) -> torch.Tensor:
    """(B, R) advantages; samples with the same `groups` entry (`Sample.group`: one per prompt) are normalised together."""
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    mask = response_mask.float()
    fn = core_algos.get_adv_estimator_fn(cfg.adv_estimator)
    kwargs = dict(
        token_level_rewards=outcome_token_rewards(rewards, mask),
        response_mask=mask,
        index=np.array(list(groups), dtype=object),
        config=AlgoConfig(adv_estimator=cfg.adv_estimator, gamma=cfg.gamma, norm_adv_by_std_in_grpo=cfg.norm_adv_by_std_in_grpo),
    )
    if "norm_adv_by_std_in_grpo" in inspect.signature(fn).parameters:
        kwargs["norm_adv_by_std_in_grpo"] = cfg.norm_adv_by_std_in_grpo
    advantages, _returns = fn(**kwargs)
    return advantages


def ppo_loss(
    log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    cfg: AlgorithmConfig,
    *,
    entropy: torch.Tensor | None = None,
    ref_log_prob: torch.Tensor | None = None,
    batch_num_tokens: int | None = None,
    global_batch_size: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss to backpropagate and its metrics. All tensors (B, R)."""
    # dp_size=1: ranks are averaged by FSDP's gradient reduction, contributions by the aggregator
    batch_info = dict(dp_size=1, batch_num_tokens=batch_num_tokens, global_batch_size=global_batch_size)
    mask = response_mask.bool()
    loss, metrics = _policy_loss(log_prob, old_log_prob, advantages, mask, cfg, batch_info)

    def aggregate(loss_mat: torch.Tensor) -> torch.Tensor:
        return core_algos.agg_loss(loss_mat=loss_mat, loss_mask=mask, loss_agg_mode=cfg.loss_agg_mode, **batch_info)

    if entropy is not None:
        ent = aggregate(entropy)
        if cfg.entropy_coeff:
            loss = loss - cfg.entropy_coeff * ent
        metrics["entropy"] = ent.item()
    if cfg.use_kl_loss:
        if ref_log_prob is None:
            raise ValueError("use_kl_loss needs ref_log_prob (log-probs of the frozen reference)")
        kl = aggregate(core_algos.kl_penalty(logprob=log_prob, ref_logprob=ref_log_prob, kl_penalty=cfg.kl_loss_type))
        loss = loss + cfg.kl_loss_coef * kl
        metrics["kl"] = kl.item()
    metrics["loss"] = loss.item()
    return loss, metrics


def _policy_loss(log_prob, old_log_prob, advantages, mask, cfg: AlgorithmConfig, batch_info: dict):
    """verl's registered policy loss (`cfg.policy_loss`) and its metrics."""
    actor = verl_actor_config(cfg)
    actor.global_batch_info.update(batch_info, loss_scale_factor=None)
    pg_loss, pg_metrics = core_algos.get_policy_loss_fn(cfg.policy_loss)(
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=mask,
        loss_agg_mode=cfg.loss_agg_mode,
        config=actor,
        rollout_is_weights=None,
    )
    metrics = {
        "pg_loss": pg_loss.item(),
        "pg_clipfrac": pg_metrics.get("actor/pg_clipfrac", 0.0),
        "pg_clipfrac_lower": pg_metrics.get("actor/pg_clipfrac_lower", 0.0),
        "ppo_kl": pg_metrics.get("actor/ppo_kl", 0.0),  # approx KL(behaviour || current)
    }
    return pg_loss, metrics
