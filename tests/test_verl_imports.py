"""verl is installed --no-deps next to vLLM: the modules we use import and compute."""

import torch


def test_verl_core_algos_registries():
    from verl import DataProto  # noqa: F401
    from verl.trainer.ppo import core_algos

    for name in ("grpo", "reinforce_plus_plus", "rloo"):
        assert callable(core_algos.get_adv_estimator_fn(name))
    assert callable(core_algos.get_policy_loss_fn("vanilla"))
    rewards = torch.tensor([[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    mask = torch.ones_like(rewards)
    adv, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index=["a", "a", "b", "b"])
    assert adv[0, 0] > 0 > adv[1, 0]  # the better sample of a group gets the positive advantage
    assert torch.allclose(adv[2], torch.zeros(2))  # no signal in a tied group


def test_vllm_and_transformers_import_together():
    import transformers
    import vllm

    assert vllm.__version__ and transformers.__version__
