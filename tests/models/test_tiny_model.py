"""The embedded model builds offline, deterministically, in Hugging Face format."""

import torch

from unified.models.tiny_model import (
    ARCH,
    SEED,
    _build_tokenizer,
    build_tiny_model,
    default_model_dir,
    save_random_qwen2,
    weights_digest,
)


def test_build_is_deterministic(tmp_path):
    # 3 warm-up steps keep it cheap; they must move the weights, or the comparison would
    # only cover the seeded random init and not the warm-up
    a, b = build_tiny_model(tmp_path / "a", pretrain_steps=3), build_tiny_model(tmp_path / "b", pretrain_steps=3)
    assert weights_digest(a) == weights_digest(b)
    untrained = save_random_qwen2(tmp_path / "c", _build_tokenizer(), ARCH, SEED)
    assert weights_digest(untrained) != weights_digest(a), "the warm-up did not change the weights"
    assert (a / "tokenizer.json").read_text() == (b / "tokenizer.json").read_text()
    size = sum(f.stat().st_size for f in a.iterdir())
    assert size < 20 * 2**20


def test_loads_in_transformers_with_chat_template():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = default_model_dir()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    n_params = sum(p.numel() for p in model.parameters())
    assert 1e6 <= n_params <= 5e6
    assert model.config.model_type == "qwen2"
    text = tok.apply_chat_template(
        [{"role": "user", "content": "def f(x): return x"}], add_generation_prompt=True, tokenize=False
    )
    assert text.endswith("<|im_start|>assistant\n")
    ids = tok(text, return_tensors="pt").input_ids
    assert tok.decode(ids[0]) == text  # byte-level BPE round-trips
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape[-1] == model.config.vocab_size and torch.isfinite(logits).all()
