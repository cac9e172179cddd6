"""The round as values: the run's learning state and each round's plan, torch-free.

    plan = plan_round(state, cfg, problem_ids, round_index)   what this round does, decided at its start
    data = phases 1-4 (build_round_data(..., plan))                   tasks
    result = phase 5 (train_on_tasks(data, ..., plan)), consolidation update
    state = state.after(plan, data, result)                           what the round taught, applied once

`RunState` is what the run has learned that is not weights: each problem's found passing
answer (`discovery.py`), its signal history (`selective.py`), its consolidation target
(`consolidation.py`) and the evaluation history the ScaleRL fit reads. It rides in every
checkpoint as one dict (`to_dict` / `from_dict`; a checkpoint written before a key existed
resumes with that key empty).

`RoundPlan` is one round's decisions, each taken once from the state and the config by the
rule beside it: the round index and every seed derived from it, the problems drawn, phase 1's
samples per problem, the replay offers, the supervised term's answers, whether the round
evaluates and whether it consolidates. **A new lever is one field here, one rule in
`plan_round`, one consumer** (docs/design.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Mapping, Sequence

from unified.pipeline import consolidation, discovery, selective
from unified.types import Completion, SamplingConfig


@dataclass(frozen=True)
class RunState:
    """The run's learning state between rounds (this rank's problems; the checkpoint holds every rank's)."""

    found: Mapping[str, Completion] = field(default_factory=dict)  # problem id -> its newest passing phase-1 answer
    signal_history: Mapping[str, tuple[bool, ...]] = field(default_factory=dict)  # problem id -> signal per drawn round
    targets: Mapping[str, consolidation.Target] = field(default_factory=dict)  # problem id -> its consolidation target
    eval_history: tuple[tuple[float, float], ...] = ()  # (cumulative compute seconds, greedy pass@1): the ScaleRL fit

    def after(self, plan: RoundPlan, data, result) -> RunState:
        """The state once the round ran: this round's passing answers found, each drawn problem's
        signal observed (its phase-5 groups, `result.rollouts`), the consolidation's targets."""
        signal = selective.problems_with_signal(groups(data.tasks, result.rollouts))
        targets = getattr(result, "targets", None)
        return replace(
            self,
            found=discovery.update_found(self.found, data.program_completions, data.visible_passing),
            signal_history=selective.observe(self.signal_history, plan.problems, signal),
            targets=self.targets if targets is None else dict(targets),
        )

    def evaluated(self, compute_s: float, pass_at_1: float) -> RunState:
        """The state with one more point of the evaluation history."""
        return replace(self, eval_history=(*self.eval_history, (compute_s, pass_at_1)))

    def to_dict(self) -> dict:
        """The checkpoint's form (plain lists and dicts): `merge_ranks` joins the ranks' parts."""
        return {
            "found": {pid: asdict(c) for pid, c in self.found.items()},
            "signal_history": {pid: list(h) for pid, h in self.signal_history.items()},
            "targets": consolidation.to_state(self.targets),
            "eval_history": [list(x) for x in self.eval_history],
        }

    @classmethod
    def from_dict(cls, state: Mapping) -> RunState:
        """The state a checkpoint holds (its `state.pt` dict; keys it predates: empty)."""
        found = {
            pid: Completion(**{k: tuple(v) if isinstance(v, list) else v for k, v in c.items()})
            for pid, c in (state.get("found") or {}).items()
        }
        return cls(
            found,
            {pid: tuple(h) for pid, h in (state.get("signal_history") or {}).items()},
            consolidation.from_state(state.get("targets") or {}),
            tuple(tuple(x) for x in state.get("eval_history") or ()),
        )


def merge_ranks(parts: Sequence[dict]) -> dict:
    """Every rank's `to_dict` as one (each rank holds its own problems; the history is every rank's)."""
    return {key: {k: v for part in parts for k, v in part[key].items()} for key in ("found", "signal_history", "targets")} | {
        "eval_history": parts[0]["eval_history"]
    }


