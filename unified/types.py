"""The data that flows between stages, one way:

problems -> programs -> IPO triples -> tasks -> rollouts -> samples -> update -> weights.

`unified.pipeline` (CPU work) and `unified.trainer` (model work) share only these types;
the round loop is the one place that uses both. All are frozen: a stage never edits what
an earlier stage produced. Python values (test arguments, outputs) are kept as values;
`unified.pipeline.values` turns them into literal text for Parquet and prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TASK_KINDS = ("induction", "deduction", "abduction")


@dataclass(frozen=True)
class TestCase:
    """One call of the entry point: positional arguments and the expected return value."""

    __test__ = False  # not a pytest class

    args: tuple
    expected: object


@dataclass(frozen=True)
class Problem:
    """A benchmark problem. `visible` may be shown to the model and used to build tasks;
    `hidden` and `hidden_test_code` are for evaluation (pass@1) only, never training."""

    task_id: str  # "Mbpp/2", "HumanEval/0"
    benchmark: str  # "mbpp" | "humaneval" | a user's name
    prompt: str  # the problem statement as the benchmark gives it
    entry_point: str
    visible: tuple[TestCase, ...]
    hidden: tuple[TestCase, ...] = ()
    hidden_test_code: str = ""  # HumanEval-style `def check(candidate): ...`
    canonical_solution: str = ""
    atol: float = 0.0


@dataclass(frozen=True)
class Completion:
    """One sampled completion, as the engine returns it."""

    text: str
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]  # behaviour log-prob of each sampled token
    finish_reason: str  # "stop" | "length" | "error"
    version: int  # weight version that generated it


@dataclass(frozen=True)
class Sample:
    """One scored rollout, what the trainer consumes (phase 5)."""

    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    reward: float
    group: str  # samples of the same prompt share a group (GRPO normalisation)
    version: int  # weight version that generated it (staleness = current - version)
    kind: str = ""  # task kind, for per-type metrics
    meta: dict = field(default_factory=dict, compare=False, hash=False)
