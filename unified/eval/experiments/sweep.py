"""The recipe sweep on the TUNE split: each configuration trained with the same budget
(problems, rounds, group size, token budget), its greedy pass@1 gain over the untrained
model on the same problems, every configuration in one JSON.

    python -m unified.eval.experiments.sweep [--problems 40] [--rounds 3] [--only NAME,...] [--collect]

Configurations are `CONFIGS` below (name -> key=value overrides of the default recipe).
Each runs through unified/eval/experiments/gain.py (`--split tune --seeds 0`), so it resumes and
writes the same keys; the untrained model's evaluation is made once and shared. Writes
RUNS_DIR.json beside the runs (logs/bench/sweep.json by default; copy it to docs/results/
with the report). A sweep against a new default takes its own `--runs-dir`: a finished
`default` of an older sweep would otherwise be read as this one's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from unified.eval.experiments.record import REPO, write_json

CONTROLS = ("before", "control_2", "control_3")  # learning_gain's control evaluations (--control-repeats 3)
CONFIGS: dict[str, list[str]] = {
    "top4_lr1e-5": ["tuning=top_layers", "algorithm.lr=1e-5"],
    "top4_lr1e-6": ["tuning=top_layers", "algorithm.lr=1e-6"],
    "top4_lr1e-4": ["tuning=top_layers", "algorithm.lr=1e-4"],  # with the default format penalty
    "top4_lr1e-4_fp0": ["tuning=top_layers", "algorithm.lr=1e-4", "pipeline.format_penalty=0.0"],  # experiment=solve_tuned
    "lora16_lr1e-4": ["tuning=lora", "algorithm.lr=1e-4"],
    "lora16_lr1e-5": ["tuning=lora", "algorithm.lr=1e-5"],
    "top4_lr1e-5_fp0": ["tuning=top_layers", "algorithm.lr=1e-5", "pipeline.format_penalty=0.0"],
    "top4_lr1e-5_graded": ["tuning=top_layers", "algorithm.lr=1e-5", "pipeline.solve_reward=graded"],
    "top4_lr1e-5_T1": ["tuning=top_layers", "algorithm.lr=1e-5", "rollout.temperature=1.0"],
    "top4_lr1e-5_n8": ["tuning=top_layers", "algorithm.lr=1e-5", "rollout.n=8"],
    "solve+induction": ["tuning=top_layers", "algorithm.lr=1e-5", "pipeline.kinds=[solve,induction]"],
    "ttrlvr": ["tuning=top_layers", "algorithm.lr=1e-5", "pipeline.kinds=[induction,deduction,abduction]"],
    # issue 32: the self-play kinds in their answer shapes next to solve, and labels with no written test
    "default": [],  # since 2026-11-27 the self-play mix (below); before it, solve alone (= "solo")
    "solo": ["pipeline.kinds=[solve]"],
    "mix_selfplay": ["pipeline.mix=[solve:0.7,deduction:0.1,abduction:0.1,induction:0.1]"],
    "mix_selfplay_shaped_solve": [
        "pipeline.mix=[solve:0.7,deduction:0.1,abduction:0.1,induction:0.1]",
        "pipeline.constrain=[induction,deduction,abduction,inputs,solve]",
    ],
    "agreement": ["pipeline.solve_source=agreement"],
    "agreement_both": ["pipeline.solve_source=both"],
    # label-free with the mix default (the self-play kinds need no written test either), and a stricter vote: on two
    # untrained tune rounds winners of >= 6 of 16 votes were right 9 times in 21, those of 3-5 votes 5 in 46
    # (docs/results/agreement_labels_tune.json)
    "agreement_v6": ["pipeline.solve_source=agreement", "pipeline.agreement_min_votes=6"],
    # issue 35's levers: a repair task beside solve, a pass@k-aware advantage (verl's grpo_passk)
    "repair_mix": ["pipeline.mix=[solve:0.75,repair:0.25]"],  # against solve alone (the default before the mix)
    # the same levers on top of the mix default, at its generated tokens: repair takes a quarter of the self-play share
    "repair_selfplay": ["pipeline.mix=[solve:0.7,deduction:0.075,abduction:0.075,induction:0.075,repair:0.075]"],
    "passk": ["algorithm.adv_estimator=grpo_passk"],
    # issue 37: the defaults before it (completions run on to EOS), and selective sampling on
    "no_stop": ["pipeline.stop_at_answer=false"],
    "selective": ["pipeline.selective_keep=0.5", "pipeline.selective_floor=0.25"],
    "n8": ["rollout.n=8"],  # half the samples per group: half of phase 1's and phase 5's tokens
    # both levers at once, the sampler's gentler setting (keep 0.7 / floor 0.35 found 67 % of headroom rounds in the
    # replay of docs/results/selective_cost.json against 47 % at 0.5 / 0.25)
    "n8_selective": ["rollout.n=8", "pipeline.selective_keep=0.7", "pipeline.selective_floor=0.35"],
}


def against_default(results: dict) -> None:
    """Each finished configuration against `default` itself (not only against the control):
    the problems only one of them solves, McNemar's p on those, and the generated-token ratio,
    so a lever is read at its price. Replaces the per-problem outcomes with that comparison."""
    from unified.eval.gain_stats import versus

    afters = {name: r.pop("per_problem_after") for name, r in results.items()}
    base = results.get("default", {})
    for name, r in results.items():
        if name == "default" or not afters[name] or not afters.get("default") or not r["complete"]:
            continue
        v = versus(afters[name], afters["default"])
        ours, theirs = r["generation_tokens"], base["generation_tokens"]
        tokens = ours / theirs if ours and theirs else None
        r["vs_default"] = {
            "difference": v["difference"],
            "only_this": v["only_a"],
            "only_default": v["only_b"],
            "mcnemar_p": v["mcnemar_p_pooled"],
            "generation_tokens_ratio": tokens,
        }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--problems", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--only", default="", help="comma-separated configuration names (default: all)")
    p.add_argument("--collect", action="store_true")
    p.add_argument("--runs-dir", default=str(REPO / "logs" / "bench" / "sweep"))
    args = p.parse_args()
    names = [n for n in (args.only.split(",") if args.only else CONFIGS) if n]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        p.error(f"unknown configuration(s) {unknown}; known: {', '.join(CONFIGS)}")
    runs = Path(args.runs_dir)
    results = {name: _summary(name, _run_config(args, runs, name)) for name in names}
    against_default(results)
    out = runs.parent / f"{runs.name}.json"  # logs/bench/sweep -> logs/bench/sweep.json
    write_json(out, {"split": "tune", "problems": args.problems, "rounds": args.rounds, "configs": results})
    for name, r in results.items():
        print(f"{name:22s} gain {r['gain']}  flips +{r['flips_gained']}/-{r['flips_lost']}  p {r['mcnemar_p']}")
    print(f"-> {out}")
    return 0


def _run_config(args, runs: Path, name: str) -> dict:
    """One configuration's gain run in its own folder (the untrained model's evaluations shared
    through `runs`, made once): its result JSON ({} where it wrote none)."""
    out = runs / name
    base = out / f"mbpp-tune-0+{args.problems}x{args.rounds}"
    for control in CONTROLS:  # the untrained model's evaluations (the control and its repeats), made once
        if (runs / control).is_dir() and not (base / control).exists():
            base.mkdir(parents=True, exist_ok=True)
            shutil.copytree(runs / control, base / control)
    cmd = [
        sys.executable,
        "-m",
        "unified.eval.experiments.gain",
        "--split",
        "tune",
        "--problems",
        str(args.problems),
        "--rounds",
        str(args.rounds),
        "--seeds",
        "0",
        "--runs-dir",
        str(out),
        "--output",
        str(out / "result.json"),
        "--weights",
        str(out / "weights"),
        *(["--collect"] if args.collect else []),
        *CONFIGS[name],
    ]
    if subprocess.run(cmd, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"}).returncode != 0:
        print(f"{name}: failed (its logs are under {out})", file=sys.stderr)
    for control in CONTROLS:
        done = base / control / "eval_results.json"
        if done.exists() and json.loads(done.read_text()).get("complete") and not (runs / control).exists():
            shutil.copytree(base / control, runs / control)
    return json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else {}


def _summary(name: str, result: dict) -> dict:
    """One configuration's line in sweep.json: its overrides, figures and generated tokens."""
    # telemetry's compute/* totals are cumulative over a run: its last round holds the run's total
    last = [seed["metrics_per_round"][-1] for seed in result.get("seeds", []) if seed.get("metrics_per_round")]
    return {
        "overrides": CONFIGS[name],
        **{
            k: result.get(k)
            for k in (
                "pass_at_1_before",
                "pass_at_1_after",
                "gain",
                "flips_gained",
                "flips_lost",
                "mcnemar_p",
                "ci95",
                "sampled_pass_at_1_before",
                "sampled_pass_at_1_after",
                "headroom",
                "complete",
            )
        },
        "generation_tokens": sum(r.get("compute/generation_tokens") or 0 for r in last) or None,
        "per_problem_after": {s["seed"]: s["per_problem_after"] for s in result.get("seeds", [])},
    }


if __name__ == "__main__":
    sys.exit(main())
