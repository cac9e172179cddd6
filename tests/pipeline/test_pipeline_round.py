"""Phases 1-4 end to end with a scripted generator and the real sandbox."""

from dataclasses import fields, replace
from pathlib import Path

import pytest
import yaml

from tests.helpers.rounds import round_data as phases_1_4
from unified.benchmarks.hidden import with_expected_outputs
from unified.benchmarks.load import load_problems
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor
from tests.helpers.scripted import ScriptedGenerator
from tests.helpers.pipeline_config import pipeline_config
from unified.pipeline.config import DERIVED, TTRLVR_KINDS
from unified.pipeline.phases import PipelineConfig, score_rollouts
from unified.values import to_literal, values_equal
from unified.kinds import TASK_KINDS
from unified.types import TestCase

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "pipeline" / "default.yaml"
FIVE = ["Mbpp/2", "Mbpp/3", "Mbpp/4", "Mbpp/63", "Mbpp/8"]


@pytest.fixture(scope="module")
def executor():
    with build_executor(ExecutorConfig(workers=2, timeout_s=2.0)) as ex:
        yield ex


def _problems(benchmark, ids, executor, hidden=5):
    """Problems with expected values; few hidden cases keep the sandbox work small."""
    chosen = [replace(p, hidden=p.hidden[:hidden]) for p in load_problems(benchmark, ids=ids)]
    return with_expected_outputs(chosen, executor.run_batch)


def script(programs=None, inputs=None, greedy=None):
    """A generator answering by prompt kind: greedy (temperature 0) -> `greedy[entry]`,
    input proposals -> `inputs[entry]`, program sampling -> `programs[entry]` (lists)."""

    def entry_of(text, table):
        return next((k for k in (table or {}) if f"`{k}`" in text or f"def {k}(" in text), None)

    def respond(text, sampling):
        if sampling.temperature == 0:
            key = entry_of(text, greedy)
            return [greedy[key]] if key else ["I am not sure."]
        if "new, varied test inputs" in text:
            key = entry_of(text, inputs)
            return [inputs[key]] if key else ["no ideas"]
        key = entry_of(text, programs)
        return programs[key] if key else ["noise noise"]

    return ScriptedGenerator(respond)


def _wrong_answer(task, data):
    """An answer that must earn 0 (and parses): a different value, an input giving a
    different output, a program returning a marker."""
    if task.kind == "deduction":
        return f"<answer>{to_literal(('__wrong__', task.cases[0].expected))}</answer>"
    if task.kind == "abduction":
        out = task.cases[0].expected
        other = next(t for t in data.triples if t.program_id == task.program_id and not values_equal(t.output, out))
        return f"<answer>{task.entry_point}({', '.join(to_literal(a) for a in other.args)})</answer>"
    if task.kind == "solve":  # the benchmark's own format: a code block, no tag
        return f"```python\ndef {task.entry_point}(*args):\n    return '__wrong__'\n```"
    return f"<answer>\ndef {task.entry_point}(*args):\n    return '__wrong__'\n</answer>"


def test_gold_earns_one_and_wrong_earns_zero_over_a_whole_round(executor):
    problems = _problems("mbpp", FIVE, executor)
    cfg = pipeline_config(
        max_tasks=None,
        keep_passing_visible=True,
        num_proposed_inputs=4,
        seed_programs="canonical",
        max_tasks_per_kind_per_problem=None,
        balance_kinds=False,
        kinds=TASK_KINDS,
    )
    data = phases_1_4(problems, script(), executor, cfg, round_index=1, seed=0)
    kinds = {t.kind for t in data.tasks}
    # keep_passing_visible drops every failing program: nothing to repair (tests/kinds/test_repair.py)
    assert kinds == set(TASK_KINDS) - {"repair"} and len(data.tasks) >= 30
    assert {t.problem_id for t in data.tasks} == set(FIVE)
    scores = score_rollouts(data.tasks, [[t.gold, _wrong_answer(t, data)] for t in data.tasks], executor, cfg)
    bad = [(t.task_id, s) for t, s in zip(data.tasks, scores) if s != [(1.0, None), (0.0, None)]]
    assert not bad