def groups(tasks, rollouts) -> list[tuple[str, list[float]]]:
    """(problem id, rewards) of each phase-5 group."""
    problem_of, rewards = {t.task_id: t.problem_id for t in tasks}, {}
    for row in rollouts:
        rewards.setdefault(row.task_id, []).append(row.reward)
    return [(problem_of[task_id], group) for task_id, group in rewards.items() if task_id in problem_of]


@dataclass(frozen=True)
class RoundPlan:
    """One round's decisions, taken once at its start (`plan_round`)."""

    round_index: int
    seed: int  # the round's seed, phases 1-4: run seed * 100_003 + round (phase 2 and chunks derive from these)
    sampling: SamplingConfig  # phase 5's sampling, its seed the round's seed * 7919
    problems: tuple[str, ...]  # drawn: phases 1-5 run on them (`pipeline.selective_keep`; all at 1.0)
    skipped: tuple[str, ...] = ()
    evaluate: bool = False  # greedy pass@1 on the hidden tests this round (`trainer.eval_every`; measured by run/measure.py)
    samples: Mapping[str, int] | None = None  # phase 1's samples per drawn problem (`pipeline.discovery_n`; None: num_programs)
    # problem id -> an earlier round's pass offered (`pipeline.replay`)
    replay: Mapping[str, Completion] = field(default_factory=dict)
    # the supervised term (`algorithm.sft_coef` > 0): problem id -> an earlier round's found answer; None: off.
    # `supervised_answers` puts this round's phase-1 passes first
    supervised: Mapping[str, Completion] | None = None
    consolidate: bool = False  # consolidation after the update (`algorithm.consolidate_passes` > 0, and the run trains)

    @classmethod
    def of(cls, problem_ids: Sequence[str], round_index: int = 1, seed: int = 0, **levers) -> RoundPlan:
        """A plan that draws every problem (tests, tools): the run's seeds, `levers` as given."""
        round_seed = seed * 100_003 + round_index
        return cls(round_index, round_seed, SamplingConfig(n=1, seed=round_seed * 7919), tuple(problem_ids), **levers)

    def supervised_answers(self, data) -> list[Completion]:
        """The supervised term's answers: each of the round's problems' newest passing completion,
        this round's phase 1 first, else an earlier round's (none when the term is off)."""
        if self.supervised is None:
            return []
        found = discovery.update_found(self.supervised, data.program_completions, data.visible_passing)
        return discovery.found_answers(found, [p.problem_id for p in data.problems])


def plan_round(state: RunState, cfg, problem_ids: Sequence[str], round_index: int) -> RoundPlan:
    """The round's plan from the state: selection, phase 1's budget, replay, the supervised term,
    evaluation and consolidation, each by its own rule (`cfg`: the run's `schema.TrainConfig`, its
    `pipeline`, `algorithm`, `trainer` and `rollout` groups; pipeline/ imports no schema)."""
    pipeline, t = cfg.pipeline, cfg.trainer
    seed = cfg.seed * 100_003 + round_index  # differs per round, reproducible per run
    drawn = selective.select(
        problem_ids, state.signal_history, pipeline.selective_keep, pipeline.selective_floor, cfg.seed, round_index
    )
    budget = (
        discovery.samples_per_problem(drawn.drawn, state.found, pipeline.num_programs, pipeline.discovery_n)
        if pipeline.discovery_n and (not pipeline.discovery_rounds or round_index <= pipeline.discovery_rounds)
        else None
    )
    mine = set(drawn.drawn)
    earlier = {pid: c for pid, c in state.found.items() if pid in mine}
    return RoundPlan(
        round_index,
        seed,
        cfg.rollout.sampling(seed=seed * 7919),
        drawn.drawn,
        drawn.skipped,
        evaluate=pipeline.evaluate_baseline and t.eval_every > 0 and (round_index - 1) % t.eval_every == 0,
        samples=budget,
        replay=earlier if pipeline.replay else {},
        supervised=earlier if cfg.algorithm.sft_coef else None,
        consolidate=bool(cfg.algorithm.consolidate_passes) and t.update_weights,
    )
