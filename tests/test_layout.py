"""The package's import graph has no circles, and its folders form layers: module-level
and function-level imports alike (a backend imports its base, the registry imports the
backends, never back; sandbox never imports pipeline)."""

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "unified"

# The package's folders (and top-level modules), lowest first. A module may import from its
# own folder and from folders of lower layers only; folders in one layer import neither
# each other. "__init__" is unified/__init__.py itself.
LAYERS = (
    ("__init__", "errors", "types", "quiet", "files", "machine"),  # nothing of the project
    ("values", "cli"),  # the literal codec; the training command's flags
    ("text", "sandbox"),  # model text (prompt, extraction); the executor
    ("kinds", "benchmarks"),  # task kinds: build a task, score an answer | problems and their hidden tests
    ("pipeline", "trainer"),  # phases 1-4, rewards, greedy pass@1 | policy, engine, aggregator, update: side by side
    ("schema",),  # the typed config: gathers each group's class from beside its stage
    ("models",),  # model folders, the tiny model
    ("config",),  # composing and checking a run's config
    ("eval",),  # pass@1, pass@k, the evaluation command
    ("run",),  # the round loop
)


def _modules(package: Path = PACKAGE) -> dict[str, Path]:
    mods = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package.parent).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


@functools.lru_cache(maxsize=None)  # parsed once for all the checks; do not modify the result
def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    mods = _modules(package)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in mods:
                    name = name.rpartition(".")[0]
                if name and name != module and not module.startswith(name + "."):  # not its own package
                    graph[module].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_checker_sees_a_function_level_circle():
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b"]]
    assert "unified.trainer.engine_base" in import_graph()["unified.trainer.engine_hf"]


def test_no_import_circles_in_the_package():
    assert cycles(import_graph()) == []


def folder(module: str) -> str:
    """unified.sandbox.executor -> sandbox; unified.cli -> cli; unified -> __init__."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_breaks(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import that does not go down the layers (or comes from a folder in no layer)."""
    rank = {name: i for i, layer in enumerate(layers) for name in layer}
    breaks = []
    for module, imported in sorted(graph.items()):
        here = folder(module)
        if here not in rank:
            breaks.append(f"{module}: folder {here!r} is in no layer (add it to LAYERS)")
            continue
        for name in sorted(imported):
            there = folder(name)
            if there != here and rank.get(there, len(layers)) >= rank[here]:
                breaks.append(f"{module} -> {name} ({here} may not import {there})")
    return breaks


