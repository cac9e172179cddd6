"""Hidden tests never reach training: a round's phases 1-4 (evaluation off), its tasks of every
kind and their phase-5 rewards run on problems whose hidden tests explode when read, and no
training-side module mentions them at all."""

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from unified.kinds import TASK_KINDS
from unified.pipeline.benchmarks import load_problems, with_expected_outputs
from unified.pipeline.generation import ScriptedGenerator
from unified.pipeline.phases import PipelineConfig, build_round_data, score_rollouts
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor

ROOT = Path(__file__).resolve().parents[2] / "unified"
# the training side: what builds tasks, rewards them and trains on them
TRAINING = [*sorted((ROOT / "kinds").glob("*.py")), *sorted((ROOT / "trainer").glob("*.py")), ROOT / "run" / "phase5.py",
            *sorted((ROOT / "text").glob("*.py")), *sorted((ROOT / "values").glob("*.py")),
            *(ROOT / "pipeline" / f for f in ("programs.py", "ipo.py", "tasks.py", "validate.py", "rewards.py", "generation.py"))]  # fmt: skip


class Tripwire(tuple):
    """Hidden tests that fail the test the moment anything reads them."""

    def _read(self, *_):
        pytest.fail("training-side code read Problem.hidden")

    __iter__ = __len__ = __getitem__ = __bool__ = __contains__ = _read


def test_no_training_module_mentions_the_hidden_tests():
    offenders = []
    for path in TRAINING:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("hidden", "hidden_test_code"):
                offenders.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}")
    assert not offenders, offenders


@pytest.mark.parametrize("source", ["visible", "agreement", "both"])
def test_a_round_and_its_rewards_never_read_the_hidden_tests(source):
    with build_executor(ExecutorConfig(workers=1)) as ex:
        problems = with_expected_outputs([replace(p, hidden=p.hidden[:3]) for p in load_problems("mbpp", ids=["Mbpp/2", "Mbpp/3"])],
                                         ex.run_batch)  # fmt: skip
        sealed = [replace(p, hidden=Tripwire(), hidden_test_code="") for p in problems]
        programs = {p.entry_point: f"```python\n{p.canonical_solution}\n```" for p in problems}

        def respond(text, sampling):
            entry = next((k for k in programs if f"`{k}`" in text), None)
            return [programs[entry]] * sampling.n if entry else ["no idea"] * sampling.n

        cfg = PipelineConfig(kinds=TASK_KINDS, evaluate_baseline=False, num_programs=2, num_proposed_inputs=0,
                             max_tasks=None, solve_source=source, agreement_min_votes=2)  # fmt: skip
        data = build_round_data(sealed, ScriptedGenerator(respond), ex, cfg, round_index=1, seed=0)
        assert {t.kind for t in data.tasks} >= {"solve", "deduction"}
        solve = [t for t in data.tasks if t.kind == "solve"]
        assert len(solve) == 2 and all(t.cases for t in solve)  # agreement: the two identical programs are one cluster
        scores = score_rollouts(data.tasks, [[t.gold or "x", "nonsense"] for t in data.tasks], ex, cfg)
        assert len(scores) == len(data.tasks)
