"""Command line of the executor (`python -m unified.sandbox`).

    python -m unified.sandbox FILE.py --entry f --args '[1, 2]'
    python -m unified.sandbox FILE.py --entry f --calls CALLS.jsonl [--workers K]

`--args`: one call, a Python-literal list of positional arguments. `--calls`: one call per
line, each line a JSON list of positional arguments, all run through one pool and printed
in input order. Every call prints one JSON object on its own line: status, value (as
literal text, null unless ok), error, duration_s, cpu_s, stdout. Exit code 0 whatever the
programs did; 2 with one line on stderr for bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Sequence

from unified.errors import ArgumentParser, UserError
from unified.sandbox.executor import ExecCall, Executor, ExecutorConfig, ExecResult
from unified.values import LiteralError, from_literal, to_literal


def _json_line(r: ExecResult) -> str:
    try:
        value = to_literal(r.value) if r.ok else None
    except (LiteralError, ValueError, RecursionError):  # cannot happen for parsed values; never crash
        value = None
    return json.dumps(
        {
            "status": r.status,
            "value": value,
            "error": r.error,
            "duration_s": round(r.duration_s, 6),
            "cpu_s": round(r.cpu_s, 6),
            "stdout": r.stdout,
        }
    )


def _read_calls(parser: ArgumentParser, path: str) -> list[tuple]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        parser.error(f"cannot read {path}: {e.strerror if isinstance(e, OSError) else e}")
    calls = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            args = json.loads(line)
        except (ValueError, RecursionError) as e:
            parser.error(f"{path}:{number}: not JSON: {str(e)[:100]}")
        if not isinstance(args, list):
            parser.error(f"{path}:{number}: each line must be a JSON list of positional arguments")
        calls.append(tuple(args))
    return calls


PROG = "python -m unified.sandbox"


def main(argv: Sequence[str] | None = None, prog: str = PROG) -> int:
    """Exit code 0 whatever the programs did; 2 with one `executor: error: ...` line for bad input."""
    try:
        return _main(argv, prog)
    except UserError as exc:
        print(f"executor: error: {exc}", file=sys.stderr)
        return 2


def _main(argv: Sequence[str] | None, prog: str) -> int:
    parser = ArgumentParser(prog=prog, description="Run FILE's function in the sandbox.")
    parser.add_argument("file", help="Python file defining the entry function")
    parser.add_argument("--entry", required=True, help="function to call")
    parser.add_argument("--args", default="[]", help="Python-literal list of positional args, e.g. '[1, \"a\"]'")
    parser.add_argument("--calls", help="JSONL file: one JSON list of positional arguments per line")
    parser.add_argument("--workers", type=int, default=1, help="pool size for --calls")
    parser.add_argument("--timeout", type=float, default=ExecutorConfig.timeout_s, help="CPU seconds per call")
    parser.add_argument("--memory-mb", type=int, default=ExecutorConfig.memory_mb, help="address-space limit")
    ns = parser.parse_args(argv)
    try:
        code = Path(ns.file).read_text()
    except (OSError, UnicodeDecodeError) as e:
        parser.error(f"cannot read {ns.file}: {e.strerror if isinstance(e, OSError) else e}")
    if ns.calls is not None:
        calls = _read_calls(parser, ns.calls)
    else:
        try:
            args = from_literal(ns.args)
        except LiteralError as e:
            parser.error(f"--args is not a Python literal: {e}")
        if not isinstance(args, (list, tuple)):
            parser.error(f"--args must be a list of positional arguments, got {type(args).__name__}")
        calls = [tuple(args)]
    try:
        config = ExecutorConfig(workers=ns.workers, timeout_s=ns.timeout, memory_mb=ns.memory_mb)
    except ValueError as e:
        parser.error(str(e))
    with Executor(config) as ex:
        results = ex.run_batch([ExecCall(code, ns.entry, args) for args in calls]) if calls else []
    for r in results:
        print(_json_line(r))
    return 0
