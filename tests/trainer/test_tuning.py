"""Which weights train: LoRA adapters merged into the pushed weights exactly as peft merges
them, top-N freezing, adapter checkpoints that load back."""

import pytest
import torch

from unified.models.tiny_model import default_model_dir
from unified.trainer.tuning import (
    TuningConfig,
    adapter_tensors,
    apply_tuning,
    changing_parameters,
    hf_name,
    lora_scalings,
    merged_weights,
)


def _model():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(default_model_dir()), dtype=torch.float32)


def _randomise_lora(model, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.05)


def test_merged_weights_equal_peft_merge_and_use_hf_names():
    base_names = {n for n, _ in _model().named_parameters()}
    model = apply_tuning(_model(), TuningConfig(method="lora", lora_r=4, lora_alpha=8))
    _randomise_lora(model)
    ours = dict(merged_weights(((n, p.detach()) for n, p in model.named_parameters()), lora_scalings(model)))
    assert set(ours) == base_names  # what vLLM's load_weights expects, nothing else
    reference = model.merge_and_unload().state_dict()
    changed = 0
    for name, tensor in ours.items():
        assert torch.allclose(tensor, reference[name], atol=1e-6), name
        changed += int(not torch.equal(tensor, _model().state_dict()[name]))
    assert changed >= 4 * 7  # every adapted projection of every layer moved


def test_merging_fails_loudly_on_a_missing_factor():
    model = apply_tuning(_model(), TuningConfig(method="lora", lora_r=2))
    named = [(n, p.detach()) for n, p in model.named_parameters() if "lora_B" not in n]
    with pytest.raises(ValueError, match="without both A and B"):
        list(merged_weights(named, lora_scalings(model)))


def test_hf_name_strips_peft_wrapping():
    assert (
        hf_name("base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight") == "model.layers.0.self_attn.q_proj.weight"
    )
    assert hf_name("base_model.model.lm_head.weight") == "lm_head.weight"


def test_adapter_round_trip_through_peft_files(tmp_path):
    from unified.trainer.tuning import load_adapter, save_adapter

    cfg = TuningConfig(method="lora", lora_r=4)
    model = apply_tuning(_model(), cfg)
    _randomise_lora(model, seed=3)
    tensors = adapter_tensors((n, p.detach()) for n, p in model.named_parameters())
    save_adapter(model, tensors, tmp_path)
    again = apply_tuning(_model(), cfg, adapter_dir=tmp_path)
    for (n1, p1), (n2, p2) in zip(model.named_parameters(), again.named_parameters()):
        assert n1 == n2 and torch.equal(p1, p2), n1
    from peft import PeftModel  # the folder is a plain peft adapter, too

    loaded = dict(PeftModel.from_pretrained(_model(), str(tmp_path)).named_parameters())
    for name, tensor in tensors.items():
        key = name.replace(".lora_A.", ".lora_A.default.").replace(".lora_B.", ".lora_B.default.")
        assert torch.equal(loaded[key], tensor), name
    with pytest.raises(ValueError, match="does not match"):
        apply_tuning(_model(), TuningConfig(method="lora", lora_r=8), adapter_dir=tmp_path)


def test_top_layers_trains_only_the_last_blocks_and_the_norm():
    model = apply_tuning(_model(), TuningConfig(method="top_layers", trainable_layers=1))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("model.layers.3.", "model.norm.")) for n in trainable)
    assert any(n.startswith("model.norm.") for n in trainable)
    with pytest.raises(ValueError, match="has 4 layers"):
        apply_tuning(_model(), TuningConfig(method="top_layers", trainable_layers=9))


def test_changing_parameters_are_whole_training_blocks():
    """What a partial push carries: every tensor of a block that trains (the engine fuses
    q|k|v and gate|up, so a block goes whole), the trainable norm, nothing frozen."""
    assert changing_parameters(_model()) is None  # full: everything changes
    top = apply_tuning(_model(), TuningConfig(method="top_layers", trainable_layers=1))
    layer3 = {n for n, _ in top.named_parameters() if n.startswith("model.layers.3.")}
    assert changing_parameters(top) == layer3 | {"model.norm.weight"}
    lora = apply_tuning(_model(), TuningConfig(method="lora", lora_r=2, target_modules=("q_proj",)))
    changing = changing_parameters(lora)
    names = {n for n, _ in lora.named_parameters()}
    assert changing == {n for n in names if ".layers." in n}  # k/v ride along with q; embeddings and norm do not
    merged = {
        n for n, _ in merged_weights(((n, p.detach()) for n, p in lora.named_parameters() if n in changing), lora_scalings(lora))
    }
    assert merged == {n for n, _ in _model().named_parameters() if ".layers." in n}


def test_bad_tuning_method_is_rejected():
    with pytest.raises(ValueError, match="tuning.method"):
        TuningConfig(method="qlora")