def test_default_config_round_is_capped_and_balanced(executor):
    problems = _problems("mbpp", FIVE, executor)
    cfg = pipeline_config(
        max_tasks=None, keep_passing_visible=True, balance_kinds=True, num_proposed_inputs=4, seed_programs="canonical"
    )
    data = phases_1_4(problems, script(), executor, cfg, round_index=1, seed=0)
    kept = {k: v for k, v in data.kept_per_kind().items() if k in cfg.kinds}
    assert len(set(kept.values())) == 1 and kept["deduction"] > 0  # balanced
    for pid in FIVE:
        for kind in TASK_KINDS:
            assert sum(t.problem_id == pid and t.kind == kind for t in data.tasks) <= 4
    counts = data.rejection_counts()
    assert counts[("program", "no_code", "")] == 5 * cfg.num_programs  # the scripted noise
    assert counts[("input", "no_inputs", "")] == 5  # no proposals: visible inputs only
    assert set(data.timings) == {"phase_1", "phase_2", "phase_3", "phase_4"}  # the evaluation is run/measure.py's
    # same seed, same round -> same tasks
    again = phases_1_4(problems, script(), executor, cfg, round_index=1, seed=0)
    assert [t.task_id for t in again.tasks] == [t.task_id for t in data.tasks]


SIMILAR = "def similar_elements(test_tup1, test_tup2):\n    return tuple(set(test_tup1) & set(test_tup2))\n"
MAXDIFF = "def max_difference(test_list):\n    return max(abs(a - b) for a, b in test_list)\n"


def test_scripted_programs_and_tuple_inputs_exactly(executor):
    problems = _problems("mbpp", ["Mbpp/2", "Mbpp/63"], executor)
    p2, p63 = problems
    gen = script(
        programs={
            "similar_elements": [
                f"Here is my answer:\n```python\n{SIMILAR}```\nDone.",
                "```python\ndef similar_elements(test_tup1,test_tup2):  # same program\n  return tuple(set(test_tup1)&set(test_tup2))\n```",
                "```python\ndef similar_elements(a, b):\n    return a\n```",
                "no idea",
            ],
            "max_difference": [MAXDIFF],
        },
        inputs={
            "similar_elements": "```python\nsimilar_elements([1, 2, 3], [2, 3, 4])\n"
            "similar_elements((3, 4, 5, 6), (5, 7, 4, 10))\nsimilar_elements(1)\n```",
            "max_difference": "max_difference([[1, 5], [2, 2]])",
        },
    )
    cfg = pipeline_config(
        max_tasks=None,
        keep_passing_visible=True,
        num_proposed_inputs=4,
        num_programs=4,
        max_tasks_per_kind_per_problem=None,
        balance_kinds=False,
        evaluate_baseline=False,
    )
    data = phases_1_4(problems, gen, executor, cfg, round_index=3, seed=0)

    assert [p.program_id for p in data.programs] == ["Mbpp/2#p0", "Mbpp/63#p0"]
    program_rejections = sorted((r.subject, r.reason) for r in data.rejections if r.stage == "program")
    assert program_rejections == [
        ("Mbpp/2#p1", "duplicate"),
        ("Mbpp/2#p2", "fails_visible"),
        ("Mbpp/2#p3", "no_code"),
        ("Mbpp/63#p1", "duplicate"),
        ("Mbpp/63#p2", "duplicate"),
        ("Mbpp/63#p3", "duplicate"),
    ]  # the scripted generator repeats Mbpp/63's one program to fill n=4
    input_rejections = sorted(r.reason for r in data.rejections if r.stage == "input")
    assert input_rejections == ["duplicate", "wrong_arity"]

    proposed = {t.problem_id: t for t in data.triples if t.input_source == "proposed"}
    assert proposed["Mbpp/2"].args == ((1, 2, 3), (2, 3, 4)) and proposed["Mbpp/2"].output == (2, 3)
    assert proposed["Mbpp/63"].args == ([(1, 5), (2, 2)],) and proposed["Mbpp/63"].output == 4
    visible = [t for t in data.triples if t.problem_id == "Mbpp/2" and t.input_source == "visible"]
    assert [t.args for t in visible] == [c.args for c in p2.visible]
    assert all(values_equal(t.output, c.expected) for t, c in zip(visible, p2.visible))

    deduction = next(t for t in data.tasks if t.kind == "deduction" and t.cases[0].args == ((1, 2, 3), (2, 3, 4)))
    assert "similar_elements((1, 2, 3), (2, 3, 4))" in deduction.prompt and deduction.gold == "<answer>(2, 3)</answer>"
    induction = next(t for t in data.tasks if t.kind == "induction" and t.problem_id == "Mbpp/63")
    assert len(induction.shown) == 3 and len(induction.cases) == len(p63.visible) + 1 - 3
    assert p63.prompt in induction.prompt


