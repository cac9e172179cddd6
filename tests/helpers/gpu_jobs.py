"""The jobs tests/gpu runs, each in a fresh process (gpu_common.run_job):

    python tests/helpers/gpu_jobs.py JOB OUT ARGS...      -> OUT/rank0.pt (a dict)

    engine_push DEVICE          the hf engine generates, takes a push of a perturbed policy,
                                and then serves what the policy computes
    learn DEVICE DTYPE          the learnability toy task through the hf engine
    sleep_vllm                  vLLM on CUDA: sleep / wake, and the colocated update
    fsdp STEPS DEVICE DTYPE     tests/helpers/dist_policy_step.py's steps (under torchrun)

All on the embedded tiny model. The policy runs on DEVICE (cpu: gloo; cuda: NCCL); the hf
engine takes the GPU whenever there is one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

PROMPTS = ["def add(a, b):", [{"role": "user", "content": "Write a function that reverses a list."}]]
LEARN_PROMPTS = ["def add(a, b):", "import os\n", "# Write a function", "class Stack:"]
N, MAX_TOKENS, LR, MAX_VERSIONS = 8, 12, 3e-2, 40  # as tests/e2e/test_learnability.py


def _policy(device: str, dtype: str):
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.distributed import init_distributed
    from unified.trainer.policy import build_policy

    info = init_distributed(device)
    return build_policy(str(default_model_dir()), device=info.device, dtype=dtype)


def _hf_engine(dtype: str):
    from unified.models.tiny_model import default_model_dir
    from unified.trainer.engine import build_engine

    return build_engine("hf", str(default_model_dir()), dtype=dtype, max_model_len=512, seed=0, retries=0)


def _logprob_gap(policy, completions, temperature: float = 1.0) -> float:
    """Largest |policy log-prob - engine log-prob| over the engine's own tokens."""
    from unified.trainer.batching import collate
    from unified.trainer.logprobs import token_logprobs_and_entropy
    from unified.types import Sample

    samples = [Sample(c.prompt_token_ids, c.token_ids, c.logprobs, 0.0, 0, c.version) for c in completions]
    mb = collate(samples, [torch.zeros(len(c.token_ids)) for c in completions], pad_id=0).to(policy.device)
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(
            policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, temperature, with_entropy=False
        )
    return float(((logp - mb.old_log_probs).abs() * mb.response_mask).max())


def _greedy_is_policy_argmax(policy, completion) -> bool:
    """The engine's greedy tokens are the policy's argmax at every step."""
    ids = torch.tensor([list(completion.prompt_token_ids) + list(completion.token_ids)], device=policy.device)
    with torch.no_grad():
        logits = policy.module(input_ids=ids, use_cache=False).logits[0].float()
    p = len(completion.prompt_token_ids)
    return logits[p - 1 : -1].argmax(-1).tolist() == list(completion.token_ids)


def engine_push(device: str) -> dict:
    from unified.trainer.engine import SamplingConfig

    policy, engine = _policy(device, "float32"), _hf_engine("float32")
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():  # every weight moves (the embedding is the tied LM head)
        for p in policy.parameters():
            p.add_((torch.randn(p.shape, generator=gen) * 0.05).to(p.device))
    sampling = SamplingConfig(n=4, temperature=1.0, max_tokens=16, seed=3)
    stale = [c for g in engine.generate(PROMPTS, sampling) for c in g]
    push = engine.push(policy.named_full_weights(), 1)
    fresh = [c for g in engine.generate(PROMPTS, sampling) for c in g]
    greedy = engine.generate(PROMPTS[:1], SamplingConfig(n=1, temperature=0.0, max_tokens=16))[0][0]
    return {
        "engine_device": str(engine.device),
        "policy_device": str(policy.device),
        "push_ok": push.ok,
        "push_error": push.error,
        "gap_before": _logprob_gap(policy, stale),
        "gap_after": _logprob_gap(policy, fresh),
        "versions": sorted({c.version for c in fresh}),
        "greedy_is_argmax": _greedy_is_policy_argmax(policy, greedy),
        "greedy_tokens": len(greedy.token_ids),
    }


