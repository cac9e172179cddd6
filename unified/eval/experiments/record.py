"""The one result record every claim is computed from, and how claims write their JSON.

A `Record` is a measured arm: per problem 0/1 outcomes of the untrained control (and its
repeats), of each seed after training, the problems left out as noise, and the settings it
ran under. Flips, McNemar's p per seed and the gain are computed from it (`figures`, `claim`:
`unified.eval.gain_stats`, the one statistics module), never typed; `results_table` prints
them, `Record.write` writes them. Every committed result is read by its keys (`read`:
`from_gain` for `test_time_gain*.json`, `from_transfer` for `transfer*.json` and the rescored
results, `from_arms` for the oldest per-problem form), so every committed JSON stays readable,
and `stated` is what a JSON claims, which tests/eval/experiments/test_record.py holds against
the outcomes.

`settings()` is what every result JSON written from now on carries: the date, the machine,
the CPU (model name, bf16/AMX flags: `unified.machine.cpu_info`), the git commit and the
command line. `write_json` writes a result with it; `Record.write` writes a record's
outcomes and figures over a claim's own keys, stamped the same way.
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
from unified.eval.gain_stats import flips, gain, mcnemar_exact_p, summary
from unified.machine import cpu_info, git_commit

REPO = Path(__file__).resolve().parents[3]
# the figures a record writes (`Record.claim`), computed from its outcomes: a claim never types them
FIGURES = ("gain", "gain_per_seed", "per_seed", "flips_gained", "flips_lost", "mcnemar_p", "ci95")
UNKNOWN = "unknown"  # settings.commit / settings.cpu of a result written before the stamp existed


class Inconsistent(ValueError):
    """A result whose stated figures its own per-problem outcomes do not give."""


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
        return cls(
            name,
            body.get("benchmark", "?"),
            dict(body.get("per_problem_before") or {}),
            seeds,
            tuple(body.get("noisy_problems") or ()),
            rounds=body.get("rounds"),
            settings=body.get("settings") or {},
        )

    @classmethod
    def from_transfer(cls, name: str, body: Mapping) -> Record | None:
        """A `transfer` result: `per_problem.control[0]` and `per_problem.seed<k>` (None: no outcomes)."""
        block, outcomes = body.get("transfer") or body.get("hidden") or {}, body.get("per_problem") or {}
        if not outcomes.get("control"):
            return None
        keys = sorted((k for k in outcomes if k.startswith("seed")), key=lambda k: (len(k), k))
        seeds = tuple((int(k[len("seed") :] or 0), dict(outcomes[k])) for k in keys)
        controls = [dict(c) for c in outcomes["control"]]
        benchmark = body.get("benchmark") or next(iter(controls[0]), "?/").split("/")[0].lower()  # Mbpp/2 -> mbpp
        return cls(
            name,
            benchmark,
            controls[0],
            seeds,
            tuple(block.get("noisy_problems") or ()),
            tuple(controls[1:]),
            settings=body.get("settings") or {},
        )

    @classmethod
    def from_arms(cls, name: str, body: Mapping) -> Record | None:
        """The oldest form (`test_time_gain_induction_2026-11-23.json`): per problem
        {before, after, control_after}; the trained arm (one seed) against the control's after."""
        rows = body.get("per_problem") or {}
        if not rows or not all(isinstance(r, Mapping) and "control_after" in r for r in rows.values()):
            return None
        control = {i: r["control_after"] for i, r in rows.items()}
        return cls(
            name,
            body.get("benchmark", "mbpp"),
            control,
            ((0, {i: r["after"] for i, r in rows.items()}),),
            rounds=body.get("rounds"),
            settings=body.get("settings") or {},
        )

    @classmethod
    def read(cls, name: str, body: Mapping) -> Record | None:
        """A committed result in whichever form it was written (None: it holds no outcomes)."""
        if "seeds" in body and "per_problem_before" in body:  # a gain result (no seed finished yet: none)
            return cls.from_gain(name, body)
        return cls.from_transfer(name, body) or cls.from_arms(name, body)

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
            out.append(
                SeedFigures(seed, sum(after.values()) / len(after), gain(control, after), up, down, mcnemar_exact_p(up, down))
            )
        return out

    def claim(self) -> dict:
        """The figures over the seeds (`FIGURES`: gain, flips, McNemar p per seed and pooled, the
        paired interval), from the outcomes by `gain_stats.summary`; {} without a seed."""
        if not self.seeds:
            return {}
        stats = summary(self.control, dict(self.seeds), self.noisy)
        return {key: ({str(s): v for s, v in stats[key].items()} if key == "per_seed" else stats[key]) for key in FIGURES}

    def write(self, path: str | Path, body: Mapping | None = None) -> Path:
        """`body` (a claim's own keys) with this record's outcomes and figures over it, stamped with
        `settings()` (its own `settings` keep their values): what a figure says is what the outcomes give."""
        body = body or {}
        rows = {int(r["seed"]): r for r in body.get("seeds") or []}
        seeds = [{**rows.get(s, {"seed": s}), "per_problem_after": dict(after)} for s, after in self.seeds]
        return write_json(
            path,
            {
                **body,
                "per_problem_before": dict(self.control),
                "seeds": seeds,
                **self.claim(),
                "noisy_problems": list(self.noisy),
                "settings": {**self.settings, **(body.get("settings") or {})},
            },
        )

    def check(self, claimed: Mapping) -> int:
        """How many stated figures (`stated`) the outcomes were checked against; Inconsistent, naming
        the first, where one differs."""
        figures, checked = self.figures(), 0
        per_seed, gains = claimed.get("per_seed"), claimed.get("gain_per_seed")
        for k, f in enumerate(figures):
            mine = per_seed.get(str(f.seed)) if per_seed else None
            if mine is not None:
                _agree(
                    self.name,
                    f"seed {f.seed}",
                    (mine["flips_gained"], mine["flips_lost"], mine["gain"], mine["mcnemar_p"]),
                    (f.gained, f.lost, f.gain, f.mcnemar_p),
                )
                checked += 4
            if gains is not None:
                _agree(self.name, f"seed {f.seed}'s gain", gains[k] if k < len(gains) else None, f.gain)
                checked += 1
        stated_seeds = len(gains) if gains is not None else len(per_seed) if per_seed else len(figures)
        if claimed.get("flips") is not None and stated_seeds == len(figures):  # pooled: only over the same seeds
            _agree(self.name, "flips", tuple(claimed["flips"]), (sum(f.gained for f in figures), sum(f.lost for f in figures)))
            checked += 1
        if gains is None and claimed.get("gain") is not None and figures:
            _agree(self.name, "gain", claimed["gain"], sum(f.gain for f in figures) / len(figures))
            checked += 1
        return checked


