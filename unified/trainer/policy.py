"""The policy: a Hugging Face causal LM sharded with FSDP2, the same code at any world size.

`fully_shard` is applied to every block the model marks as not splittable
(`_no_split_modules`, e.g. `Qwen2DecoderLayer`) and then to the root, on a 1-D device mesh
(gloo on CPU, NCCL on GPU; `init_distributed` must have run). Parameters stay float32
(the optimizer's master copy); on GPU the forward runs in bfloat16 through FSDP2's
mixed-precision policy; on a CPU with bf16 units (`resolve_dtype`) at world size 1 it runs
under `torch.autocast(bfloat16)` (`Policy.compute()`), elsewhere in float32. There, frozen
linear weights keep a bf16 copy made once (`frozen_cast.py`) instead of autocast's cast in
every forward; the values are the same.

At world size 1 with float32 compute there is nothing to shard and no precision to cast:
FSDP2 would only copy every block's parameters into its all-gather buffer and out again
in each forward and backward (and gradients through its reduce-scatter buffers), ~5% of
a SmolLM2 update step. The model then runs unwrapped (`sharded=False`); everything here
and in the aggregator takes plain tensors and DTensors alike, and checkpoints hold full
tensors under the same names either way, so they move between world sizes as before.

Gathering full weights is a collective: `named_full_weights()` yields
`(name, p.full_tensor())` in `named_parameters()` order, the same on every rank, so every
rank must consume it to the end (the engine's push does). Names are the HF names, which
vLLM's `load_weights` expects. `get_model_state_dict(cpu_offload=True)` is not used: it
returns an empty dict on ranks > 0, and each rank feeds its own engine.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor

from unified.trainer.distributed import resolve_dtype, world_size
from unified.trainer.frozen_cast import hold_frozen_weights
from unified.trainer.tuning import (
    TuningConfig,
    adapter_tensors,
    apply_tuning,
    changing_parameters,
    lora_scalings,
    merged_weights,
    save_adapter,
)


class Policy:
    """An FSDP2-sharded HF causal LM. `module` is the sharded model (call it like the HF one);
    with LoRA it is the peft model, and `lora_scalings` says how to merge its adapters.
    `sharded=False`: the plain model (world size 1, float32; see the module doc)."""

    def __init__(
        self,
        module: torch.nn.Module,
        device: torch.device,
        trainable: bool,
        lora_scalings: dict | None = None,
        sharded: bool = True,
        changing: frozenset[str] | None = None,
        autocast: torch.dtype | None = None,
    ):
        self.module = module
        # unsharded lower-precision compute (CPU bf16): float32 master weights and optimizer
        # state, the forward and backward under torch.autocast (sharded models: FSDP2's policy)
        self.autocast = autocast
        self.device = device
        self.trainable = trainable
        self.lora_scalings = lora_scalings
        self.sharded = sharded
        # names (as in module.named_parameters) of the tensors training can change; None: all
        self.changing = changing

    @property
    def config(self):
        return self.module.config

    def compute(self):
        """The context every forward/backward of this policy runs in (autocast or nothing)."""
        if self.autocast is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast)

    def parameters(self):
        return self.module.parameters()

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.module.parameters() if p.requires_grad]

    def _named_full_parameters(self, only: frozenset[str] | None = None) -> Iterator[tuple[str, torch.Tensor]]:
        for name, param in self.module.named_parameters():
            if only is not None and name not in only:
                continue
            with torch.no_grad():
                full = param.full_tensor() if isinstance(param, DTensor) else param
            yield name, full.detach()

    def named_full_weights(self, changing_only: bool = False) -> Iterator[tuple[str, torch.Tensor]]:
        """(HF name, full tensor) of the model the engine serves, LoRA adapters merged;
        collective, same order on all ranks. `changing_only`: just the tensors training
        can change (every tensor of a block that trains, so fused engine kernels such as
        q|k|v get all their parts), for `engine.push(..., partial=True)`."""
        named = self._named_full_parameters(self.changing if changing_only else None)
        if self.lora_scalings is None:
            return named
        return merged_weights(named, self.lora_scalings)  # detached inputs: no graph

    def adapter_state(self) -> dict[str, torch.Tensor] | None:
        """The LoRA adapter's full tensors (peft's names), None without LoRA; collective."""
        if self.lora_scalings is None:
            return None
        return adapter_tensors(self._named_full_parameters())

    def write_adapter(self, directory: str | Path, tensors: dict[str, torch.Tensor]) -> None:
        save_adapter(self.module, tensors, directory)

    def full_state_dict(self, device: str = "cpu") -> dict[str, torch.Tensor]:
        return {n: t.to(device, copy=True) for n, t in self.named_full_weights()}

    def write_pretrained(self, directory: str | Path, state: dict[str, torch.Tensor], tokenizer=None) -> None:
        """Write an already gathered `full_state_dict()` in Hugging Face format (one rank)."""
        from huggingface_hub import save_torch_state_dict

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.module.config.save_pretrained(directory)
        if getattr(self.module, "generation_config", None) is not None:
            self.module.generation_config.save_pretrained(directory)
        save_torch_state_dict(state, directory, metadata={"format": "pt"})
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)

    # Optimizer state: full (unsharded) on rank 0, so checkpoints do not depend on world size.
    def optimizer_state(self, optimizer: torch.optim.Optimizer) -> dict:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        return get_optimizer_state_dict(self.module, optimizer, options=opts)

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict) -> None:
        """`state` as `optimizer_state` returned it; needed on rank 0 only (it is broadcast)."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        opts = StateDictOptions(full_state_dict=True, broadcast_from_rank0=world_size() > 1)
        # torch builds a fresh optimizer's state with a zero-lr step, but skips that when any
        # parameter holds a gradient and then fails ("Expected device to be set"): hide them
        stashed = {}
        if not optimizer.state:
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        stashed[p], p.grad = p.grad, None
        try:
            set_optimizer_state_dict(self.module, optimizer, optim_state_dict=state, options=opts)
        finally:
            for p, grad in stashed.items():
                p.grad = grad


