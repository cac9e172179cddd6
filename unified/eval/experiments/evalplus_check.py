"""Score greedy samples with EvalPlus's own `evalplus.evaluate` and compare, problem by
problem, with the pass@1 our evaluation recorded for the same samples (`passed_evalplus`).

    python -m unified.eval.experiments.evalplus_check SAMPLES.jsonl [--benchmark mbpp] [--output FILE.json]

`SAMPLES.jsonl` is what `python -m unified.eval` writes (one greedy sample per problem, the
`solution` field holding the program as it was run). EvalPlus wants every problem of its
dataset sampled, so it is given, offline, a dataset of exactly the sampled problems: the
bundled MBPP+ (or HumanEval+) rows of those ids, through its own override variable
(`MBPP_OVERRIDE_PATH` / `HUMANEVAL_OVERRIDE_PATH`). Its "plus" verdict (base and plus tests)
is what our `pass@1_evalplus` claims to be.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from unified.eval.experiments.record import REPO, write_json

DATA = {"mbpp": ("MBPP_OVERRIDE_PATH", REPO / "unified" / "data" / "MbppPlus.jsonl.gz")}


def _rows(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def check(samples: Path, benchmark: str, work: Path) -> dict:
    variable, source = DATA[benchmark]
    ours = {r["task_id"]: r for r in _rows(samples)}
    dataset = [row for row in _rows(source) if row["task_id"] in ours]
    if len(dataset) != len(ours):
        raise SystemExit(f"{len(ours) - len(dataset)} sampled problems are not in {source}")
    (work / "dataset.jsonl").write_text("".join(json.dumps(row) + "\n" for row in dataset))
    copy = work / "samples.jsonl"
    copy.write_text("".join(json.dumps({"task_id": t, "solution": r["solution"]}) + "\n" for t, r in ours.items()))
    env = {**os.environ, variable: str(work / "dataset.jsonl")}
    subprocess.run(
        [sys.executable, "-m", "evalplus.evaluate", benchmark, "--samples", str(copy), "--parallel", "2", "--i_just_wanna_run"],
        env=env,
        check=True,
        cwd=work,
    )
    [results] = list(work.glob("*eval_results.json"))
    verdicts = json.loads(results.read_text())["eval"]
    theirs = {t: float(all(x["base_status"] == "pass" and x["plus_status"] == "pass" for x in v)) for t, v in verdicts.items()}
    differ = sorted(t for t in ours if float(ours[t].get("passed_evalplus", -1)) != theirs[t])
    return {
        "samples": str(samples),
        "benchmark": benchmark,
        "problems": len(ours),
        "pass_at_1_evalplus_ours": sum(float(r.get("passed_evalplus", 0)) for r in ours.values()) / len(ours),
        "pass_at_1_evalplus_theirs": sum(theirs.values()) / len(theirs),
        "differ": differ,
        "evalplus": "evalplus.evaluate " + __import__("evalplus").__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("samples", type=Path)
    parser.add_argument("--benchmark", choices=sorted(DATA), default="mbpp")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = check(args.samples.resolve(), args.benchmark, Path(tmp))
    print(
        f"{result['problems']} problems: ours {result['pass_at_1_evalplus_ours']:.3f}, evalplus.evaluate "
        f"{result['pass_at_1_evalplus_theirs']:.3f}, differ on {len(result['differ'])}: {result['differ']}"
    )
    if args.output:
        write_json(args.output, result)


if __name__ == "__main__":
    main()
