"""Whether a test-time gain carries to problems never trained on: a committed result's seed-0
weights and the untrained control, evaluated greedily on report problems outside the ones it
trained on (the next `--problems` of the report split after `--offset`).

    python -m unified.eval.experiments.transfer docs/results/test_time_gain.json [--offset 100] [--problems 100]
        [--repeats 3] [--seed-weights SEED=MODEL_DIR ...] [--output docs/results/transfer_mbpp.json]

Evaluated as `unified/eval/experiments/rescore.py` evaluates (greedy, one thread, the same batches, the
control repeated and a problem whose control outcome differs between repeats left out as
noise). Only seed 0's weights are committed, so by default the figure is one seed's;
`--seed-weights 1=RUN/checkpoints/round_000003/model` adds another seed's trained weights
(each seed is read against the same control, as the transductive result is).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

from unified.benchmarks.splits import split_ids
from unified.cli import exit_code
from unified.eval.experiments.record import REPO, committed_weights, repo_relative, write_json
from unified.eval.experiments.rescore import evaluate, metric


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("result", type=Path, help="a committed test_time_gain JSON (its weights and problems)")
    p.add_argument("--offset", type=int, default=100, help="report problems to skip (the trained ones come first)")
    p.add_argument("--problems", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3, help="evaluations of the base model (the control)")
    p.add_argument("--runs-dir", type=Path, default=REPO / "logs" / "bench" / "transfer")
    p.add_argument("--output", type=Path, default=None)
    p.add_argument(
        "--seed-weights",
        action="append",
        default=[],
        metavar="SEED=MODEL_DIR",
        help="another seed's trained weights (a checkpoint's model/ folder or compact weights); repeatable",
    )
    return p


def main() -> int:
    args = _parser().parse_args()
    original = json.loads(args.result.read_text())
    bench, trained, model = original["benchmark"], set(original["problems"]), original["settings"]["model"]
    ids = split_ids("report", bench)[args.offset : args.offset + args.problems]
    if trained & set(ids):
        raise SystemExit(f"{len(trained & set(ids))} of these problems were trained on: raise --offset")
    runs = args.runs_dir / f"{args.result.stem}-{args.offset}+{args.problems}"
    controls = [evaluate(bench, model, ids, runs / f"control_{k}") for k in range(1, args.repeats + 1)]
    weights = {0: str(REPO / committed_weights(original, args.result)), **seed_weights(args.seed_weights)}
    afters = {s: evaluate(bench, w, ids, runs / f"seed{s}") for s, w in sorted(weights.items())}
    hidden = metric(ids, controls, {s: a["per_problem"] for s, a in afters.items()}, "per_problem")
    evalplus = metric(ids, controls, {s: a.get("per_problem_evalplus", {}) for s, a in afters.items()}, "per_problem_evalplus")
    transfer = _transfer(ids, afters, hidden, evalplus)
    result = {
        "source": repo_relative(str(args.result)),
        "model_path": original["model_path"],
        "trained_on": sorted(trained),
        "metric": "greedy pass@1 on the hidden tests (MBPP+: plus inputs); `evalplus`: base + plus",
        "weights": {f"seed{s}": repo_relative(w) for s, w in sorted(weights.items())},
        "transfer": transfer,
        "per_problem": {
            "control": [c["per_problem"] for c in controls],
            **{f"seed{s}": a["per_problem"] for s, a in afters.items()},
        },
        "settings": {
            "greedy": True,
            "threads": 1,
            "repeats": args.repeats,
            "offset": args.offset,
            "date": datetime.date.today().isoformat(),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        },
    }
    out = args.output or REPO / "docs" / "results" / f"transfer_{bench}.json"
    write_json(out, result)
    print(
        f"transfer on {len(ids)} untrained problems: control {transfer['control_pass_at_1_repeats']} -> seeds "
        f"{transfer['seeds']} {transfer['pass_at_1_after_per_seed']}, gain {transfer['gain']}, +{transfer['flips_gained']}/-{transfer['flips_lost']}, "
        f"p {transfer['mcnemar_p']}, ci95 {transfer['ci95']}, noisy {len(transfer['noisy_problems'])} -> {out}"
    )
    return 0


def _transfer(ids: list[str], afters: dict, hidden: dict, evalplus: dict) -> dict:
    """The result's `transfer`: the control and each seed on the untrained problems, the gain and its tests."""
    after = hidden["pass_at_1_after"]
    return {
        "problems": ids,
        "seeds": sorted(afters),
        "control_pass_at_1": hidden["control_pass_at_1_repeats"][0],
        "control_pass_at_1_repeats": hidden["control_pass_at_1_repeats"],
        "pass_at_1_after": sum(after.values()) / len(after),
        "pass_at_1_after_per_seed": list(after.values()),
        "gain": hidden.get("gain"),
        "gain_per_seed": hidden.get("gain_per_seed"),
        "ci95": hidden.get("ci95"),
        "mcnemar_p": hidden.get("mcnemar_p"),
        "mcnemar_p_per_seed": hidden.get("mcnemar_p_per_seed"),
        "flips_gained": hidden.get("flips_gained"),
        "flips_lost": hidden.get("flips_lost"),
        "noisy_problems": hidden.get("noisy_problems", []),
        "evalplus": evalplus,
    }


def seed_weights(pairs: list[str]) -> dict[int, str]:
    """`--seed-weights SEED=MODEL_DIR` pairs -> {seed: folder}; one line for a bad pair."""
    out = {}
    for pair in pairs:
        seed, sep, folder = pair.partition("=")
        if not sep or not seed.strip().isdigit() or not Path(folder).is_dir():
            raise SystemExit(
                f"--seed-weights {pair!r}: expected SEED=MODEL_DIR with an existing folder, "
                f"e.g. 1=logs/bench/mix/RUN/seed1/run/checkpoints/round_000003/model"
            )
        if int(seed) == 0:
            raise SystemExit("--seed-weights 0=...: seed 0's weights are the result's own `model_path`")
        out[int(seed)] = str(Path(folder).resolve())
    return out


if __name__ == "__main__":
    sys.exit(exit_code(main, "run it again"))