def _toy_reward(vocab_size: int):
    chosen = torch.zeros(vocab_size, dtype=torch.bool)
    chosen[torch.randperm(vocab_size, generator=torch.Generator().manual_seed(2024))[: vocab_size // 10]] = True
    return lambda token_ids: float(chosen[list(token_ids)].float().mean()) if token_ids else 0.0


def _sample(engine, reward, seed: int):
    from unified.trainer.engine import SamplingConfig
    from unified.types import Sample

    groups = engine.generate(LEARN_PROMPTS, SamplingConfig(n=N, temperature=1.0, max_tokens=MAX_TOKENS, seed=seed))
    samples = [
        Sample(c.prompt_token_ids, c.token_ids, c.logprobs, reward(c.token_ids), i, c.version)
        for i, group in enumerate(groups)
        for c in group
    ]
    return samples, sum(s.reward for s in samples) / len(samples)


def learn(device: str, dtype: str) -> dict:
    """tests/e2e/test_learnability.py with the hf engine: reward = the share of tokens in a fixed
    10% of the vocabulary; GRPO through the aggregator, a push after every step."""
    from unified.trainer.config import AlgorithmConfig
    from unified.trainer.aggregator import Aggregator
    from unified.trainer.update import push_weights, train_on_samples

    policy, engine = _policy(device, dtype), _hf_engine(dtype)
    reward = _toy_reward(policy.config.vocab_size)
    cfg = AlgorithmConfig(
        micro_batch_size=N * len(LEARN_PROMPTS) // 2,
        accum_steps=2,
        update_steps=1,
        grad_clip=1.0,
        max_staleness=1,
        adv_estimator="grpo",
    )
    aggregator = Aggregator(policy, torch.optim.AdamW(policy.parameters(), lr=LR, weight_decay=0.0), cfg)
    assert push_weights(engine, policy, 0).ok
    samples, mean = _sample(engine, reward, seed=0)
    history, losses = [mean], []
    while mean <= 0.9 and aggregator.version < MAX_VERSIONS:
        stats = train_on_samples(samples, aggregator, cfg, engine=engine, pad_token_id=0)
        losses.append(stats.losses.get("loss", float("nan")))
        samples, mean = _sample(engine, reward, seed=1000 * aggregator.version)
        history.append(mean)
    end = [_sample(engine, reward, seed=10**6 + s)[1] for s in (7, 8)]
    return {
        "history": history,
        "losses": losses,
        "versions": aggregator.version,
        "end": sum(end) / 2,
        "sharded": policy.sharded,
        "skipped": aggregator.stats()["skipped_nonfinite"],
        "engine_version": engine.version,
    }


def sleep_vllm() -> dict:
    """vLLM on CUDA with sleep mode: memory freed asleep, the same answers after waking, and
    the colocated update (sleep -> update -> wake -> push) on a real engine."""
    from unified.models.tiny_model import default_model_dir
    from unified.run.colocate import Colocation
    from unified.trainer.engine import SamplingConfig, build_engine

    policy = _policy("cuda", "float32")
    engine = build_engine(
        "vllm", str(default_model_dir()), dtype="bfloat16", max_model_len=1024, gpu_memory_utilization=0.3, retries=0
    )
    greedy = SamplingConfig(n=1, temperature=0.0, max_tokens=16)
    before = engine.generate(PROMPTS, greedy)
    awake_used = _device_used()
    engine.sleep()
    asleep_used = _device_used()
    try:
        engine.generate(PROMPTS, greedy)
        refused = False
    except RuntimeError:
        refused = True
    engine.wake_up()
    after = engine.generate(PROMPTS, greedy)
    colocation = Colocation(engine, enabled=True)
    update = _colocated_update(policy, engine, colocation)
    return {
        "frees_memory": engine.frees_memory_asleep,
        "awake_gib": awake_used,
        "asleep_gib": asleep_used,
        "refused_asleep": refused,
        "same_after_wake": [c[0].token_ids for c in before] == [c[0].token_ids for c in after],
        **update,
        "metrics": colocation.round_metrics(),
        "asleep_at_end": engine.asleep,
    }


def _colocated_update(policy, engine, colocation) -> dict:
    from unified.trainer.config import AlgorithmConfig
    from unified.trainer.aggregator import Aggregator
    from unified.trainer.update import push_weights, train_on_samples

    assert push_weights(engine, policy, 0).ok
    samples, _ = _sample(engine, _toy_reward(policy.config.vocab_size), seed=0)
    cfg = AlgorithmConfig(micro_batch_size=len(samples) // 2, accum_steps=1, update_steps=1)
    aggregator = Aggregator(policy, torch.optim.AdamW(policy.parameters(), lr=LR), cfg)
    with colocation.session():
        stats = train_on_samples(samples, aggregator, cfg, engine=engine, pad_token_id=0, turns=colocation)
    fresh, _ = _sample(engine, _toy_reward(policy.config.vocab_size), seed=1)
    return {
        "steps": stats.steps,
        "engine_version": engine.version,
        "sleeps": colocation.sleeps,
        "versions_sampled": sorted({s.version for s in fresh}),
    }


def _device_used() -> float:
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return (total - free) / 2**30


def fsdp(steps: str, device: str, dtype: str) -> dict:
    """tests/helpers/dist_policy_step.py's steps on DEVICE in DTYPE, at the launcher's world size."""
    import dist_policy_step  # its neighbour in tests/helpers: this file runs as a script (sys.path[0])

    return dist_policy_step.train(int(steps), device, dtype)


JOBS = {"engine_push": engine_push, "learn": learn, "sleep_vllm": sleep_vllm, "fsdp": fsdp}


def main() -> None:
    import torch.distributed as dist

    job, out, args = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    result = JOBS[job](*args)
    if not dist.is_initialized() or dist.get_rank() == 0:
        torch.save(result, out / "rank0.pt")
    if dist.is_initialized() and dist.get_world_size() > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
