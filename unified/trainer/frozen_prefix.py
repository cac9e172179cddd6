"""The frozen blocks' output, computed once per answer in an update.

Under `tuning=top_layers` the lower blocks never change, so an answer's hidden states at the
first trainable block are the same at every weight version. The update runs the self-play
answers twice (their behaviour log-probs are recomputed before the first step, then they
train), each time through all the blocks. `PrefixCache` keeps what the first forward saw at
that boundary, per answer (keyed by its real tokens: the same tokens give the same states),
and the training forward starts there: `inputs_embeds` into the trainable blocks alone
(`top_blocks`), the frozen blocks skipped. A micro-batch with any answer not in the cache
runs the whole model as before.

`top_blocks` runs the decoder with only its blocks from `start` on, numbered from 0 for the
KV cache (a shared prompt's cache then holds just those blocks); it restores the model on
exit. Only the forward runs inside it: the backward replays the recorded graph and never
reads the numbering. `prefix_blocks` is 0 (nothing to skip) unless the model is a plain
HF decoder (`model.model.layers`, attention with `layer_idx`), its embeddings and first
blocks freeze, and it does not recompute activations in the backward (gradient checkpointing).
"""

from __future__ import annotations

import contextlib

import torch


def prefix_blocks(model: torch.nn.Module) -> int:
    """How many leading decoder blocks (and the embeddings) train nothing; 0 if this model
    cannot start at a block."""
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None or getattr(model, "is_gradient_checkpointing", False):
        return 0
    if not all(hasattr(getattr(layer, "self_attn", None), "layer_idx") for layer in layers):
        return 0
    if any(p.requires_grad for p in inner.embed_tokens.parameters()):
        return 0
    k = 0
    while k < len(layers) and not any(p.requires_grad for p in layers[k].parameters()):
        k += 1
    return k if k < len(layers) else 0  # all frozen: nothing trains, nothing to gain


@contextlib.contextmanager
def top_blocks(model: torch.nn.Module, start: int):
    """The decoder with only its blocks from `start` on (KV-cache slots renumbered from 0)."""
    inner = model.model
    layers = inner.layers
    top = list(layers)[start:]
    numbers = [layer.self_attn.layer_idx for layer in top]
    inner.layers = torch.nn.ModuleList(top)
    for i, layer in enumerate(top):
        layer.self_attn.layer_idx = i
    try:
        yield
    finally:
        inner.layers = layers
        for layer, n in zip(top, numbers):
            layer.self_attn.layer_idx = n


class PrefixCache:
    """Per answer (its real tokens), its hidden states entering block `start`, kept on the
    model's device in its residual dtype (float32: ~0.6 MB for 250 tokens of a 576-wide model)."""

    def __init__(self, start: int, recording: bool = True):
        self.start = start
        self.recording = recording  # False: only read (a forward that misses runs whole and keeps nothing)
        self._rows: dict[tuple[int, ...], torch.Tensor] = {}

    def __len__(self) -> int:
        return len(self._rows)

    @staticmethod
    def _keys(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[tuple[int, ...]]:
        return [tuple(ids[m.bool()].tolist()) for ids, m in zip(input_ids, attention_mask)]

    def record(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, states: torch.Tensor) -> None:
        """`states` (B, L, D): the hidden states entering block `start`, in the batch's layout."""
        mask = attention_mask.bool()
        for key, row, m in zip(self._keys(input_ids, attention_mask), states.detach(), mask):
            self._rows[key] = row[m]

    def lookup(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor | None:
        """(B, L, D) states in the batch's layout (zeros at pads), or None unless every row is held."""
        rows = [self._rows.get(key) for key in self._keys(input_ids, attention_mask)]
        if not rows or any(r is None for r in rows):
            return None
        out = rows[0].new_zeros((*input_ids.shape, rows[0].shape[-1]))
        out[attention_mask.bool()] = torch.cat(rows)
        return out
