"""The embedded default model: a tiny Qwen2 causal LM with its own byte-level BPE tokenizer.

It exists so that `python train_unified.py` runs offline, on CPU, with no download. It is
built deterministically (fixed seed, fixed training text: the bundled MBPP+ prompts and
solutions) into a cache folder on first use and saved in Hugging Face format, so the same
directory loads in `transformers` and in vLLM. Its weights start random and get a short
supervised warm-up on gold answers of self-play tasks (`tiny_pretrain`), so its
answers parse and are sometimes right: rewards differ within a rollout group and every
test that trains moves the weights. It is a plumbing model, not a baseline.

Departures from a real Qwen2 checkpoint: a 4k vocabulary trained here, 4 layers of width
128, tied embeddings, and a minimal ChatML chat template.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

BUILD_VERSION = "v3"  # v3: a short supervised warm-up (tiny_pretrain) so its answers parse
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
ARCH = dict(
    vocab_size=4096,
    hidden_size=128,
    intermediate_size=384,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
    rope_theta=10000.0,
)
SEED = 1234


def cache_root() -> Path:
    return Path(os.environ.get("UNIFIED_CACHE", Path.home() / ".cache" / "unified"))


def default_model_dir() -> Path:
    """Where the tiny model lives; built there on first call. Concurrent first calls
    (parallel tests, torchrun ranks) wait for one build instead of each starting one."""
    import fcntl
    import shutil

    path = cache_root() / f"tiny-qwen2-{BUILD_VERSION}"
    if (path / "config.json").exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".tiny-qwen2.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / "config.json").exists():
            for stale in path.parent.glob(f"{path.name}.tmp*"):  # builds that were killed
                shutil.rmtree(stale, ignore_errors=True)
            build_tiny_model(path)
    return path


def _training_text() -> list[str]:
    from unified.benchmarks.mbpp import BUNDLED as data

    rows = [json.loads(line) for line in gzip.open(data, "rt", encoding="utf-8")]
    return [row["prompt"] + "\n" + row["canonical_solution"] for row in rows]


def _build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=ARCH["vocab_size"],
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHAT_TEMPLATE,
        model_max_length=ARCH["max_position_embeddings"],
    )


def build_tiny_model(path: Path, pretrain_steps: int | None = None) -> Path:
    """Build tokenizer and model into `path` atomically (temp dir + rename);
    `pretrain_steps` overrides the warm-up's length (tests of the build itself)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    from transformers.utils import logging as hf_logging

    from unified.models.tiny_pretrain import STEPS, pretrain

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a first use builds it: no save/load bars on the console
    try:
        save_random_qwen2(tmp, _build_tokenizer(), ARCH, SEED)
        pretrain(tmp, SEED, STEPS if pretrain_steps is None else pretrain_steps)
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    try:
        os.rename(tmp, path)
    except OSError:  # another process built it first: keep theirs
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    return path


def save_random_qwen2(path: Path, tokenizer, arch: dict, seed: int) -> Path:
    """A Qwen2 with seeded random weights and `tokenizer`, saved in Hugging Face format
    (the embedded model; larger shapes for bench/push_time.py)."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    tokenizer.save_pretrained(path)
    config = Qwen2Config(
        **arch,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id)
    model.save_pretrained(path, safe_serialization=True)
    return path


def weights_digest(path: Path) -> str:
    """sha256 of the saved weights (used to prove the build is deterministic)."""
    return hashlib.sha256((Path(path) / "model.safetensors").read_bytes()).hexdigest()
