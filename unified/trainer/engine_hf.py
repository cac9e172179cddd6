"""The `transformers.generate` fallback engine: same interface, no vLLM needed.

Slower than vLLM (no paged KV cache, padded batches) but it runs anywhere `transformers`
does. Behaviour log-probs come from the processed scores (after temperature/top-p), the
distribution the tokens were drawn from, like vLLM's `processed_logprobs`. A push loads
into the engine's own copy of the model; it is checked in full (names, shapes, finite
values) before anything is copied, so a bad push leaves the old weights in place.

`sleep()` / `wake_up()` free nothing here (no sleep mode in transformers): they only mark
the engine as not to be used, so the orchestration (unified/run/colocate.py) runs and is
checked the same way as with vLLM on CUDA.

Departure from vLLM: one batch shares one RNG stream, so with `seed` set the whole call
is seeded with the first prompt's seed (reproducible per call, not per prompt); without
a seed it draws from the global torch RNG (`seed` of `build_engine` is not used here).
"""

from __future__ import annotations

import os

import torch

from unified.trainer.distributed import resolve_dtype
from unified.text.stops import answer_end
from unified.trainer.engine_base import Engine


class HFEngine(Engine):
    def __init__(self, model_path: str, *, dtype: str, seed: int, max_model_len: int, retries: int, retry_backoff_s: float):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if torch.cuda.is_available():
            self.device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        else:
            self.device = torch.device("cpu")
        dtype = resolve_dtype(dtype, self.device.type)
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        tokenizer.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(model_path, dtype=getattr(torch, dtype))
        self.model.to(self.device).eval().requires_grad_(False)
        eos = self.model.generation_config.eos_token_id
        eos = eos if eos is not None else tokenizer.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos])
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(self.eos_ids)
        super().__init__(tokenizer, max_model_len, retries, retry_backoff_s)

    @torch.no_grad()
    def _generate_ids(self, requests, sampling):
        n = sampling.n
        rows = [r.prompt_ids for r in requests for _ in range(n)]
        width = max(len(r) for r in rows)
        input_ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros_like(input_ids)
        for i, r in enumerate(rows):  # left padding: generation continues from the right
            input_ids[i, width - len(r) :] = torch.tensor(r)
            attention[i, width - len(r) :] = 1
        greedy = sampling.temperature <= 0
        gen_kwargs = dict(
            max_new_tokens=max(1, min(max(r.limit for r in requests), self.max_model_len - width)),
            do_sample=not greedy,
            output_scores=True,
            return_dict_in_generate=True,
            pad_token_id=self.pad_id,
            eos_token_id=sorted(self.eos_ids),
        )
        if not greedy:
            gen_kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
        inputs = dict(input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device))
        if requests[0].seed is None:  # the global RNG, as vLLM does
            out = self.model.generate(**inputs, **gen_kwargs)
        else:
            with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
                torch.manual_seed(requests[0].seed)
                out = self.model.generate(**inputs, **gen_kwargs)
        new = out.sequences[:, width:].cpu()
        logps = self.model.compute_transition_scores(out.sequences, out.scores, normalize_logits=True).float().cpu()
        return [[self._one(new[j].tolist(), logps[j], r) for j in range(i * n, (i + 1) * n)] for i, r in enumerate(requests)]

    def _one(self, tokens: list[int], logps: torch.Tensor, request) -> tuple:
        """One row as (tokens, log-probs, finish): cut at EOS, at the request's budget, and
        at the first token where its answer closes (the whole text is known here, so no
        false stop needs continuing)."""
        stop = next((k for k, t in enumerate(tokens) if t in self.eos_ids), None)
        end, finish = (len(tokens), "length") if stop is None else (stop + 1, "stop")
        if end > request.limit:
            end, finish = request.limit, "length"
        if request.end is not None:
            closed = answer_end(self.tokenizer.decode(tokens[:end], skip_special_tokens=True), request.end)
            if closed is not None:  # the first token whose text reaches the answer's end
                end = next(
                    k for k in range(1, end + 1) if len(self.tokenizer.decode(tokens[:k], skip_special_tokens=True)) >= closed
                )
                finish = "stop"
        return tuple(tokens[:end]), tuple(logps[:end].tolist()), finish

    @torch.no_grad()
    def _load(self, weights) -> None:
        own = dict(self.model.named_parameters(remove_duplicate=False))  # tied aliases accepted
        shapes = {name: tuple(p.shape) for name, p in own.items()}
        required = {name for name, _ in self.model.named_parameters()}
        staged = self._check_weights(weights, shapes, required)  # nothing copied unless all pass
        for name, tensor in staged:
            own[name].copy_(tensor.detach().to(own[name].device, own[name].dtype))
