"""Phases 1-4 of a round in one call, and the phase-5 rewards for its rollouts.

    data = build_round_data(problems, engine, executor, cfg, plan)   plan: pipeline/plan.py RoundPlan
    rewards = score_rollouts(data.tasks, completions, executor, cfg)

Two generation calls (K programs, proposed inputs) and two executor batches (visible check,
one run_twice for all program x input pairs).
`problems` must already carry expected values (`benchmarks.with_expected_outputs`).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from unified.kinds import KINDS, SOLVE, BuildOptions
from unified.kinds.agreement import votes_per_program
from unified.pipeline import ipo, programs as phase1, tasks as phase3, validate
from unified.pipeline.config import INPUTS, TTRLVR_KINDS, PipelineConfig  # noqa: F401 - the schema's names, re-exported
from unified.pipeline.generation import Generator, SamplingConfig
from unified.pipeline.plan import RoundPlan
from unified.pipeline.rewards import penalize_format_only_without_signal, score_batch
from unified.types import Completion, IOTriple, Problem, Program, Rejection, Task


@dataclass(frozen=True)
class RoundData:
    """Everything phases 1-4 made in one round. `programs` are the ones used for triples;
    `program_candidates` every extracted program (the rest were rejected)."""

    round_index: int
    problems: tuple[Problem, ...]
    pass_at_1: dict  # problem_id -> 1.0 / 0.0, None without hidden tests or when not evaluated
    program_candidates: tuple[Program, ...]
    programs: tuple[Program, ...]
    triples: tuple[IOTriple, ...]
    candidate_tasks: tuple[Task, ...]
    tasks: tuple[Task, ...]
    rejections: tuple[Rejection, ...]
    timings: dict  # phase name -> seconds
    program_completions: dict = field(default_factory=dict)  # problem id -> phase 1's K completions, as sampled
    # phase 1's programs that return every visible example's value (problems with at least one such example)
    visible_passing: frozenset = frozenset()

    def rejection_counts(self) -> Counter:
        """(stage, reason, kind) -> count; kind is "" before tasks exist."""
        return Counter((r.stage, r.reason, r.kind) for r in self.rejections)

    def kept_per_kind(self) -> dict[str, int]:
        return {k: sum(t.kind == k for t in self.tasks) for k in KINDS}

    def generated_per_kind(self) -> dict[str, int]:
        return {k: sum(t.kind == k for t in self.candidate_tasks) for k in KINDS}


def build_round_data(
    problems: Sequence[Problem],
    generator: Generator,
    executor,
    cfg: PipelineConfig,
    plan: RoundPlan,
    on_phase: Callable[[str, float], None] | None = None,
) -> RoundData:
    """Phases 1-4 on the problems `plan` draws (`plan.problems`), with its seed and phase 1's
    samples per problem (`plan.samples`; None: `num_programs` each). `on_phase(name, seconds)`:
    called as each sub-phase ends. Nothing here reads a hidden test (the round's evaluation is
    run/measure.py's): `pass_at_1` is None per problem."""
    cfg, round_index, round_seed = cfg.require_derived(), plan.round_index, plan.seed
    lap, rejections = _Laps(on_phase), []
    drawn = set(plan.problems)
    problems = [p for p in problems if p.problem_id in drawn]
    pass_at_1 = {p.problem_id: None for p in problems}
    (candidates, completions), kept, passing = _phase_1(problems, generator, executor, cfg, round_seed, rejections, plan.samples)
    lap("phase_1")
    selfplay = [p for p in kept if _within_group(p, cfg.num_programs) or p.program_id in passing]  # a wider budget is for solve
    triples = _phase_2(problems, selfplay, generator, executor, cfg, round_seed, rejections) if cfg.needs_triples else []
    lap("phase_2")
    opts = _build_options(cfg, candidates, kept, passing, rejections)
    candidate_tasks = _collect(rejections, phase3.build_tasks(problems, selfplay, triples, cfg.kinds, opts))
    lap("phase_3")
    tasks = _phase_4(candidate_tasks, triples, cfg, round_seed, rejections)
    lap("phase_4")
    return RoundData(
        round_index=round_index,
        problems=tuple(problems),
        pass_at_1=pass_at_1,
        program_candidates=tuple(candidates),
        programs=tuple(selfplay),
        program_completions=completions,
        visible_passing=frozenset(_with_examples(passing, problems)),
        triples=tuple(triples),
        candidate_tasks=tuple(candidate_tasks),
        tasks=tuple(tasks),
        rejections=tuple(rejections),
        timings=lap.timings,
    )


def _build_options(cfg: PipelineConfig, candidates, kept, passing, rejections: list) -> BuildOptions:
    """Phase 3's options: the config's, and what phases 1-2 found (votes, visible passes and failures)."""
    return BuildOptions(
        shown_pairs=cfg.induction_shown,
        visible_passing=frozenset(passing) if cfg.induction_needs_visible else None,
        partial_credit=cfg.partial_credit,
        solve_reward=cfg.solve_reward,
        solve_source=cfg.solve_source,
        program_votes=votes_per_program(candidates, kept),
        samples_per_problem=cfg.num_programs,
        agreement_min_votes=cfg.agreement_min_votes,
        visible_failures={r.subject: r.detail for r in rejections if r.reason == "fails_visible"},
    )


def _phase_4(candidate_tasks, triples, cfg: PipelineConfig, round_seed: int, rejections: list) -> list[Task]:
    """Phase 4: validate the candidate tasks, mix the kinds to their shares, cap the count (each drop is a rejection)."""
    tasks = _collect(
        rejections,
        validate.validate_tasks(
            candidate_tasks, triples, cfg.max_tasks_per_kind_per_problem, cfg.balance_kinds, round_seed, cfg.partial_credit
        ),
    )
    tasks = _collect(rejections, mix_tasks(tasks, cfg.shares, round_seed))
    tasks = _collect(rejections, cap_tasks(tasks, cfg.max_tasks, round_seed))
    return tasks


def _phase_1(
    problems,
    generator: Generator,
    executor,
    cfg: PipelineConfig,
    round_seed: int,
    rejections: list,
    budget: Mapping[str, int] | None = None,
):
    """K candidate programs per problem (plus canonical seeds; `budget`: K per problem),
    deduplicated, checked on the visible examples. A program that fails one still defines its
    own answers for the kinds that read only the program; `passing` says which ones agree
    with the problem text."""
    candidates: list[Program] = phase1.canonical_programs(problems) if cfg.seed_programs == "canonical" else []
    completions: dict = {}
    if cfg.num_programs > 0:
        generated, completions = _sample_programs(problems, generator, cfg, round_seed, rejections, budget)
        candidates += generated
    kept = _collect(rejections, phase1.deduplicate(candidates))
    passing = _collect(rejections, phase1.check_visible(kept, problems, executor.run_batch))
    if cfg.keep_passing_visible:
        kept = [p for p in kept if p.program_id in passing]
    return (candidates, completions), kept, passing


def _sample_programs(
    problems, generator: Generator, cfg: PipelineConfig, round_seed: int, rejections: list, budget: Mapping[str, int] | None
) -> tuple[list[Program], dict]:
    """Phase 1's generation: one call per distinct sample count (in ascending order), the
    programs back in the problems' order."""
    sizes = {p.problem_id: (budget or {}).get(p.problem_id, cfg.num_programs) for p in problems}
    shaped = SOLVE in cfg.constrain  # phase 1's programs are the solve kind's groups: one distribution
    programs, completions = {}, {}
    for n in sorted(set(sizes.values())):
        mine = [p for p in problems if sizes[p.problem_id] == n]
        sampling = replace(program_sampling(cfg, round_seed), n=n)
        generated, groups = _collect(rejections, phase1.generate_programs(mine, generator, sampling, shaped, cfg.program_end))
        completions.update(groups)
        for prog in generated:
            programs.setdefault(prog.problem_id, []).append(prog)
    return [prog for p in problems for prog in programs.get(p.problem_id, [])], {
        p.problem_id: completions[p.problem_id] for p in problems if p.problem_id in completions
    }


def _within_group(program: Program, n: int) -> bool:
    """A sampled program among its problem's first `n` (ids `<problem>#p<i>`); seeds count too."""
    index = program.program_id.rpartition("#p")[2]
    return not index.isdigit() or int(index) < n


def _with_examples(passing: set[str], problems) -> set[str]:
    """The passing programs of problems with a visible example that has a value (with none,
    every program passes a vacuous check)."""
    checked = {p.problem_id for p in problems if any(c.expected is not None for c in p.visible)}
    return {pid for pid in passing if pid.rpartition("#")[0] in checked}


def program_sampling(cfg: PipelineConfig, round_seed: int) -> SamplingConfig:
    """How phase 1 samples the K programs (phase 5 reuses them for `solve` when it matches)."""
    cfg = cfg.require_derived()
    return SamplingConfig(
        n=cfg.num_programs, temperature=cfg.program_temperature, max_tokens=cfg.program_max_tokens, seed=round_seed
    )


def _phase_2(problems, kept, generator: Generator, executor, cfg: PipelineConfig, round_seed: int, rejections: list):
    """Inputs (visible + proposed), every program on every input, run twice: IPO triples."""
    sampling = SamplingConfig(n=1, temperature=cfg.input_temperature, max_tokens=cfg.input_max_tokens, seed=round_seed + 1)
    with_programs = [p for p in problems if any(prog.problem_id == p.problem_id for prog in kept)]
    inputs = _collect(
        rejections,
        ipo.propose_inputs(with_programs, generator, sampling, cfg.num_proposed_inputs, shaped=INPUTS in cfg.constrain),
    )
    return _collect(rejections, ipo.execute(kept, inputs, executor.run_twice, cfg.max_output_chars))


def _collect(rejections: list, result: tuple):
    """(value, rejections) -> value, the rejections appended to the round's list."""
    value, rejected = result
    rejections += rejected
    return value


class _Laps:
    """Seconds per sub-phase, reported as each one ends."""

    def __init__(self, on_phase: Callable[[str, float], None] | None):
        self.timings: dict[str, float] = {}
        self.on_phase, self.clock = on_phase, time.perf_counter()

    def __call__(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name], self.clock = now - self.clock, now
        if self.on_phase is not None:
            self.on_phase(name, self.timings[name])


def mix_tasks(tasks: Sequence[Task], mix: dict[str, float], seed: int) -> tuple[list[Task], list[Rejection]]:
    """Phase 5's tasks in the `mix`'s shares: the largest round whose every kind with tasks gets
    its share (kinds with none this round drop out; the others keep their ratios), each kind's
    tasks a seeded sample; the rest are rejected as `over_mix`. Empty: every task."""
    if not mix:
        return list(tasks), []
    rng = random.Random(seed)
    present = {k: [t for t in tasks if t.kind == k] for k in mix if any(t.kind == k for t in tasks)}
    if not present:
        return list(tasks), []
    shares = {k: mix[k] / sum(mix[j] for j in present) for k in present}
    total = min(len(present[k]) / shares[k] for k in present)
    keep = {t.task_id for k, mine in present.items() for t in rng.sample(mine, min(len(mine), max(1, round(shares[k] * total))))}
    rejected = [
        Rejection("task", "over_mix", t.problem_id, t.task_id, t.kind, f"mix={mix}") for t in tasks if t.task_id not in keep
    ]
    return [t for t in tasks if t.task_id in keep], rejected


def cap_tasks(tasks: Sequence[Task], limit: int | None, seed: int) -> tuple[list[Task], list[Rejection]]:
    """At most `limit` tasks: kinds take turns (each in a seeded random order), so a cap
    keeps the mix; the rest are rejected as `over_cap`."""
    if limit is None or len(tasks) <= limit:
        return list(tasks), []
    rng = random.Random(seed)
    queues = {k: rng.sample([t for t in tasks if t.kind == k], sum(t.kind == k for t in tasks)) for k in KINDS}
    chosen: list[Task] = []
    while len(chosen) < limit:
        for kind in KINDS:
            if queues[kind] and len(chosen) < limit:
                chosen.append(queues[kind].pop())
    keep = {t.task_id for t in chosen}
    rejected = [
        Rejection("task", "over_cap", t.problem_id, t.task_id, t.kind, f"max_tasks={limit}")
        for t in tasks
        if t.task_id not in keep
    ]
    return [t for t in tasks if t.task_id in keep], rejected


def score_rollouts(
    tasks: Sequence[Task], completions: Sequence[Sequence[Completion | str]], executor, cfg: PipelineConfig
) -> list[list[tuple[float, str | None]]]:
    """Per task, per completion: (reward, parse-failure reason or None); one executor batch.
    The batch is the unit of `format_penalty_when` (phase 5: one chunk)."""
    items = [(task, c if isinstance(c, str) else c.text) for task, group in zip(tasks, completions) for c in group]
    flat = iter(score_batch(items, executor.run_batch, cfg.format_penalty, cfg.partial_credit, cfg.solve_reward))
    scores = [[next(flat) for _ in group] for group in completions]
    if cfg.format_penalty_when == "always":
        return scores
    return penalize_format_only_without_signal(tasks, scores, cfg.solve_reward)
