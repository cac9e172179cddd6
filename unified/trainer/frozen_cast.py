"""Frozen linear weights cast to the compute dtype once, not in every forward.

Under `torch.autocast(bfloat16)` (the unsharded CPU bf16 policy, `Policy.compute()`) every
`linear` casts its float32 weight to bf16 again, and autocast keeps that cast only for
weights that require a gradient. With the default tuning (the top 4 of SmolLM2's 30 blocks
train) the other 26 blocks and the tied output projection are re-cast in every forward:
`aten::copy_` was 24 % of a profiled update step, twice per micro-batch with shared prompts.

`hold_frozen_weights(model, dtype)` gives each frozen `nn.Linear` (every parameter without
a gradient: the frozen blocks, LoRA's base layers, all of a KL reference) a copy of its
weight and bias in `dtype`, made on first use and remade when the float32 tensor changes
(in place, e.g. a checkpoint load, or replaced). The forward uses the copy only while
autocast to that same dtype is on, where autocast would have made exactly that copy
(round to nearest), so the outputs and gradients are bitwise the same; elsewhere it is the
module's own forward. The float32 parameters stay as they are: checkpoints, pushes to the
engine and the compact weights read them, never the copy, which lives outside the
state dict. Memory: 2 bytes per frozen linear weight (SmolLM2, top 4 layers: ~240 MB).
"""

from __future__ import annotations

import types

import torch
import torch.nn.functional as F


def hold_frozen_weights(model: torch.nn.Module, dtype: torch.dtype) -> int:
    """Make every frozen `nn.Linear` of `model` keep a `dtype` copy of its weights for
    autocast forwards; returns how many modules hold one."""
    held = 0
    for module in model.modules():
        if isinstance(module, torch.nn.Linear) and not any(p.requires_grad for p in module.parameters()):
            module._held_dtype = dtype
            module._held = None
            module.forward = types.MethodType(_held_forward, module)
            held += 1
    return held


def release_frozen_weights(model: torch.nn.Module) -> None:
    """Undo `hold_frozen_weights`: the modules' own forward again, the copies dropped."""
    for module in model.modules():
        if "_held_dtype" in module.__dict__:
            del module.forward, module._held, module._held_dtype


def _stamp(t: torch.Tensor | None) -> tuple:
    return (None, 0) if t is None else (t, t._version)


def _same(a: tuple, b: tuple) -> bool:
    return a[0] is b[0] and a[1] == b[1]


def held_weights(module: torch.nn.Module, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The module's (weight, bias) copy in `dtype`, remade if the float32 tensors changed;
    None when the module holds none in that dtype."""
    if module.__dict__.get("_held_dtype") != dtype:
        return None
    stamps = (_stamp(module.weight), _stamp(module.bias))
    if module._held is None or not all(map(_same, module._held[0], stamps)):
        with torch.no_grad():
            bias = None if module.bias is None else module.bias.to(dtype)
            module._held = (stamps, module.weight.to(dtype), bias)
    return module._held[1], module._held[2]


def _held_forward(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    device = x.device.type
    if not (torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == self._held_dtype):
        return torch.nn.Linear.forward(self, x)
    return F.linear(x, *held_weights(self, self._held_dtype))