def test_humaneval_round_and_pass_at_1(executor):
    problems = _problems("humaneval", ["HumanEval/0", "HumanEval/1"], executor)
    he0, he1 = problems
    body = he0.canonical_solution[len(he0.prompt) :]
    # the greedy answer for HumanEval/0 leaves out the prompt's `from typing import List`
    answer = f"```python\ndef has_close_elements(numbers: List[float], threshold: float) -> bool:\n{body}```"
    gen = script(
        greedy={
            "has_close_elements": answer,
            "separate_paren_groups": "```python\ndef separate_paren_groups(s):\n    return []\n```",
        }
    )
    cfg = pipeline_config(
        max_tasks=None,
        keep_passing_visible=True,
        num_proposed_inputs=4,
        seed_programs="canonical",
        num_programs=2,
        max_tasks_per_kind_per_problem=None,
        balance_kinds=False,
    )
    data = phases_1_4(problems, gen, executor, cfg, round_index=1, seed=0, evaluate=True)
    assert data.pass_at_1 == {"HumanEval/0": 1.0, "HumanEval/1": 0.0}
    greedy_calls = [s for _, s in gen.calls if s.temperature == 0]
    assert len(greedy_calls) == 1 and greedy_calls[0].n == 1
    assert {t.problem_id for t in data.tasks} == {"HumanEval/0", "HumanEval/1"}
    scores = score_rollouts(data.tasks, [[t.gold] for t in data.tasks], executor, cfg)
    assert all(s == [(1.0, None)] for s in scores)


def test_mbpp_pass_at_1_on_hidden_tests(executor):
    problems = _problems("mbpp", ["Mbpp/2", "Mbpp/63"], executor, hidden=20)
    gen = script(
        greedy={
            "similar_elements": f"```python\n{SIMILAR}```",
            "max_difference": "```python\ndef max_difference(t):\n    return 0\n```",
        }
    )
    cfg = pipeline_config(max_tasks=None, keep_passing_visible=True, balance_kinds=True, num_programs=0, num_proposed_inputs=0)
    data = phases_1_4(problems, gen, executor, cfg, round_index=1, evaluate=True)
    assert data.pass_at_1 == {"Mbpp/2": 1.0, "Mbpp/63": 0.0}
    assert data.tasks == () and data.programs == ()


def test_hidden_tests_never_reach_tasks_prompts_or_rewards(executor):
    [p2] = _problems("mbpp", ["Mbpp/2"], executor, hidden=0)
    hidden = TestCase(((987654321, 5), (5, 123456789)), (5,))  # what the canonical solution returns
    sentinel = replace(p2, hidden=(hidden,))
    gen = script(
        programs={"similar_elements": [f"```python\n{SIMILAR}```"]},
        greedy={"similar_elements": f"```python\n{SIMILAR}```"},
        inputs={"similar_elements": "similar_elements((1, 2), (2, 3))"},
    )
    cfg = pipeline_config(
        max_tasks=None,
        keep_passing_visible=True,
        num_proposed_inputs=4,
        seed_programs="canonical",
        max_tasks_per_kind_per_problem=None,
        balance_kinds=False,
    )
    data = phases_1_4([sentinel], gen, executor, cfg, round_index=1, evaluate=True)
    assert data.pass_at_1 == {"Mbpp/2": 1.0}  # evaluation did read the hidden case
    assert data.tasks
    marks = ("987654321", "123456789")
    texts = [t.prompt + t.gold + repr(t.cases) + repr(t.shown) for t in data.candidate_tasks]
    texts += [repr(t) for t in data.triples]
    texts += [prompt for prompts, _ in gen.calls for prompt in prompts]
    assert not [t for t in texts for m in marks if m in t]


def test_pipeline_config_is_the_schema_and_the_file_holds_deltas():
    from unified.config import compose_config, typed
    from unified.errors import UserError

    def pipeline(*overrides):
        return typed(compose_config(list(overrides))).pipeline

    mapping = yaml.safe_load(CONFIG.read_text())
    assert set(mapping) < {f.name for f in fields(PipelineConfig)}  # only keys of the schema, not all of them
    assert list(compose_config([]).pipeline) == [f.name for f in fields(PipelineConfig)]
    # only the derived keys (None in the class: they follow other groups) differ from the dataclass default
    resolved, defaults = pipeline("model=tiny"), PipelineConfig()
    differing = {f.name for f in fields(PipelineConfig) if getattr(resolved, f.name) != getattr(defaults, f.name)}
    assert differing == set(DERIVED)
    assert resolved.seed_programs == "canonical"  # the default for the embedded tiny model
    assert resolved.kinds == TTRLVR_KINDS  # the self-play kinds: it writes no code
    assert pipeline("model=hf").seed_programs == "none" and pipeline("model=hf").kinds[0] == "solve"
    with pytest.raises(UserError, match="unknown config key 'pipeline.num_program'"):
        compose_config(["pipeline.num_program=3"])
    with pytest.raises(UserError, match="seed_programs"):
        pipeline("pipeline.seed_programs=gold")
    with pytest.raises(UserError, match="kinds"):
        pipeline("pipeline.kinds=[deduction,riddles]")
    with pytest.raises(UserError, match="induction_reward"):
        pipeline("pipeline.induction_reward=most")
    with pytest.raises(UserError, match="num_programs.*'three'"):
        compose_config(["pipeline.num_programs=three"])
    assert pipeline("pipeline.kinds=[deduction]").kinds == ("deduction",)
    with pytest.raises(ValueError, match="kinds"):  # the dataclass checks itself, config or not
        PipelineConfig(kinds=("riddles",))