def compute_dtype(dtype: str, device: torch.device) -> torch.dtype:
    return getattr(torch, resolve_dtype(dtype, device.type))


def build_policy(
    model_path: str | Path,
    *,
    device: torch.device,
    dtype: str = "auto",
    gradient_checkpointing: bool = False,
    trust_remote_code: bool = False,
    trainable: bool = True,
    tuning: TuningConfig | None = None,
    adapter_dir: str | Path | None = None,
) -> Policy:
    """Load an HF model (a hub id or an HF-format dir), apply `tuning` (LoRA, top layers;
    `adapter_dir`: a saved adapter to continue from) and shard it. `trainable=False` gives
    a frozen copy (the KL reference)."""
    from transformers import AutoModelForCausalLM

    if not dist.is_initialized():
        raise RuntimeError("call unified.trainer.distributed.init_distributed() before build_policy()")
    model = AutoModelForCausalLM.from_pretrained(str(model_path), dtype=torch.float32, trust_remote_code=trust_remote_code)
    if gradient_checkpointing and trainable:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    scalings = None
    if trainable and tuning is not None:
        model = apply_tuning(model, tuning, adapter_dir)
        scalings = lora_scalings(model) if tuning.method == "lora" else None
    model.to(device)
    run_dtype = compute_dtype(dtype, device)
    # CPU bf16 at world size 1: autocast (measured faster than FSDP2's mixed precision there)
    sharded = world_size() > 1 or (run_dtype != torch.float32 and device.type == "cuda")
    autocast = run_dtype if run_dtype != torch.float32 and not sharded else None
    changing = changing_parameters(model)
    if sharded:
        _fully_shard(model, device, run_dtype)
    if trainable:
        model.train()
    else:
        model.eval().requires_grad_(False)
    if autocast is not None:  # frozen weights cast once, not in every forward (frozen_cast.py)
        hold_frozen_weights(model, autocast)
    return Policy(model, device, trainable, scalings, sharded, changing, autocast)


def _fully_shard(model: torch.nn.Module, device: torch.device, run_dtype: torch.dtype) -> None:
    """FSDP2 over all ranks: each decoder block its own unit, then the root; parameters in
    `run_dtype` for compute, gradients reduced in float32."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (world_size(),))
    mp = MixedPrecisionPolicy()
    if run_dtype != torch.float32:
        mp = MixedPrecisionPolicy(param_dtype=run_dtype, reduce_dtype=torch.float32)
    blocks = set(getattr(model, "_no_split_modules", None) or [])
    for module in model.modules():
        if type(module).__name__ in blocks:
            fully_shard(module, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)


def build_policy_from_config(
    model_cfg,
    model_path: str | Path,
    device: torch.device,
    trainable: bool = True,
    tuning: TuningConfig | None = None,
    adapter_dir: str | Path | None = None,
    dtype: str | None = None,
) -> Policy:
    """`dtype`: the already resolved compute dtype (default: the config's, resolved here)."""
    return build_policy(
        model_path,
        device=device,
        dtype=dtype or model_cfg.dtype,
        gradient_checkpointing=model_cfg.gradient_checkpointing,
        trust_remote_code=model_cfg.trust_remote_code,
        trainable=trainable,
        tuning=tuning,
        adapter_dir=adapter_dir,
    )
