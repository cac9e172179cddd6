"""Which weights train: all of them, LoRA adapters (peft), or only the top N blocks.

    tuning = TuningConfig(method="lora", lora_r=16, lora_alpha=32)
    model = apply_tuning(hf_model, tuning, adapter_dir=None)   # before FSDP2 sharding
    for name, tensor in merged_weights(named_full, scalings):   # what the engine gets

- `full`: every parameter trains (the default for the tiny model).
- `lora`: `peft.get_peft_model` wraps the target linear layers; only `lora_A`/`lora_B`
  train (and the optimizer holds state for them alone). The engine always receives FULL
  weights with the adapters merged (W + scaling * B @ A, computed in float32 from the
  gathered tensors), under the base model's Hugging Face names, so vLLM needs no LoRA
  support and checkpoints' `model/` folders load anywhere. `adapter/` next to it holds
  the adapter in peft's format (`PeftModel.from_pretrained(base, ckpt/adapter)`).
- `top_layers`: only the last `trainable_layers` decoder blocks and the final norm train;
  the backward pass stops there.

`changing_parameters` names what training can change (None for `full`), so a push can
carry just that (`Policy.named_full_weights(changing_only=True)`): for SmolLM2 with 4 top
layers, 14 M of 135 M parameters.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Iterator

import torch

from unified.trainer.config import TuningConfig  # the tuning group's schema

_PEFT_PREFIX = "base_model.model."


def apply_tuning(model: torch.nn.Module, cfg: TuningConfig, adapter_dir: str | Path | None = None) -> torch.nn.Module:
    """Wrap or freeze `model` (an unsharded HF model) as `cfg` says; load a saved adapter."""
    if cfg.method == "lora":
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=cfg.lora_r,
            lora_alpha=cfg.lora_alpha,
            lora_dropout=cfg.lora_dropout,
            target_modules=list(cfg.target_modules),
            bias="none",
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
        if adapter_dir is not None:
            load_adapter(model, adapter_dir)
    elif cfg.method == "top_layers":
        layers = decoder_layers(model)
        if cfg.trainable_layers > len(layers):
            raise ValueError(f"tuning.trainable_layers={cfg.trainable_layers} but the model has {len(layers)} layers")
        model.requires_grad_(False)
        for layer in layers[-cfg.trainable_layers :]:
            layer.requires_grad_(True)
        norm = getattr(getattr(model, "model", model), "norm", None)
        if norm is not None:
            norm.requires_grad_(True)
    return model


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    blocks = set(getattr(model, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in blocks]


def changing_parameters(model: torch.nn.Module) -> frozenset[str] | None:
    """Names of the parameters training can change: the trainable ones and everything else
    in a decoder block that has one (LoRA: the block's base weights, merged into; fused
    engine kernels need whole blocks). None when every parameter trains."""
    params = dict(model.named_parameters())
    if all(p.requires_grad for p in params.values()):
        return None
    changing = {n for n, p in params.items() if p.requires_grad}
    blocks = set(getattr(model, "_no_split_modules", None) or [])  # peft forwards it to the base model
    for prefix, module in model.named_modules():
        if type(module).__name__ in blocks and any(p.requires_grad for p in module.parameters()):
            changing |= {f"{prefix}.{n}" for n, _ in module.named_parameters()}
    return frozenset(changing)


def lora_scalings(model: torch.nn.Module) -> dict[str, float]:
    """peft module name (as in named_parameters, without the trailing parameter) -> scaling."""
    from peft.tuners.lora import LoraLayer

    return {name: float(m.scaling["default"]) for name, m in model.named_modules() if isinstance(m, LoraLayer)}


def hf_name(peft_name: str) -> str:
    """`base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight` -> the HF name."""
    name = peft_name[len(_PEFT_PREFIX) :] if peft_name.startswith(_PEFT_PREFIX) else peft_name
    return name.replace(".base_layer.", ".")


def merged_weights(named: Iterable[tuple[str, torch.Tensor]], scalings: dict[str, float]) -> Iterator[tuple[str, torch.Tensor]]:
    """Full (name, tensor) pairs of a LoRA model -> the base model's HF weights with the
    adapters merged. Streams: a base weight waits only until its own A and B arrive
    (peft registers them right after it), so at most one layer is held."""
    pending: dict[str, dict[str, torch.Tensor]] = {}
    for name, tensor in named:
        if ".lora_A." in name or ".lora_B." in name or ".base_layer.weight" in name:
            module = name.split(".lora_")[0] if ".lora_" in name else name[: -len(".base_layer.weight")]
            part = "A" if ".lora_A." in name else "B" if ".lora_B." in name else "W"
            parts = pending.setdefault(module, {})
            parts[part] = tensor
            if len(parts) == 3:
                del pending[module]
                delta = (parts["B"].float() @ parts["A"].float()) * scalings[module]
                yield hf_name(f"{module}.weight"), (parts["W"].float() + delta).to(parts["W"].dtype)
            continue
        if ".lora_" in name:  # other adapter tensors (e.g. embedding LoRA) are not supported
            raise ValueError(f"cannot merge adapter tensor {name}")
        yield hf_name(name), tensor
    if pending:
        raise ValueError(f"LoRA layers without both A and B: {sorted(pending)[:3]}")


def adapter_tensors(named: Iterable[tuple[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The adapter's tensors under peft's on-disk names (no adapter name, `base_model.model.` kept)."""
    return {n.replace(".default.", "."): t.clone() for n, t in named if ".lora_" in n}


def save_adapter(model: torch.nn.Module, tensors: dict[str, torch.Tensor], folder: str | Path) -> None:
    """`adapter_config.json` + `adapter_model.safetensors`, as `PeftModel.save_pretrained` writes them."""
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.peft_config["default"].save_pretrained(str(folder))
    save_file({k: v.contiguous() for k, v in tensors.items()}, folder / "adapter_model.safetensors", metadata={"format": "pt"})


def load_adapter(model: torch.nn.Module, folder: str | Path) -> None:
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    folder = Path(folder)
    saved = json.loads((folder / "adapter_config.json").read_text())
    mine = model.peft_config["default"]
    if int(saved.get("r", -1)) != mine.r or sorted(saved.get("target_modules") or []) != sorted(mine.target_modules):
        raise ValueError(
            f"the checkpoint's adapter (r={saved.get('r')}, {saved.get('target_modules')}) does not match tuning (r={mine.r}, {sorted(mine.target_modules)})"
        )
    result = set_peft_model_state_dict(model, load_file(folder / "adapter_model.safetensors"))
    if getattr(result, "unexpected_keys", None):
        raise ValueError(f"unexpected adapter tensors: {result.unexpected_keys[:3]}")