def _agree(name: str, what: str, said, computed) -> None:
    """Inconsistent unless what a result says equals what its outcomes give (floats to 1e-9)."""
    said_, computed_ = (said, computed) if isinstance(said, tuple) else ((said,), (computed,))
    if len(said_) != len(computed_) or any(a is None or abs(a - b) > 1e-9 for a, b in zip(said_, computed_)):
        raise Inconsistent(f"{name}: {what} is stated {said}, its per-problem outcomes give {computed}")


def stated(body: Mapping) -> dict:
    """What a committed result claims over its seeds: its figures block (a gain result's top level,
    the transfer's, the rescored `hidden` one) -> {per_seed, gain_per_seed, flips, gain, ci95}, each None where not stated."""
    own = body.get("seeds") and body.get("per_problem_before")  # a gain result: its figures are its top level
    block = body if own else body.get("transfer") or body.get("hidden") or body
    flips_ = (block.get("flips_gained"), block.get("flips_lost"))
    return {
        "per_seed": block.get("per_seed") or None,
        "gain_per_seed": block.get("gain_per_seed"),
        "flips": flips_ if None not in flips_ else None,
        "gain": block.get("gain"),
        "ci95": block.get("ci95"),
    }


def settings() -> dict:
    """Where and how a result was measured: date, machine, CPU kind and flags, commit, command."""
    return {
        "date": datetime.date.today().isoformat(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "cpu": cpu_info(),
        "commit": git_commit(REPO),
        "command": command_line(),
    }


def command_line() -> str:
    """How this process was started: `python -m MODULE ARGS` (or `python SCRIPT ARGS`)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    head = f"python -m {spec.name}" if spec is not None and spec.name else f"python {repo_relative(sys.argv[0])}"
    return " ".join([head, *(portable(a) for a in sys.argv[1:])])


def portable(arg: str) -> str:
    """One command-line word with no path of this machine: an absolute path (alone or after
    `key=`) inside the repository becomes relative to it, one beside it relative to it too
    (`../runs/x`), any other its last three folders."""
    key, eq, value = arg.rpartition("=") if "=" in arg and not arg.startswith("/") else ("", "", arg)
    if not value.startswith("/"):
        return arg
    path = Path(value).resolve()
    if path.is_relative_to(REPO):
        short = str(path.relative_to(REPO))
    elif path.is_relative_to(REPO.parent):
        short = f"../{path.relative_to(REPO.parent)}"
    else:
        short = "/".join(path.parts[-3:])
    return f"{key}{eq}{short}"


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
        raise UserError(
            f"{name} names no committed weights (model_path is null: {result.get('model_path_note', 'never committed')})"
        )
    return result["model_path"]


def repo_relative(path: str | Path) -> str:
    """`path` relative to the repository when it lies inside it (how result JSONs name files)."""
    p = Path(path).resolve()
    return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(path)
