"""Benchmarks: selection, visible/hidden split, MBPP+ argument types, user files."""

import ast
import gzip
import json

import pytest

from unified.benchmarks import mbpp
from unified.benchmarks.hidden import with_expected_outputs
from unified.benchmarks.humaneval import docstring_examples
from unified.benchmarks.load import BenchmarkError, load_problems
from unified.text.arg_types import calls_of
from unified.types import TestCase


def test_selection_by_count_and_id():
    first = load_problems("mbpp", count=3)
    assert [p.problem_id for p in first] == ["Mbpp/2", "Mbpp/3", "Mbpp/4"]
    chosen = load_problems("mbpp", ids=["Mbpp/63", "Mbpp/2"])
    assert [p.problem_id for p in chosen] == ["Mbpp/63", "Mbpp/2"]
    assert len(load_problems("mbpp")) == 399
    assert len(load_problems("humaneval")) == 164
    assert load_problems("humaneval", ids=["HumanEval/0"])[0].entry_point == "has_close_elements"


def test_bad_selection_is_a_clear_error():
    with pytest.raises(BenchmarkError, match="--benchmark humaneval"):
        load_problems("mbpp", ids=["HumanEval/0"])
    with pytest.raises(BenchmarkError, match="unknown benchmark"):
        load_problems("apps")
    with pytest.raises(BenchmarkError, match="at least 1"):
        load_problems("mbpp", count=0)


def test_mbpp_tuple_inputs_are_tuples():
    p2, p63 = load_problems("mbpp", ids=["Mbpp/2", "Mbpp/63"])
    assert all(isinstance(arg, tuple) for case in p2.visible + p2.hidden for arg in case.args)
    lists_of_tuples = [case.args[0] for case in p63.hidden]
    assert all(isinstance(x, list) and all(isinstance(t, tuple) for t in x) for x in lists_of_tuples)


