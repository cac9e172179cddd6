"""Whether a test-time gain carries to problems never trained on: a committed result's seed-0
weights and the untrained control, evaluated greedily on report problems outside the ones it
trained on (the next `--problems` of the report split after `--offset`).

    python bench/transfer.py docs/results/test_time_gain.json [--offset 100] [--problems 100]
        [--repeats 3] [--output docs/results/transfer_mbpp.json]

Evaluated as `bench/rescore_result.py` evaluates (greedy, one thread, the same batches, the
control repeated and a problem whose control outcome differs between repeats left out as
noise). Only seed 0's weights are committed, so the figure is one seed's.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from rescore_result import evaluate, metric  # noqa: E402
from learning_gain import split_ids  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("result", type=Path, help="a committed test_time_gain JSON (its weights and problems)")
    p.add_argument("--offset", type=int, default=100, help="report problems to skip (the trained ones come first)")
    p.add_argument("--problems", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3, help="evaluations of the base model (the control)")
    p.add_argument("--runs-dir", type=Path, default=REPO / "logs" / "bench" / "transfer")
    p.add_argument("--output", type=Path, default=None)
    args = p.parse_args()
    original = json.loads(args.result.read_text())
    bench, trained, model = original["benchmark"], set(original["problems"]), original["settings"]["model"]
    ids = split_ids("report", bench)[args.offset : args.offset + args.problems]
    if trained & set(ids):
        raise SystemExit(f"{len(trained & set(ids))} of these problems were trained on: raise --offset")
    runs = args.runs_dir / f"{args.result.stem}-{args.offset}+{args.problems}"
    controls = [evaluate(bench, model, ids, runs / f"control_{k}") for k in range(1, args.repeats + 1)]
    after = evaluate(bench, str(REPO / original["model_path"]), ids, runs / "seed0")
    hidden = metric(ids, controls, {0: after["per_problem"]}, "per_problem")
    evalplus = metric(ids, controls, {0: after.get("per_problem_evalplus", {})}, "per_problem_evalplus")
    transfer = {"problems": ids, "control_pass_at_1": hidden["control_pass_at_1_repeats"][0],
                "control_pass_at_1_repeats": hidden["control_pass_at_1_repeats"], "pass_at_1_after": hidden["pass_at_1_after"][0],
                "gain": hidden.get("gain"), "ci95": hidden.get("ci95"), "mcnemar_p": hidden.get("mcnemar_p"),
                "flips_gained": hidden.get("flips_gained"), "flips_lost": hidden.get("flips_lost"),
                "noisy_problems": hidden.get("noisy_problems", []), "evalplus": evalplus}  # fmt: skip
    result = {"source": str(args.result), "model_path": original["model_path"], "trained_on": sorted(trained),
              "metric": "greedy pass@1 on the hidden tests (MBPP+: plus inputs); `evalplus`: base + plus",
              "transfer": transfer,
              "per_problem": {"control": [c["per_problem"] for c in controls], "seed0": after["per_problem"]},
              "settings": {"greedy": True, "threads": 1, "repeats": args.repeats, "offset": args.offset,
                           "date": datetime.date.today().isoformat(),
                           "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}"}}  # fmt: skip
    out = args.output or REPO / "docs" / "results" / f"transfer_{bench}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"transfer on {len(ids)} untrained problems: control {transfer['control_pass_at_1_repeats']} -> seed 0 "
          f"{transfer['pass_at_1_after']:.3f}, gain {transfer['gain']}, +{transfer['flips_gained']}/-{transfer['flips_lost']}, "
          f"p {transfer['mcnemar_p']}, ci95 {transfer['ci95']}, noisy {len(transfer['noisy_problems'])} -> {out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
