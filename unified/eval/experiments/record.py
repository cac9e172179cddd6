"""The one result record every claim is computed from, and how claims write their JSON.

A `Record` is a measured arm: per problem 0/1 outcomes of the untrained control (and its
repeats), of each seed after training, the problems left out as noise, and the settings it
ran under. Flips, McNemar's p per seed and the gain are computed from it (`figures`), never
typed; `results_table` prints them, `gain` writes them. Results written before the record
existed are read by their keys (`from_gain`: `test_time_gain*.json`; `from_transfer`:
`transfer*.json`), so every committed JSON stays readable.

`settings()` is what every result JSON written from now on carries: the date, the machine,
the CPU (model name, bf16/AMX flags: `unified.machine.cpu_info`), the git commit and the
command line. `write_json` writes a result with it.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from unified.errors import UserError
from unified.eval.gain_stats import flips, gain, mcnemar_exact_p
from unified.machine import cpu_info, git_commit

REPO = Path(__file__).resolve().parents[3]


@dataclass(frozen=True)
class SeedFigures:
    """One seed against the control, over the problems scored in both (noise left out)."""

    seed: int
    pass_at_1: float
    gain: float
    gained: int
    lost: int
    mcnemar_p: float


@dataclass(frozen=True)
class Record:
    """A measured arm: the control and each seed's outcomes per problem (1.0 / 0.0 / None)."""

    name: str
    benchmark: str
    control: Mapping[str, float | None]
    seeds: tuple[tuple[int, Mapping[str, float | None]], ...]
    noisy: tuple[str, ...] = ()
    control_repeats: tuple[Mapping[str, float | None], ...] = ()  # the control's other evaluations
    rounds: int | None = None
    settings: Mapping = field(default_factory=dict)

    @classmethod
    def from_gain(cls, name: str, body: Mapping) -> Record:
        """A `gain` result (`test_time_gain*.json`): `per_problem_before`, `seeds[].per_problem_after`."""
        seeds = tuple((int(s["seed"]), dict(s.get("per_problem_after") or {})) for s in body.get("seeds") or [])
        return cls(name, body.get("benchmark", "?"), dict(body.get("per_problem_before") or {}), seeds,
                   tuple(body.get("noisy_problems") or ()), rounds=body.get("rounds"), settings=body.get("settings") or {})  # fmt: skip

    @classmethod
    def from_transfer(cls, name: str, body: Mapping) -> Record | None:
        """A `transfer` result: `per_problem.control[0]` and `per_problem.seed<k>` (None: no outcomes)."""
        block, outcomes = body.get("transfer") or {}, body.get("per_problem") or {}
        if not outcomes.get("control"):
            return None
        keys = sorted((k for k in outcomes if k.startswith("seed")), key=lambda k: (len(k), k))
        seeds = tuple((int(k[len("seed"):] or 0), dict(outcomes[k])) for k in keys)
        controls = [dict(c) for c in outcomes["control"]]
        benchmark = body.get("benchmark") or next(iter(controls[0]), "?/").split("/")[0].lower()  # Mbpp/2 -> mbpp
        return cls(name, benchmark, controls[0], seeds, tuple(block.get("noisy_problems") or ()),
                   tuple(controls[1:]), settings=body.get("settings") or {})  # fmt: skip

    def aligned(self) -> tuple[dict[str, float], list[tuple[int, dict[str, float]]]]:
        """(control, [(seed, after)]) over the problems scored in every one, noisy ones left out."""
        noisy = set(self.noisy)
        control = {i: v for i, v in self.control.items() if v is not None and i not in noisy}
        ids = [i for i in control if all(after.get(i) is not None for _, after in self.seeds)]
        return {i: control[i] for i in ids}, [(s, {i: after[i] for i in ids}) for s, after in self.seeds]

    def control_pass_at_1(self) -> float | None:
        control, _ = self.aligned()
        return sum(control.values()) / len(control) if control else None

    def figures(self) -> list[SeedFigures]:
        """Per seed: pass@1, gain, flips and McNemar's exact p against the control."""
        control, seeds = self.aligned()
        out = []
        for seed, after in seeds:
            up, down = flips(control, after)
            out.append(SeedFigures(seed, sum(after.values()) / len(after), gain(control, after), up, down, mcnemar_exact_p(up, down)))
        return out


def settings() -> dict:
    """Where and how a result was measured: date, machine, CPU kind and flags, commit, command."""
    return {"date": datetime.date.today().isoformat(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
            "cpu": cpu_info(), "commit": git_commit(REPO), "command": command_line()}  # fmt: skip


def command_line() -> str:
    """How this process was started: `python -m MODULE ARGS` (or `python SCRIPT ARGS`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    head = f"python -m {spec.name}" if spec is not None and spec.name else f"python {repo_relative(sys.argv[0])}"
    return " ".join([head, *sys.argv[1:]])


def with_settings(body: Mapping) -> dict:
    """`body` with `settings` holding at least `settings()`'s keys (its own values win); a body
    whose `settings` is a list (selective_cost's grid) gets them as `run_settings`."""
    if isinstance(body.get("settings"), list):
        return {**body, "run_settings": settings()}
    return {**body, "settings": {**settings(), **(body.get("settings") or {})}}


def write_json(path: str | Path, body: Mapping, indent: int = 1) -> Path:
    """Write a result (indented, with `settings`), creating its folder; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(with_settings(body), indent=indent) + "\n")
    return path


def committed_weights(result: Mapping, name: str | Path) -> str:
    """The result's committed seed-0 weights (`model_path`); one UserError line where there are none."""
    if not result.get("model_path"):
        raise UserError(f"{name} names no committed weights (model_path is null: {result.get('model_path_note', 'never committed')})")
    return result["model_path"]


def repo_relative(path: str | Path) -> str:
    """`path` relative to the repository when it lies inside it (how result JSONs name files)."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(path)
