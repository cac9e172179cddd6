"""The command lines are real entry points (`__main__.py`) under one name each: the older
spellings (`unified.evaluate`, `unified.pipeline.executor`) are gone, not aliased."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

COMMANDS = ("unified.sandbox", "unified.eval")
GONE = ("unified.evaluate", "unified.pipeline.executor")


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", COMMANDS)
def test_help_exits_0(module):
    out = _run(module, "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith(f"usage: python -m {module} ")


@pytest.mark.parametrize("module", GONE)
def test_the_older_names_are_gone(module):
    """By file (an editable install of another checkout could still answer to the name)."""
    path = REPO.joinpath(*module.split("."))
    assert not path.with_suffix(".py").exists() and not path.is_dir()
