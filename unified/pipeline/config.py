"""The pipeline's config groups: `pipeline` (phases 1-5's tasks and rewards) and
`benchmark` (which problems).

Frozen dataclasses whose fields are the keys of their Hydra group; `__post_init__` refuses a
bad value with one line naming it. `unified/schema.py` gathers these with the trainer's and
the executor's groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from unified.kinds import KINDS, SELF_PLAY, SOLVE, kind_of, per_problem, raw_answer
from unified.kinds.agreement import SOURCES as SOLVE_SOURCES
from unified.kinds.solve import REWARDS as SOLVE_REWARDS
from unified.text.stops import AnswerEnd, for_answer
from unified.types import Task

SEED_PROGRAMS = ("none", "canonical")
TTRLVR_KINDS = SELF_PLAY  # the self-play kinds of the original design
INDUCTION_REWARDS = ("all", "fraction")  # "fraction": partial credit, a share of the held-out pairs
FORMAT_PENALTY_WHEN = ("always", "no_signal")  # when an unreadable answer gets `format_penalty` (see score_rollouts)
INPUTS = "inputs"  # in `constrain`: phase 2's proposed inputs
# the fields whose value follows from another group: None in the class, filled by schema.derive
DERIVED = (
    "num_programs",
    "program_temperature",
    "program_max_tokens",
    "input_max_tokens",
    "seed_programs",
    "kinds",
    "mix",
    "constrain",
)


@dataclass(frozen=True)
class PipelineConfig:
    """The `pipeline` group's schema (unified/schema.py): its keys and defaults (configs/pipeline/default.yaml sets none)."""

    # a key that "follows" another is derived: None here, filled from what it follows by TrainConfig
    # (schema.derive); a PipelineConfig built by hand gives it (`require_derived` names any left out)
    # K candidate programs sampled per problem. Follows rollout.n: the group size has ONE source, rollout.n
    # (phase 1's programs are the solve kind's groups); set this only to sample phase 1 differently
    num_programs: int | None = None
    program_temperature: float | None = None  # follows rollout.temperature
    program_max_tokens: int | None = None  # follows model.max_new_tokens; also the greedy pass@1 sample's budget
    num_proposed_inputs: int = 2  # new inputs asked of the model per problem
    input_temperature: float = 0.8
    input_max_tokens: int | None = None  # follows model.max_new_tokens
    evaluate_baseline: bool = True  # greedy pass@1 on the hidden tests each round
    keep_passing_visible: bool = False  # drop programs that fail a visible example (else: no induction from them)
    induction_needs_visible: bool = True  # induction only from programs that pass the visible examples
    # "canonical": add each canonical solution as a program. Follows model.path: canonical for the embedded
    # tiny model (it writes noise), else none
    seed_programs: str | None = None
    # the task kinds a round builds (unified/kinds); `mix` replaces it. Follows model.path and rollout.backend:
    # solve + the self-play kinds for a real model ([solve] on hf), the self-play kinds for the tiny one
    kinds: tuple[str, ...] | None = None
    # "kind:share" of phase 5's tasks, e.g. [solve:0.75,deduction:0.25] (`mix_tasks`); empty: every kept task.
    # Follows model.path and kinds: DEFAULT_MIX's shares of the kinds for a real model, none for the tiny one
    mix: tuple[str, ...] | None = None
    # where answers are decoded in their kind's shape (a grammar, kinds/shapes.py): kind names, and
    # "inputs" for phase 2's proposals; "solve" also shapes phase 1's programs (they are its groups).
    # Follows rollout.backend: the self-play kinds and "inputs", none on hf (it cannot decode in a grammar)
    constrain: tuple[str, ...] | None = None
    max_tasks_per_kind_per_problem: int | None = 4
    max_tasks: int | None = None  # per round (per rank): a seeded, kind-balanced sample of the kept tasks (None: all)
    balance_kinds: bool = False  # keep as many tasks of each present kind as of the rarest one
    induction_shown: int = 3  # at most this many pairs shown in an induction prompt; >= 1 held out
    induction_reward: str = "all"  # "all" | "fraction" of held-out pairs
    solve_reward: str = "binary"  # solve kind: "binary" | "fraction" of its cases | "graded" (kinds/solve.py)
    solve_source: str = "visible"  # solve kind's expected values: "visible" examples | "agreement" | "both" (kinds/agreement.py)
    agreement_min_votes: int = (
        3  # the smallest cluster of programs whose outputs are a label (tuned: unified/eval/experiments/agreement_labels.py)
    )
    format_penalty: float = -0.5  # reward of an unreadable answer
    format_penalty_when: str = (
        "no_signal"  # "always" | "no_signal": only in a batch where correctness alone gives no group signal
    )
    max_output_chars: int = 1000  # longer output literals are rejected
    # stop each free-text completion where its answer ends (text/stops.py: the fence that closes a
    # program, the closing </answer> tag) instead of running on to EOS; evaluation never stops early
    stop_at_answer: bool = True
    # selective sampling (pipeline/selective.py): a problem silent in its last z drawn rounds is drawn
    # with probability max(selective_keep ** z, selective_floor); 1.0 draws every problem every round
    selective_keep: float = 1.0
    selective_floor: float = 0.25
    # discovery (pipeline/discovery.py): phase 1 samples `discovery_n` programs for a problem no sample has
    # passed the visible example of yet (0: `num_programs` for every problem) in the first `discovery_rounds`
    # rounds (0: every round); groups larger than the group size train on its max-variance subset; `replay`
    # offers each problem's newest passing answer to its later groups where no fresh sample passes
    # (off-policy, under the PPO clip). The default since 2026-11-29, decided on the tune split with
    # algorithm.consolidate_passes=8 (docs/discovery.md): one wide search in round 1, then groups of
    # `num_programs` while consolidation keeps what it found; no replay (consolidation trains found answers)
    discovery_n: int = 32
    discovery_rounds: int = 1
    replay: bool = False

    def __post_init__(self):  # a derived field still None is skipped: schema.derive fills it and this runs again
        for key in ("mix", "kinds", "constrain"):
            if getattr(self, key) is not None:
                object.__setattr__(self, key, tuple(str(v) for v in getattr(self, key)))
        if self.mix:
            object.__setattr__(self, "kinds", tuple(_shares(self.mix)))
        problems = []
        if self.seed_programs not in (*SEED_PROGRAMS, None):
            problems.append(f"seed_programs must be one of {SEED_PROGRAMS}, got {self.seed_programs!r}")
        if self.kinds is not None and (not self.kinds or set(self.kinds) - set(KINDS)):
            problems.append(f"kinds must be a non-empty subset of {tuple(KINDS)}, got {list(self.kinds)}")
        if self.induction_reward not in INDUCTION_REWARDS:
            problems.append(f"induction_reward must be one of {INDUCTION_REWARDS}, got {self.induction_reward!r}")
        if self.format_penalty_when not in FORMAT_PENALTY_WHEN:
            problems.append(f"format_penalty_when must be one of {FORMAT_PENALTY_WHEN}, got {self.format_penalty_when!r}")
        if self.mix and any(v <= 0 for v in _shares(self.mix).values()):
            problems.append(f"mix must give each kind a share > 0 (kind:share), got {list(self.mix)}")
        if set(self.constrain or ()) - set(KINDS) - {INPUTS}:
            problems.append(f"constrain must be a subset of {(*KINDS, INPUTS)}, got {list(self.constrain)}")
        if self.solve_source not in SOLVE_SOURCES:
            problems.append(f"solve_source must be one of {SOLVE_SOURCES}, got {self.solve_source!r}")
        if not (0 < self.selective_floor <= 1 and 0 < self.selective_keep <= 1):
            problems.append(
                f"selective_keep and selective_floor must be in (0, 1] (a silent problem is never skipped for "
                f"good), got {self.selective_keep} and {self.selective_floor}"
            )
        if self.agreement_min_votes < 1:
            problems.append("agreement_min_votes must be >= 1")
        if self.solve_source == "agreement" and self.keep_passing_visible:
            problems.append(
                "solve_source=agreement reads no visible example, but keep_passing_visible=true drops the "
                "programs that fail one (a label by the back door): set keep_passing_visible=false"
            )
        if self.solve_reward not in SOLVE_REWARDS:
            problems.append(f"solve_reward must be one of {SOLVE_REWARDS}, got {self.solve_reward!r}")
        if self.discovery_rounds < 0:
            problems.append(f"discovery_rounds must be >= 0 (0: the budget every round), got {self.discovery_rounds}")
        if self.discovery_n < 0:
            problems.append(f"discovery_n must be >= 0 (0: no wider budget for unsolved problems), got {self.discovery_n}")
        if (self.num_programs or 0) < 0 or self.num_proposed_inputs < 0 or self.induction_shown < 1:
            problems.append("num_programs and num_proposed_inputs must be >= 0, induction_shown >= 1")
        if problems:
            raise ValueError("pipeline config: " + "; ".join(problems))

    def require_derived(self) -> PipelineConfig:
        """This config, once every derived field has a value (a stage calls it as it starts): one
        line naming any still None, instead of a TypeError deep inside a phase."""
        missing = [key for key in DERIVED if getattr(self, key) is None]
        if missing:
            raise ValueError(
                f"pipeline.{missing[0]} is None: derived keys ({', '.join(missing)}) follow other groups and "
                f"TrainConfig fills them (schema.derive): build the config as a TrainConfig, or give "
                f"PipelineConfig({missing[0]}=...)"
            )
        return self

    @property
    def shares(self) -> dict[str, float]:
        """`mix` as kind -> share (empty: no mix)."""
        return _shares(self.mix)

    @property
    def partial_credit(self) -> bool:
        return self.induction_reward == "fraction"

    @property
    def needs_triples(self) -> bool:
        """Some configured kind builds from IPO triples, or solve's labels come from agreement
        (phase 2 runs only then)."""
        agreement = SOLVE in self.kinds and self.solve_source != "visible"
        return agreement or any(not per_problem(kind_of(k)) for k in self.kinds)

    def shape(self, task: Task) -> str | None:
        """The grammar `task`'s answers are decoded in, or None (free text)."""
        return kind_of(task.kind).answer_shape(task) if task.kind in self.constrain else None

    def answer_end(self, task: Task) -> AnswerEnd | None:
        """Where `task`'s answers stop (`stop_at_answer`), or None: run on to EOS (a shaped
        answer's grammar ends it anyway)."""
        if not self.stop_at_answer or task.kind in self.constrain:
            return None
        return for_answer(raw_answer(kind_of(task.kind)), task.entry_point)

    def program_end(self, entry_point: str) -> AnswerEnd | None:
        """Where phase 1's programs stop: they are the solve kind's answers."""
        if not self.stop_at_answer or SOLVE in self.constrain:
            return None
        return for_answer(raw_answer(kind_of(SOLVE)), entry_point)


def _shares(mix: Sequence[str]) -> dict[str, float]:
    """["solve:0.75", "deduction:0.25"] -> {"solve": 0.75, "deduction": 0.25}; a malformed entry
    is a ValueError naming it."""
    out = {}
    for item in mix:
        kind, _, share = str(item).partition(":")
        try:
            out[kind.strip()] = float(share)
        except ValueError:
            raise ValueError(f"pipeline config: mix entries are kind:share, e.g. solve:0.75, got {item!r}") from None
    return out


@dataclass(frozen=True)
class BenchmarkConfig:
    name: str = "mbpp"  # mbpp | humaneval
    source: Optional[str] = None  # None: the bundled data; or a JSONL/Parquet path, or a HF dataset name
    problems: Optional[int] = 10  # the first K problems by id, when problem_ids is empty
    problem_ids: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "problem_ids", tuple(str(i) for i in self.problem_ids))
