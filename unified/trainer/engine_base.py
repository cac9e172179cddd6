"""What every rollout backend shares (`Engine`): prompts tokenised here (a string as raw
text, a list of {"role", "content"} messages through the tokenizer's chat template), every
completion with its token ids, the behaviour log-prob of each sampled token (of the
*processed* distribution, i.e. after temperature/top-p, the one the tokens were drawn
from) and the weight version that produced it; generation errors retried with
exponential back-off; a push that fails reported, never raised; `sleep()` / `wake_up()`
around the policy's update (vLLM's sleep mode on CUDA, a no-op elsewhere; asleep, the
engine refuses to generate or take a push).

A backend is one module with a subclass (`engine_hf`, `engine_vllm`) plus one line in
`engine.ENGINES`; it imports this module, never `engine`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Sequence

import torch

from unified.text.stops import AnswerEnd, answer_end
from unified.types import Completion, SamplingConfig

log = logging.getLogger("unified")

Prompt = str | Sequence[dict]
Weights = Iterable[tuple[str, torch.Tensor]]


STOP_STRING = "stop_string"  # a backend's finish reason: the request's answer-end marker matched


@dataclass(frozen=True)
class Request:
    """One prompt as a backend generates it: its token ids, seed, grammar (None: free text),
    answer end (None: run to EOS) and budget of new tokens."""

    prompt_ids: list[int]
    seed: int | None
    shape: str | None
    end: AnswerEnd | None
    limit: int


class WeightsRejected(ValueError):
    """A push refused before anything was loaded (unknown name, wrong shape, non-finite
    values, missing parameters): the engine keeps serving its previous weights."""


@dataclass(frozen=True)
class PushResult:
    ok: bool
    seconds: float
    error: str = ""


class Engine:
    """Backend-independent part. Subclasses implement `_generate_ids` and `_load`."""

    OPTIONS: tuple[str, ...] = ()  # backend-specific keyword arguments `build_engine` passes on
    compiled = False  # whether the served model runs compiled (vLLM's torch.compile path)
    SHAPES = False  # whether the backend decodes in answer shapes (grammars)

    def __init__(self, tokenizer, max_model_len: int, retries: int, retry_backoff_s: float):
        self.tokenizer = tokenizer
        self.max_model_len = max_model_len
        self.retries = retries
        self.retry_backoff_s = retry_backoff_s
        self.version = 0
        self.healthy = True  # False after a failed push until a push succeeds
        self.pushes = 0
        self.failed_pushes = 0
        # True while the engine serves one complete push (the weights it was built with
        # count): only then may a partial push update a part of them
        self._complete = True
        self._partial = False
        # seconds of the last push's phases (backend-defined keys, e.g. gather, validate,
        # reload, tied_heads, prefix_cache) plus "total"; benches read it
        self.last_push_phases: dict[str, float] = {}
        self.asleep = False  # between sleep() and wake_up(): generate and push are refused

    # ---------------------------------------------------------------- generation
    def encode(self, prompt: Prompt) -> list[int]:
        if isinstance(prompt, str):
            return list(self.tokenizer(prompt)["input_ids"])
        text = self.tokenizer.apply_chat_template([dict(m) for m in prompt], tokenize=False, add_generation_prompt=True)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(
        self,
        prompts: Sequence[Prompt],
        sampling: SamplingConfig,
        shapes: Sequence[str | None] | None = None,
        ends: Sequence[AnswerEnd | None] | None = None,
    ) -> list[list[Completion]]:
        """Per prompt, `sampling.n` completions. A prompt too long for the context gets
        `finish_reason="error"` completions instead of failing the whole batch. `shapes`:
        per prompt, a grammar (`unified.kinds.shapes`, xgrammar EBNF) its completions are
        decoded in, or None for free text; such completions are `constrained`. `ends`: per
        prompt, where its answer ends (`unified.text.stops`): a completion stops there
        (finish "stop") instead of running on to EOS or the budget; ignored where a shape
        is given (the grammar ends the answer)."""
        if not self.healthy:
            raise RuntimeError("engine weights are invalid after a failed push; push again first")
        if self.asleep:
            raise RuntimeError("the engine is asleep (sleep mode): wake_up() before generating")
        shapes = list(shapes) if shapes is not None else [None] * len(prompts)
        ends = list(ends) if ends is not None else [None] * len(prompts)
        if len(shapes) != len(prompts) or len(ends) != len(prompts):
            raise ValueError(f"{len(shapes)} shapes and {len(ends)} answer ends for {len(prompts)} prompts")
        if any(shapes) and not self.SHAPES:
            raise ValueError(
                f"the {type(self).__name__} backend cannot decode in an answer shape; "
                "use rollout=vllm_cpu or rollout=vllm, or set pipeline.constrain=[]"
            )
        ends = [None if shape else end for shape, end in zip(shapes, ends)]
        ids = [self.encode(p) for p in prompts]
        fits = [i for i, p in enumerate(ids) if len(p) < self.max_model_len]
        requests = [
            Request(
                ids[i],
                None if sampling.seed is None else sampling.seed + i,
                shapes[i],
                ends[i],
                max(1, min(sampling.max_tokens, self.max_model_len - len(ids[i]))),
            )
            for i in fits
        ]
        raw = self._until_answer_ends(requests, sampling) if fits else []
        out: list[list[Completion]] = []
        by_index = dict(zip(fits, raw))
        for i, p in enumerate(ids):
            if i not in by_index:
                err = Completion("", tuple(p), (), (), "error", self.version)
                out.append([err] * sampling.n)
                continue
            out.append([self._completion(p, t, lp, fr, bool(shapes[i])) for t, lp, fr in by_index[i]])
        return out

    def _until_answer_ends(self, requests: list[Request], sampling: SamplingConfig) -> list[list[tuple]]:
        """Generate; a completion that a stop string ended where its answer had not closed
        yet (`stops.answer_end`: e.g. a bare ``` that opens a block) continues from its own
        tokens, with its remaining budget, until its answer closes, EOS or the budget.
        Stopping is a function of the text so far, so a continued completion has the
        distribution of one never stopped up to its answer's end."""
        raw = [list(group) for group in self._with_retries(requests, sampling)]
        greedy = sampling.temperature <= 0  # n copies of one completion: continue one, copy it
        pending = [(i, j) for i, group in enumerate(raw) for j in range(1 if greedy else len(group))]
        for step in range(1, sampling.max_tokens + 1):  # each continuation adds >= 1 token
            todo = []
            for i, j in pending:
                tokens, logprobs, finish = raw[i][j]
                if finish != STOP_STRING:
                    continue
                text = self.tokenizer.decode(list(tokens), skip_special_tokens=True)
                if answer_end(text, requests[i].end) is not None:
                    raw[i][j] = (tokens, logprobs, "stop")
                elif len(tokens) >= requests[i].limit:
                    raw[i][j] = (tokens, logprobs, "length")
                else:
                    todo.append((i, j))
            if not todo:
                break
            more = [
                replace(
                    requests[i],
                    prompt_ids=requests[i].prompt_ids + list(raw[i][j][0]),
                    seed=None if requests[i].seed is None else requests[i].seed + 7919 * step,
                    limit=requests[i].limit - len(raw[i][j][0]),
                )
                for i, j in todo
            ]
            for (i, j), [(tokens, logprobs, finish)] in zip(todo, self._with_retries(more, replace(sampling, n=1))):
                raw[i][j] = (raw[i][j][0] + tokens, raw[i][j][1] + logprobs, finish)
            pending = todo
        return [[group[0]] * len(group) for group in raw] if greedy else raw

    def _completion(self, prompt_ids, token_ids, logprobs, finish_reason, constrained: bool = False) -> Completion:
        text = self.tokenizer.decode(list(token_ids), skip_special_tokens=True)
        return Completion(text, tuple(prompt_ids), tuple(token_ids), tuple(logprobs), finish_reason, self.version, constrained)

    def _with_retries(self, requests: list[Request], sampling: SamplingConfig):
        for attempt in range(self.retries + 1):
            try:
                return self._generate_ids(requests, sampling)
            except Exception as exc:  # noqa: BLE001 - any backend error is retried, then raised
                self._after_error()
                if attempt == self.retries:
                    raise RuntimeError(f"generation failed after {attempt + 1} attempts: {exc}") from exc
                wait = self.retry_backoff_s * 2**attempt
                log.warning("generation failed (%s); retry %d/%d in %.2fs", exc, attempt + 1, self.retries, wait)
                time.sleep(wait)

    def _generate_ids(self, requests: list[Request], sampling: SamplingConfig) -> list[list[tuple]]:
        """-> per request, `sampling.n` tuples (token_ids, logprobs, finish_reason): "stop"
        (EOS), "length", or `STOP_STRING` when the request's `end.marker` ended it (the
        marker's text kept in the tokens); at most `request.limit` new tokens. Only backends
        with `SHAPES` get requests with a `shape`."""
        raise NotImplementedError

    def _after_error(self) -> None:
        """Clean up after a failed generate (e.g. abort requests left in the engine)."""

    # ---------------------------------------------------------------- weights
    @property
    def accepts_partial(self) -> bool:
        """Whether a partial push can be applied: the engine serves a complete, intact set."""
        return self.healthy and self._complete

    def push(self, weights: Weights, version: int, *, partial: bool = False) -> PushResult:
        """Load new weights in place (HF parameter names) and tag later samples `version`.

        `partial=True`: `weights` holds only the tensors that may have changed since the
        last complete push (`Policy.named_full_weights(changing_only=True)`: the trainable
        blocks of `top_layers` or LoRA); the engine keeps serving its other tensors. The
        caller promises that those are the same policy's; the engine refuses a partial push
        unless it serves a complete, intact set (`accepts_partial`).

        The iterator is always consumed to the end, even on failure: under FSDP it yields
        all-gathered tensors, and a rank that stopped early would hang the others."""
        t0 = time.perf_counter()
        it = iter(weights)
        self.last_push_phases = {}
        self._partial = partial
        try:
            if self.asleep:
                raise WeightsRejected("the engine is asleep (sleep mode): wake_up() before a push")
            if partial and not self.accepts_partial:
                raise WeightsRejected("a partial push needs the engine to serve a complete push first")
            self._load(it)
        except Exception as exc:  # noqa: BLE001 - reported to the caller, not raised
            for _ in it:
                pass
            # rejected up front: the previous weights are still served intact; otherwise
            # the engine may hold a mix of old and new weights until a push succeeds
            if not isinstance(exc, WeightsRejected):
                self.healthy = False
                self._complete = False
            self.failed_pushes += 1
            log.error("weight push for version %d failed: %s", version, exc)
            return PushResult(False, time.perf_counter() - t0, f"{type(exc).__name__}: {exc}")
        finally:
            self._partial = False
        self.version = version
        self.healthy = True
        self._complete = True  # a partial push is only accepted on top of a complete one
        self.pushes += 1
        seconds = time.perf_counter() - t0
        self.last_push_phases["total"] = seconds
        return PushResult(True, seconds)

    def _load(self, weights: Iterator[tuple[str, torch.Tensor]]) -> None:
        raise NotImplementedError

    def _check_weights(
        self, weights, shapes: dict[str, tuple[int, ...]] | None, required: set[str]
    ) -> list[tuple[str, torch.Tensor]]:
        """Materialise and check a push before anything is loaded: every name known
        (`shapes`, tied aliases included; None: names and shapes unknown, not checked),
        shapes equal, values finite, every `required` name present (unless the push is
        partial). Raises `WeightsRejected`."""
        staged: list[tuple[str, torch.Tensor]] = []
        seen: set[str] = set()
        for name, tensor in weights:
            if shapes is None:
                pass
            elif name not in shapes:
                raise WeightsRejected(f"no parameter named {name!r} in the engine's model")
            elif tuple(tensor.shape) != tuple(shapes[name]):
                raise WeightsRejected(f"{name}: shape {tuple(tensor.shape)} != {tuple(shapes[name])}")
            if not torch.is_floating_point(tensor) or not _finite(tensor):
                raise WeightsRejected(f"{name}: non-finite or non-float values")
            staged.append((name, tensor))
            seen.add(name)
        missing = [] if self._partial else sorted(required - seen)
        if missing:
            raise WeightsRejected(f"push is missing {len(missing)} parameters, e.g. {missing[:3]}")
        return staged

    # ---------------------------------------------------------------- sleep mode
    @property
    def frees_memory_asleep(self) -> bool:
        """Whether `sleep()` gives memory back (vLLM on CUDA built with sleep mode); elsewhere
        sleeping only marks the engine as not to be used."""
        return False

    def sleep(self) -> None:
        """Give the GPU to the policy's update: vLLM's sleep mode level 1 (weights offloaded
        to CPU memory, KV cache dropped) where the backend has it, a no-op for the others.
        Until `wake_up()`, generate raises and a push is rejected. Idempotent."""
        if not self.asleep:
            self._sleep()
            self.asleep = True

    def wake_up(self) -> None:
        """Back from `sleep()`: the same weights as before it, an empty KV cache. Idempotent."""
        if self.asleep:
            self._wake_up()
            self.asleep = False

    def _sleep(self) -> None:
        """Backend part of `sleep()`; nothing to free by default (hf, vllm_cpu)."""

    def _wake_up(self) -> None:
        """Backend part of `wake_up()`."""

    def close(self) -> None:
        """Release the engine. For vLLM this also destroys the default process group."""


def _finite(tensor: torch.Tensor) -> bool:
    """All values finite. `aminmax` is one read-only pass (NaN propagates into both
    results, +-inf shows in one of them); `isfinite(t).all()` writes a bool tensor of
    the same length first and was 13x slower on CPU (SmolLM2: 1.06 s vs 83 ms)."""
    if tensor.numel() == 0:
        return True
    lo, hi = torch.aminmax(tensor.detach())
    return bool(torch.isfinite(lo) & torch.isfinite(hi))
