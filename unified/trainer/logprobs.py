"""Log-probabilities (and entropy) of a batch's answer tokens under the policy's model: the
forward every update, recompute and consolidation step runs (`token_logprobs_and_entropy`),
and the answer positions' logits (`answer_logits`).

At world size 1 the forward may read log-probs from the last hidden states (`from_hidden`:
`vocab.target_logprobs`, without the full logits tensor), run the shared prompt of a group
once (`share_prompts`), and start above a frozen prefix cached per batch (`prefix`,
`frozen_prefix.PrefixCache`). The entropy of a large vocabulary is taken in row chunks that
stay in L2 when no gradient flows through it.
"""

from __future__ import annotations

import torch
from torch.distributed.tensor import DTensor

from unified.trainer.distributed import world_size
from unified.trainer.frozen_prefix import PrefixCache, top_blocks
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
