"""Compact committed weights: the bf16 bit-delta of the changed tensors over a named base
comes back as exactly the bf16 weights the engine served, and any model path accepts it."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from unified.errors import UserError
from unified.models import compact
from unified.models.resolve import resolve_model_path
from unified.models.tiny_model import default_model_dir


@pytest.fixture
def trained(tmp_path):
    """The tiny model with one block nudged as a few optimizer steps would."""
    folder = tmp_path / "trained"
    shutil.copytree(default_model_dir(), folder)
    weights = load_file(str(folder / "model.safetensors"))
    name = next(n for n in weights if "layers.0." in n and n.endswith("proj.weight"))
    gen = torch.Generator().manual_seed(0)
    weights[name] = weights[name] + 1e-3 * torch.randn(weights[name].shape, generator=gen)
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder, name, weights


def test_round_trip_gives_the_engines_bf16_weights_bit_for_bit(trained, tmp_path):
    folder, name, weights = trained
    manifest = compact.write_compact(folder, "tiny", default_model_dir(), tmp_path / "compact")
    assert manifest["changed"] == [name] and manifest["base"] == "tiny"
    model_dir = compact.materialize(tmp_path / "compact", default_model_dir(), cache=tmp_path / "cache")
    back = load_file(f"{model_dir}/model.safetensors")
    assert set(back) == set(weights)
    for n, t in weights.items():
        assert back[n].dtype == torch.bfloat16 and torch.equal(back[n], t.to(torch.bfloat16)), n
    assert (tmp_path / "compact" / "deltas.npz").stat().st_size < weights[name].numel() * 2  # smaller than the bf16 tensor


def test_model_paths_accept_a_compact_folder_and_a_wrong_base_is_one_line(trained, tmp_path):
    folder, name, weights = trained
    compact.write_compact(folder, "tiny", default_model_dir(), tmp_path / "compact")
    model_dir = resolve_model_path(str(tmp_path / "compact"))  # built once under ~/.cache/unified/compact
    assert torch.equal(load_file(f"{model_dir}/model.safetensors")[name], weights[name].to(torch.bfloat16))
    manifest = json.loads((tmp_path / "compact" / "compact.json").read_text())
    (tmp_path / "compact" / "compact.json").write_text(json.dumps({**manifest, "base_sha256": "0" * 64}))
    with pytest.raises(UserError, match="other tiny weights"):
        compact.materialize(tmp_path / "compact", default_model_dir(), cache=tmp_path / "other-cache")


def test_a_lora_adapter_merges_back_exactly_as_the_trainer_merged_it(tmp_path):
    from unified.trainer.distributed import init_distributed
    from unified.trainer.policy import build_policy
    from unified.trainer.tuning import TuningConfig

    policy = build_policy(
        str(default_model_dir()),
        device=init_distributed("cpu").device,
        dtype="float32",
        tuning=TuningConfig(method="lora", lora_r=4),
    )
    with torch.no_grad():  # a trained adapter: B is no longer zero
        for n, p in policy.module.named_parameters():
            if "lora_B" in n:
                p.copy_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(0)))
    policy.write_adapter(tmp_path / "adapter", policy.adapter_state())
    served = dict(policy.named_full_weights())  # what a push sends the engine
    manifest = compact.write_compact_adapter(tmp_path / "adapter", "tiny", default_model_dir(), tmp_path / "compact")
    assert manifest["base"] == "tiny"
    config = json.loads((tmp_path / "compact" / "adapter" / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "tiny"  # no path of this machine in a committed file
    back = load_file(
        f"{compact.materialize(tmp_path / 'compact', default_model_dir(), cache=tmp_path / 'cache')}/model.safetensors"
    )
    assert set(back) == set(served) and all(torch.equal(back[n], served[n]) for n in served)
