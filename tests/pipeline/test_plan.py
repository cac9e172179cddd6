"""The round as values: `plan_round` takes every lever's choice once from the state and the
config, `RunState.after` applies a round once, and the state's one dict form resumes old
checkpoints (keys they predate are empty)."""

from dataclasses import replace
from types import SimpleNamespace

from unified.pipeline.consolidation import FOUND, Target
from unified.pipeline.plan import RoundPlan, RunState, merge_ranks, plan_round
from unified.schema import TrainConfig
from unified.trainer.config import AlgorithmConfig, TrainerConfig
from unified.types import Completion, Rollout

A = Completion("def f(x):\n    return x", (1, 2), (3, 4), (-0.5, -0.25), "stop", 2)
B = Completion("def g(x):\n    return x", (1,), (5,), (-1.0,), "stop", 3)
IDS = ["P/1", "P/2", "P/3"]


def test_a_plan_derives_every_seed_once_and_each_lever_from_the_state():
    cfg = TrainConfig(seed=7)
    cfg = replace(cfg, pipeline=replace(cfg.pipeline, discovery_rounds=0, replay=True))  # every lever on, every round
    state = RunState(found={"P/1": A, "P/9": B})
    plan = plan_round(state, cfg, IDS, 3)
    assert plan.round_index == 3 and plan.seed == 7 * 100_003 + 3 and plan.sampling.seed == plan.seed * 7919
    assert plan.sampling.n == cfg.rollout.n and plan.problems == tuple(IDS) and plan.skipped == ()
    assert plan.samples == {"P/1": cfg.pipeline.num_programs, "P/2": 32, "P/3": 32}  # discovery: found gets the group size
    assert plan.replay == {"P/1": A} and plan.supervised == {"P/1": A}  # only the drawn problems' answers
    assert plan.evaluate and plan.consolidate  # consolidation: on by default (8 passes)


def test_each_lever_off_is_its_own_field():
    cfg = replace(
        TrainConfig(),
        algorithm=AlgorithmConfig(sft_coef=0.0, consolidate_passes=2),
        trainer=TrainerConfig(eval_every=2, update_weights=False),
    )
    cfg = replace(cfg, pipeline=replace(cfg.pipeline, discovery_n=0, replay=False))
    plan = plan_round(RunState(found={"P/1": A}), cfg, IDS, 2)
    assert (plan.samples, plan.replay, plan.supervised, plan.evaluate) == (None, {}, None, False)
    assert not plan.consolidate  # the no-training control consolidates nothing
    assert plan_round(RunState(), replace(cfg, trainer=TrainerConfig(eval_every=2)), IDS, 3).consolidate


def test_the_budget_can_hold_in_the_first_rounds_only():
    cfg = TrainConfig()
    cfg = replace(cfg, pipeline=replace(cfg.pipeline, discovery_rounds=1))
    assert plan_round(RunState(), cfg, IDS, 1).samples == {pid: 32 for pid in IDS}
    assert plan_round(RunState(), cfg, IDS, 2).samples is None  # groups of num_programs from round 2 on
    every = replace(cfg, pipeline=replace(cfg.pipeline, discovery_rounds=0))
    assert plan_round(RunState(), every, IDS, 5).samples == {pid: 32 for pid in IDS}  # 0: every round
    assert TrainConfig().pipeline.discovery_rounds == 1  # the default: one wide search, in round 1


def test_a_silent_problem_is_drawn_by_the_selection_rule():
    cfg = TrainConfig()
    cfg = replace(cfg, pipeline=replace(cfg.pipeline, selective_keep=0.01, selective_floor=0.01))
    silent = RunState(signal_history={pid: (False,) * 5 for pid in IDS})
    plan = plan_round(silent, cfg, IDS, 4)
    assert set(plan.problems) | set(plan.skipped) == set(IDS) and len(plan.skipped) >= 2


def test_the_supervised_answers_put_this_rounds_pass_first():
    plan = RoundPlan.of(IDS, supervised={"P/1": A, "P/2": B})
    data = SimpleNamespace(
        problems=[SimpleNamespace(problem_id=i) for i in IDS],
        program_completions={"P/2": [A, B]},
        visible_passing=frozenset({"P/2#p0"}),
    )
    assert plan.supervised_answers(data) == [A, A]  # P/2's newest pass: this round's first passing sample
    assert RoundPlan.of(IDS).supervised_answers(data) == []  # the term off


def test_the_state_after_a_round_applies_it_once():
    data = SimpleNamespace(
        tasks=[SimpleNamespace(task_id="t1", problem_id="P/1"), SimpleNamespace(task_id="t2", problem_id="P/2")],
        program_completions={"P/2": [B]},
        visible_passing=frozenset({"P/2#p0"}),
    )
    rows = [Rollout(1, "t1", "solve", "x", r, None, "stop", 1, 0) for r in (0.0, 1.0)] + [
        Rollout(1, "t2", "solve", "x", 0.0, None, "stop", 1, 0)
    ] * 2
    plan = RoundPlan.of(["P/1", "P/2"])
    state = RunState(found={"P/1": A}, signal_history={"P/3": (True,)})
    after = state.after(plan, data, SimpleNamespace(rollouts=rows, targets=None))
    assert after.found == {"P/1": A, "P/2": B} and state.found == {"P/1": A}  # a value: the old state is untouched
    assert after.signal_history == {"P/1": (True,), "P/2": (False,), "P/3": (True,)}  # P/3 was not drawn
    target = Target("P/2", B, "def g(x):\n    return x", 1, FOUND)
    assert state.after(plan, data, SimpleNamespace(rollouts=rows, targets={"P/2": target})).targets == {"P/2": target}


def test_the_state_has_one_checkpoint_form_and_old_checkpoints_resume():
    target = Target("P/2", B, "def g(x):\n    return x", 1, FOUND)
    state = RunState({"P/1": A}, {"P/1": (True, False)}, {"P/2": target}, ((1.5, 0.1), (3.0, 0.2)))
    assert RunState.from_dict(state.to_dict()) == state
    assert RunState.from_dict({"round": 2, "aggregator": {}}) == RunState()  # a checkpoint older than the state
    old = {"signal_history": {"P/1": [True]}, "found": {"P/1": state.to_dict()["found"]["P/1"]}}  # before targets existed
    assert RunState.from_dict(old) == RunState(found={"P/1": A}, signal_history={"P/1": (True,)})
    parts = [RunState(found={"P/1": A}).to_dict(), RunState(found={"P/2": B}, eval_history=((1.0, 0.5),)).to_dict()]
    assert RunState.from_dict(merge_ranks(parts)).found == {"P/1": A, "P/2": B}


def test_the_hubs_take_the_plan_not_a_parameter_per_lever():
    """A new lever is a field of the plan: neither hub's signature grows with it."""
    import inspect

    from unified.pipeline.phases import build_round_data
    from unified.run.phase5 import train_on_tasks

    for hub in (build_round_data, train_on_tasks):
        params = inspect.signature(hub).parameters
        assert len(params) <= 6 and "plan" in params, hub.__name__
