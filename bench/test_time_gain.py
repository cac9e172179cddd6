"""Test-time gain: does training on self-built tasks raise greedy pass@1 on the hidden tests
more than the same run without weight updates?

    python bench/test_time_gain.py --model smollm2 --problems 40 --rounds 5 [--split report]
        [--parallel] [--collect] [key=value ...]

Two runs of `train_unified.py` with the same seeds, problems, rounds and generation budget:
- train:   the trainer as configured;
- control: the same with `trainer.update_weights=false` (phase 5 samples and scores the same
           way, no optimizer step), so a gain cannot come from sampling luck.
pass@1 is greedy on the hidden tests: at the start of every round (phase 1) and once more
after the last round (the final evaluation), i.e. before round 1 and after every round.

Problems: MBPP+ ids in a seeded random order (seed 0), split in two disjoint sets:
`tune` (the first 100 of that order: hyper-parameters are chosen on these) and `report`
(the other 299: results are reported on the first N of them, chosen without looking at
their hidden tests). The runs resume (`--resume auto`), so a killed bench continues;
`--collect` rebuilds the JSON and plot from whatever the run folders hold.

Writes logs/bench/test_time_gain.json (keys: problems, rounds, pass_at_1_before,
pass_at_1_after, control_pass_at_1_after, gain, curves, per_problem, seconds, settings,
fit) and logs/bench/test_time_gain.png (both curves; the ScaleRL fit of the trained run).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPLIT_SEED, TUNE_SIZE = 0, 100
LAUNCHES = "launches.json"  # beside the two run folders: every command that trained them


def split_ids(split: str) -> list[str]:
    sys.path.insert(0, str(REPO))
    from unified.pipeline.benchmarks import load_problems

    ids = [p.task_id for p in load_problems("mbpp", None, None, [])]
    random.Random(SPLIT_SEED).shuffle(ids)
    return ids[:TUNE_SIZE] if split == "tune" else ids[TUNE_SIZE:]


def run_command(out: Path, ids: list[str], rounds: int, model: str, overrides: list[str], control: bool) -> list[str]:
    return [
        sys.executable, str(REPO / "train_unified.py"), "--benchmark", "mbpp", f"--rounds={rounds}",
        f"--output-dir={out}", "--resume", "auto", f"model={model}", f"benchmark.problem_ids=[{','.join(ids)}]",
        f"benchmark.problems={len(ids)}", "trainer.eval_every=1", *overrides,
        *(["trainer.update_weights=false"] if control else []),
    ]  # fmt: skip


def curve(run: Path, rounds: int) -> tuple[list[float | None], dict, dict, list[float | None]]:
    """Greedy pass@1 before round 1 .. after round R (None where not measured yet), read from
    each round's problems.parquet (phase 1) and the final evaluation; per-problem outcomes
    before and after; the last metrics line; cumulative compute at each point."""
    import pandas as pd

    points: list[float | None] = [None] * (rounds + 1)
    compute: list[float | None] = [None] * (rounds + 1)
    before, after, last = {}, {}, {}
    metrics = run / "metrics.jsonl"
    by_round = {}
    if metrics.exists():
        for line in metrics.read_text().splitlines():
            m = json.loads(line)
            by_round[m["round"]] = last = m
    for r in range(1, rounds + 1):
        table = run / f"round_{r}" / "problems.parquet"
        if table.exists():
            frame = pd.read_parquet(table)
            measured = [float(v) for v in frame.pass_at_1 if v is not None and v == v]
            points[r - 1] = sum(measured) / len(measured) if measured else None
            if r == 1:
                before = dict(zip(frame.task_id, frame.pass_at_1))
        # compute spent up to this evaluation: everything before the round, plus its evaluation
        prev = by_round.get(r - 1, {})
        here = by_round.get(r, {})
        if here:
            spent_before = prev.get("compute/total_s", 0.0)
            evaluation = here.get("compute/evaluation_s", 0.0) - prev.get("compute/evaluation_s", 0.0)
            compute[r - 1] = spent_before + evaluation
    final = run / "eval" / "eval_results.json"
    if final.exists():
        result = json.loads(final.read_text())
        points[rounds] = result.get("pass@1", result.get("pass_at_1"))
        after = result.get("per_problem", {})
        fit_file = run / "eval_fit_summary.json"
        saved = json.loads(fit_file.read_text()) if fit_file.exists() else {}
        if isinstance(saved.get("points"), list) and saved["points"]:
            compute[rounds] = saved["points"][-1]["compute"]
        elif rounds in by_round:  # compute through the last round (the final evaluation's own cost left out)
            compute[rounds] = by_round[rounds].get("compute/total_s")
    return points, {"before": before, "after": after}, last, compute


def collect(args, ids: list[str], runs: dict[str, Path], seconds: dict, overrides: list[str]) -> dict:
    from unified.eval.scaling_fit import fit_scalerl

    launches_file = runs["train"].parent / LAUNCHES
    launches = json.loads(launches_file.read_text()) if launches_file.exists() else []
    curves, outcomes, lasts, computes = {}, {}, {}, {}
    for name, folder in runs.items():
        curves[name], outcomes[name], lasts[name], computes[name] = curve(folder, args.rounds)
    pairs = [(c, p) for c, p in zip(computes["train"], curves["train"]) if c is not None and p is not None]
    fit = fit_scalerl([c for c, _ in pairs], [p for _, p in pairs])  # greedy pass@1 against compute
    fit["points"] = [{"compute": c, "pass_at_1": p} for c, p in pairs]
    fit["status"] = "fitted" if fit.get("fitted") else "not fitted"
    after, control_after = _last(curves["train"]), _last(curves["control"])
    per_problem = {
        i: {"before": outcomes["train"]["before"].get(i), "after": outcomes["train"]["after"].get(i),
            "control_after": outcomes["control"]["after"].get(i)}
        for i in ids
    }  # fmt: skip
    return {
        "problems": ids,
        "rounds": args.rounds,
        "pass_at_1_before": curves["train"][0],
        "pass_at_1_after": after,
        "control_pass_at_1_after": control_after,
        "gain": None if after is None or control_after is None else after - control_after,
        "complete": curves["train"][-1] is not None and curves["control"][-1] is not None,
        "curves": {"train": curves["train"], "control": curves["control"], "x": ["before"] + [f"after round {r}" for r in range(1, args.rounds + 1)]},
        "per_problem": per_problem,
        "seconds": seconds,
        "compute": {n: {k: v for k, v in lasts[n].items() if k.startswith("compute/")} for n in runs},
        "train_metrics_per_round": _per_round(runs["train"]),
        "control_metrics_per_round": _per_round(runs["control"]),
        "fit": fit,
        "settings": {
            "model": args.model, "split": args.split, "offset": args.offset, "split_seed": SPLIT_SEED, "tune_ids": split_ids("tune"),
            "overrides": overrides or (launches[-1]["overrides"] if launches else []), "launches": launches,
            "train_config": _saved_config(runs["train"]), "command": " ".join(sys.argv), "parallel": args.parallel,
            "date": datetime.date.today().isoformat(), "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
            "runs": {n: str(p) for n, p in runs.items()},
        },
    }  # fmt: skip


def _last(points: list) -> float | None:
    """pass@1 after the last round, or (a run still going or cut off) the latest measured point."""
    measured = [p for p in points if p is not None]
    return measured[-1] if measured else None


def _saved_config(run: Path) -> dict:
    """The resolved config the run last saved with a checkpoint: what actually trained,
    whatever command rebuilt this JSON."""
    from omegaconf import OmegaConf

    path = run / "checkpoints" / "latest"
    latest = run / "checkpoints" / path.read_text().strip() if path.is_file() else None
    config = latest / "config.yaml" if latest else None
    return OmegaConf.to_container(OmegaConf.load(config)) if config and config.exists() else {}


def _per_round(run: Path) -> list[dict]:
    keys = ("round", "reward/mean", "reward/induction", "reward/deduction", "reward/abduction", "losses/kl", "losses/entropy",
            "train/grad_norm", "tasks/kept", "state/version", "time/round")  # fmt: skip
    path = run / "metrics.jsonl"
    if not path.exists():
        return []
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    prefixes = ("reward/", "tasks/kept", "losses/", "parse/", "eval/pass@")
    return [{k: v for k, v in m.items() if k in keys or k.startswith(prefixes)} for m in rows]


def plot(result: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    xs = list(range(result["rounds"] + 1))
    for name, style in (("train", dict(marker="o", color="C0")), ("control", dict(marker="s", color="C1", linestyle="--"))):
        ys = [np.nan if v is None else v for v in result["curves"][name]]
        ax1.plot(xs, ys, label=f"{name}", **style)
    ax1.set_xlabel("rounds trained (0 = before round 1)")
    ax1.set_ylabel("greedy pass@1 (hidden tests)")
    ax1.set_title(f"{len(result['problems'])} MBPP+ problems ({result['settings']['split']} split)")
    ax1.set_xticks(xs)
    ax1.legend()
    fit = result["fit"]
    points = fit.get("points", [])
    if points:
        c = np.array([p["compute"] for p in points])
        ax2.plot(c, [p["pass_at_1"] for p in points], "o", color="C0", label="train run")
        if fit.get("fitted"):
            from unified.eval.scaling_fit import scalerl_curve

            grid = np.linspace(max(c.min(), 1e-6), c.max() * 1.5, 200)
            ax2.plot(grid, scalerl_curve(grid, fit["r0"], fit["a"], fit["c_mid"], fit["b"]), "-", color="C2",
                     label=f"ScaleRL fit: A={fit['a']:.3f}, C_mid={fit['c_mid']:.0f}")  # fmt: skip
        else:
            ax2.text(0.02, 0.02, f"not fitted: {fit.get('reason', '')}"[:80], transform=ax2.transAxes, fontsize=7)
    ax2.set_xlabel("cumulative compute (CPU-seconds)")
    ax2.set_ylabel("pass@1")
    ax2.legend()
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--problems", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--split", choices=("tune", "report"), default="report")
    parser.add_argument("--offset", type=int, default=0, help="skip the split's first problems (already used)")
    parser.add_argument("--parallel", action="store_true", help="run train and control at once (one thread each)")
    parser.add_argument("--collect", action="store_true", help="only rebuild the JSON and plot from the run folders")
    parser.add_argument("--runs-dir", default=str(REPO / "logs" / "bench" / "test_time_gain"))
    parser.add_argument("--output", default=str(REPO / "logs" / "bench" / "test_time_gain.json"))
    args, overrides = parser.parse_known_args()
    bad = [o for o in overrides if "=" not in o]
    if bad:
        parser.error(f"unknown argument(s) {bad}: extra arguments must be Hydra overrides key=value")
    ids = split_ids(args.split)[args.offset : args.offset + args.problems]
    base = Path(args.runs_dir) / f"{args.split}-{args.offset}+{args.problems}x{args.rounds}"
    runs = {"train": base / "train", "control": base / "control"}
    seconds_file = base / "seconds.json"
    seconds = json.loads(seconds_file.read_text()) if seconds_file.exists() else {}
    if not args.collect:
        base.mkdir(parents=True, exist_ok=True)
        launches_file = base / LAUNCHES
        launches = json.loads(launches_file.read_text()) if launches_file.exists() else []
        launches.append({"command": " ".join(sys.argv), "overrides": overrides, "date": datetime.datetime.now().isoformat(timespec="seconds")})
        launches_file.write_text(json.dumps(launches, indent=1) + "\n")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if args.parallel:
            env["OMP_NUM_THREADS"] = "1"  # two engines on two cores: one thread each
        procs = {}
        for name, folder in runs.items():
            folder.parent.mkdir(parents=True, exist_ok=True)
            cmd = run_command(folder, ids, args.rounds, args.model, overrides, control=name == "control")
            log = open(base / f"{name}.console.log", "a")
            start = time.time()
            procs[name] = (subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT), start)
            if not args.parallel:
                code = procs[name][0].wait()
                seconds[name] = seconds.get(name, 0.0) + time.time() - start
                if code != 0:
                    print(f"{name} run failed (exit {code}); see {base / f'{name}.console.log'}", file=sys.stderr)
                    return code
        if args.parallel:
            for name, (proc, start) in procs.items():
                code = proc.wait()
                seconds[name] = seconds.get(name, 0.0) + time.time() - start
                if code != 0:
                    print(f"{name} run failed (exit {code}); see {base / f'{name}.console.log'}", file=sys.stderr)
                    return code
        seconds_file.write_text(json.dumps(seconds))
    result = collect(args, ids, runs, seconds, overrides)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out.with_suffix(".png"))
    fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"pass@1 before {fmt(result['pass_at_1_before'])} | after {fmt(result['pass_at_1_after'])} | "
          f"control after {fmt(result['control_pass_at_1_after'])} | gain {fmt(result['gain'])} -> {out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
