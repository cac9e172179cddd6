"""Every claim is a module of `unified.eval.experiments` whose `--help` works; bench/ holds
the speed benches only, as a package, with no edit of the import path."""

import ast
import pkgutil
import runpy
import sys
from pathlib import Path

import pytest

import unified.eval.experiments as experiments

REPO = Path(__file__).resolve().parents[3]
LIBRARY = {
    "record",
    "planned",
    "gain_args",
    "gain_jobs",
}  # modules that are no command (planned, gain_args, gain_jobs: parts of gain)
COMMANDS = sorted(m.name for m in pkgutil.iter_modules(experiments.__path__) if m.name not in LIBRARY)


def test_the_claims_are_here():
    assert set(COMMANDS) >= {"gain", "compare_arms", "transfer", "curve", "sweep", "rescore", "results_table"}


@pytest.mark.parametrize("name", COMMANDS)
def test_help_works(name, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [name, "--help"])
    # run as a script would be: a module another command imported first would run twice (runpy warns)
    monkeypatch.delitem(sys.modules, f"unified.eval.experiments.{name}", raising=False)
    with pytest.raises(SystemExit) as done:
        runpy.run_module(f"unified.eval.experiments.{name}", run_name="__main__")
    assert done.value.code == 0 and "usage:" in capsys.readouterr().out


def path_edits(folder: Path) -> list[str]:
    """Every `sys.path` use in a module of `folder` (the package is imported as a package)."""
    return [
        f"{p.name}:{n.lineno}"
        for p in sorted(folder.glob("*.py"))
        for n in ast.walk(ast.parse(p.read_text()))
        if isinstance(n, ast.Attribute) and n.attr == "path" and isinstance(n.value, ast.Name) and n.value.id == "sys"
    ]


def claims(folder: Path) -> list[str]:
    """Modules of `folder` that compute a claim's statistics (they belong in unified.eval.experiments)."""
    return [
        p.name
        for p in sorted(folder.glob("*.py"))
        if "gain_stats" in p.read_text() or "eval.experiments.record import Record" in p.read_text()
    ]


def test_bench_is_a_package_of_speed_benches(tmp_path):
    bench = REPO / "bench"
    assert (bench / "__init__.py").exists()
    assert path_edits(bench) == [] and claims(bench) == []
    (tmp_path / "x.py").write_text("import sys\nsys.path.insert(0, '..')\nfrom unified.eval.gain_stats import summary\n")
    assert path_edits(tmp_path) == ["x.py:2"] and claims(tmp_path) == ["x.py"]
