"""The command lines are real entry points (`__main__.py`), and the older spellings are
aliases that run the same main: same flags, same output, only their own name in usage."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# new name -> older name kept for the Makefile, bench/ and docs
COMMANDS = {"unified.sandbox": "unified.pipeline.executor", "unified.eval": "unified.evaluate"}


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", sorted(COMMANDS))
def test_help_exits_0_under_both_names(module):
    new, old = _run(module, "--help"), _run(COMMANDS[module], "--help")
    assert new.returncode == 0 and old.returncode == 0, new.stderr[-2000:] + old.stderr[-2000:]
    assert new.stdout.startswith(f"usage: python -m {module} ")
    words = lambda text: text.split()  # noqa: E731 - argparse wraps the usage to the name's length
    assert words(old.stdout) == words(new.stdout.replace(f"python -m {module} ", f"python -m {COMMANDS[module]} "))


def test_importing_an_old_name_replaces_nothing():
    code = "import sys, unified.evaluate, unified.pipeline.executor as e; print(e.__name__, sys.modules['unified.evaluate'].__name__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["unified.pipeline.executor", "unified.evaluate"], out.stderr[-2000:]
