"""Header hygiene over unified/: project imports at the top of a module (ruff's
PLC0415, `import-outside-top-level`; pyproject.toml's per-file-ignores list the modules that
import inside functions on purpose, each with its reason), and no function over 50 lines.
And one formatter for the whole repo: `ruff format` (pyproject's line length, 130) leaves
every file as it is; `# fmt: skip` in unified/ only for tables, each with its reason."""

import ast
import importlib.util
import re
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


def _format_check(*paths: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*_ruff(), "format", "--check", "--no-cache", "--output-format", "concise", *paths],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def unformatted(out: subprocess.CompletedProcess) -> list[str]:
    """The files `ruff format --check` would change (its concise lines: `path:line:col: unformatted: ...`)."""
    return sorted({line.split(":")[0] for line in out.stdout.splitlines() if ": unformatted:" in line})


def test_the_repo_is_ruff_formatted():
    out = _format_check(".")
    assert out.returncode == 0, (
        f"ruff format would change {unformatted(out)}: run `ruff format .` (line length 130, pyproject.toml)\n"
        + out.stderr[-2000:]
    )


def test_the_format_check_sees_an_unformatted_file(tmp_path):
    """A planted file the formatter would change is flagged, and a line of up to 130 characters stays one line."""
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    long_call = "print(" + ", ".join(f'"{i:02d}"' for i in range(20)) + ")"
    assert 88 < len(long_call) <= 130  # ruff's default would split it; pyproject's 130 keeps it
    (tmp_path / "formatted.py").write_text(long_call + "\n")
    (tmp_path / "planted.py").write_text("x = {  'a':1 }\n")
    out = _format_check(".", cwd=tmp_path)
    assert out.returncode == 1 and unformatted(out) == ["planted.py"], out.stdout + out.stderr


FMT_SKIP = re.compile(r"#\s*fmt:\s*(skip|off|on)\b(.*)")
MAX_FMT_SKIPS = 30


def fmt_skips(package: Path = PACKAGE) -> tuple[int, list[str]]:
    """(how many `# fmt: skip` markers `package` holds, the ones without a reason: `# fmt: skip  # table: ...`;
    `# fmt: off/on` count as reasonless)."""
    count, bare = 0, []
    for path in sorted(package.rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if m := FMT_SKIP.search(line):
                count += 1
                if m.group(1) != "skip" or not m.group(2).strip().lstrip("#").strip():
                    bare.append(f"{path.relative_to(package.parent)}:{n}")
    return count, bare


def test_fmt_skip_is_rare_and_says_why(tmp_path):
    count, bare = fmt_skips()
    assert count <= MAX_FMT_SKIPS and bare == [], (count, bare)
    planted = tmp_path / "unified"
    planted.mkdir()
    (planted / "x.py").write_text("A = (1,  2)  # fmt: skip\nB = (1,  2)  # fmt: skip  # table: aligned\n")
    assert fmt_skips(planted) == (2, ["unified/x.py:1"])
