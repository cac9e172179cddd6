"""Log-probs and entropy of the sampled tokens straight from the last hidden states.

The plain path projects every answer position (pads included) to SmolLM2's 49,152-word
vocabulary, makes the bf16 logits float32, takes a log-softmax, gathers, and in the
backward fills and walks the same (B, R, V) tensors again: ~30 % of a profiled update
step. Here only the real answer positions are projected, with the frozen projection's held
bf16 copy (`frozen_cast.py`), and each pass over the logits works in place; the backward
recomputes the logits (one more product) instead of keeping them, in row chunks of at most
`CHUNK_ELEMENTS` (a micro-batch's answers fit one; the bound keeps a long batch's memory):

    z = (h W^T + b) / T (float32)    lp = z[t] - lse(z)    H = -sum(p log p)
    dlp/dz = onehot(t) - p           dH/dz = -p (log p + H)

Products run in the autocast dtype when autocast is on (the logits are then rounded to it
as the module call rounds them), else in the hidden states' dtype. `weight_c`/`bias_c` are
the weight in that dtype (a frozen module's held copy, `frozen_cast.py`); the float32
`weight`/`bias` get gradients when they require them (full fine-tuning). An output whose
gradient is not asked for (the entropy as a metric) costs nothing in the backward.
Measured: `bench/shared_prompts.py` (docs/performance.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from unified.trainer.frozen_cast import held_weights

CHUNK_ELEMENTS = 1 << 25  # logits per chunk: 32M floats (128 MB), ~680 rows of a 49k vocabulary: a micro-batch's answers


class _TargetLogProbs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, weight, bias, weight_c, bias_c, targets, temperature, rows, with_entropy):
        ctx.set_materialize_grads(False)  # an unused output (the entropy, as a metric) gets no work
        lp, ent, lse = [], [], []
        with torch.no_grad():
            for hc, tc in zip(h.split(rows), targets.split(rows)):
                log_p = _logits(hc, weight_c, bias_c, temperature)
                lse_c = torch.logsumexp(log_p, dim=-1)
                log_p.sub_(lse_c[:, None])
                lp.append(log_p.gather(-1, tc[:, None]).squeeze(-1))
                ent.append(-torch.linalg.vecdot(log_p.exp(), log_p) if with_entropy else torch.zeros_like(lse_c))
                lse.append(lse_c)
        lp, ent, lse = torch.cat(lp), torch.cat(ent), torch.cat(lse)
        ctx.save_for_backward(h, weight_c, bias_c, targets, lse, ent)
        ctx.temperature, ctx.rows = temperature, rows
        return lp, ent

    @staticmethod
    def backward(ctx, g_lp, g_ent):
        h, weight_c, bias_c, targets, lse, ent = ctx.saved_tensors
        t, rows = ctx.temperature, ctx.rows
        want_w, want_b = ctx.needs_input_grad[1], ctx.needs_input_grad[2]
        grad_h = torch.empty_like(h) if ctx.needs_input_grad[0] else None
        grad_w = torch.zeros(weight_c.shape, dtype=torch.float32, device=h.device) if want_w else None
        grad_b = torch.zeros(weight_c.shape[0], dtype=torch.float32, device=h.device) if want_b else None
        g_lp = torch.zeros_like(lse) if g_lp is None else g_lp
        for start in range(0, h.shape[0], rows):
            sl = slice(start, start + rows)
            hc = h[sl]
            log_p = _logits(hc, weight_c, bias_c, t).sub_(lse[sl, None])
            # dz = onehot(t) g_lp - p (g_lp + g_ent (log p + H))
            scale = None if g_ent is None else log_p.add(ent[sl, None]).mul_(g_ent[sl, None]).add_(g_lp[sl, None])
            dz = log_p.exp_().mul_(scale if scale is not None else g_lp[sl, None]).neg_()
            dz.scatter_add_(-1, targets[sl, None], g_lp[sl, None])
            if t != 1.0:
                dz.div_(t)
            dz = dz.to(weight_c.dtype)
            if grad_h is not None:
                grad_h[sl] = (dz @ weight_c).to(h.dtype)
            if grad_w is not None:
                grad_w += (dz.T @ hc.to(weight_c.dtype)).float()
            if grad_b is not None:
                grad_b += dz.float().sum(0)
        return grad_h, grad_w, grad_b, None, None, None, None, None, None


def _logits(h: torch.Tensor, weight_c: torch.Tensor, bias_c: torch.Tensor | None, temperature: float) -> torch.Tensor:
    z = F.linear(h.to(weight_c.dtype), weight_c, bias_c).float()  # the module call's kernel and rounding
    return z.div_(temperature) if temperature != 1.0 else z


def target_logprobs(
    h: torch.Tensor, head: torch.nn.Linear, targets: torch.Tensor, temperature: float = 1.0, with_entropy: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(N,) log-prob of each `targets` token and (N,) entropy (None without `with_entropy`:
    one pass over the logits fewer), from (N, D) hidden states and the output projection
    `head`; both differentiable in `h` (and in `head` if it trains)."""
    device = h.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else h.dtype
    weight_c, bias_c = _weights_in(head, dtype)
    rows = max(1, CHUNK_ELEMENTS // weight_c.shape[0])
    temperature = temperature if temperature > 0 else 1.0
    with torch.autocast(device, enabled=False):
        logp, entropy = _TargetLogProbs.apply(
            h, head.weight, head.bias, weight_c, bias_c, targets, float(temperature), rows, with_entropy
        )
    return logp, entropy if with_entropy else None


def _weights_in(head: torch.nn.Linear, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    held = held_weights(head, dtype)
    if held is not None:
        return held
    with torch.no_grad():
        return head.weight.to(dtype), None if head.bias is None else head.bias.to(dtype)