def test_visible_and_hidden_are_kept_apart():
    p = load_problems("mbpp", ids=["Mbpp/2"])[0]
    assert len(p.visible) == 3 and len(p.hidden) > 10
    assert not {repr(c.args) for c in p.visible} & {repr(c.args) for c in p.hidden}
    h = load_problems("humaneval", ids=["HumanEval/0"])[0]
    # check's assertions became (input, expected) calls; no check code is kept to run
    assert h.visible and len(h.hidden) >= 7 and h.hidden_test_code == ""
    assert h.hidden[0] == TestCase(([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3), True)


def test_docstring_examples_are_parsed():
    prompt = 'def add(x, y):\n    """\n    >>> add(2, 3)\n    5\n    add([1], (2,)) == [1, 2]\n    """\n'
    cases = docstring_examples(prompt, "add")
    assert [(c.args, c.expected) for c in cases] == [((2, 3), 5), (([1], (2,)), [1, 2])]


def _assertion_expectations(row):
    """(expected, kind) per assert of `f(...) == literal` / isclose / set(...) form."""
    out = []
    for stmt in ast.parse(row["assertion"]).body:
        if not isinstance(stmt, ast.Assert):  # e.g. `import math` before the asserts
            continue
        test = stmt.test
        if isinstance(test, ast.Compare) and isinstance(test.ops[0], ast.Eq):
            left = test.left
            kind = "set" if isinstance(left, ast.Call) and getattr(left.func, "id", "") == "set" else "eq"
            try:
                out.append((ast.literal_eval(test.comparators[0]) if kind == "eq" else None, kind))
            except ValueError:
                out.append((None, "skip"))
        elif isinstance(test, ast.Call) and "isclose" in ast.unparse(test.func):
            out.append((ast.literal_eval(test.args[1]), "close"))
        else:
            out.append((None, "skip"))
    return out


# The MBPP+ assertion and canonical solution disagree upstream for these tasks.
UPSTREAM_DISAGREEMENTS = {"Mbpp/164", "Mbpp/295"}
# Their canonical solutions return re.Match objects (the assertions only test truthiness):
# not values the sandbox sends back, so those cases are dropped from the problem.
RETURNS_NON_LITERALS = {"Mbpp/737", "Mbpp/787", "Mbpp/794"}  # EvalPlus: MBPP_OUTPUT_NOT_NONE_TASKS


@pytest.fixture(scope="module")
def executor():
    from unified.sandbox.executor import Executor, ExecutorConfig

    with Executor(ExecutorConfig(banned_modules=(), banned_calls=(), timeout_s=5.0, memory_mb=1024)) as ex:
        yield ex


def test_every_mbpp_canonical_solution_matches_its_assertions(executor):
    """Runs all 399 canonical solutions on our typed base inputs in the sandbox and checks the
    results against the expected values written in each task's assertion."""
    from unified.values import values_equal

    rows = {json.loads(line)["task_id"]: json.loads(line) for line in gzip.open(mbpp.BUNDLED, "rt")}
    problems = load_problems("mbpp")
    filled = with_expected_outputs([p.__class__(**{**p.__dict__, "hidden": ()}) for p in problems], executor.run_batch)
    checked = 0
    for before, after in zip(problems, filled):
        if before.problem_id in RETURNS_NON_LITERALS:  # match objects: kept as `is not None`, as EvalPlus does
            truth = {
                repr(calls_of(line, before.entry_point)[0]): not line.startswith("assert not")
                for line in rows[before.problem_id]["assertion"].splitlines()
                if line.startswith("assert")
            }
            assert [c.expected for c in after.visible] == [truth[repr(c.args)] for c in after.visible]
            continue
        assert len(after.visible) == len(before.visible), f"{before.problem_id}: canonical solution failed on a base input"
        if before.problem_id in UPSTREAM_DISAGREEMENTS:
            continue
        for case, (expected, kind) in zip(after.visible, _assertion_expectations(rows[before.problem_id])):
            if kind == "eq":
                assert values_equal(case.expected, expected, atol=1e-6), (before.problem_id, case)
            elif kind == "close":
                assert abs(case.expected - expected) <= 1e-3 * max(1.0, abs(expected)), (before.problem_id, case)
            else:
                continue
            checked += 1
    assert checked > 1000


def test_mbpp_hidden_inputs_run_on_canonical_solutions(executor):
    problems = [p.__class__(**{**p.__dict__, "hidden": p.hidden[:4]}) for p in load_problems("mbpp")]
    filled = with_expected_outputs(problems, executor.run_batch)
    total = sum(len(p.hidden) for p in problems)
    kept = sum(len(p.hidden) for p in filled)
    assert kept >= 0.98 * total, f"only {kept}/{total} hidden inputs ran on the canonical solutions"


def test_humaneval_canonical_solutions_pass_their_recorded_cases(executor):
    from unified.benchmarks.hidden import hidden_calls, passes_hidden

    problems = load_problems("humaneval")
    assert all(p.hidden for p in problems)  # every check was recorded
    spans, calls = [], []
    for p in problems:
        batch = hidden_calls(p, p.canonical_solution)
        spans.append((len(calls), len(calls) + len(batch)))
        calls += batch
    results = executor.run_batch(calls)
    failed = [p.problem_id for p, (a, b) in zip(problems, spans) if not passes_hidden(p, results[a:b])]
    assert failed == []


def test_user_jsonl_and_parquet_files(tmp_path):
    rows = [
        {
            "task_id": "my/1",
            "prompt": "Add one.",
            "entry_point": "inc",
            "visible": [{"args": [1], "expected": 2}],
            "hidden": [{"args": [5], "expected": 6}],
        },
        {"task_id": "my/2", "prompt": "Double.", "entry_point": "dbl", "visible": [{"args": [2], "expected": 4}], "hidden": []},
    ]
    jsonl = tmp_path / "mine.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    problems = load_problems("mine", source=str(jsonl))
    assert [p.problem_id for p in problems] == ["my/1", "my/2"]
    assert problems[0].visible[0].args == (1,) and problems[0].hidden[0].expected == 6

    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = tmp_path / "mine.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    again = load_problems("mine", source=str(parquet), ids=["my/2"])
    assert again[0].entry_point == "dbl" and again[0].visible[0].expected == 4

    with pytest.raises(BenchmarkError, match="not a readable"):
        load_problems("mine", source=str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "x"}))
    with pytest.raises(BenchmarkError, match="lacks field"):
        load_problems("mine", source=str(bad))


def test_a_builtin_benchmark_is_one_module_and_one_registry_entry(monkeypatch):
    """A third built-in benchmark: a module-like object with the five names, one entry in
    BUILTIN, and the loader, the id hint and the row reader all use it."""
    import types

    from unified.benchmarks import load as benchmarks

    rows = [
        {
            "task_id": f"Toy/{i}",
            "prompt": f"add {i}",
            "entry_point": "f",
            "toy_cases": [[1], [2]],
            "canonical_solution": f"def f(x):\n    return x + {i}\n",
        }
        for i in range(3)
    ]
    toy = types.SimpleNamespace(
        NAME="toy",
        ID_PREFIX="Toy/",
        rows=lambda: rows,
        matches=lambda row: "toy_cases" in row,
        problem=lambda row, benchmark: benchmarks._generic_problem(
            {**row, "hidden": [{"args": a} for a in row["toy_cases"]]}, benchmark
        ),
    )
    monkeypatch.setitem(benchmarks.BUILTIN, "toy", toy)
    problems = load_problems("toy", count=2)
    assert [p.problem_id for p in problems] == ["Toy/0", "Toy/1"]
    assert [c.args for c in problems[1].hidden] == [(1,), (2,)] and problems[1].benchmark == "toy"
    with pytest.raises(BenchmarkError, match="it belongs to --benchmark toy"):
        load_problems("mbpp", ids=["Toy/1"])
