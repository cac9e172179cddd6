"""What the pipeline needs from a text generator (a scripted one for tests: tests/helpers/scripted.py).

The real generator is the resident engine (`unified.trainer.engine.Engine`); the pipeline
only calls `generate(prompts, sampling)`, so it never imports the trainer
(`SamplingConfig` lives in `unified.types`).
"""

from __future__ import annotations

from typing import Protocol, Sequence

from unified.text.stops import AnswerEnd
from unified.types import Completion, SamplingConfig

Prompt = Sequence[dict]  # chat messages: [{"role": "user", "content": ...}]


class Generator(Protocol):
    def generate(
        self,
        prompts: Sequence[str | Prompt],
        sampling: SamplingConfig,
        shapes: Sequence[str | None] | None = None,
        ends: Sequence[AnswerEnd | None] | None = None,
    ) -> list[list[Completion]]:
        """Per prompt, `sampling.n` completions, in prompt order; `shapes`: per prompt, the
        grammar its completions are decoded in (None: free text); `ends`: per prompt, where
        its answer ends, so the completion stops there (`text.stops`; None: run on)."""
        ...


def user_message(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]
