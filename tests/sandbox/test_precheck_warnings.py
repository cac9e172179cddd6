"""A generated program's compiler warnings stay out of the run's log (the confirm run's log
held hundreds of "<sandbox>:10: SyntaxWarning: 'int' object is not subscriptable"), and the
filter is narrow: the same warning from any other file still shows."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
from unified.sandbox.config import ExecutorConfig
from unified.sandbox.exec_types import ExecCall
from unified.sandbox.precheck import Precheck
check = Precheck(ExecutorConfig())
result, request = check(ExecCall("def f(x):\\n    return 1[0]\\n", "f", (1,)))
assert result is None and request, "the program compiles and goes to a worker as before"
compile("y = 1[0]\\n", "mine.py", "exec")
"""


def test_a_generated_programs_syntax_warning_is_not_printed_and_others_still_are():
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "SyntaxWarning" in line]
    assert not any("<sandbox>" in line for line in lines), proc.stderr
    assert any(line.startswith("mine.py:1: SyntaxWarning") for line in lines), (
        f"the filter swallowed the user's own warning: {proc.stderr!r}"
    )
