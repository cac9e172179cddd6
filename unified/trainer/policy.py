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
from unified.trainer.frozen_prefix import PrefixCache, top_blocks
from unified.trainer.tuning import (
    TuningConfig,
    adapter_tensors,
    apply_tuning,
    changing_parameters,
    lora_scalings,
    merged_weights,
    save_adapter,
)
from unified.trainer.vocab import target_logprobs


def token_logprobs_and_entropy(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    response_mask: torch.Tensor,
    temperature: float = 1.0,
    with_entropy: bool = True,
    entropy_grad: bool = True,
    share_prompts: bool = False,
    from_hidden: bool = True,
    prefix: PrefixCache | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-prob of each response token and the entropy of its distribution, both (B, R).

    Layout (verl's): `input_ids` = [left-padded prompt | right-padded response], (B, P+R);
    `response_mask` (B, R) marks real response tokens. Logits are computed only for the
    R positions that predict response tokens (`logits_to_keep`), never for the prompt.
    Logits are divided by the sampling temperature, matching the engine's processed
    log-probs (exact for top_p=1). Padded positions hold garbage; mask them.
    `entropy_grad=False` computes the entropy as a metric only (no graph through it).
    `share_prompts`: rows with the same prompt (a group's samples) run it once
    (`_answer_states`); the same values, fewer tokens through the model.
    `from_hidden` (where the output projection is a plain, unsharded `nn.Linear`): project
    only the real answer positions, in chunks (`vocab.py`), never the full (B, R, vocab)
    logits; the same values to the compute dtype's rounding.
    `prefix` (frozen_prefix.py): rows it holds start at its block; others fill it.
    Otherwise (sharded): one `log_softmax` over the (B, R, vocab) logits serves both, the
    entropy read back in row chunks that stay in cache (~3 passes where verl's make ~7).
    """
    r = response_mask.shape[1]
    # one rank only: the shared path's number of forwards depends on the batch, and FSDP2's
    # collectives need every rank to make the same calls (two ranks would wait on each other)
    shared = share_prompts and world_size() == 1 and not getattr(model, "is_gradient_checkpointing", False)
    head = model.get_output_embeddings()
    if from_hidden and type(head) is torch.nn.Linear and not isinstance(head.weight, DTensor):
        # unsharded plain projection: the sampled tokens' log-probs from the hidden states (vocab.py)
        hidden = _answer_states(model, input_ids, attention_mask, r, shared, hidden=True, prefix=prefix)
        mask = response_mask.bool()
        logp, entropy = target_logprobs(hidden[mask], head, input_ids[:, -r:][mask], temperature, with_entropy)
        full = lambda x: torch.zeros(mask.shape, dtype=x.dtype, device=x.device).masked_scatter(mask, x)  # noqa: E731
        return full(logp), (full(entropy if entropy_grad else entropy.detach()) if with_entropy else None)
    logits = _answer_states(model, input_ids, attention_mask, r, shared, hidden=False, prefix=prefix)
    if temperature > 0 and temperature != 1.0:
        logits = logits / temperature
    log_p = torch.log_softmax(logits, dim=-1)
    logprobs = log_p.gather(-1, input_ids[:, -r:, None]).squeeze(-1)
    return logprobs, (_entropy(log_p, entropy_grad) if with_entropy else None)


def answer_logits(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, r: int) -> torch.Tensor:
    """(B, R, vocab) float logits at the R positions predicting the response tokens (the
    layout of `token_logprobs_and_entropy`), for what reads more than the sampled token's
    log-prob: greedy decoding's argmax (trainer/consolidate.py)."""
    return _answer_states(model, input_ids, attention_mask, r, share=False, hidden=False)


def _positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions counting real tokens only, as the engine numbers them (left padding shifts)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def _answer_states(
    model,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    r: int,
    share: bool,
    hidden: bool,
    prefix: PrefixCache | None = None,
) -> torch.Tensor:
    """(B, R, X) at the R positions predicting the response tokens: float logits (X = vocab),
    or with `hidden` the last hidden states after the final norm (X = width), the output
    projection left to the caller.

    `share`: each distinct prompt runs once. The prompts' forward fills a KV cache (kept in
    the graph, so gradients reach the prompt positions of trainable layers as in the full
    forward), each row takes its prompt's cache, and the responses run on it. A group of 16
    samples of a ~190-token prompt and ~100-token answers puts ~1,800 tokens through the
    model instead of ~4,600. Rows that share nothing: the plain forward.

    `prefix` (frozen_prefix.py): when it holds every row, only the blocks from `prefix.start`
    run, from the held states; otherwise the whole model runs and, if it is recording, the
    rows' states entering that block go into it."""
    embeds = prefix.lookup(input_ids, attention_mask) if prefix is not None else None
    if embeds is None:
        record = prefix if prefix is not None and prefix.recording else None
        return _forward(model, input_ids, attention_mask, r, share, hidden, None, record)
    with top_blocks(model, prefix.start):
        return _forward(model, input_ids, attention_mask, r, share, hidden, embeds, None)


def _forward(
    model, input_ids, attention_mask, r: int, share: bool, hidden: bool, embeds: torch.Tensor | None, record: PrefixCache | None
) -> torch.Tensor:
    """`_answer_states`' forward, from token ids or (`embeds`) from states entering the first
    block that runs; `record`: the states entering `record.start` go into it. With `share`,
    rows with the same prompt run it once (when some do)."""
    p = input_ids.shape[1] - r
    if share and p > 0:
        prompts = torch.cat([input_ids[:, :p], attention_mask[:, :p].to(input_ids.dtype)], dim=1)
        unique, row_of = torch.unique(prompts, dim=0, return_inverse=True)
        if unique.shape[0] < input_ids.shape[0]:
            return _forward_shared(model, input_ids, attention_mask, r, hidden, embeds, record, unique.shape[0], row_of)
    return _forward_whole(model, input_ids, attention_mask, r, hidden, embeds, record)


def _fed(input_ids, embeds: torch.Tensor | None, rows, cols) -> dict:
    """The model's input for these rows and columns: token ids, or the states `embeds`."""
    return {"input_ids": input_ids[rows, cols]} if embeds is None else {"inputs_embeds": embeds[rows, cols]}


def _read(out, hidden: bool) -> torch.Tensor:
    return out.hidden_states[-1] if hidden else out.logits


def _forward_whole(
    model, input_ids, attention_mask, r: int, hidden: bool, embeds: torch.Tensor | None, record: PrefixCache | None
) -> torch.Tensor:
    """Every row whole, in one forward."""
    everything = slice(None)
    out = model(
        **_fed(input_ids, embeds, everything, everything),
        attention_mask=attention_mask,
        position_ids=_positions(attention_mask),
        logits_to_keep=1 if hidden else r + 1,  # hidden states come for every position; logits only where kept
        use_cache=False,
        output_hidden_states=hidden or record is not None,
    )
    if record is not None:
        record.record(input_ids, attention_mask, out.hidden_states[record.start])
    states = _read(out, hidden)[:, -r - 1 : -1]
    return states if hidden else states.float()


def _forward_shared(
    model, input_ids, attention_mask, r: int, hidden: bool, embeds, record: PrefixCache | None, distinct: int, row_of
) -> torch.Tensor:
    """Each of the `distinct` prompts once (`row_of`: row -> its prompt), then every row's
    last `r` tokens on its prompt's keys and values."""
    p = input_ids.shape[1] - r
    collect = hidden or record is not None
    first = torch.empty(distinct, dtype=torch.long, device=row_of.device).scatter_(
        0, row_of, torch.arange(input_ids.shape[0], device=row_of.device)
    )  # a row of each distinct prompt
    mask = attention_mask[first, :p]
    head = model(
        **_fed(input_ids, embeds, first, slice(None, p)),
        attention_mask=mask,
        position_ids=_positions(mask),
        logits_to_keep=1,
        use_cache=True,
        output_hidden_states=collect,
    )
    cache = head.past_key_values
    cache.batch_select_indices(row_of)  # each row its prompt's keys and values (a gather: gradients sum back)
    tail = model(
        **_fed(input_ids, embeds, slice(None), slice(p, None)),
        attention_mask=attention_mask,
        position_ids=_positions(attention_mask)[:, p:],
        past_key_values=cache,
        logits_to_keep=1 if hidden else r,
        use_cache=True,
        output_hidden_states=collect,
    )
    if record is not None:
        k = record.start
        record.record(input_ids, attention_mask, torch.cat([head.hidden_states[k][row_of], tail.hidden_states[k]], dim=1))
    states = torch.cat([_read(head, hidden)[row_of, -1:], _read(tail, hidden)[:, :-1]], dim=1)
    return states if hidden else states.float()


def _entropy(log_p: torch.Tensor, grad: bool) -> torch.Tensor:
    """-sum(p * log p) over the vocabulary; without `grad`, read back in row chunks that
    stay in cache (a metric only: no graph through it)."""
    if grad:
        return -(log_p.exp() * log_p).sum(-1)
    with torch.no_grad():
        rows = log_p.detach().reshape(-1, log_p.shape[-1])
        return torch.cat([-torch.linalg.vecdot(c.exp(), c) for c in rows.split(_ENTROPY_ROWS)]).view(log_p.shape[:-1])


_ENTROPY_ROWS = 4  # rows of the vocabulary per chunk: 4 x 49k floats stay in L2


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
