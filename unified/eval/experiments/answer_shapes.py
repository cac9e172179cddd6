"""Parse failures per kind with and without answer shapes: one round of the default model on
the tune split, every kind in phase 5 (`pipeline.mix`), no update (the rollouts are what is
measured), three ways:

    free         pipeline.constrain=[]                                  nothing shaped
    self_play    the default: the self-play kinds and phase 2's inputs  (solve and phase 1 free)
    all          the self-play kinds, inputs and solve (phase 1's programs too)

    python -m unified.eval.experiments.answer_shapes [--problems 100] [--runs-dir DIR] [--collect] [--output FILE]

Per configuration and kind: rollouts, the parse-failure rate and its reasons, tasks kept,
groups and groups whose rewards differ, mean reward and completion tokens; for phase 2's
proposals the input rejections by reason. Each round resumes (a finished one is read back),
`--collect` only reads. Writes logs/bench/answer_shapes.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from unified.eval.experiments.record import REPO, write_json
from unified.kinds import SELF_PLAY, SOLVE

CONFIGS = {
    "free": ["pipeline.constrain=[]"],
    "self_play": [],
    "all": ["pipeline.constrain=[induction,deduction,abduction,inputs,solve]"],
}
MIX = "pipeline.mix=[solve:0.7,deduction:0.1,abduction:0.1,induction:0.1]"
KINDS = (*SELF_PLAY, SOLVE)  # the kinds the mix trains


def run(name: str, ids: list[str], out: Path) -> None:
    if (out / "metrics.jsonl").exists():
        return
    cmd = [
        sys.executable,
        str(REPO / "train_unified.py"),
        "--benchmark",
        "mbpp",
        "--rounds",
        "1",
        f"--output-dir={out}",
        f"benchmark.problem_ids=[{','.join(ids)}]",
        f"benchmark.problems={len(ids)}",
        "trainer.eval_every=0",
        "trainer.update_weights=false",
        MIX,
        *CONFIGS[name],
    ]
    with open(out.parent / f"{name}.log", "a") as log:
        subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, check=True)


def summarize(out: Path) -> dict:
    import pandas as pd

    rows = pd.read_parquet(out / "round_1" / "rollouts.parquet")
    rejected = pd.read_parquet(out / "round_1" / "rejections.parquet")
    metrics = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    kinds = {}
    for kind in KINDS:
        mine = rows[rows["kind"] == kind]
        if mine.empty:
            continue
        spread = mine.groupby("task_id")["reward"].agg(lambda r: r.max() > r.min())
        kinds[kind] = {
            "rollouts": len(mine),
            "parse_failure_rate": float(mine["parse_failure"].notna().mean()),
            "reasons": dict(Counter(mine["parse_failure"].dropna())),
            "groups": int(len(spread)),
            "groups_with_signal": int(spread.sum()),
            "mean_reward": float(mine["reward"].mean()),
            "completion_tokens": float(mine["num_tokens"].mean()),
            "finished": float((mine["finish_reason"] == "stop").mean()),
        }
    inputs = rejected[rejected["stage"] == "input"]
    proposals = metrics.get("tasks/rejected/input/no_inputs", 0)
    return {
        "kinds": kinds,
        "input_rejections": dict(Counter(inputs["reason"])),
        "no_inputs": proposals,
        "time_round_s": metrics.get("time/round"),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", type=int, default=100)
    p.add_argument("--runs-dir", default=str(REPO / "logs" / "bench" / "answer_shapes"))
    p.add_argument("--collect", action="store_true")
    p.add_argument("--output", default=str(REPO / "logs" / "bench" / "answer_shapes.json"))
    args = p.parse_args()
    from unified.benchmarks.splits import split_ids

    ids = split_ids("tune")[: args.problems]
    base = Path(args.runs_dir)
    base.mkdir(parents=True, exist_ok=True)
    result = {"split": "tune", "problems": len(ids), "mix": MIX, "configs": {}}
    for name in CONFIGS:
        if not args.collect:
            run(name, ids, base / name)
        if (base / name / "metrics.jsonl").exists():
            result["configs"][name] = {"overrides": CONFIGS[name], **summarize(base / name)}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    write_json(Path(args.output), result)
    print(f"{'config':10s} {'kind':10s} {'parse fail':>10s} {'signal':>8s} {'tokens':>7s}")
    for name, body in result["configs"].items():
        for kind, k in body["kinds"].items():
            print(
                f"{name:10s} {kind:10s} {k['parse_failure_rate']:10.3f} {k['groups_with_signal']:>3d}/{k['groups']:<4d} "
                f"{k['completion_tokens']:7.1f}"
            )
        print(f"{name:10s} inputs     rejected {body['input_rejections']}")
    print(f"-> {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
