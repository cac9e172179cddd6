"""A scripted text generator: the pipeline's `Generator` for tests that need no model."""

from __future__ import annotations

from typing import Callable, Sequence

from unified.pipeline.generation import Prompt
from unified.text.stops import AnswerEnd, cut
from unified.types import Completion, SamplingConfig


def prompt_text(prompt: str | Prompt) -> str:
    """The text of a prompt, whichever form it came in."""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(m.get("content", "")) for m in prompt)


def completion(text: str, version: int = 0) -> Completion:
    """A Completion with no token data (scripted text)."""
    return Completion(text=text, prompt_token_ids=(), token_ids=(), logprobs=(), finish_reason="stop", version=version)


class ScriptedGenerator:
    """Answers from a function `(prompt_text, sampling) -> list[str]`; pads/cuts to `n`.

    Records every call in `calls` (prompt texts and sampling) so tests can assert on them.
    """

    def __init__(self, respond: Callable[[str, SamplingConfig], Sequence[str]]):
        self.respond = respond
        self.calls: list[tuple[list[str], SamplingConfig]] = []
        self.shapes: list[list[str | None]] = []  # per call, the shape asked for each prompt
        self.ends: list[list[AnswerEnd | None]] = []  # per call, the answer end asked for each prompt

    def generate(
        self, prompts: Sequence[str | Prompt], sampling: SamplingConfig, shapes=None, ends=None
    ) -> list[list[Completion]]:
        texts = [prompt_text(p) for p in prompts]
        self.calls.append((texts, sampling))
        self.shapes.append(list(shapes) if shapes is not None else [None] * len(texts))
        ends = list(ends) if ends is not None else [None] * len(texts)
        self.ends.append(ends)
        out = []
        for text, end in zip(texts, ends):
            answers = list(self.respond(text, sampling)) or [""]
            answers = (answers * sampling.n)[: sampling.n]
            out.append([completion(cut(a, end)) for a in answers])  # stopped where an engine would stop
        return out
