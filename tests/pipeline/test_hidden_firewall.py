"""Hidden tests never reach training: a round's phases 1-4 (evaluation off), its tasks of every
kind and their phase-5 rewards run on problems whose hidden tests explode when read, and no
module reads them outside `benchmarks/hidden.py` (the one reader) and `unified/eval/`: a rule
over folders, so a new module anywhere else is covered without being listed."""

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from tests.helpers.scripted import ScriptedGenerator
from tests.helpers.pipeline_config import pipeline_config
from tests.helpers.rounds import round_data as phases_1_4
from unified.benchmarks.hidden import with_expected_outputs
from unified.benchmarks.load import load_problems
from unified.kinds import TASK_KINDS
from unified.pipeline.phases import score_rollouts
from unified.sandbox.executor import ExecutorConfig
from unified.sandbox.executors import build_executor

PACKAGE = Path(__file__).resolve().parents[2] / "unified"
HIDDEN = ("hidden", "hidden_test_code")  # the Problem fields that hold hidden tests
ALLOWED = ("benchmarks/hidden.py", "eval/")  # the one reader, and evaluation


def hidden_readers(package: Path = PACKAGE) -> list[str]:
    """Every read of a Problem's hidden tests (`x.hidden`, `x.hidden_test_code`, or getattr with
    either name) in a module outside ALLOWED: writing them (`Problem(hidden=...)`) is no read."""
    found = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.startswith(ALLOWED):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            attribute = isinstance(node, ast.Attribute) and node.attr in HIDDEN
            by_name = (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in HIDDEN
            )
            if attribute or by_name:
                found.append(f"{rel}:{node.lineno}")
    return found


def test_no_module_outside_the_reader_and_eval_reads_the_hidden_tests():
    assert hidden_readers() == []


def test_the_rule_catches_a_planted_reader(tmp_path):
    """A new module in any folder (one no list names) that reads the hidden tests is caught;
    the allowed reader and eval/ are not."""
    for rel, text in {
        "run/new_metric.py": "def f(problem):\n    return len(problem.hidden)\n",
        "pipeline/sneaky.py": "def g(p):\n    return getattr(p, 'hidden_test_code')\n",
        "newfolder/x.py": "y = 1\nz = p.hidden[0]\n",
        "benchmarks/mbpp.py": "P = Problem(hidden=())\n",  # writing is no read
        "benchmarks/hidden.py": "n = len(p.hidden)\n",
        "eval/score.py": "n = p.hidden\n",
    }.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert hidden_readers(tmp_path) == ["newfolder/x.py:2", "pipeline/sneaky.py:2", "run/new_metric.py:2"]


class Tripwire(tuple):
    """Hidden tests that fail the test the moment anything reads them."""

    def _read(self, *_):
        pytest.fail("training-side code read Problem.hidden")

    __iter__ = __len__ = __getitem__ = __bool__ = __contains__ = _read


@pytest.mark.parametrize("source", ["visible", "agreement", "both"])
def test_a_round_and_its_rewards_never_read_the_hidden_tests(source):
    with build_executor(ExecutorConfig(workers=1)) as ex:
        problems = with_expected_outputs(
            [replace(p, hidden=p.hidden[:3]) for p in load_problems("mbpp", ids=["Mbpp/2", "Mbpp/3"])], ex.run_batch
        )
        sealed = [replace(p, hidden=Tripwire(), hidden_test_code="") for p in problems]
        programs = {p.entry_point: f"```python\n{p.canonical_solution}\n```" for p in problems}

        def respond(text, sampling):
            entry = next((k for k in programs if f"`{k}`" in text), None)
            return [programs[entry]] * sampling.n if entry else ["no idea"] * sampling.n

        cfg = pipeline_config(
            kinds=TASK_KINDS,
            evaluate_baseline=False,
            num_programs=2,
            num_proposed_inputs=0,
            max_tasks=None,
            solve_source=source,
            agreement_min_votes=2,
        )
        data = phases_1_4(sealed, ScriptedGenerator(respond), ex, cfg, round_index=1, seed=0)
        assert {t.kind for t in data.tasks} >= {"solve", "deduction"}
        solve = [t for t in data.tasks if t.kind == "solve"]
        assert len(solve) == 2 and all(t.cases for t in solve)  # agreement: the two identical programs are one cluster
        scores = score_rollouts(data.tasks, [[t.gold or "x", "nonsense"] for t in data.tasks], ex, cfg)
        assert len(scores) == len(data.tasks)


def test_select_visible_picks_without_reading_the_hidden_tests():
    """`--select visible` (unified/eval/select.py) chooses among samples on the visible examples
    alone: problems whose hidden tests explode when read get their pick, the first passing one."""
    from unified.eval.select import select_visible
    from unified.types import Program

    with build_executor(ExecutorConfig(workers=1)) as ex:
        problems = with_expected_outputs(load_problems("mbpp", ids=["Mbpp/2", "Mbpp/3"]), ex.run_batch)
        sealed = [replace(p, hidden=Tripwire(), hidden_test_code="") for p in problems]
        right = {p.problem_id: p.canonical_solution for p in problems}
        programs = [
            Program("Mbpp/2", "Mbpp/2#p0", "def similar_elements(a, b):\n    return ()\n", "similar_elements"),
            Program("Mbpp/2", "Mbpp/2#p1", right["Mbpp/2"], "similar_elements"),
            Program("Mbpp/2", "Mbpp/2#p2", right["Mbpp/2"], "similar_elements"),
            Program("Mbpp/3", "Mbpp/3#p0", "def is_not_prime(n):\n    return None\n", "is_not_prime"),
        ]
        chosen = select_visible(sealed, programs, ex.run_batch)
    assert {pid: (p.program_id if p else None) for pid, p in chosen.items()} == {"Mbpp/2": "Mbpp/2#p1", "Mbpp/3": None}