def test_the_layer_checker_sees_an_upward_import(tmp_path):
    package = tmp_path / "unified"
    for name, text in {
        "sandbox/a.py": "def f():\n    from unified.pipeline.b import g\n",
        "pipeline/b.py": "from unified.sandbox import a\ng = 1\n",
        "pipeline/__init__.py": "",
        "sandbox/__init__.py": "",
        "__init__.py": "",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    graph = import_graph(package)
    assert layer_breaks(graph) == ["unified.sandbox.a -> unified.pipeline.b (sandbox may not import pipeline)"]
    assert layer_breaks({"unified.text.x": {"unified.sandbox.y"}}) == [
        "unified.text.x -> unified.sandbox.y (text may not import sandbox)"
    ]  # one layer: neither way
    assert layer_breaks({"unified.newfolder.x": set()})[0].startswith("unified.newfolder.x: folder 'newfolder' is in no layer")


def test_folders_import_only_their_own_and_lower_layers():
    graph = import_graph()
    assert layer_breaks(graph) == []
    listed = {name for layer in LAYERS for name in layer}
    assert listed == {folder(m) for m in graph}, "LAYERS names a folder the package no longer has"


# Modules a folder may not import although the layers would let it: the training folders
# read no hidden test (measuring does: unified/eval/, unified/run/measure.py).
FORBIDDEN = {
    "pipeline": ("unified.benchmarks.hidden",),
    "kinds": ("unified.benchmarks.hidden",),
    "trainer": ("unified.benchmarks.hidden",),
}


def forbidden_imports(graph: dict[str, set[str]], rules=FORBIDDEN) -> list[str]:
    """Every import of a module that `rules` forbids to the importer's folder."""
    return [
        f"{m} -> {d} ({folder(m)} may not import {d})"
        for m, deps in sorted(graph.items())
        for d in sorted(deps)
        if any(d == bad or d.startswith(bad + ".") for bad in rules.get(folder(m), ()))
    ]


def test_training_folders_import_nothing_of_the_hidden_tests():
    assert forbidden_imports(import_graph()) == []


def test_the_rule_sees_a_planted_hidden_import(tmp_path):
    """A function-level import in pipeline/ or a relative one in kinds/ is caught; eval/ may import it."""
    package = tmp_path / "unified"
    for name, text in {
        "pipeline/a.py": "def f():\n    from unified.benchmarks.hidden import passes_hidden\n",
        "kinds/b.py": "from ..benchmarks import hidden\n",
        "eval/c.py": "import unified.benchmarks.hidden\n",
        "benchmarks/hidden.py": "def passes_hidden():\n    pass\n",
        "benchmarks/__init__.py": "",
        "pipeline/__init__.py": "",
        "kinds/__init__.py": "",
        "eval/__init__.py": "",
        "__init__.py": "",
    }.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert forbidden_imports(import_graph(package)) == [
        "unified.kinds.b -> unified.benchmarks.hidden (kinds may not import unified.benchmarks.hidden)",
        "unified.pipeline.a -> unified.benchmarks.hidden (pipeline may not import unified.benchmarks.hidden)",
    ]


def test_trainer_and_pipeline_import_nothing_of_each_other():
    """What unified/types.py promises: the two meet only in folders above both."""
    graph = import_graph()
    crossing = [f"{m} -> {d}" for m, deps in graph.items() for d in deps if {folder(m), folder(d)} == {"trainer", "pipeline"}]
    assert crossing == []


def test_the_trainer_loads_nothing_of_the_pipeline_sandbox_kinds_or_benchmarks():
    """A trainer module that reads its config (trainer/config.py) pulls in no stage of the
    pipeline: counted in a fresh interpreter, so this test's own imports do not count."""
    import subprocess
    import sys

    code = (
        "import sys, unified.trainer.update, unified.trainer.aggregator, unified.trainer.losses\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2][-1] in ('pipeline', 'sandbox', 'kinds', 'benchmarks')"
        " and m.startswith('unified.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def kind_names_outside_kinds(package: Path = PACKAGE) -> list[str]:
    """Every string constant in code (docstrings aside) outside kinds/ that spells a task
    kind's name: the rest of the package reaches kinds through the registry
    (`kinds.KINDS`, `SELF_PLAY`, `SOLVE`)."""
    from unified.kinds import KINDS

    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).parts[0] == "kinds":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        found += [
            f"{path.relative_to(package)}:{n.lineno} {n.value!r}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and id(n) not in docs
            and n.value.partition(":")[0] in KINDS
        ]
    return found


def test_no_kind_is_named_outside_kinds(tmp_path):
    assert kind_names_outside_kinds() == []
    planted = tmp_path / "unified" / "run"
    planted.mkdir(parents=True)
    (planted / "x.py").write_text('"""Docs may say solve."""\nif kind == "deduction":\n    pass\n')
    assert kind_names_outside_kinds(tmp_path / "unified") == ["run/x.py:2 'deduction'"]


def test_the_sandbox_harness_imports_only_the_standard_library():
    """The worker runs these files by path (values/literal.py among them), with the project
    unimportable: each import is a standard-library module."""
    import sys

    from unified.sandbox.config import _HARNESS

    for rel in _HARNESS.values():
        for node in ast.walk(ast.parse((PACKAGE / rel).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = ["." if node.level else node.module or ""]
            else:
                continue
            outside = [n for n in names if n.split(".")[0] not in sys.stdlib_module_names | {"__future__"}]
            assert not outside, f"{rel}:{node.lineno} imports {outside}"
