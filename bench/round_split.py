"""One round of the default recipe at two commits, back to back: where the time goes, and
how much of it each commit spends generating.

Each commit runs from its own detached worktree (`git worktree add`, removed after), as a real
`train_unified.py --benchmark mbpp --problems P --rounds 1` with the default config of THAT
commit: what a user of each version gets. The runs alternate (before, after, before, ...);
each figure is the median over the repetitions. The split comes from the run's own
`metrics.jsonl` (`time/*`, `compute/*`), so both commits are read the same way.

    python -m bench.round_split --before 80e4d3a [--after HEAD] [--problems 100] [--repeats 1]

Writes logs/bench/round_split.json: per commit the split (seconds) and the tokens generated,
and `ratio` (after / before) for the round, the update and the generated tokens. Time it on
an idle machine: a second heavy process beside it (a vLLM engine above all) skews it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import REPO, write_json

OUT = REPO / "logs" / "bench" / "round_split.json"
# figure -> how it is read from a round's metrics row (and the greedy evaluation's, when the
# round's first evaluation is logged on its own row)
SPLIT = {
    "round_s": "time/round",
    "phase_1_s": "time/phase_1",
    "phase_2_4_s": ("time/phase_2", "time/phase_3", "time/phase_4"),
    "phase_5_generate_s": "time/phase_5_generate",
    "phase_5_score_s": "time/phase_5_score",
    "update_s": "time/phase_5_train",
    "push_s": "time/push",
    "evaluation_s": "compute/evaluation_s",
    "generation_tokens": "compute/generation_tokens",
    "update_tokens": "compute/update_tokens",
    "optimizer_steps": "train/steps",
    "trained_tokens": "train/tokens",
    "sandbox_calls": "executor/calls",
}


def _read(row: dict, key) -> float | None:
    keys = key if isinstance(key, tuple) else (key,)
    values = [row.get(k) for k in keys]
    return None if any(v is None for v in values) else float(sum(values))


def split_of(rows: list[dict]) -> dict:
    """The split of the run's one round: the last metrics row that has a round time."""
    row = [r for r in rows if "time/round" in r][-1]
    return {name: _read(row, key) for name, key in SPLIT.items()}


def one_run(tree: Path, problems: int, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="round-split-") as out:
        cmd = [
            sys.executable,
            str(tree / "train_unified.py"),
            "--benchmark",
            "mbpp",
            "--problems",
            str(problems),
            "--rounds",
            "1",
            f"--output-dir={out}",
            "trainer.save_every=1000",
            *extra,
        ]
        load = os.getloadavg()[0]
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=tree, env={**os.environ, "VLLM_LOGGING_LEVEL": "WARNING"}, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(f"run in {tree} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
        rows = [json.loads(line) for line in Path(out, "metrics.jsonl").read_text().splitlines() if line.strip()]
    row = [r for r in rows if "time/round" in r][-1]
    return {**split_of(rows), "process_wall_s": wall, "load_at_start": load, "metrics": row}


def _median(runs: list[dict]) -> dict:
    """Each figure's median over the repeats (the raw metrics rows stay in `runs`)."""
    keys = [k for k in runs[0] if k != "metrics"]
    return {k: statistics.median(r[k] for r in runs) if all(r[k] is not None for r in runs) else None for k in keys}


def _ratio(after: dict, before: dict, key: str) -> float | None:
    a, b = after.get(key), before.get(key)
    return round(a / b, 3) if a is not None and b else None


def _worktree(ref: str, root: Path) -> tuple[Path, str]:
    sha = subprocess.run(
        ["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = root / sha[:12]
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(tree), sha], cwd=REPO, check=True)
    return tree, sha


def cpu_name() -> str:
    """The CPU's model name and its matrix units (figures are compared only within one CPU)."""
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), platform.machine())
    flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    units = [f for f in ("amx_bf16", "avx512_bf16") if f in flags]
    return f"{name} ({', '.join(units) or 'no bf16 units'})"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the earlier commit (today's default)")
    parser.add_argument("--after", default="HEAD", help="the later commit (default HEAD)")
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--output", type=Path, default=OUT)
    parser.add_argument("overrides", nargs="*", help="key=value overrides given to both commits' runs")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="round-split-trees-"))
    trees = {}
    try:
        for name in ("before", "after"):
            trees[name] = _worktree(getattr(args, name), root)
        runs = {"before": [], "after": []}
        for i in range(args.repeats):
            for name in ("before", "after"):
                runs[name].append(one_run(trees[name][0], args.problems, args.overrides))
                shown = {k: v for k, v in runs[name][-1].items() if k != "metrics"}
                print(f"repeat {i + 1}/{args.repeats} {name}: {json.dumps(shown)}", flush=True)
    finally:
        for tree, _ in trees.values():
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO, check=False)
        shutil.rmtree(root, ignore_errors=True)
    before, after = _median(runs["before"]), _median(runs["after"])
    result = {
        "before": {"commit": trees["before"][1], **before},
        "after": {"commit": trees["after"][1], **after},
        "ratio": {
            k: _ratio(after, before, key)
            for k, key in (
                ("round", "round_s"),
                ("update", "update_s"),
                ("generation_tokens", "generation_tokens"),
                ("phase_1", "phase_1_s"),
            )
        },
        "runs": runs,
        "settings": {
            "problems": args.problems,
            "repeats": args.repeats,
            "overrides": args.overrides,
            "cpu": cpu_name(),
            "cpus": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M"),
        },
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.output, result, indent=1)
    print(json.dumps(result["ratio"]))
    return result


if __name__ == "__main__":
    main()
