"""The data that flows between stages, one way:

problems -> programs -> IPO triples -> tasks -> rollouts -> samples -> update -> weights.

`unified.trainer` (model work) imports no module of `unified.pipeline` (CPU work), nor
the other way round: what passes between them is these types, and each reads its own
config groups (`unified.trainer.config`, `unified.pipeline.config`). Modules that import
both sit in folders layered above them: `unified.schema` (which gathers both groups'
classes), `unified.models`, `unified.eval` and the round loop in `unified.run`
(tests/test_layout.py checks both rules).

All are frozen: a stage never edits what an earlier stage produced. Python values (test
arguments, outputs) are kept as values; `unified.values` turns them into literal text for
Parquet and prompts.
"""

from __future__ import annotations

from dataclasses import dataclass


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

    problem_id: str  # "Mbpp/2", "HumanEval/0" (the benchmark's own "task_id")
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
    # decoded inside an answer shape (a grammar mask): `logprobs` are of the masked
    # distribution, which the learner does not score; it recomputes them (trainer.update)
    constrained: bool = False
    replayed: bool = False  # a passing answer of an earlier round offered again (pipeline/discovery.py)


@dataclass(frozen=True)
class Rollout:
    """One scored completion of a phase-5 task: a row of rollouts.parquet."""

    round: int
    task_id: str
    kind: str
    completion: str
    reward: float
    parse_failure: str | None  # why the answer could not be read (format penalty), else None
    finish_reason: str
    num_tokens: int
    version: int  # weight version that generated it
    replayed: bool = False  # a passing answer of an earlier round, replayed (pipeline/discovery.py)


@dataclass(frozen=True)
class Sample:
    """One scored rollout, what the trainer consumes (phase 5)."""

    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    reward: float
    group: int  # samples of the same prompt share a group (GRPO normalisation)
    version: int  # weight version that generated it (staleness = current - version)
    kind: str = ""  # task kind, for per-type metrics
    constrained: bool = False  # sampled inside an answer shape: behaviour log-probs are recomputed
    replayed: bool = False  # from an earlier round (replay): exempt from max_staleness, its ratio clipped as any
    # a found passing answer under the supervised term (algorithm.sft_coef): its advantage is the coefficient on every
    # token, outside any group; its behaviour log-probs are recomputed by the policy (ratio 1), exempt from max_staleness
    supervised: bool = False


# ---------------------------------------------------------------- pipeline (phases 1-4)
# Appended by the pipeline; the stages that make and check self-play tasks.

REJECTION_STAGES = ("program", "input", "triple", "task")


@dataclass(frozen=True)
class Program:
    """A candidate solution of one problem (phase 1). `code` defines `entry_point`."""

    problem_id: str
    program_id: str  # "Mbpp/2#p0": unique in a round
    code: str
    entry_point: str
    source: str = "model"  # "model" | "canonical" (seed_programs: canonical)


@dataclass(frozen=True)
class IOTriple:
    """(input, program, output) from one sandboxed run (phase 2); values are Python values."""

    problem_id: str
    program_id: str
    args: tuple  # positional arguments of the entry point
    output: object
    input_source: str  # "visible" | "proposed"


@dataclass(frozen=True)
class Task:
    """A self-play task (phase 3): the prompt the policy sees and what its reward checks.

    `cases` are the (input, output) pairs the reward checks against and `shown` the pairs
    the prompt reveals; each kind's module (`unified.kinds`) says what they mean for it. `program` is the program the task was built from.
    """

    task_id: str  # "<program_id>:<kind>:<index>": unique in a round
    kind: str  # a registered task kind (unified.kinds.KINDS)
    problem_id: str
    program_id: str
    prompt: str  # the user message
    gold: str  # an answer text that earns reward 1
    entry_point: str
    program: str
    cases: tuple[TestCase, ...]
    shown: tuple[TestCase, ...] = ()
    atol: float = 0.0

    @property
    def messages(self) -> list[dict]:
        return [{"role": "user", "content": self.prompt}]


@dataclass(frozen=True)
class Rejection:
    """Why something was dropped in phases 1-4; every drop is one of these."""

    stage: str  # one of REJECTION_STAGES
    reason: str  # "syntax", "timeout", "nondeterministic", "trivial", ... (pipeline.validate.REASONS)
    problem_id: str
    subject: str = ""  # the program/task id, or the input's literal text
    kind: str = ""  # the task kind for task-stage rejections, else ""
    detail: str = ""


@dataclass(frozen=True)
class SamplingConfig:
    """How the engine samples: `n` completions per prompt; temperature 0 is greedy."""

    n: int = 1
    temperature: float = 1.0  # 0: greedy
    top_p: float = 1.0
    max_tokens: int = 128
    seed: int | None = None  # prompt i is sampled with seed + i
