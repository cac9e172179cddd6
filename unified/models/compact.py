"""Trained weights, small enough to commit: the bf16 bit-delta of the changed tensors over a base.

    write_compact(trained_dir, "smollm2", resolve_model_path("smollm2"), "docs/results/weights/mbpp-mix-seed0")
    resolve_model_path("docs/results/weights/mbpp-mix-seed0")   # a full HF folder, built once and cached

The engine serves bfloat16 on this project's CPUs (and GPUs), so what a run measured is the
bf16 rounding of its float32 weights. For each tensor training changed, the compact form
stores the difference of the two bf16 bit patterns (trained minus base, as integers): a
few ULPs at test-time learning rates, so it compresses to a fraction of the tensor.
`materialize` adds it back onto the base's bf16 bits and writes a bf16 model folder (base
files otherwise), which serves the same bits the run's engine served: a re-score gives the
run's greedy outcomes. The base is named (`smollm2`, a folder or a hub id) and its weight
digest is checked. Any path that `resolve_model_path` accepts can point at a compact folder.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch

from unified.errors import UserError
from unified.files import sha256

FORMAT = "unified-bf16-delta/1"
ADAPTER_FORMAT = "unified-lora-adapter/1"  # LoRA: its adapter (fp32) is smaller than any delta of the merged weights
MANIFEST, DELTAS, ADAPTER = "compact.json", "deltas.npz", "adapter"


def is_compact(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise UserError(f"{folder} holds no .safetensors weights")
    return {k: v for f in files for k, v in load_file(str(f)).items()}


def _bits(t: torch.Tensor) -> np.ndarray:
    """The bf16 bit pattern of `t` (rounded as the engine rounds: torch's to(bfloat16))."""
    return t.to(torch.bfloat16).view(torch.int16).numpy().astype(np.int32)


def weights_digest(folder: Path) -> str:
    return sha256(*sorted(Path(folder).glob("*.safetensors")))


def write_compact(trained_dir: str | Path, base: str, base_dir: str | Path, out: str | Path, **extra) -> dict:
    """Compact `trained_dir` (an HF folder or a checkpoint's `model/`) over the model `base`
    names (resolved to `base_dir`); returns the manifest (`extra`: more keys for it, e.g. the
    run's `program_max_tokens` budget)."""
    base_dir = Path(base_dir)
    trained, original = _weights(Path(trained_dir)), _weights(base_dir)
    if set(trained) != set(original):
        raise UserError(f"{trained_dir} and the base {base} hold different tensors: not a fine-tune of that base")
    deltas = {}
    for name in sorted(trained):
        diff = _bits(trained[name]) - _bits(original[name])
        if diff.any():
            deltas[name] = diff.astype(np.int16) if np.abs(diff).max() < 2**15 else diff
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / DELTAS, **{n.replace(".", "/"): d for n, d in deltas.items()})
    manifest = {
        "format": FORMAT,
        "base": base,
        "base_sha256": weights_digest(base_dir),
        "dtype": "bfloat16",
        "changed": sorted(deltas),
        "changed_parameters": int(sum(d.size for d in deltas.values())),
        **extra,
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def write_compact_adapter(adapter_dir: str | Path, base: str, base_dir: str | Path, out: str | Path, **extra) -> dict:
    """Compact a LoRA run: its adapter as saved (float32, peft's files), over the named base."""
    out = Path(out)
    (out / ADAPTER).mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(adapter_dir) / "adapter_model.safetensors", out / ADAPTER / "adapter_model.safetensors")
    config = json.loads((Path(adapter_dir) / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = base  # a name, never this machine's path
    (out / ADAPTER / "adapter_config.json").write_text(json.dumps(config, indent=1) + "\n")
    manifest = {"format": ADAPTER_FORMAT, "base": base, "base_sha256": weights_digest(Path(base_dir)), **extra}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(compact_dir: str | Path) -> dict:
    manifest = json.loads((Path(compact_dir) / MANIFEST).read_text())
    if manifest.get("format") not in (FORMAT, ADAPTER_FORMAT):
        raise UserError(
            f"{compact_dir}: unknown compact format {manifest.get('format')!r} (this version reads {FORMAT}, {ADAPTER_FORMAT})"
        )
    return manifest


def materialize(compact_dir: str | Path, base_dir: str | Path, cache: str | Path | None = None) -> str:
    """A full bf16 HF folder for a compact folder over `base_dir` (the folder its manifest's
    `base` resolves to), built once under the cache."""
    from safetensors.torch import save_file

    compact_dir, base_dir = Path(compact_dir), Path(base_dir)
    manifest = read_manifest(compact_dir)
    payload = compact_dir / (DELTAS if manifest["format"] == FORMAT else ADAPTER + "/adapter_model.safetensors")
    key = sha256(payload)[:16]
    dest = Path(cache or Path.home() / ".cache" / "unified" / "compact") / key
    if (dest / "model.safetensors").is_file():
        return str(dest)
    if weights_digest(base_dir) != manifest["base_sha256"]:
        raise UserError(f"{compact_dir} was made over other {manifest['base']} weights than {base_dir} holds")
    weights = _with_deltas(compact_dir, base_dir) if manifest["format"] == FORMAT else _merged(compact_dir, base_dir)
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(base_dir, tmp, ignore=shutil.ignore_patterns("*.safetensors", "*.safetensors.index.json", "*.bin"))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return str(dest)


def _with_deltas(compact_dir: Path, base_dir: Path) -> dict[str, torch.Tensor]:
    weights = {n: t.to(torch.bfloat16) for n, t in _weights(base_dir).items()}
    with np.load(compact_dir / DELTAS) as deltas:
        for stored in deltas.files:
            name = stored.replace("/", ".")
            bits = _bits(weights[name]) + deltas[stored].astype(np.int32)
            weights[name] = torch.from_numpy(bits.astype(np.int16)).view(torch.bfloat16)
    return weights


def _merged(compact_dir: Path, base_dir: Path) -> dict[str, torch.Tensor]:
    """The base with the adapter merged exactly as the trainer merges it for a push (float32)."""
    from transformers import AutoModelForCausalLM

    from unified.trainer.tuning import TuningConfig, apply_tuning, lora_scalings, merged_weights

    config = json.loads((compact_dir / ADAPTER / "adapter_config.json").read_text())
    tuning = TuningConfig(
        method="lora",
        lora_r=int(config["r"]),
        lora_alpha=int(config["lora_alpha"]),
        target_modules=tuple(sorted(config["target_modules"])),
    )
    model = apply_tuning(AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=torch.float32), tuning, compact_dir / ADAPTER)
    named = ((n, p.detach()) for n, p in model.named_parameters())
    return {n: t.contiguous() for n, t in merged_weights(named, lora_scalings(model))}