def test_a_real_model_trains_on_the_default_mix_and_one_override_gives_solve_alone():
    """The default for a real model is solve plus the self-play kinds in DEFAULT_MIX's shares
    (the tune sweep's winner); naming the kinds keeps their default shares, naming one kind or a
    kind outside the mix means every kept task, `rollout=hf` (no answer shapes) solve alone, and
    the tiny model no mix at all."""
    from unified.config import compose_config, typed
    from unified.kinds import DEFAULT_MIX

    def pipeline(*overrides):
        return typed(compose_config(list(overrides))).pipeline

    default = pipeline("model=smollm2")
    assert default.kinds == tuple(DEFAULT_MIX) and default.shares == DEFAULT_MIX and default.kinds[0] == "solve"
    assert pipeline("model=smollm2", "pipeline.kinds=[solve]").kinds == ("solve",)
    assert pipeline("model=smollm2", "pipeline.kinds=[solve]").mix == ()
    assert pipeline("model=smollm2", "pipeline.kinds=[solve,induction]").shares == {"solve": 0.7, "induction": 0.1}
    assert pipeline("model=smollm2", "pipeline.kinds=[solve,repair]").mix == ()  # repair has no default share
    assert pipeline("model=smollm2", "pipeline.mix=[]").kinds == tuple(DEFAULT_MIX)  # every kept task
    assert pipeline("model=smollm2", "pipeline.mix=[solve:0.5,abduction:0.5]").kinds == ("solve", "abduction")
    assert pipeline("model=smollm2", "rollout=hf").kinds == ("solve",) and pipeline("model=smollm2", "rollout=hf").mix == ()
    assert pipeline("model=smollm2", "experiment=solve_tuned").kinds == ("solve",)  # the report run's recipe, exactly
    assert pipeline("model=tiny").mix == () and "solve" not in pipeline("model=tiny").kinds


def test_the_budget_samples_each_problem_its_own_count_and_self_play_keeps_the_group(executor):
    """`budget` (pipeline/discovery.py): phase 1 asks each problem for its own number of samples
    (one generation call per count); the passing programs of every sample are known, while the
    self-play kinds build from the first `num_programs` samples (and any that pass) only."""
    problems = _problems("mbpp", ["Mbpp/2", "Mbpp/3", "Mbpp/4"], executor)
    right = {"Mbpp/3": "```python\ndef is_not_prime(n):\n    return n < 2 or any(n % d == 0 for d in range(2, n))\n```"}
    wrong = {p.entry_point: [f"```python\ndef {p.entry_point}(*a):\n    return {i}\n```" for i in range(6)] for p in problems}
    programs = {**wrong, "is_not_prime": wrong["is_not_prime"][:5] + [right["Mbpp/3"]]}  # only the 6th sample passes
    cfg = pipeline_config(kinds=("solve", "deduction"), num_programs=2, num_proposed_inputs=0, evaluate_baseline=False)
    gen = script(programs=programs)
    data = phases_1_4(problems, gen, executor, cfg, round_index=1, seed=0, samples={"Mbpp/2": 2, "Mbpp/3": 6, "Mbpp/4": 6})
    asked = [(len(texts), s.n) for texts, s in gen.calls]
    assert asked == [(1, 2), (2, 6)]  # one call per count, ascending
    assert {pid: len(g) for pid, g in data.program_completions.items()} == {"Mbpp/2": 2, "Mbpp/3": 6, "Mbpp/4": 6}
    assert data.visible_passing == {"Mbpp/3#p5"}
    assert {p.program_id for p in data.programs} == {
        "Mbpp/2#p0",
        "Mbpp/2#p1",
        "Mbpp/3#p0",
        "Mbpp/3#p1",
        "Mbpp/3#p5",
        "Mbpp/4#p0",
        "Mbpp/4#p1",
    }
    again = phases_1_4(problems, script(programs=programs), executor, cfg, round_index=1, seed=0, samples=None)
    assert {pid: len(g) for pid, g in again.program_completions.items()} == {"Mbpp/2": 2, "Mbpp/3": 2, "Mbpp/4": 2}
    assert again.visible_passing == frozenset()  # the pass was the 6th sample
