"""The benches' yardsticks: FLOPs per token from a model's config (unified/models/flops.py)
agree with the real modules' matrix-product weights, and the matrix-product peak
(bench/peak.py) is measured at the thread count asked for, in a child process where this
one cannot change its thread count (as after vLLM's CPU worker started). No timing is
asserted: only that the measurement is taken where and how it says."""

import json

import pytest
import torch

from bench import peak
from unified.models import flops as model_flops

SMOLLM2 = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "head_dim": 64,
    "num_hidden_layers": 30,
    "vocab_size": 49152,
    "tie_word_embeddings": True,
}


def test_smollm2_flops_per_token_are_the_issues_figures():
    assert model_flops.generation_flops_per_token(SMOLLM2) / 1e9 == pytest.approx(0.269, abs=5e-4)  # 2 x 134.5 M
    top = model_flops.training_flops(SMOLLM2, "top_layers", trainable_layers=4)
    assert top["per_token"] / 1e9 == pytest.approx(0.382, abs=5e-4)
    assert top["block"] + top["head"] == top["per_token"] and top["head"] == 4 * 49152 * 576
    # a step: the head only for response tokens (logits_to_keep)
    assert model_flops.step_flops(top, tokens=300, response_tokens=100) == 300 * top["block"] + 100 * top["head"]
    full, lora = (model_flops.training_flops(SMOLLM2, m) for m in ("full", "lora"))
    assert top["per_token"] < lora["per_token"] < full["per_token"]


def test_flop_counts_match_the_real_modules_weights():
    from transformers import AutoModelForCausalLM

    from unified.models.tiny_model import default_model_dir
    from unified.schema import TuningConfig
    from unified.trainer.tuning import apply_tuning

    folder = default_model_dir()
    config = json.loads((folder / "config.json").read_text())
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32)
    block = model.model.layers[0]
    linears = sum(m.weight.numel() for m in block.modules() if isinstance(m, torch.nn.Linear))
    assert model_flops.block_params(config) == linears
    assert model_flops.head_params(config) == model.lm_head.weight.numel()
    cfg = TuningConfig(method="lora", lora_r=4)
    adapted = apply_tuning(model, cfg)
    trainable = sum(p.numel() for p in adapted.parameters() if p.requires_grad)
    assert model_flops.lora_params(config, 4, cfg.target_modules) == trainable


def test_peak_is_measured_in_this_process_at_its_thread_count():
    threads = torch.get_num_threads()
    result = peak.measure("float32", threads, hidden=64, intermediate=128, batch=2, repeats=3)
    assert result["how"] == "in this process" and result["threads"] == threads and result["dtype"] == "float32"
    assert len(result["runs"]) == 3 and result["peak_gflops"] > 0
    assert torch.get_num_threads() == threads


def test_peak_moves_to_a_child_when_this_process_cannot_change_its_threads(monkeypatch):
    """vLLM's CPU worker replaces torch.set_num_threads with a no-op; then a child measures."""
    threads = torch.get_num_threads()
    want = 1 if threads != 1 else 2
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    result = peak.measure("bfloat16", want, hidden=64, intermediate=128, batch=2, repeats=3)
    assert result["how"] == "in a child process" and result["threads"] == want and result["dtype"] == "bfloat16"
    assert torch.get_num_threads() == threads


def test_fraction_fields_divide_by_the_same_runs_peak():
    peaks = [
        {"dtype": "bfloat16", "threads": 2, "peak_gflops": 400.0, "runs": [390.0, 400.0, 410.0]},
        {"dtype": "bfloat16", "threads": 2, "peak_gflops": 300.0, "runs": [300.0, 300.0, 310.0]},
    ]
    combined = peak.combined(peaks)
    assert combined["peak_gflops"] == 350.0 and combined["before_after"] == [400.0, 300.0]
    fields = peak.fraction_fields(175.0, combined, gflop_per_token=0.27)
    assert {k: fields[k] for k in ("dtype", "threads", "peak_gflops", "achieved_gflops", "fraction")} == {
        "dtype": "bfloat16",
        "threads": 2,
        "peak_gflops": 350.0,
        "achieved_gflops": 175.0,
        "fraction": 0.5,
    }
    assert fields["gflop_per_token"] == 0.27
