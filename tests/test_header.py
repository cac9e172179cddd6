"""Header hygiene over unified/: project imports at the top of a module (ruff's
PLC0415, `import-outside-top-level`; pyproject.toml's per-file-ignores list the modules that
import inside functions on purpose, each with its reason), and no function over 50 lines."""

import ast
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "unified"
MAX_LINES = 50


def _ruff() -> list[str]:
    if importlib.util.find_spec("ruff") is not None:  # the pinned one (requirements/cpu.lock)
        return [sys.executable, "-m", "ruff"]
    if shutil.which("ruff"):
        return [shutil.which("ruff")]
    pytest.fail("ruff is not installed: make install (it is pinned in requirements/cpu.lock)")


def _imports_outside_top_level(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_ruff(), "check", "--select", "PLC0415", "--output-format", "concise", "--no-cache", str(path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_project_imports_sit_at_the_top():
    out = _imports_outside_top_level(PACKAGE)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


def test_the_import_rule_sees_an_import_inside_a_function(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from unified.types import Task\n    return Task\n")
    out = _imports_outside_top_level(planted)
    assert out.returncode == 1 and "PLC0415" in out.stdout


def long_functions(package: Path = PACKAGE, limit: int = MAX_LINES) -> list[str]:
    """Every function (methods and nested ones too) longer than `limit` lines, decorators aside."""
    found = []
    for path in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit:
                found.append(
                    f"{path.relative_to(package.parent)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
                )
    return found


def test_no_function_is_over_50_lines(tmp_path):
    assert long_functions() == []
    planted = tmp_path / "unified"
    planted.mkdir()
    (planted / "x.py").write_text("def f():\n" + "    x = 1\n" * MAX_LINES)
    assert long_functions(planted) == ["unified/x.py:1 f (51 lines)"]
