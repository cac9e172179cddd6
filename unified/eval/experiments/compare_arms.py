"""Two recipes against each other: two `unified/eval/experiments/gain.py` results on the same problems,
the same control and the same seeds, compared seed by seed (`gain_stats.versus`).

    python -m unified.eval.experiments.compare_arms A.json B.json [--names mix,solo] [--output X.json] [--note TEXT]

Each seed of A and B trained from the same model with the same seed on the same problems, so
seed s is a paired experiment: per seed the problems only A solves and only B solves, with
McNemar's exact p; over the seeds the mean difference and its paired-bootstrap 95 % interval.
Next to it, each arm's own gain over the control and what a round cost (generated tokens,
seconds), so a difference can be read at its price. Problems that are noise in either arm's
control repeats are left out.
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

from unified.cli import exit_code
from unified.errors import ArgumentParser, UserError
from unified.eval.experiments.record import write_json
from unified.eval.gain_stats import versus

ARM_KEYS = (
    "pass_at_1_before",
    "pass_at_1_after",
    "gain",
    "gain_per_seed",
    "flips_gained",
    "flips_lost",
    "mcnemar_p",
    "ci95",
    "sampled_pass_at_1_before",
    "sampled_pass_at_1_after",
    "gain_split",
)


def load(path: Path) -> dict:
    try:
        body = json.loads(path.read_text())
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}; pass a result written by unified/eval/experiments/gain.py") from None
    except ValueError:
        raise UserError(f"{path} is not JSON; pass a result written by unified/eval/experiments/gain.py") from None
    if not isinstance(body, dict) or "seeds" not in body or "per_problem_before" not in body:
        raise UserError(
            f"{path} has no 'seeds' or 'per_problem_before'; pass a result written by unified/eval/experiments/gain.py"
        )
    return body


def check_paired(a: dict, b: dict) -> None:
    """The comparison means something only on the same problems against the same control."""
    for key in ("benchmark", "problems"):
        if a.get(key) != b.get(key):
            raise UserError(f"the two results differ in {key!r}: compare runs of the same benchmark and problems")
    if a["per_problem_before"] != b["per_problem_before"]:
        raise UserError("the two results have different controls: run both arms against the same `before` evaluation")
    if not {s["seed"] for s in a["seeds"]} & {s["seed"] for s in b["seeds"]}:
        raise UserError("the two results share no seed: compare arms trained with the same seeds")


def round_cost(result: dict) -> dict:
    """Mean per round over every seed: generated tokens and seconds (from the runs' metrics;
    telemetry's `compute/*` totals are cumulative, so a run's last round holds its total)."""
    runs = [s["metrics_per_round"] for s in result["seeds"] if s.get("metrics_per_round")]
    rounds = sum(len(rows) for rows in runs)
    tokens = [rows[-1].get("compute/generation_tokens") for rows in runs]
    seconds = [r["time/round"] for rows in runs for r in rows if r.get("time/round") is not None]
    return {
        "rounds": rounds,
        "generation_tokens": sum(tokens) / rounds if rounds and None not in tokens else None,
        "seconds": sum(seconds) / len(seconds) if seconds else None,
        "seconds_per_round": [[r.get("time/round") for r in rows] for rows in runs],
    }


def compare(a: dict, b: dict, names: tuple[str, str], note: str = "") -> dict:
    check_paired(a, b)
    after = [{s["seed"]: s["per_problem_after"] for s in arm["seeds"]} for arm in (a, b)]
    noisy = sorted(set(a.get("noisy_problems", [])) | set(b.get("noisy_problems", [])))
    vs = versus(*after, noisy=noisy)
    vs[f"only_{names[0]}"], vs[f"only_{names[1]}"] = vs["only_a"], vs["only_b"]
    arms = {
        name: {
            **{k: arm.get(k) for k in ARM_KEYS},
            "overrides": arm.get("settings", {}).get("overrides"),
            "round_cost": round_cost(arm),
        }
        for name, arm in zip(names, (a, b))
    }
    ca, cb = (arms[n]["round_cost"]["seconds"] for n in names)
    return {
        "benchmark": a["benchmark"],
        "problems": a["problems"],
        "arms": arms,
        "versus": vs,
        "a": names[0],
        "b": names[1],
        "round_time_ratio": ca / cb if ca and cb else None,
        "metric": "greedy pass@1 on the hidden tests; `versus.difference` = pass@1 of a minus b, mean over shared seeds",
        "timing": "round seconds as the runs logged them: a timing only where the machine was idle for both (see `note`)",
        "note": note,
        "date": datetime.date.today().isoformat(),
    }


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--names", default="a,b", help="the two arms' names, comma separated")
    p.add_argument("--output", type=Path, default=None)
    p.add_argument("--note", default="", help="what the JSON should say about the runs (e.g. whether the machine was idle)")
    args = p.parse_args(argv)
    names = tuple(n.strip() for n in args.names.split(","))
    if len(names) != 2 or not all(names) or names[0] == names[1]:
        raise UserError(f"--names needs two different names, got {args.names!r}: e.g. --names mix,solo")
    out = compare(load(args.a), load(args.b), names, args.note)
    v = out["versus"]
    print(
        f"{names[0]} - {names[1]}: {v['difference']:+.3f} greedy pass@1 (seeds {v['seeds']}, per seed "
        f"{[round(d, 3) for d in v['difference_per_seed']]}) | only {names[0]} {v['only_a']}, only {names[1]} "
        f"{v['only_b']} | McNemar p per seed {[round(x, 3) for x in v['mcnemar_p_per_seed']]} | 95% CI "
        f"[{v['ci95'][0]:+.3f}, {v['ci95'][1]:+.3f}]"
    )
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        write_json(args.output, out)
        print(f"-> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(exit_code(main, "nothing was written; run it again"))
