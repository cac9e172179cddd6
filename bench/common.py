"""What every bench shares: the repository's path and how a result JSON is written
(`write_json`: with `settings` holding the date, the machine, the CPU model and its bf16/AMX
flags, the git commit and the command line; `unified.eval.experiments.record`)."""

from __future__ import annotations

from unified.eval.experiments.record import REPO, write_json

OUT = REPO / "logs" / "bench"  # where a bench writes by default

__all__ = ["OUT", "REPO", "write_json"]
