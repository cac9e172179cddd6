"""What runs inside vLLM's worker during a push (`LLM.collective_rpc(fn)`): the direct
load on CPU, the tied-head refresh after vLLM's own reload, and undoing a failed reload.

`direct_load` is the CPU push without vLLM's generic layerwise reload (which re-creates
every layer: ~2x the work). It does the one step that cannot be skipped on CPU, re-packing
each linear weight into its oneDNN kernel: HF names are mapped with the model's own
`hf_to_vllm_mapper` (q/k/v -> qkv_proj, gate/up -> gate_up_proj), a packed linear gets its
new weight (fused ones assembled in one reused buffer) and is re-processed by its own
`quant_method`, every other tensor is copied in place by its own `weight_loader`. It plans
every tensor before it changes anything, and returns None when something has no direct
path (the engine then uses vLLM's reload).
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass, field

import torch

# One reusable buffer per model for assembling fused linear weights (q|k|v, gate|up):
# re-packing copies out of it at once, so one buffer serves every layer in turn.
_STAGING: "weakref.WeakKeyDictionary[torch.nn.Module, torch.Tensor]" = weakref.WeakKeyDictionary()


class KernelKeptWeight(RuntimeError):
    """A re-processed CPU kernel kept our tensor instead of packing a copy: this backend's
    kernels alias their weight, so the direct load cannot reuse the staging buffer."""


@dataclass
class _Packed:
    """A linear layer whose CPU kernel holds the only copy of its weight (vLLM's
    `dispatch_cpu_unquantized_gemm` packs it for oneDNN and leaves an empty parameter)."""

    module: torch.nn.Module
    parts: dict[int, torch.Tensor] = field(default_factory=dict)  # row offset -> rows


@dataclass
class _Plan:
    packed: dict[str, _Packed] = field(default_factory=dict)  # module name -> its new weight's parts
    in_place: list[tuple[torch.Tensor, torch.Tensor, object]] = field(default_factory=list)  # (param, tensor, shard)


def direct_load(worker, weights: list[tuple[str, torch.Tensor]]) -> dict[str, float] | None:
    """Load `weights` (HF names) in place; None, with nothing changed, when some weight has
    no direct path. -> {"tied_heads": seconds}"""
    from vllm.model_executor.model_loader.weight_utils import default_weight_loader

    model = worker.get_model()
    plan = _plan(model, weights)
    if plan is None:
        return None
    with torch.no_grad():
        for param, tensor, shard in plan.in_place:
            loader = getattr(param, "weight_loader", default_weight_loader)
            loader(param, tensor) if shard is None else loader(param, tensor, shard)
        _load_packed(model, plan.packed)
    t0 = time.perf_counter()
    _repack_kept_weights(model, {id(param) for param, _, _ in plan.in_place})
    return {"tied_heads": time.perf_counter() - t0}


def _plan(model: torch.nn.Module, weights: list[tuple[str, torch.Tensor]]) -> _Plan | None:
    """Where every tensor goes, or None when one has no direct path."""
    mapper = getattr(model, "hf_to_vllm_mapper", None)
    if mapper is not None and not hasattr(mapper, "_map_name_with_shard"):
        return None  # another vLLM version: its reload knows the mapping
    plan = _Plan()
    for name, tensor in weights:
        mapped = mapper._map_name_with_shard(name) if mapper is not None else (name, None)
        if mapped is None:  # vLLM ignores this checkpoint tensor (e.g. rotary inv_freq)
            continue
        vname, shard = mapped
        module_name, _, pname = vname.rpartition(".")
        try:
            module = model.get_submodule(module_name)
        except AttributeError:
            return None
        param = module._parameters.get(pname)
        if param is None or isinstance(shard, list):
            return None
        if pname == "weight" and hasattr(module, "cpu_linear") and param.numel() == 0:
            offset = _packed_offset(module, shard, name, tensor)
            if offset is None:
                return None
            plan.packed.setdefault(module_name, _Packed(module)).parts[offset] = tensor
        else:
            plan.in_place.append((param, tensor, shard))
    complete = all(sum(t.shape[0] for t in p.parts.values()) == p.module.output_size_per_partition for p in plan.packed.values())
    return plan if complete else None  # a packed kernel is rebuilt whole: all its parts must come


def _packed_offset(module: torch.nn.Module, shard, name: str, tensor: torch.Tensor) -> int | None:
    """The first row of `shard` (q/k/v or an index) in a packed linear's fused weight."""
    if getattr(module, "tp_size", 1) != 1 or not hasattr(module, "input_size_per_partition"):
        return None
    rows, cols = module.output_size_per_partition, module.input_size_per_partition
    sizes = list(getattr(module, "output_sizes", None) or [rows]) if shard is not None else [rows]
    index = {"q": 0, "k": 1, "v": 2}.get(shard, shard) if shard is not None else 0
    if not isinstance(index, int) or not 0 <= index < len(sizes) or sum(sizes) != rows:
        return None
    if tuple(tensor.shape) != (sizes[index], cols):
        raise ValueError(f"{name}: shape {tuple(tensor.shape)} != {(sizes[index], cols)}")
    return sum(sizes[:index])


def _load_packed(model: torch.nn.Module, packed: dict[str, _Packed]) -> None:
    """Give each packed linear its new weight and let its own `quant_method` re-pack it."""
    if not packed:
        return
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
            raise KernelKeptWeight(f"{type(m).__name__} kept its weight tensor after re-processing")


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


def refresh_tied_heads(worker) -> int:
    """Re-process every LM head whose weight is an embedding's
    weight: the reload updated the shared tensor but not the head's prepacked CPU copy."""
    from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

    model = worker.get_model()
    embeddings = {
        id(m.weight)
        for m in model.modules()
        if isinstance(m, VocabParallelEmbedding) and not isinstance(m, ParallelLMHead) and hasattr(m, "weight")
    }
    refreshed = 0
    for m in model.modules():
        weight = getattr(m, "weight", None)
        if isinstance(m, ParallelLMHead) and weight is not None and id(weight) in embeddings:
            m.quant_method.process_weights_after_loading(m)
            refreshed += 1
    return refreshed


def abort_reload(worker) -> None:
    """Undo a reload that raised half-way: layers still waiting
    for weights drop what they buffered and get their previous tensors back."""
    from vllm.model_executor.model_loader.reload import layerwise

    model = worker.get_model()
    for layer in model.modules():
        info = layerwise.LAYERWISE_INFO.get(layer)
        if info is not None and info.can_load():
            info.loaded_weights = []
            info.load_numel = 0
    layerwise.finalize_layerwise_reload(model, worker.vllm_config.model_config)
